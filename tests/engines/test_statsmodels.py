"""The statsmodels engine: translation to MixedLM, lme4's scale, what it cannot express."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design import build_design
from crossed.engines.statsmodels import _psd_cholesky, translate
from crossed.model.pls import profiled_deviance
from reference import fit_case, load_case, load_table


def design_of(case: str):
    c = load_case(case)
    return build_design(crossed.parse(c.formula, reference=c.reference), c.data)


@pytest.fixture(scope="module")
def sleep_fits():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {reml: crossed.lmer("Reaction ~ Days + (Days | Subject)",
                                   load_table("sleepstudy.csv", ("Subject",)), reml=reml,
                                   engine="statsmodels") for reml in (True, False)}


@pytest.fixture(scope="module")
def crossed_table() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    a, b = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
    df = pd.DataFrame({"a": [f"a{i}" for i in a.ravel()], "b": [f"b{j}" for j in b.ravel()]})
    df = pd.concat([df, df], ignore_index=True)
    df["x"] = rng.normal(size=len(df))
    df["y"] = 1 + 0.5 * df["x"] + rng.normal(size=len(df))
    return df


# ---------------------------------------------------------------- translation
def test_translation_slopes_nested_crossed():
    d = design_of("sleepstudy_slopes")
    lay = translate(d)
    assert lay.re_term is not None and lay.re_term.columns == ("(Intercept)", "Days")
    assert d.random.blocks[lay.group_block].group == "Subject" and lay.vc_terms == ()

    d = design_of("pastes_nested")  # (1 | batch/cask): cask:batch nested in batch
    lay = translate(d)
    assert d.random.blocks[lay.group_block].group == "batch"
    assert [t.group for t in lay.vc_terms] == ["cask:batch", "batch"]

    d = design_of("penicillin_crossed")  # crossed: one group holding every row
    lay = translate(d)
    assert lay.group_block is None and lay.re_term is None
    assert [t.group for t in lay.vc_terms] == ["plate", "sample"]
    assert "groups=(all rows)" in lay.describe(d)

    d = design_of("sleepstudy_zerocorr")  # || : two variance components within Subject
    lay = translate(d)
    assert lay.re_term is None and [t.columns for t in lay.vc_terms] == [("(Intercept)",),
                                                                          ("Days",)]


def test_correlated_slopes_on_crossed_factors_are_refused(crossed_table):
    with pytest.raises(crossed.UnsupportedModelError,
                       match="cannot express correlated random slopes") as info:
        crossed.lmer("y ~ x + (1 + x | a) + (1 | b)", crossed_table, engine="statsmodels")
    assert "engine='native'" in str(info.value) and "(1 | b)" not in str(info.value)


def test_two_correlated_vectors_are_refused(crossed_table):
    with pytest.raises(crossed.UnsupportedModelError, match="one correlated random-effects"):
        crossed.lmer("y ~ x + (1 + x | a) + (1 + x | b)", crossed_table, engine="statsmodels")


def test_uncorrelated_slopes_on_crossed_factors_fit(crossed_table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = crossed.lmer("y ~ x + (1 | a) + (0 + x | a) + (1 | b)", crossed_table,
                          engine="statsmodels")
        nat = crossed.lmer("y ~ x + (1 | a) + (0 + x | a) + (1 | b)", crossed_table)
    assert sm.engine == "statsmodels"
    assert sm.deviance == pytest.approx(nat.deviance, rel=1e-5)
    np.testing.assert_allclose(sm.beta, nat.beta, rtol=1e-4, atol=1e-6)


def test_control_is_refused():
    c = load_case("dyestuff")
    with pytest.raises(ValueError, match="native engine's optimiser"):
        crossed.lmer(c.formula, c.data, engine="statsmodels", control=crossed.LmerControl())


# ---------------------------------------------------------------- lme4's scale
@pytest.mark.parametrize("reml", [True, False])
def test_criterion_constant_is_lme4s(sleep_fits, reml):
    """−2 × statsmodels' llf is lme4's profiled criterion at statsmodels' θ (same constants)."""
    fit = sleep_fits[reml]
    n, p = fit.design.X.shape
    assert fit.deviance == pytest.approx(
        profiled_deviance(fit.pls.factor(fit.theta), n, p, reml), rel=1e-9)
    # σ is statsmodels' scale: lme4's r²/(n − p) (REML) or r²/n (ML) at that θ
    f = fit.pls.factor(fit.theta)
    assert fit.sigma**2 == pytest.approx(f.pwrss / (n - p if reml else n), rel=1e-6)


def test_theta_is_the_relative_cholesky_factor(sleep_fits):
    fit = sleep_fits[True]
    res = fit.engine_info["statsmodels_result"]
    L = np.array([[fit.theta[0], 0.0], [fit.theta[1], fit.theta[2]]])
    np.testing.assert_allclose(L @ L.T * fit.sigma**2, np.asarray(res.cov_re), rtol=1e-10)


def test_psd_cholesky_of_a_singular_matrix():
    S = np.array([[4.0, 2.0], [2.0, 1.0]])  # rank 1: lme4's singular fit has L[1, 1] = 0
    L = _psd_cholesky(S)
    np.testing.assert_allclose(L @ L.T, S, atol=1e-12)
    assert L[1, 1] == 0.0 and L[0, 0] == 2.0
    np.testing.assert_allclose(_psd_cholesky(np.zeros((2, 2))), 0.0)


def test_estimates_are_statsmodels_own(sleep_fits):
    fit = sleep_fits[True]
    res = fit.engine_info["statsmodels_result"]
    np.testing.assert_array_equal(fit.beta, np.asarray(res.fe_params))
    se = np.sqrt(np.diag(fit.vcov_beta))
    np.testing.assert_allclose(se, np.asarray(res.bse_fe), rtol=1e-12)
    assert fit.sigma == pytest.approx(np.sqrt(res.scale), rel=1e-14)
    assert fit.deviance == pytest.approx(-2 * res.llf, rel=1e-14)
    assert fit.opt is None and fit.converged
    assert fit.convergence is crossed.ConvergenceStatus.OK


def test_singular_fit_is_reported():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_case("dyestuff2_singular", engine="statsmodels")
    assert fit.is_singular and fit.theta[0] < 1e-4
    assert fit.convergence is crossed.ConvergenceStatus.SINGULAR
    assert any(issubclass(w.category, crossed.SingularFitWarning) for w in caught)
    assert any(m.startswith("statsmodels:") for m in fit.messages)  # its own warnings kept


def test_downstream_inference_runs_unchanged(sleep_fits):
    fit = sleep_fits[True]
    tab = fit.coef_table()
    assert list(tab["term"]) == ["(Intercept)", "Days"] and np.all(tab["df"] > 10)
    assert len(fit.ranef()) == 36 and fit.r2().shape[0] >= 1
    assert "statsmodels" in repr(fit)
