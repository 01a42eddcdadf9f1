"""``GlmerFit.r2`` arguments refused with messages naming them (the R comparisons are in
test_glmm_native.py)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx


@functools.cache
def _fit() -> cx.GlmerFit:
    rng = np.random.default_rng(8)
    d = pd.DataFrame({"x": rng.normal(size=200), "g": np.repeat([f"g{i}" for i in range(10)], 20)})
    d["y"] = (rng.random(200) < 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer("y ~ x + (1 | g)", d, family="binomial")


@pytest.mark.parametrize("kw, match", [
    ({"tolerance": "a"}, "tolerance must be a number >= 0"),
    ({"tolerance": -1.0}, "tolerance must be a number >= 0"),
    ({"null_intercept": "a"}, "null_intercept must be a number"),
])
def test_r2_arguments_are_checked(kw, match):
    with pytest.raises(TypeError, match=match):
        _fit().r2(**kw)


def test_r2_runs_with_its_defaults():
    assert list(_fit().r2().columns[:2]) == ["marginal", "conditional"]

