"""GLMM inference on native ``cx.glmer`` fits against R (lme4 1.1-31, emmeans 1.8.4-1,
performance 0.10.2): tests/data/reference/glmm/glmm.json, from glmm.R beside it.

The native optimiser stops at lme4's criterion or slightly below it (never assert where
an optimiser stopped), so its estimates differ from lme4's by ~1e-5: EMMs on the response
scale are compared at 5e-5 relative, SEs at 1e-4, likelihood-ratio statistics and AICs at
1e-4 absolute (criterion slack), Wald χ² on the √χ² (z) scale at 2e-3 absolute. On
lme4's own estimates the same code matches R to 1e-8 (test_glmm_r_estimates.py).

R calls: ``emmeans(m, spec, type = "response")`` and ``pairs()`` (Tukey; summary with
``infer = TRUE``); ``drop1(m, test = "Chisq")``; ``anova(m_small, m)``;
``performance::r2_nakagawa(m)``; Wald χ² from ``lmerTest:::get_contrasts_type2/3``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.inference.glmm import fixed_reduced_design, refit_design
from glmm_reference import case, case_data

pytestmark = pytest.mark.filterwarnings("ignore:NOTE. Results may be misleading")

CBIND = "cbind(incidence, size - incidence) ~ period + (1 | herd)"
SPECS = {
    "cbpp": (CBIND, "binomial", 1),
    "cbpp_agq9": (CBIND, "binomial", 9),
    "cbpp_probit": (CBIND, ("binomial", "probit"), 1),
    "cbpp_cloglog": (CBIND, ("binomial", "cloglog"), 1),
    "grouseticks": (None, "poisson", 1),
    "errors_offset": (None, "poisson", 1),
    "singular": (None, "binomial", 1),
}
FAST = ["cbpp", "cbpp_agq9", "cbpp_probit", "cbpp_cloglog", "errors_offset", "singular"]
EMM_RTOL, SE_RTOL, LRT_ATOL = 5e-5, 1e-4, 1e-4


def _family(family):
    return cx.binomial(family[1]) if isinstance(family, tuple) else family


@functools.cache
def native(name: str, formula: str | None = None):
    f, family, nagq = SPECS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(formula or f or case(name)["formula"], case_data(name),
                        family=_family(family), nAGQ=nagq)


def _check_emm(got: pd.DataFrame, r: pd.DataFrame, est: str):
    np.testing.assert_allclose(got[est], r[est], rtol=EMM_RTOL)
    np.testing.assert_allclose(got["std_error"], r["SE"], rtol=SE_RTOL)
    np.testing.assert_allclose(got["conf_low"], r["asymp.LCL"], rtol=SE_RTOL)
    np.testing.assert_allclose(got["conf_high"], r["asymp.UCL"], rtol=SE_RTOL)
    assert np.all(np.isinf(got["df"]))


@pytest.mark.parametrize("name", FAST + ["grouseticks"])
def test_emmeans_on_the_response_scale(name):
    fit, ref = native(name), case(name)["emm"]
    emm = fit.emmeans(ref["spec"], type="response")
    got = emm.table()
    est = "prob" if case(name)["family"] == "binomial" else "rate"
    assert got.attrs["estimate_name"] == est
    # errors_offset: the default offset is the mean of the fit's offset, as emmeans
    _check_emm(got, pd.DataFrame(ref["emmeans"]), est)
    link = emm.table(type="link")
    rl = pd.DataFrame(ref["emmeans_link"])
    np.testing.assert_allclose(link["estimate"], rl["emmean"], rtol=EMM_RTOL, atol=1e-5)
    np.testing.assert_allclose(link["std_error"], rl["SE"], rtol=SE_RTOL)


@pytest.mark.parametrize("name", FAST + ["grouseticks"])
def test_pairs_odds_and_rate_ratios(name):
    fit, ref = native(name), case(name)["emm"]
    got = fit.emmeans(ref["spec"], type="response").pairs()
    r = pd.DataFrame(ref["pairs"])
    col = {"logit": "odds.ratio", "log": "ratio"}.get(case(name)["link"], "estimate")
    assert got.attrs["estimate_name"] == col
    assert col.replace(".", "_") in got.columns
    assert got.attrs["adjust"] == ("tukey" if len(got) > 1 else "none")  # as emmeans
    assert list(got["contrast"]) == list(r["contrast"])
    np.testing.assert_allclose(got[col.replace(".", "_")], r[col], rtol=EMM_RTOL, atol=1e-5)
    np.testing.assert_allclose(got["std_error"], r["SE"], rtol=SE_RTOL)
    np.testing.assert_allclose(got["statistic"], r["z.ratio"], rtol=SE_RTOL, atol=1e-4)
    np.testing.assert_allclose(got["p_value"], r["p.value"], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(got["conf_low"], r["asymp.LCL"], rtol=SE_RTOL)
    np.testing.assert_allclose(got["conf_high"], r["asymp.UCL"], rtol=SE_RTOL)


def test_emmeans_and_rate_ratios_by_group():
    """emmeans(m, "system", by = "task", type = "response") and its pairs."""
    ref = case("errors_offset")["emm_by"]
    emm = native("errors_offset").emmeans("system", by="task", type="response")
    got = emm.table()
    r = pd.DataFrame(ref["emmeans"])
    assert list(got["task"]) == list(r["task"]) and list(got["system"]) == list(r["system"])
    _check_emm(got, r, "rate")
    pr = emm.pairs()
    rp = pd.DataFrame(ref["pairs"])
    assert list(pr["contrast"]) == list(rp["contrast"]) and list(pr["task"]) == list(rp["task"])
    np.testing.assert_allclose(pr["ratio"], rp["ratio"], rtol=EMM_RTOL)
    np.testing.assert_allclose(pr["std_error"], rp["SE"], rtol=SE_RTOL)
    np.testing.assert_allclose(pr["p_value"], rp["p.value"], rtol=1e-3, atol=1e-6)


def test_emmeans_offset_zero_gives_rates_per_unit_exposure():
    ref = case("errors_offset")["emm_offset0"]
    got = native("errors_offset").emmeans("system", offset=0, type="response").table()
    _check_emm(got, pd.DataFrame(ref["emmeans"]), "rate")


@pytest.mark.parametrize("name", ["cbpp", "grouseticks", "errors_offset", "singular"])
@pytest.mark.parametrize("type", [2, 3])
def test_wald_chisq_anova(name, type):
    got = native(name).anova(type=type)
    r = pd.DataFrame(case(name)[f"wald_type{type}"])
    assert list(got["term"]) == list(r["term"])
    # on the z scale (√χ²): as precise as β/SE of the native optimum (β within ~4e-5)
    np.testing.assert_allclose(np.sqrt(got["statistic"]), np.sqrt(r["Chisq"]), atol=2e-3)
    np.testing.assert_array_equal(got["df"], r["Df"])
    np.testing.assert_allclose(got["p_value"], r["Pr(>Chisq)"], rtol=1e-3)


@pytest.mark.parametrize("name", ["cbpp", "grouseticks", "errors_offset"])
def test_drop1_chisq(name):
    got = native(name).drop1()
    r = pd.DataFrame(case(name)["drop1"])
    assert list(got["term"]) == list(r["term"])
    np.testing.assert_allclose(got["aic"], r["AIC"], atol=LRT_ATOL)
    np.testing.assert_allclose(got["npar"].iloc[1:], r["npar"].iloc[1:])
    np.testing.assert_allclose(got["statistic"].iloc[1:], r["LRT"].iloc[1:], atol=LRT_ATOL)
    np.testing.assert_allclose(got["p_value"].iloc[1:], r["Pr(Chi)"].iloc[1:], rtol=1e-3)


@pytest.mark.parametrize("name", ["cbpp", "grouseticks", "errors_offset"])
def test_likelihood_ratio_between_nested_fits(name):
    ref = case(name)["anova"]
    small = native(name, ref["small"])
    full = native(name)
    for got in (cx.compare(small, full), full.anova(small)):
        r = pd.DataFrame(ref["table"])
        np.testing.assert_array_equal(got["npar"], r["npar"])
        for col, rc in (("aic", "AIC"), ("bic", "BIC"), ("loglik", "logLik"),
                        ("deviance", "deviance")):
            np.testing.assert_allclose(got[col], r[rc], atol=LRT_ATOL)
        np.testing.assert_allclose(got["statistic"].iloc[1], r["Chisq"].iloc[1], atol=LRT_ATOL)
        assert got["df"].iloc[1] == r["Df"].iloc[1]
        np.testing.assert_allclose(got["p_value"].iloc[1], r["Pr(>Chisq)"].iloc[1], rtol=1e-3)


def test_compare_refuses_lmm_with_glmm():
    d = case_data("cbpp")
    lmm = cx.lmer("prop ~ period + (1 | herd)", d, reml=False)
    with pytest.raises(TypeError, match="not both"):
        cx.compare(lmm, native("cbpp"))


@pytest.mark.parametrize("name", FAST + ["grouseticks"])
def test_nakagawa_r2(name):
    """performance's R²; for Poisson, its null model is refitted (ln(1 + 1/μ)), except
    where R's own null refit stopped with a convergence warning (grouseticks): there R's
    β₀ is used, so that the R² computation is compared, not two optimisers' stops
    (test_poisson_null_model_reaches_lme4 checks the refit)."""
    fit = native(name)
    ref = case(name)["r2"]
    null = ref.get("null_model")
    kwargs = {}
    if null is not None and null["messages"]:
        kwargs["null_intercept"] = null["intercept"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # performance's "mu too close to zero" (Poisson)
        got = fit.r2(**kwargs).iloc[0]
    np.testing.assert_allclose(got["marginal"], ref["marginal"], rtol=1e-4)
    if ref["conditional"] is None:
        assert np.isnan(got["conditional"])
    else:
        np.testing.assert_allclose(got["conditional"], ref["conditional"], rtol=1e-4)


def test_items_by_systems_50k():
    """lme4 stops there with a max|grad| warning; native must reach its criterion or
    lower, and its EMMs agree with emmeans' to the precision lme4's stop allows."""
    ref = case("items_systems")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(ref["formula"], case_data("items_systems"), family="binomial")
    assert fit.nobs == ref["nobs"] == 50_000
    assert fit.criterion <= ref["minus2loglik"] + 1e-6
    got = fit.emmeans("system", type="response").table()
    r = pd.DataFrame(ref["emm"]["emmeans"])
    np.testing.assert_allclose(got["prob"], r["prob"], rtol=1e-2)
    pr = fit.emmeans("system", type="response").pairs()
    assert len(pr) == 45 and pr.attrs["estimate_name"] == "odds.ratio"
    np.testing.assert_allclose(pr["odds_ratio"], pd.DataFrame(ref["emm"]["pairs"])["odds.ratio"],
                               rtol=1e-2)


def test_poisson_null_model_reaches_lme4():
    """The null model r2() refits for a Poisson fit reaches lme4's criterion or lower with
    ``pirls="auto"``. With lme4's PIRLS rule (the default) the criterion there has a
    false minimum 0.009 above lme4's, and the fit says how large the rule's error is
    (tests/model/glmm/test_pirls_exact.py)."""
    f, family, _ = SPECS["grouseticks"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(case("grouseticks")["formula"], case_data("grouseticks"),
                       family=family, control=cx.LmerControl(pirls="auto"))
    null = case("grouseticks")["r2"]["null_model"]
    red = refit_design(fit, fixed_reduced_design(fit.design, None))
    assert red.opt.control.pirls == "auto"
    assert red.criterion <= null["minus2loglik"] + 1e-6
    default = refit_design(native("grouseticks"), fixed_reduced_design(fit.design, None))
    assert default.criterion <= null["minus2loglik"] + 0.05
    assert default.engine_info["pirls_error"] > 1e-3
    assert any("tolPwrss" in m for m in default.messages)
