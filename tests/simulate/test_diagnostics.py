"""Simulated-residual diagnostics: calibrated KS p uniform under the model, small otherwise."""

import warnings

import numpy as np
import pytest
from _simdata import fit_to, small_design
from scipy import stats

import crossed as cx
from crossed import simulate as cs


def test_scaled_residuals_are_uniform_for_the_true_parameters(truth):
    # simulate from the truth and compute the residuals against the truth itself: exact PIT
    y = truth.simulate(1, seed=3)["sim_1"].to_numpy()
    model = truth.refit(y)
    res = cs.simulate_residuals(model, nsim=99, seed=1)
    assert res.scaled.shape == (model.nobs,)
    assert np.all((res.scaled > 0) & (res.scaled < 1))
    np.testing.assert_array_equal(res.scaled, cs.simulate_residuals(model, 99, seed=1).scaled)


def test_calibrated_ks_p_uniform_under_correct_model():
    design = small_design(10, 6)
    truth = cx.specify("y ~ x + (1 | g)", design, fixef={"(Intercept)": 1.0, "x": 0.5},
                       varcorr={"g": 0.8}, sigma=1.0)
    ys = truth.simulate(30, seed=1).to_numpy()
    pvals, nominal = [], []
    for i in range(ys.shape[1]):
        fit = fit_to(truth, ys[:, i])
        diag = cs.check(fit, nsim=40, seed=i, calibrate=19)
        pvals.append(diag.tests["p_value"].iloc[0])
        nominal.append(cs.check(fit, nsim=40, seed=i).tests["p_value"].iloc[0])
    pvals = np.array(pvals)
    # p-values on the grid 1/20, ..., 1: uniform up to the grid
    assert stats.kstest(pvals, "uniform").pvalue > 0.01
    assert 0.3 < pvals.mean() < 0.7
    # the uncalibrated KS test is conservative (fitted to the same data)
    assert np.mean(nominal) > 0.5


@pytest.mark.parametrize("kind", ["heavy_tails", "skewed"])
def test_calibrated_ks_p_small_under_misspecified_model(kind):
    rng = np.random.default_rng(5)
    design = small_design(10, 6)
    g = np.repeat(np.arange(10), 6)
    pvals = []
    for i in range(6):
        b = rng.normal(0, 0.8, 10)[g]
        e = rng.standard_t(1.5, len(design)) if kind == "heavy_tails" else \
            rng.lognormal(0, 1, len(design))
        data = design.assign(y=1 + 0.5 * design["x"] + b + e)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = cx.lmer("y ~ x + (1 | g)", data)
        pvals.append(cs.check(fit, nsim=40, seed=i, calibrate=19).tests["p_value"].iloc[0])
    assert np.median(pvals) <= 0.1


def test_nominal_tests_flag_skewed_errors_on_larger_data():
    rng = np.random.default_rng(2)
    design = small_design(20, 12)
    g = np.repeat(np.arange(20), 12)
    y = 1 + 0.5 * design["x"] + rng.normal(0, 0.5, 20)[g] + rng.lognormal(0, 1, len(design))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ x + (1 | g)", design.assign(y=y))
    diag = fit.check(nsim=100, seed=1)
    tests = diag.tests.set_index("test")
    assert tests.loc["uniformity", "p_value"] < 0.01
    assert not diag.ok
    assert "PROBLEM" in str(diag) and "not uniform" in str(diag)


def test_check_reports_in_words(exist_fit):
    diag = exist_fit.check(seed=1)
    assert list(diag.tests["test"]) == ["uniformity", "dispersion", "outliers"]
    assert set(diag.tests.columns) >= {"statistic", "p_value", "flag", "meaning", "calibrated"}
    text = str(diag)
    assert "Overall:" in text and "uniformity" in text
    again = exist_fit.check(seed=1)
    np.testing.assert_array_equal(diag.tests["p_value"], again.tests["p_value"])


def test_dispersion_detects_underestimated_variance(truth):
    # data with three times the residual SD, tested against the truth's parameters
    rng = np.random.default_rng(0)
    y = truth.simulate(1, seed=2)["sim_1"].to_numpy() + rng.normal(0, 3.0, truth.nobs)
    model = truth.refit(y)
    fixed_params = cx.specify("y ~ x + (1 | g)", small_design().assign(y=y),
                              fixef=dict(model.fixef), varcorr={"g": 0.8}, sigma=1.0)
    diag = cs.check(fixed_params, nsim=200, seed=3)
    disp = diag.tests.set_index("test").loc["dispersion"]
    assert disp["statistic"] > 2 and disp["p_value"] < 0.05
