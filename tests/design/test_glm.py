"""GLM column expressions (cbind's sides, offsets), evaluated by the one evaluator."""

from __future__ import annotations

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
