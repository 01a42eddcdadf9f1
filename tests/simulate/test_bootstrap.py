"""Parametric bootstrap: replicates, intervals, coverage near nominal."""

import importlib

import numpy as np
import pandas as pd
import pytest
from _simdata import fit_to

import crossed as cx
from crossed import simulate as cs

bootstrap_module = importlib.import_module("crossed.simulate.bootstrap")  # (the package
# exports the function under the module's name)


def test_replicates_recover_the_generating_parameters(truth):
    # bootstrapping the specified model = simulate from known parameters and refit
    boot = cx.bootstrap(truth, "fixef", nsim=300, seed=1)
    reps = boot.replicates[["(Intercept)", "x"]].to_numpy()
    mc_se = reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    assert np.all(np.abs(reps.mean(axis=0) - truth.beta) < 4 * mc_se)
    sd = cx.bootstrap(truth, "sdcor", nsim=300, seed=2).replicates
    # REML: sigma^2 nearly unbiased; the group SD is estimated with 10 groups (biased low)
    assert abs(np.mean(sd["sigma"] ** 2) - 1.0) < 4 * np.std(sd["sigma"] ** 2) / np.sqrt(300)
    assert 0.55 < sd["sd_(Intercept)|g"].mean() < 0.9


def test_bootstrap_se_matches_model_se(exist_fit):
    boot = cx.bootstrap(exist_fit, "fixef", nsim=200, seed=3)
    tab = boot.intervals()
    model_se = np.sqrt(np.diag(exist_fit.vcov_beta))
    ratio = tab["std_error"].to_numpy() / model_se
    assert np.all((ratio > 0.75) & (ratio < 1.3))
    assert list(tab.columns) == ["term", "estimate", "bias", "std_error", "n_boot",
                                 "conf_low", "conf_high"]
    assert tab.attrs["ci"] == "percentile" and tab.attrs["conf_level"] == 0.95


def test_interval_coverage_near_nominal(truth):
    ys = truth.simulate(40, seed=10).to_numpy()
    covered = {"percentile": 0, "normal": 0, "basic": 0}
    for i in range(ys.shape[1]):
        fit = fit_to(truth, ys[:, i])
        boot = cx.bootstrap(fit, cs.fixed("x"), nsim=60, seed=100 + i)
        for kind in covered:
            row = boot.intervals(kind).iloc[0]
            covered[kind] += bool(row["conf_low"] <= 0.5 <= row["conf_high"])
    # 40 datasets: coverage 0.95 gives >= 34 with probability 0.99
    for kind, k in covered.items():
        assert k >= 33, (kind, k)


def test_emm_contrast_and_callable_statistics(exist_fit):
    emm = cx.bootstrap(exist_fit, cs.emm_contrast("language"), nsim=30, seed=4)
    assert list(emm.t0.index) == ["en - es"]
    direct = exist_fit.emmeans("language").pairs()
    np.testing.assert_allclose(emm.t0.iloc[0], direct["estimate"].iloc[0], rtol=1e-10)
    ratio = cx.bootstrap(exist_fit, lambda f: {"icc": f.theta[0] ** 2 / (1 + f.theta[0] ** 2)},
                         nsim=30, seed=4)
    assert ratio.replicates.shape == (30, 2) and ratio.replicates["icc"].between(0, 1).all()
    again = cx.bootstrap(exist_fit, cs.emm_contrast("language"), nsim=30, seed=4)
    pd.testing.assert_frame_equal(emm.replicates, again.replicates)


def test_bad_arguments(exist_fit):
    with pytest.raises(ValueError, match="ci"):
        cx.bootstrap(exist_fit, nsim=2, ci="bca")
    with pytest.raises(ValueError, match="stat"):
        cx.bootstrap(exist_fit, "nonsense", nsim=2)


@pytest.mark.parametrize("name", ["fixef", "theta", "sigma"])
def test_builtin_statistics_read_from_arrays_are_the_series_values(exist_fit, name):
    # a built-in statistic's replicates are read from the refit's arrays; the same
    # statistic given as a plain function goes through its Series: the same numbers
    series = bootstrap_module.STATS[name].series
    fast = cx.bootstrap(exist_fit, name, nsim=20, seed=5)
    plain = cx.bootstrap(exist_fit, lambda f: series(f), nsim=20, seed=5)
    pd.testing.assert_frame_equal(fast.replicates, plain.replicates, check_exact=True)
    pd.testing.assert_series_equal(fast.t0, plain.t0, check_exact=True)


def test_builtin_statistic_with_other_names_is_reindexed(exist_fit):
    # a refit whose names differ from the original's (a dropped rank-deficient column):
    # NaN where a name is missing, the others in the original's order
    names = (*reversed(exist_fit.fixef_names), "absent")
    got = bootstrap_module._replicate_values(bootstrap_module.STATS["fixef"], exist_fit,
                                             names)
    np.testing.assert_array_equal(got[:-1], exist_fit.beta[::-1])
    assert np.isnan(got[-1])
