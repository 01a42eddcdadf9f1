"""Cheaper pandas constructors for the design of small tables.

On a table of a few thousand rows, building a design is dominated by pandas' fixed costs:
every column access builds a Series (~10 µs), every categorical validates its categories
by hashing them (~20 µs), every object Index infers a dtype. The helpers here build the
same objects through pandas' internal constructors, skipping checks whose outcome is known
(the levels are distinct labels; the columns are distinct names), and fall back to the
public route when an internal constructor is missing or has changed (pandas >= 2.1).
``tests/design/test_fastpd.py`` checks that both routes give equal objects.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["ascii_r_order", "categorical", "column_array", "frame_of", "object_index",
           "string_codes"]


def object_index(values: Sequence[Any]) -> pd.Index:
    """``pd.Index(values, dtype=object)`` (no dtype inference, no copy)."""
    arr = np.fromiter(values, dtype=object, count=len(values))  # (tuples stay elements)
    try:
        index = pd.Index._simple_new(arr)
        if isinstance(index, pd.Index) and index.dtype == object:
            return index
    except (AttributeError, TypeError):  # pragma: no cover - a pandas without it
        pass
    return pd.Index(arr, dtype=object)  # pragma: no cover


def categorical(codes: np.ndarray, levels: Sequence[str]) -> pd.Categorical:
    """An unordered categorical of ``codes`` (0 .. len(levels) - 1, no missing values) with
    the distinct labels ``levels`` as an object index of categories; as
    ``pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(levels,
    dtype=object), ordered=False), validate=False)`` without re-checking that the labels
    are distinct and present."""
    categories = object_index(levels)
    try:
        dtype = pd.CategoricalDtype._from_fastpath(categories, False)
    except (AttributeError, TypeError):  # pragma: no cover - a pandas without it
        dtype = pd.CategoricalDtype(categories, ordered=False)
    return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)


def frame_of(arrays: dict[str, Any], n: int) -> pd.DataFrame:
    """A DataFrame of the (distinct) columns ``arrays``, each of length ``n``, with a
    RangeIndex and the names as an object index (the design looks columns up by name a
    dozen times; pandas' string index makes each lookup dearer)."""
    columns = object_index(list(arrays))
    try:
        frame = pd.DataFrame._from_arrays(list(arrays.values()), columns=columns,
                                          index=pd.RangeIndex(n), verify_integrity=False)
        if frame.shape == (n, len(arrays)):
            return frame
    except (AttributeError, TypeError, ValueError):  # pragma: no cover
        pass
    frame = pd.DataFrame(arrays, copy=False)  # pragma: no cover
    frame.columns = columns  # pragma: no cover
    return frame  # pragma: no cover


def column_array(data: pd.DataFrame, label: Hashable) -> Any:
    """The values of column ``label`` of ``data`` (a distinct name): a numpy array for a
    numpy column, the extension array otherwise (``data[label].array`` without the
    Series)."""
    try:
        loc = data.columns.get_loc(label)
        if isinstance(loc, int | np.integer):
            values = data._get_column_array(int(loc))
            if isinstance(values, np.ndarray | pd.api.extensions.ExtensionArray):
                return values
    except (AttributeError, TypeError, KeyError):  # pragma: no cover
        pass
    return data[label].array  # pragma: no cover


SMALL_STRINGS = 500
"""Up to this many values, :func:`string_codes` codes them in Python (a dict over the
values): pyarrow's dictionary encoding costs more there, after the rest of a fit (180
values: 270 against 130 µs; 1,000 values: 240 against 380 µs)."""


def string_codes(values: Any) -> tuple[np.ndarray, list[str]] | None:
    """First-appearance codes and distinct values (distinct strings) of a pyarrow-backed
    string array without missing values (a dict over its values up to
    :data:`SMALL_STRINGS`, else pyarrow's dictionary encoding, without pandas' factorize
    around either); None for any other array."""
    if not isinstance(values.dtype, pd.StringDtype) or values.dtype.storage != "pyarrow":
        return None
    chunked = getattr(values, "_pa_array", None)
    if chunked is None or chunked.null_count or not hasattr(chunked, "combine_chunks"):
        return None  # pragma: no cover
    try:
        if len(chunked) <= SMALL_STRINGS:
            first: dict[str, int] = {}
            strings = chunked.to_pylist()
            codes = np.array([first.setdefault(v, len(first)) for v in strings],
                             dtype=np.int64)
            return codes, list(first)
        encoded = chunked.combine_chunks().dictionary_encode()
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        # (the dictionary of a string array without nulls: Python strings, distinct)
        uniques = encoded.dictionary.to_pylist()
    except (AttributeError, TypeError):  # pragma: no cover
        return None
    if len(codes) != len(values):
        return None  # pragma: no cover
    return codes, uniques


ARROW_ORDER = 5_000
"""From this many distinct strings, :func:`ascii_r_order` sorts them with pyarrow (200k
item IDs: 41 against 173 ms for Python's two sorts); below, it leaves them to Python."""


def ascii_r_order(strings: Sequence[str]) -> np.ndarray | None:
    """R's order of distinct strings (``frame._r_string_order``: by the lower-case string,
    then by the case-swapped one) where there are at least :data:`ARROW_ORDER` of them and
    all are ASCII, by pyarrow's sort on those two keys (for ASCII, Python's ``lower`` and
    ``swapcase`` are pyarrow's ``ascii_lower`` and ``ascii_swapcase``, and both compare
    strings by code points); None otherwise (the caller sorts in Python: beyond ASCII,
    Python's case mappings are Unicode's)."""
    if len(strings) < ARROW_ORDER:
        return None
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        array = pa.array(strings, type=pa.large_string())
        if array.null_count or not pc.all(pc.string_is_ascii(array)).as_py():
            return None
        keys = pa.table({"lower": pc.ascii_lower(array),
                         "swapped": pc.ascii_swapcase(array)})
        order = pc.sort_indices(keys, sort_keys=[("lower", "ascending"),
                                                 ("swapped", "ascending")])
    except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover
        return None  # (pyarrow missing, or values it does not take as strings)
    return np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)
