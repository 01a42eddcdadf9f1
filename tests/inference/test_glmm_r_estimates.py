"""GLMM inference on R's own estimates (β, vcov, θ of lme4's glmer) reproduces R's tables.

These tests isolate the inference computations from the optimiser: the stand-in fit holds
crossed's design and lme4 1.1-31's estimates (tests/data/reference/glmm/glmm.json), so
Wald tests, EMMs and R² must match R to rounding (1e-8 relative here; the issue's
tolerances apply to native fits, tests/inference/test_glmm_native.py).

- Wald χ² (Type II and III): base R on lmerTest's hypothesis matrices (glmm.R ``wald``);
- EMMs and pairs: ``emmeans(m, spec, type = "response")`` and ``pairs()`` (Tukey),
  ``summary(..., infer = TRUE)``, emmeans 1.8.4-1;
- binomial R²: ``performance::r2_nakagawa`` 0.10.2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crossed.inference.glmm import fixed_reduced_design, r2_nakagawa_glmm, wald_anova
from crossed.inference.glmm_emmeans import glmm_emmeans
from glmm_reference import case, case_data, r_estimates_fit

pytestmark = pytest.mark.filterwarnings("ignore:NOTE. Results may be misleading")
RTOL = 1e-8
CASES = ["cbpp", "cbpp_agq9", "cbpp_probit", "cbpp_cloglog", "errors_offset", "singular"]
WALD_CASES = ["cbpp", "cbpp_probit", "errors_offset", "singular"]


@pytest.mark.parametrize("name", WALD_CASES)
@pytest.mark.parametrize("type", [2, 3])
def test_wald_chisq_matches_base_r_on_lmertest_hypotheses(name, type):
    fit = r_estimates_fit(name)
    ref = pd.DataFrame(case(name)[f"wald_type{type}"])
    got = wald_anova(fit, type=type)
    assert list(got["term"]) == list(ref["term"])
    np.testing.assert_allclose(got["statistic"], ref["Chisq"], rtol=1e-7)
    np.testing.assert_array_equal(got["df"], ref["Df"])
    np.testing.assert_allclose(got["p_value"], ref["Pr(>Chisq)"], rtol=1e-6)


def _emm(name: str, block: str = "emm", offset: float = 0.0):
    fit = r_estimates_fit(name)
    spec = case(name)[block]["spec"]
    return glmm_emmeans(fit, spec, type="response", offset=offset), case(name)[block]


@pytest.mark.parametrize("name", CASES)
def test_response_scale_emmeans_match_emmeans(name):
    emm, ref = _emm(name)
    if name == "errors_offset":  # emmeans' grid: offset(log(length)) at mean(log(length))
        emm.offset = float(np.log(case_data(name)["length"]).mean())
    got = emm.table(tests=True)
    r = pd.DataFrame(ref["emmeans"])
    est = "prob" if case(name)["family"] == "binomial" else "rate"
    assert got.attrs["estimate_name"] == est
    np.testing.assert_allclose(got[est], r[est], rtol=RTOL)
    np.testing.assert_allclose(got["std_error"], r["SE"], rtol=RTOL)
    np.testing.assert_allclose(got["conf_low"], r["asymp.LCL"], rtol=RTOL)
    np.testing.assert_allclose(got["conf_high"], r["asymp.UCL"], rtol=RTOL)
    np.testing.assert_allclose(got["statistic"], r["z.ratio"], rtol=RTOL)
    np.testing.assert_allclose(got["p_value"], r["p.value"], rtol=1e-6, atol=1e-300)
    link = emm.table(type="link")
    rl = pd.DataFrame(ref["emmeans_link"])
    np.testing.assert_allclose(link["estimate"], rl["emmean"], rtol=RTOL)
    np.testing.assert_allclose(link["std_error"], rl["SE"], rtol=RTOL)


def test_offset_zero_emmeans_are_rates_per_unit_exposure():
    emm, ref = _emm("errors_offset", "emm_offset0")
    got = emm.table()
    r = pd.DataFrame(ref["emmeans"])
    np.testing.assert_allclose(got["rate"], r["rate"], rtol=RTOL)
    np.testing.assert_allclose(got["std_error"], r["SE"], rtol=RTOL)


@pytest.mark.parametrize("name", CASES)
def test_pairs_are_odds_or_rate_ratios_with_tukey(name):
    emm, ref = _emm(name)
    got = emm.pairs()
    r = pd.DataFrame(ref["pairs"])
    assert list(got["contrast"]) == list(r["contrast"])
    link = case(name)["link"]
    col = {"logit": "odds.ratio", "log": "ratio"}.get(link, "estimate")
    assert got.attrs["estimate_name"] == col
    np.testing.assert_allclose(got[col.replace(".", "_")], r[col], rtol=RTOL)
    np.testing.assert_allclose(got["std_error"], r["SE"], rtol=RTOL)
    np.testing.assert_allclose(got["statistic"], r["z.ratio"], rtol=RTOL)
    # Tukey p values and intervals through the studentized range at df = inf
    np.testing.assert_allclose(got["p_value"], r["p.value"], rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(got["conf_low"], r["asymp.LCL"], rtol=1e-6)
    np.testing.assert_allclose(got["conf_high"], r["asymp.UCL"], rtol=1e-6)


@pytest.mark.parametrize("name", ["cbpp", "cbpp_agq9", "cbpp_probit", "cbpp_cloglog",
                                  "singular"])
def test_binomial_nakagawa_r2(name):
    fit = r_estimates_fit(name)
    got = r2_nakagawa_glmm(fit).iloc[0]
    ref = case(name)["r2"]
    np.testing.assert_allclose(got["marginal"], ref["marginal"], rtol=1e-8)
    if ref["conditional"] is None:  # singular: insight reports no random variance
        assert np.isnan(got["conditional"])
    else:
        np.testing.assert_allclose(got["conditional"], ref["conditional"], rtol=1e-8)


def test_refusals_name_what_is_wrong():
    fit = r_estimates_fit("cbpp")
    with pytest.raises(ValueError, match="type must be"):
        glmm_emmeans(fit, "period", type="probability")
    emm = glmm_emmeans(fit, "period", type="response")
    with pytest.raises(ValueError, match="ratio"):
        emm.contrast({"avg": [0.25, 0.25, 0.25, 0.25]})
    # on the link scale the same weights are a plain linear function
    tab = emm.contrast({"avg": [0.25, 0.25, 0.25, 0.25]}, type="link")
    np.testing.assert_allclose(tab["estimate"], np.mean(pd.DataFrame(
        case("cbpp")["emm"]["emmeans_link"])["emmean"]), rtol=1e-10)
    with pytest.raises(ValueError, match="no fixed term"):
        fixed_reduced_design(fit.design, "herd")


def test_reduced_design_drops_the_terms_columns():
    fit = r_estimates_fit("errors_offset")
    red = fixed_reduced_design(fit.design, "system:task")
    assert red.fixed.names == ("(Intercept)", "systemB", "systemC", "taskprose")
    assert red.fixed.term_labels == ("(Intercept)", "system", "task")
    assert red.fixed.assign == (0, 1, 1, 2)
    null = fixed_reduced_design(fit.design, None)
    assert null.fixed.names == ("(Intercept)",) and null.X.shape == (fit.design.n, 1)
