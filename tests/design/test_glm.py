"""GLM column expressions (cbind's sides, offsets): plain column arithmetic computed
directly gives formulaic's I(...) values; anything else still goes through formulaic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from formulaic import model_matrix

from crossed.design.glm import _arithmetic, evaluate_column
from crossed.formula.safety import SAFE_CONTEXT

DATA = pd.DataFrame({"a": [1, 2, None, 4], "b": [0.5, 1.5, 2.5, np.nan],
                     "i": pd.array([1, 2, 3, None], dtype="Int64"), "k": [3, 4, 5, 6],
                     "s": ["x", "y", "z", "w"], "t": [True, False, True, True]})


@pytest.mark.parametrize("expr", ["a - b", "k - a", "a + b * 2", "k*2 - 1", "i - k",
                                  "2 - k", "k - 0.5", "(k - a) * b"])
def test_direct_arithmetic_matches_formulaic(expr: str) -> None:
    ref = np.asarray(model_matrix(f"0 + I({expr})", DATA, na_action="ignore",
                                  context=SAFE_CONTEXT, output="numpy"), dtype=float)[:, 0]
    got = _arithmetic(expr, DATA)
    assert got is not None
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(evaluate_column(expr, DATA, "x"), ref)


@pytest.mark.parametrize("expr", ["log(k)", "k ** 2", "s - k", "t - k", "k / a", "nope - k",
                                  "k -", "True - k"])
def test_other_expressions_left_to_formulaic(expr: str) -> None:
    assert _arithmetic(expr, DATA) is None
