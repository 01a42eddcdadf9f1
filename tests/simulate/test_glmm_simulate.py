"""GLMM simulations: simulate, refit, bootstrap, power, ablation and DHARMa-style checks.

Checked against theory (no R stream to match): moments of lme4's ``simulate.merMod``
model, uniform scaled residuals on data simulated from the fitted model, and the
dispersion test flagging overdispersed Poisson data.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.evaluation import ablation
from crossed.simulate import bootstrap, emm_contrast, fixed, lrt, power_sim

DATA = Path(__file__).parents[1] / "data" / "glmm"


@pytest.fixture(scope="module")
def cbpp_fit():
    cb = pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})
    return cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", cb)


@pytest.fixture(scope="module")
def grouse_fit():
    g = pd.read_csv(DATA / "grouseticks.csv", dtype={"BROOD": str, "LOCATION": str,
                                                      "YEAR": str, "INDEX": str})
    return cx.glmer("TICKS ~ YEAR + cHEIGHT + (1 | BROOD) + (1 | LOCATION)", g,
                    family="poisson")


@pytest.fixture(scope="module")
def binary_fit():
    b = pd.read_csv(DATA / "binary.csv")
    return cx.glmer("correct ~ sys + (1 | item) + (1 | grp)", b)


def test_binomial_trials_and_reproducible(cbpp_fit):
    s = cbpp_fit.simulate(50, seed=3).to_numpy()
    w = cbpp_fit.prior_weights
    k = s * w[:, None]
    assert s.shape == (cbpp_fit.nobs, 50)
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)   # whole successes
    assert (s >= 0).all() and (s <= 1).all()
    np.testing.assert_array_equal(s, cbpp_fit.simulate(50, seed=3))


def test_conditional_mean_is_fitted_mean(cbpp_fit, grouse_fit):
    # use_ranef=True: E[y*] = mu (lme4's re.form = NULL)
    for fit in (cbpp_fit, grouse_fit):
        s = fit.simulate(4000, seed=1, use_ranef=True).to_numpy()
        se = np.sqrt(fit.family.variance(fit.mu) / fit.prior_weights / 4000)
        z = (s.mean(axis=1) - fit.mu) / np.maximum(se, 1e-12)
        assert np.max(np.abs(z)) < 5.0


def test_unconditional_poisson_mean(grouse_fit):
    # new b ~ N(0, ΛΛᵀ) (no sigma): E[y*] = exp(Xβ + (σ²_brood + σ²_location) / 2)
    s = grouse_fit.simulate(4000, seed=2).to_numpy()
    v = grouse_fit.varcorr()["variance_or_cov"].sum()
    expect = np.exp(grouse_fit.design.X @ grouse_fit.beta + v / 2)
    assert abs(np.mean(s.mean(axis=1) / expect) - 1) < 0.05


def test_refit_same_response_same_fit(cbpp_fit):
    r = cbpp_fit.refit(y=cbpp_fit.design.y)
    assert r.criterion == pytest.approx(cbpp_fit.criterion, rel=1e-9)
    np.testing.assert_allclose(r.beta, cbpp_fit.beta, rtol=1e-6)
    sub = cbpp_fit.refit(rows=np.arange(40))
    assert sub.nobs == 40 and sub.family.name == "binomial"


def test_refit_refuses_impossible_response(cbpp_fit, grouse_fit):
    with pytest.raises(ValueError, match="proportions"):
        cbpp_fit.refit(y=cbpp_fit.design.y * 3)
    with pytest.raises(ValueError, match="negative"):
        grouse_fit.refit(y=-grouse_fit.design.y - 1)


def test_scaled_residuals_uniform_on_model_data(binary_fit):
    # data simulated from the fitted model: KS p-values not small across seeds
    ps = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(3):
            y = binary_fit.simulate(1, seed=seed)["sim_1"].to_numpy()
            d = binary_fit.refit(y=y).check(seed=seed, nsim=200)
            ps.append(d.tests.set_index("test").loc["uniformity", "p_value"])
            assert set(np.unique(y)) <= {0.0, 1.0}
    assert min(ps) > 0.01


def test_dispersion_flags_overdispersed_poisson():
    rng = np.random.default_rng(0)
    n = 600
    grp = rng.integers(0, 30, n)
    x = rng.normal(size=n)
    mu = np.exp(0.5 + 0.3 * x + rng.normal(0, 0.5, 30)[grp] + rng.normal(0, 0.8, n))
    df = pd.DataFrame({"y": rng.poisson(mu), "x": x, "g": grp.astype(str)})
    fit = cx.glmer("y ~ x + (1 | g)", df, family="poisson")
    tests = fit.check(seed=1).tests.set_index("test")
    assert tests.loc["dispersion", "statistic"] > 1.5
    assert tests.loc["dispersion", "flag"] and tests.loc["uniformity", "flag"]


def test_bootstrap_glmm(cbpp_fit):
    b = bootstrap(cbpp_fit, stat="fixef", nsim=8, seed=1)
    iv = b.intervals()
    assert list(iv["term"]) == list(cbpp_fit.fixef_names)
    assert (iv["n_boot"] == 8).all()
    assert cbpp_fit.bootstrap(stat="sdcor", nsim=2, seed=1).t0.index[0] == "sd_(Intercept)|herd"
    with pytest.raises(ValueError, match="no residual sigma"):
        bootstrap(cbpp_fit, stat="sigma", nsim=2)


def test_power_glmm_tests(cbpp_fit):
    p = power_sim(cbpp_fit, fixed("period4"), nsim=4, seed=1)
    reps = p.replicates
    assert (reps["status"] == "ok").all() and np.isinf(reps["df"]).all()  # Wald z
    p2 = power_sim(cbpp_fit, lrt("period"), nsim=2, seed=1)
    assert (p2.replicates["df"] == 3).all()
    p3 = power_sim(cbpp_fit, emm_contrast("period", "period1 - period2"), nsim=2, seed=1)
    assert (p3.replicates["status"] == "ok").all()
    with pytest.raises(ValueError, match="Wald z"):
        power_sim(cbpp_fit, fixed("period4", ddf="satterthwaite"), nsim=1)


def test_lrt_matches_anova(cbpp_fit):
    bound = lrt("period")(cbpp_fit)
    row = bound(cbpp_fit)
    cb = cbpp_fit.design.frame
    assert cb is not None
    reduced = cx.glmer("cbind(incidence, size - incidence) ~ 1 + (1 | herd)",
                       pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str}))
    assert row["statistic"] == pytest.approx(reduced.criterion - cbpp_fit.criterion,
                                             abs=1e-6)


def test_ablation_glmm():
    b = pd.read_csv(DATA / "binary.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ablation(b, "correct ~ sys + (1 | item) + (1 | grp)", fixed("sysB"),
                       fractions=[0.2], reps=2, seed=1, family="binomial")
    assert (res.replicates["status"] == "ok").all()


def test_residual_plots_accept_glmm(cbpp_fit):
    pytest.importorskip("matplotlib")
    from crossed.plots.residuals import residual_plots

    fig = residual_plots(cbpp_fit)
    assert len(fig.axes) == 2


def test_extend_glmm_items(cbpp_fit):
    from crossed.datasets import item_level_irt
    from crossed.simulate import extend

    d = item_level_irt(n_systems=3, n_items=30, n_datasets=2, seed=1)
    fit = cx.glmer("correct ~ system + (1 | item)", d)
    big = extend(fit, along="item", n=100)
    assert big.nobs == 300 and len(big.eta) == 300
    np.testing.assert_allclose(big.eta[:180], fit.eta)     # old rows keep their modes
    assert big.simulate(1, seed=1, use_ranef=True).shape == (300, 1)
    with pytest.raises(ValueError, match="prior weights"):
        extend(cbpp_fit, along="herd", n=30)
