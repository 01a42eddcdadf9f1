"""The lme4 engine's glmer (R through rpy2) against R's own answers and the native engine.

R's numbers: tests/data/reference/glmm/glmm.json (glmm.R beside it, lme4 1.1-31). The
lme4 engine runs the same glmer on the design's columns, so its numbers equal R's to
rounding; the native engine must reach lme4's criterion or lower, with β, SE and θ close.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crossed as cx
from glmm_reference import as_list, case, case_data

CBIND = "cbind(incidence, size - incidence) ~ period + (1 | herd)"
CASES = {
    "cbpp": (CBIND, "binomial", 1),
    "cbpp_agq9": (CBIND, "binomial", 9),
    "cbpp_probit": (CBIND, ("binomial", "probit"), 1),
    "errors_offset": (None, "poisson", 1),
    "singular": (None, "binomial", 1),
}


def _fit(name: str, engine: str):
    formula, family, nagq = CASES[name]
    if isinstance(family, tuple):
        family = cx.binomial(family[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(formula or case(name)["formula"], case_data(name), family=family,
                        nAGQ=nagq, engine=engine)


@pytest.fixture(scope="module")
def lme4_fits(r_stack):
    return {name: _fit(name, "lme4") for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_lme4_engine_reproduces_glmer(lme4_fits, name):
    fit, ref = lme4_fits[name], case(name)
    assert fit.engine == "lme4"
    np.testing.assert_allclose(fit.deviance, ref["deviance"], rtol=1e-9)   # deviance()
    np.testing.assert_allclose(fit.criterion, ref["minus2loglik"], rtol=1e-9)
    np.testing.assert_allclose(fit.loglik, ref["loglik"], rtol=1e-9)
    np.testing.assert_allclose(fit.aic, ref["aic"], rtol=1e-9)
    np.testing.assert_allclose(fit.bic, ref["bic"], rtol=1e-9)
    np.testing.assert_allclose(fit.beta, ref["beta"], rtol=1e-8, atol=1e-10)
    # vcov is lme4's finite-difference Hessian: NumPy 1's SIMD log() is one ulp from the C
    # library's (R's) on 69 of the 360 offsets log(length) of errors_offset, which moves
    # it by 4e-6 (NumPy 2's log is R's)
    ulp_offsets = name == "errors_offset" and np.lib.NumpyVersion(np.__version__) < "2.0.0"
    np.testing.assert_allclose(fit.vcov_beta, ref["vcov"], rtol=1e-5 if ulp_offsets else 1e-7,
                               atol=1e-12)
    np.testing.assert_allclose(fit.theta, as_list(ref["theta"]), rtol=1e-8, atol=1e-10)
    assert fit.is_singular == ref["singular"]
    # conditional modes and SDs (ranef(condVar = TRUE)), first levels of the first factor
    re = ref["ranef"][0]
    got = fit.ranef()
    got = got[got["group"] == re["group"]].head(len(re["levels"]))
    assert [str(v) for v in got["level"]] == as_list(re["levels"])
    np.testing.assert_allclose(got["estimate"], np.ravel(re["values"]), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got["cond_sd"], np.ravel(re["cond_sd"]), rtol=1e-6)
    # fitted values and residuals at a few rows
    rows = as_list(ref["resid"]["rows"])
    np.testing.assert_allclose(fit.eta[rows], ref["resid"]["eta"], rtol=1e-7)
    np.testing.assert_allclose(fit.fitted()[rows], ref["resid"]["fitted_response"], rtol=1e-7)
    for ty in ("deviance", "pearson", "response"):
        np.testing.assert_allclose(fit.residuals(type=ty)[rows], ref["resid"][f"resid_{ty}"],
                                   rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_native_reaches_lme4s_criterion(lme4_fits, name):
    """Native vs lme4 on the same design: criterion at lme4's or lower (slack 1e-6
    relative), β within 1e-4, SE within 1e-3 relative, θ within 1e-3."""
    nat, r = _fit(name, "native"), lme4_fits[name]
    assert nat.criterion <= r.criterion * (1 + 1e-6)
    np.testing.assert_allclose(nat.beta, r.beta, atol=1e-4)
    np.testing.assert_allclose(np.sqrt(np.diag(nat.vcov_beta)), np.sqrt(np.diag(r.vcov_beta)),
                               rtol=1e-3)
    np.testing.assert_allclose(nat.theta, r.theta, atol=1e-3)


def test_lme4_engine_refuses_control(r_stack):
    from crossed.engines.lme4_glmm import fit_glmm_lme4

    fit = _fit("cbpp", "native")
    with pytest.raises(ValueError, match="control"):
        fit_glmm_lme4(fit.design, fit.family, control=object())


def test_inference_on_lme4_fits_reproduces_r(lme4_fits):
    """drop1, the LRT against a nested fit and the response-scale EMMs computed on the
    lme4 engine's fits equal R's (drop1(test = "Chisq"), anova(m0, m), emmeans) to
    rounding: the inference layer refits with the fit's own engine."""
    import pandas as pd

    fit, ref = lme4_fits["cbpp"], case("cbpp")
    d1 = fit.drop1()
    r1 = pd.DataFrame(ref["drop1"])
    np.testing.assert_allclose(d1["aic"], r1["AIC"], rtol=1e-8)
    np.testing.assert_allclose(d1["statistic"].iloc[1:], r1["LRT"].iloc[1:], rtol=1e-6)
    small = _fit_formula("cbpp", ref["anova"]["small"], "lme4")
    lrt = fit.anova(small)
    r2 = pd.DataFrame(ref["anova"]["table"])
    np.testing.assert_allclose(lrt["statistic"].iloc[1], r2["Chisq"].iloc[1], rtol=1e-6)
    np.testing.assert_allclose(lrt["aic"], r2["AIC"], rtol=1e-9)
    emm = fit.emmeans("period", type="response").table()
    np.testing.assert_allclose(emm["prob"], pd.DataFrame(ref["emm"]["emmeans"])["prob"],
                               rtol=1e-7)


def _fit_formula(name: str, formula: str, engine: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(formula, case_data(name), family="binomial", engine=engine)
