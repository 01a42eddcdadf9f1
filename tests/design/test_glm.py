"""GLM column expressions (cbind's sides, offsets), evaluated by the one evaluator."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from formulaic import model_matrix

from crossed.design.frame import DataError
from crossed.design.glm import evaluate_column
from crossed.formula.safety import SAFE_CONTEXT

DATA = pd.DataFrame({"a": [1, 2, None, 4], "b": [0.5, 1.5, 2.5, np.nan],
                     "i": pd.array([1, 2, 3, None], dtype="Int64"), "k": [3, 4, 5, 6],
                     "s": ["x", "y", "z", "w"], "t": [True, False, True, True]})


@pytest.mark.parametrize("expr", ["a - b", "k - a", "a + b * 2", "k*2 - 1", "i - k",
                                  "2 - k", "k - 0.5", "(k - a) * b", "log(k)", "k ^ 2",
                                  "k / a", "sqrt(k) + t"])
def test_column_arithmetic_matches_formulaic(expr: str) -> None:
    """The one evaluator gives formulaic's I(...) values (R's arithmetic, ^ a power)."""
    mm = model_matrix(f"0 + I({expr.replace('^', '**')})", DATA,
                      na_action="ignore", context=SAFE_CONTEXT, output="numpy")
    # (formulaic 1.1 under pandas 2 keeps the Int64 column's pd.NA in an object array)
    ref = pd.Series(np.asarray(mm)[:, 0]).astype("Float64").to_numpy(dtype=float,
                                                                      na_value=np.nan)
    np.testing.assert_array_equal(evaluate_column(expr, DATA, "x"), ref)


@pytest.mark.parametrize("expr", ["s - k", "nope - k"])
def test_non_numeric_or_unknown_columns_are_named(expr: str) -> None:
    with pytest.raises(DataError, match=expr.split()[0]):
        evaluate_column(expr, DATA, "offset")


def test_a_cbind_column_with_missing_values_is_named_once() -> None:
    """``cbind(succ, fail)``: succ is the response's side and a used column; the
    dropped-rows warning named it twice ("in: succ, x, succ")."""
    import crossed as cx

    d = pd.DataFrame({"succ": [3, 1, np.nan, 4, 2, 5, 1, 0] * 3,
                      "fail": [1, 3, 2, 0, 2, 1, 3, 4] * 3,
                      "x": [0.1, np.nan, 0.3, 0.2, 0.5, 0.4, 0.9, 0.7] * 3,
                      "g": list("abcdefgh") * 3})
    with pytest.warns(UserWarning, match=r"dropped for missing values in: succ, x$"):
        cx.glmer("cbind(succ, fail) ~ x + (1 | g)", d, family="binomial")


def test_a_glmm_response_missing_in_every_row_is_named():
    # before: "the data table is empty (0 rows)" for a table of 40 rows
    import warnings

    import crossed as cx

    rng = np.random.default_rng(0)
    d = pd.DataFrame({"x": rng.normal(size=40), "g": np.repeat(list("abcd"), 10),
                      "k": np.nan})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(cx.DataError, match="'k' is missing .* in every row"):
            cx.glmer("k ~ x + (1 | g)", d, family="binomial")
        d["k"] = rng.integers(0, 2, 40).astype(float)
        d["w"] = np.nan
        with pytest.raises(cx.DataError, match="'w' is missing .* in every row"):
            cx.glmer("k ~ x + (1 | g)", d, family="binomial", weights="w")


def test_weights_all_zero_are_refused_naming_them():
    # before: numpy's LinAlgError "Singular matrix" from the fit
    import warnings

    import crossed as cx

    rng = np.random.default_rng(0)
    d = pd.DataFrame({"x": rng.normal(size=40), "g": np.repeat(list("abcd"), 10),
                      "k": rng.integers(0, 2, 40), "w": 0.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(cx.DataError, match="w: every weight is 0"):
            cx.glmer("k ~ x + (1 | g)", d, family="binomial", weights="w")


@pytest.mark.parametrize("failures, found", [("np.exp(log(1e308, 9))", "1.50259e+140"),
                                              ("s - 10", "-"), ("s / 0", "inf")])
def test_cbind_counts_must_be_finite_non_negative_exact_integers(failures, found):
    # before: cbind(s, np.exp(log(1e308, 9))) (found by the formula fuzzer) reached PIRLS
    # and failed there with NumPy's "Singular matrix"
    import crossed as cx

    d = pd.DataFrame({"s": [1, 2, 0, 3, 1, 2] * 3, "x": np.arange(18.0),
                      "g": list("abc") * 6})
    with pytest.raises(DataError,
                       match=rf"cbind\(s, .*must be finite, non-negative.*{re.escape(found)}"):
        cx.glmer(f"cbind(s, {failures}) ~ x + (1 | g)", d, family="binomial")
