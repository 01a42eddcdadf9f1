"""The cheaper pandas constructors give the objects of pandas' public route."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crossed.design.fastpd import (
    SMALL_STRINGS,
    categorical,
    column_array,
    frame_of,
    object_index,
    string_codes,
)


def test_object_index_is_the_public_one():
    for values in (["b", "a", "10"], [], ["x:y", ("t", 1)], [("a", 1), ("b", 2)]):
        got = object_index(values)
        want = pd.Index(np.array(values + [None], dtype=object)[:-1], dtype=object)
        assert got.dtype == object
        pd.testing.assert_index_equal(got, want)


def test_categorical_is_the_public_one():
    codes = np.array([2, 0, 1, 1, 0], dtype=np.int64)
    levels = ["b", "a", "10"]
    want = pd.Categorical.from_codes(
        codes, dtype=pd.CategoricalDtype(pd.Index(levels, dtype=object), ordered=False))
    got = categorical(codes, levels)
    pd.testing.assert_extension_array_equal(got, want)
    assert got.categories.dtype == object and not got.ordered
    assert got.dtype == want.dtype


def test_frame_of_is_the_public_one():
    arrays = {"y": np.arange(4.0), "g": categorical(np.array([0, 1, 0, 1]), ["a", "b"]),
              "n": np.arange(4)}
    want = pd.DataFrame(arrays, copy=False)
    want.columns = pd.Index(list(arrays), dtype=object)
    got = frame_of(arrays, 4)
    pd.testing.assert_frame_equal(got, want)
    assert got.columns.dtype == object
    assert isinstance(got.index, pd.RangeIndex)


@pytest.mark.parametrize("values", [
    np.arange(3.0), np.array(["a", None, "b"], dtype=object),
    pd.array([1, None, 3], dtype="Int64"), pd.Categorical(["a", "b", "a"]),
    pd.array(["x", "y", "x"], dtype="string"),
])
def test_column_array_is_the_series_array(values):
    data = pd.DataFrame({"a": np.zeros(3), "b": values, 3: np.ones(3)})
    got = column_array(data, "b")
    want = data["b"].array
    pd.testing.assert_series_equal(pd.Series(got), pd.Series(want))
    np.testing.assert_array_equal(column_array(data, 3), data[3].to_numpy())


@pytest.mark.parametrize("n", [6, SMALL_STRINGS, SMALL_STRINGS + 1, 5 * SMALL_STRINGS])
def test_string_codes_match_factorize(n):
    """Below and above SMALL_STRINGS (Python's dict, pyarrow's encoding), chunked arrays
    too: pandas' factorize's codes and uniques."""
    pa = pytest.importorskip("pyarrow")
    words = ["b", "a", "B", "", "a b", "é", "ä", "0", "00", "b"]
    rng = np.random.default_rng(n)
    picked = [words[i] for i in rng.integers(0, len(words), n)]
    chunked = pa.chunked_array([picked[: n // 2], picked[n // 2:]], type=pa.string())
    for values in (pd.array(picked, dtype="string[pyarrow]"),
                   pd.arrays.ArrowStringArray(chunked)):
        codes, uniques = string_codes(values)
        want_codes, want_uniques = pd.factorize(values)
        np.testing.assert_array_equal(codes, want_codes)
        assert codes.dtype == np.int64
        assert uniques == list(want_uniques)
        assert all(type(u) is str for u in uniques)


def test_string_codes_refuse_other_arrays():
    pytest.importorskip("pyarrow")
    # anything else: None (the caller factorizes)
    assert string_codes(pd.array(["a", None], dtype="string[pyarrow]")) is None
    assert string_codes(np.array(["a"], dtype=object)) is None
    assert string_codes(pd.array(["a", "b"], dtype="string[python]")) is None


def test_ascii_r_order_is_rs_string_order():
    """pyarrow's order of many ASCII labels (mixed case, digits, punctuation, prefixes of
    each other, case variants of one word) is R's as Python's two sorts give it, and it is
    the order ``_r_string_order`` gives; fewer labels and labels beyond ASCII are left to
    Python (None)."""
    pytest.importorskip("pyarrow")
    from crossed.design.fastpd import ARROW_ORDER, ascii_r_order
    from crossed.design.frame import _r_string_order

    def python_order(strings: list[str]) -> list[int]:  # (the two stable sorts)
        order = sorted(range(len(strings)), key=[s.swapcase() for s in strings].__getitem__)
        return sorted(order, key=[s.lower() for s in strings].__getitem__)

    rng = np.random.default_rng(7)
    alphabet = list("aAbBzZ09_-. ~")
    labels = list(dict.fromkeys(
        "".join(rng.choice(alphabet, rng.integers(0, 6))) for _ in range(3 * ARROW_ORDER)))
    labels += [w for w in ("item", "Item", "ITEM", "iTEM", "item1", "Item10") if w not in labels]
    assert len(labels) >= ARROW_ORDER
    got = ascii_r_order(labels)
    assert got is not None
    np.testing.assert_array_equal(got, python_order(labels))
    np.testing.assert_array_equal(_r_string_order(labels), got)
    assert ascii_r_order(labels[: ARROW_ORDER - 1]) is None
    assert ascii_r_order(labels[:-1] + ["é"]) is None
