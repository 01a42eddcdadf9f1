"""Engine against engine: native vs lme4 and native vs statsmodels on the reference cases.

The fits are shared with the conformance suite (``test_conformance._fitted``, fitted once per
session). Tolerances, engine against engine:

* native vs lme4: criterion 1e-6 relative; fixed effects 1e-5 max(|b|, SE); SEs 1e-4;
  theta 1e-3 relative + 1e-4 absolute; sigma 1e-4. Where the lme4 engine stops early on a
  flat criterion (its default rule; blurb_ccmem_slopes), the difference must be explained
  by that stop (``agree``): native's criterion no worse, theta equal in well-determined
  directions, and native's formulas at lme4's theta reproduce lme4's numbers.
* native vs statsmodels: the issue's statsmodels tolerances, criterion and fixed effects
  1e-5, SEs 1e-3 (except the documented vcov limitation on carrots_slopes, asserted below);
  theta and sigma as for lme4.

Downstream inference (Satterthwaite, ANOVA, EMMs, R²) runs unchanged on every engine's fit
and follows its estimates.
"""

from __future__ import annotations

import numpy as np
import pytest
import test_conformance as conf

from crossed.engines import AVAILABLE
from reference import as_matrix, case_names, explained_by_optimum, r_answers

PAIRS = [("native", "lme4"), ("native", "statsmodels")]
TOL = {
    "lme4": dict(crit=1e-6, fixef=1e-5, se=1e-4, theta=(1e-3, 1e-4), sigma=1e-4),
    "statsmodels": dict(crit=1e-5, fixef=1e-5, se=1e-3, theta=(1e-3, 1e-4), sigma=1e-4),
}
KNOWN = {
    ("statsmodels", "carrots_slopes", "se"): conf._SM_VCOV,
}
CASES = [c for c in case_names() if c != "insteval_crossed"]  # see conf.NOT_RUN / CANNOT


def params(quantity: str) -> list:
    out = []
    for a, b in PAIRS:
        if b not in AVAILABLE:
            continue
        for case in CASES:
            marks = []
            if (b, case, quantity) in KNOWN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[(b, case, quantity)]))
            out.append(pytest.param(a, b, case, id=f"{a}-{b}-{case}", marks=marks))
    return out


def pair(a: str, b: str, case: str):
    fa, _ = conf.fitted(a, case)
    fb, _ = conf.fitted(b, case)
    return fa, fb


def agree(fa, fb, check) -> None:
    """``check(fa)`` against engine b's numbers; where it fails, the difference must come
    from where b's optimiser stopped (reference.explained_by_optimum with b's fit as the
    reference: ours no worse, theta in well-determined directions, our formulas at b's
    theta reproduce b's numbers)."""
    explained_by_optimum(fa, {"deviance": fb.deviance, "theta": fb.theta}, check)


@pytest.mark.parametrize("a,b,case", params("crit"))
def test_criterion_agrees(a, b, case):
    fa, fb = pair(a, b, case)
    conf.assert_close(fb.deviance, fa.deviance, TOL[b]["crit"], what=f"{b} vs {a} criterion")


@pytest.mark.parametrize("a,b,case", params("fixef"))
def test_fixef_agree(a, b, case):
    fa, fb = pair(a, b, case)
    assert list(fa.fixef.index) == list(fb.fixef.index)
    scale = np.maximum(np.abs(fb.beta), np.sqrt(np.diag(fb.vcov_beta)))
    agree(fa, fb, lambda f: conf.assert_close(f.beta, fb.beta, 0.0, TOL[b]["fixef"] * scale,
                                              what=f"{a} vs {b} fixef",
                                              labels=list(fa.fixef.index)))


@pytest.mark.parametrize("a,b,case", params("se"))
def test_std_errors_agree(a, b, case):
    fa, fb = pair(a, b, case)
    agree(fa, fb, lambda f: conf.assert_close(
        np.sqrt(np.diag(f.vcov_beta)), np.sqrt(np.diag(fb.vcov_beta)), TOL[b]["se"],
        what=f"{a} vs {b} SE", labels=list(fa.fixef.index)))


@pytest.mark.parametrize("a,b,case", params("theta"))
def test_theta_and_sigma_agree(a, b, case):
    fa, fb = pair(a, b, case)
    assert list(fa.theta_names) == list(fb.theta_names)
    rtol, atol = TOL[b]["theta"]

    def check(f):
        conf.assert_close(f.theta, fb.theta, rtol, atol, what=f"{a} vs {b} theta",
                          labels=list(fa.theta_names))
        conf.assert_close(f.sigma, fb.sigma, TOL[b]["sigma"], what=f"{a} vs {b} sigma")
    agree(fa, fb, check)
    # the native engine's singular flag is R's (test_conformance); another engine's agrees
    # with it, or (an engine stopping by lme4's default rule) that engine stopped before the
    # optimum and its flag is that of its own theta
    if fb.is_singular != fa.is_singular:
        assert b in conf.DEFAULT_STOP_ONLY, (fa.is_singular, fb.is_singular)
        assert fb.deviance > fa.deviance
        bounded = np.isfinite(fb.design.random.theta_lower)
        assert fb.is_singular is bool(np.any(fb.theta[bounded] < 1e-4))


# ---------------------------------------------------------------- the statsmodels limitation
def test_statsmodels_vcov_limitation_on_carrots():
    """statsmodels' SEs come from the inverse observed information over (β, covariance
    parameters); lme4's are σ² (X'V⁻¹X)⁻¹. On carrots_slopes the two differ by 5e-3; lme4's
    formula evaluated at statsmodels' own θ and σ reproduces R's SEs to 1e-4."""
    fit, _ = conf.fitted("statsmodels", "carrots_slopes")
    se_r = np.sqrt(np.diag(as_matrix(r_answers("carrots_slopes")["vcov"])))
    rel = np.abs(np.sqrt(np.diag(fit.vcov_beta)) - se_r) / se_r
    assert 1e-3 < rel.max() < 1e-2  # the limitation: beyond 1e-3, and only that
    Ri = fit.pls.rx_inverse(fit.factor_at_optimum)
    se_lme4_formula = np.sqrt(np.diag(fit.sigma**2 * (Ri.T @ Ri)))
    np.testing.assert_allclose(se_lme4_formula, se_r, rtol=1e-4)


# ---------------------------------------------------------------- downstream inference
@pytest.mark.parametrize("engine", [e for e in AVAILABLE if e != "native"])
def test_downstream_inference_agrees(engine):
    """ANOVA (Satterthwaite), EMMs and R² on another engine's fit follow the native ones."""
    fa, _ = conf.fitted("native", "cake_split_plot")
    fb, _ = conf.fitted(engine, "cake_split_plot")
    an_a, an_b = fa.anova(type=3), fb.anova(type=3)
    assert list(an_a["term"]) == list(an_b["term"])
    np.testing.assert_allclose(an_b["statistic"], an_a["statistic"], rtol=1e-4)
    np.testing.assert_allclose(an_b["den_df"], an_a["den_df"], rtol=1e-3)
    em_a, em_b = fa.emmeans("recipe").table(), fb.emmeans("recipe").table()
    np.testing.assert_allclose(em_b["estimate"], em_a["estimate"], rtol=1e-6)
    np.testing.assert_allclose(em_b["std_error"], em_a["std_error"], rtol=1e-4)
    r2a, r2b = fa.r2(), fb.r2()
    np.testing.assert_allclose(r2b.select_dtypes("number").to_numpy(),
                               r2a.select_dtypes("number").to_numpy(), rtol=1e-4)
