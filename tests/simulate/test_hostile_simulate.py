"""Simulation arguments found by adversarial probing (issue 14)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed import DataError


def _data(n: int = 120, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    d = pd.DataFrame({"g": rng.integers(0, 8, n), "x": rng.normal(size=n),
                      "f": rng.choice(list("abc"), n)})
    d["y"] = d.x + (d.f == "b") + rng.normal(size=n) + d.g * 0.3
    return d


@pytest.fixture(scope="module")
def fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer("y ~ x + f + (1 | g)", _data())


@pytest.mark.parametrize("p", [float("nan"), 2.0, -0.1, "a", None, True])
def test_a_test_function_returning_no_probability_fails_the_replicate(fit, p):
    # NaN and 2.0 used to count as "not significant": power 0% from 2 of 2 simulations
    res = crossed.power_sim(fit, test=lambda f: p, nsim=2, seed=1)
    reps = res.replicates
    assert (reps["status"] == "failed").all()
    assert reps["message"].str.contains("expected a number from 0 to 1").all() or p is None


def test_a_test_function_returning_a_probability_counts(fit):
    res = crossed.power_sim(fit, test=lambda f: 0.01, nsim=2, seed=1)
    assert res.power == 1.0


@pytest.mark.parametrize("kw,match", [
    ({"fixef": {"(Intercept)": np.nan, "x": 1.0}, "sigma": 1.0}, r"fixef\['\(Intercept\)'\]"),
    ({"fixef": {"(Intercept)": 1.0, "x": 1.0}, "sigma": np.nan}, "sigma must be a positive"),
    ({"fixef": {"(Intercept)": 1.0, "x": 1.0}, "sigma": "1"}, "sigma must be a positive"),
])
def test_specify_refuses_non_finite_parameters(kw, match):
    # a NaN intercept or sigma gave a model that simulates NaN responses
    with pytest.raises(ValueError, match=match):
        crossed.specify("y ~ x + (1 | g)", _data(), varcorr={"g": 1.0}, **kw)


def test_refit_refuses_a_constant_or_non_numeric_response(fit):
    # lmer refuses a constant response; refit fitted it (deviance -4208)
    with pytest.raises(DataError, match="constant"):
        fit.refit(y=np.ones(fit.nobs))
    with pytest.raises(DataError, match="must be numbers"):
        fit.refit(y=np.array(["a"] * fit.nobs))


@pytest.mark.parametrize("rows,match", [
    (np.array([0, 1, 10**6]), "outside 0..119"),
    (np.arange(50.0), "whole-number positions"),
    (np.ones(5, dtype=bool), "needs 120 values"),
])
def test_refit_rows_are_validated(fit, rows, match):
    with pytest.raises(DataError, match=match):
        fit.refit(rows=rows)


def test_emm_contrast_of_a_numeric_covariate_is_refused(fit):
    # a single mean: the power of "(nothing)" was reported as 0% from 2 of 2 simulations
    with pytest.raises(ValueError, match=r"emm_contrast\('x'\) has a single mean"):
        crossed.power_sim(fit, test=crossed.emm_contrast("x"), nsim=2, seed=1)
