"""Engine against engine: native vs lme4 and native vs statsmodels on the reference cases.

The fits are shared with the conformance suite (``test_conformance._fitted``, fitted once per
session). Tolerances, engine against engine:

* native vs lme4: criterion 1e-6 relative; fixed effects 1e-5 max(|b|, SE) (both stop by
  lme4's default rule; on the flat blurb_ccmem_slopes criterion they differ by 3e-5, strict
  xfail); SEs 1e-4 (blurb_ccmem_slopes: 2.4e-4, strict xfail); theta 1e-3 relative + 1e-4
  absolute; sigma 1e-4.
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
from reference import as_matrix, case_names, r_answers

PAIRS = [("native", "lme4"), ("native", "statsmodels")]
TOL = {
    "lme4": dict(crit=1e-6, fixef=1e-5, se=1e-4, theta=(1e-3, 1e-4), sigma=1e-4),
    "statsmodels": dict(crit=1e-5, fixef=1e-5, se=1e-3, theta=(1e-3, 1e-4), sigma=1e-4),
}
KNOWN = {
    ("statsmodels", "carrots_slopes", "se"): conf._SM_VCOV,
    ("lme4", "blurb_ccmem_slopes", "se"): (
        "(Intercept) SE 1.906692 (lme4 here) vs 1.906241 (native; 2.4e-4 relative): both stop "
        "by lme4's rule on this flat, singular criterion, at points that move with last-bit "
        "differences (test_conformance._FLAT)"),
    ("lme4", "blurb_ccmem_slopes", "fixef"): (
        "lr4e-5 0.1535088 (lme4 here) vs 0.1535042 (native): 3.0e-5 relative, 4.66e-6 "
        "absolute against 1.5e-6 allowed (1e-5 of the SE): test_conformance._FLAT"),
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


@pytest.mark.parametrize("a,b,case", params("crit"))
def test_criterion_agrees(a, b, case):
    fa, fb = pair(a, b, case)
    conf.assert_close(fb.deviance, fa.deviance, TOL[b]["crit"], what=f"{b} vs {a} criterion")


@pytest.mark.parametrize("a,b,case", params("fixef"))
def test_fixef_agree(a, b, case):
    fa, fb = pair(a, b, case)
    assert list(fa.fixef.index) == list(fb.fixef.index)
    scale = np.maximum(np.abs(fa.beta), np.sqrt(np.diag(fa.vcov_beta)))
    conf.assert_close(fb.beta, fa.beta, 0.0, TOL[b]["fixef"] * scale,
                      what=f"{b} vs {a} fixef", labels=list(fa.fixef.index))


@pytest.mark.parametrize("a,b,case", params("se"))
def test_std_errors_agree(a, b, case):
    fa, fb = pair(a, b, case)
    conf.assert_close(np.sqrt(np.diag(fb.vcov_beta)), np.sqrt(np.diag(fa.vcov_beta)),
                      TOL[b]["se"], what=f"{b} vs {a} SE", labels=list(fa.fixef.index))


@pytest.mark.parametrize("a,b,case", params("theta"))
def test_theta_and_sigma_agree(a, b, case):
    fa, fb = pair(a, b, case)
    assert list(fa.theta_names) == list(fb.theta_names)
    rtol, atol = TOL[b]["theta"]
    conf.assert_close(fb.theta, fa.theta, rtol, atol, what=f"{b} vs {a} theta",
                      labels=list(fa.theta_names))
    conf.assert_close(fb.sigma, fa.sigma, TOL[b]["sigma"], what=f"{b} vs {a} sigma")
    assert fb.is_singular == fa.is_singular or case == "blurb_ccmem_slopes"


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
