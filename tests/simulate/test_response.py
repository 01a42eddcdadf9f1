"""simulate() and refit(): lme4's semantics on the stored design."""

import warnings

import numpy as np
import pytest

import crossed as cx


@pytest.fixture(scope="module")
def fit():
    data = cx.load_dataset("exist_multi")
    return cx.lmer("delta ~ language * task * mode + (1 | architecture)", data)


def test_simulate_is_reproducible_and_shaped(fit):
    a = fit.simulate(5, seed=3)
    b = fit.simulate(5, seed=np.random.default_rng(3))
    assert a.shape == (fit.nobs, 5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, fit.simulate(5, seed=4))


def test_simulate_returns_rs_table_for_both_fit_classes():
    """R's ``simulate(m, nsim = 3)`` is a data frame with columns ``sim_1`` ... ``sim_3``
    and one row per observation of the model frame (before: a bare (nobs, nsim) array);
    the array is ``.to_numpy()``. Rows dropped for missing values are not simulated."""
    import pandas as pd

    d = cx.load_dataset("cbpp")
    d.loc[2, "incidence"] = np.nan  # one row dropped: 55 observations used
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = {"lmm": cx.lmer("incidence ~ period + (1 | herd)", d),
                "glmm": cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                                 d, family="binomial")}
    for kind, f in fits.items():
        sims = f.simulate(3, seed=1)
        assert isinstance(sims, pd.DataFrame), kind
        assert list(sims.columns) == ["sim_1", "sim_2", "sim_3"], kind
        assert sims.index.equals(pd.RangeIndex(f.nobs)) and f.nobs == 55, kind
        assert sims.attrs["nsim"] == 3 and sims.attrs["use_ranef"] is False
        arr = sims.to_numpy()
        assert arr.shape == (55, 3) and arr.dtype == float
        from crossed.simulate import simulate_responses
        np.testing.assert_array_equal(arr, simulate_responses(f, 3, seed=1))
    # a GLMM's binomial response is the proportion of the trials, as lme4's
    k = fits["glmm"].simulate(2, seed=2).to_numpy() * fits["glmm"].prior_weights[:, None]
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)


def _draws_by_hand(f, nsim, seed):
    """y* = Xβ̂ + Σ_k Z_k (σ T_k u_k) + σ ε, with the draws in the simulation's order (the
    blocks' u in turn, then ε), written out with dense Z."""
    rng = np.random.default_rng(seed)
    y = np.repeat((f.design.X @ f.beta)[:, None], nsim, axis=1)
    for blk in f.design.random.blocks:
        u = rng.standard_normal((blk.nlevels, blk.q, nsim))
        b = f.sigma * np.einsum("ab,lbs->las", blk.template(f.theta), u)
        y += np.einsum("iq,iqs->is", blk.Z, b[blk.codes])
    return y + f.sigma * rng.standard_normal((f.nobs, nsim))


@pytest.mark.parametrize("formula", [
    "Reaction ~ Days + (Days | Subject)",  # a block of two columns per level
    "Reaction ~ Days + (1 | Subject) + (0 + Days | Subject)",  # an intercept and a slope
])
def test_simulate_draws_are_the_model_written_out(formula):
    """The draws kept per fit (Xβ̂ and each block's T, computed once) give the model's
    responses, and a fit with other estimates (``replace``: its own, empty cache) draws
    from its own, not from the first fit's."""
    from dataclasses import replace

    from crossed.simulate import simulate_responses

    f = cx.lmer(formula, cx.load_dataset("sleepstudy"))
    for seed in (1, 2):  # (the second call reads the kept draws)
        np.testing.assert_allclose(simulate_responses(f, 3, seed=seed),
                                   _draws_by_hand(f, 3, seed), rtol=1e-12, atol=1e-9)
    g = replace(f, beta=f.beta + 10.0, theta=f.theta * 2.0)
    np.testing.assert_allclose(simulate_responses(g, 3, seed=1), _draws_by_hand(g, 3, 1),
                               rtol=1e-12, atol=1e-9)
    assert not np.allclose(simulate_responses(g, 3, seed=1), simulate_responses(f, 3, seed=1))


def test_simulate_moments_match_the_model(fit):
    y = fit.simulate(4000, seed=1).to_numpy()
    # marginal mean Xβ, marginal variance σ²(1 + θ²) for one random intercept
    np.testing.assert_allclose(y.mean(axis=1), fit.design.X @ fit.beta, atol=0.005)
    var = fit.sigma**2 * (1 + fit.theta[0] ** 2)
    assert abs(y.var(axis=1).mean() / var - 1) < 0.05


def test_simulate_conditional_on_ranef(fit):
    y = fit.simulate(4000, seed=2, use_ranef=True).to_numpy()
    np.testing.assert_allclose(y.mean(axis=1), fit.fitted(), atol=0.002)
    assert abs(y.var(axis=1).mean() / fit.sigma**2 - 1) < 0.05


def test_refit_same_response_reproduces_fit(fit):
    again = fit.refit(fit.design.y)
    np.testing.assert_allclose(again.deviance, fit.deviance, rtol=1e-10)
    np.testing.assert_allclose(again.beta, fit.beta, rtol=1e-8)


def test_refit_recovers_parameters_on_average(fit):
    ys = fit.simulate(150, seed=11).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        betas = np.array([fit.refit(ys[:, i]).beta for i in range(ys.shape[1])])
    se = np.sqrt(np.diag(fit.vcov_beta)) / np.sqrt(len(betas))
    assert np.all(np.abs(betas.mean(axis=0) - fit.beta) < 4 * se)


def test_refit_rows_equals_fit_on_subset(fit):
    data = cx.load_dataset("exist_multi")
    keep = np.arange(fit.nobs) % 5 != 0
    sub = fit.refit(rows=keep)
    direct = cx.lmer(fit.formula, data.loc[keep])
    np.testing.assert_allclose(sub.deviance, direct.deviance, rtol=1e-8)
    np.testing.assert_allclose(sub.beta, direct.beta, rtol=1e-6)
    assert sub.nobs == keep.sum()


def test_refit_rows_drops_columns_of_removed_cells():
    data = cx.load_dataset("exist_multi")
    fit = cx.lmer("delta ~ language * task + (1 | architecture)", data)
    keep = ~((data.language == "es") & (data.task == "t3")).to_numpy()
    with pytest.warns(UserWarning, match="languagees:taskt3"):
        sub = fit.refit(rows=keep)
    assert "languagees:taskt3" not in sub.fixef_names


def test_refit_rejects_bad_response(fit):
    with pytest.raises(cx.DataError, match="shape"):
        fit.refit(np.zeros(3))
