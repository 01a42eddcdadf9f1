"""Every consumer of an LmerFit with prior weights, an offset or contrasts=: right (against
R) or refused with an error naming the feature.

Reference: ``tests/data/reference/weights/audit.R`` (lme4 1.1-31, lmerTest, emmeans,
performance; R 4.2.2) on sleepstudy with ``w = 1 + Days %% 3``, ``off = 2 Days`` and a
three-level factor ``grp`` (``Days %/% 4``): ``fw`` = ``lmer(Reaction ~ Days + grp +
(1 | Subject), weights = w)``, ``fo`` = the same with ``offset = off`` (no weights), ``ff``
= ``Reaction ~ Days + grp + offset(off) + (1 | Subject)`` with ``weights = w``.

Tolerances: log-likelihoods 1e-6 relative; Satterthwaite df 1e-4 relative (lmerTest's
numerical Hessian); estimates, SEs, F, R², ICC 1e-5 relative; hat values 1e-7 absolute;
Cook's distances 1e-5 relative; residuals, fitted values and predictions 1e-6 relative.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.design.frame import DataError
from crossed.engines import fit_with
from crossed.engines.errors import UnsupportedModelError
from crossed.model.prior import PriorWeightsError
from crossed.simulate import Refitter

DATA = Path(__file__).resolve().parent / "data"
R = json.loads((DATA / "reference" / "weights" / "audit.json").read_text())
FORMULA = "Reaction ~ Days + grp + (1 | Subject)"


def _sleep() -> pd.DataFrame:
    d = pd.read_csv(DATA / "sleepstudy.csv", dtype={"Subject": str})
    d["w"] = 1.0 + d["Days"] % 3
    d["off"] = 2.0 * d["Days"]
    d["grp"] = np.array(["a", "b", "c"])[d["Days"] // 4]
    return d


@pytest.fixture(scope="module")
def fits():
    d = _sleep()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "d": d,
            "fw": cx.lmer(FORMULA, d, weights="w"),
            "fo": cx.lmer(FORMULA, d, offset="off"),
            "ff": cx.lmer("Reaction ~ Days + grp + offset(off) + (1 | Subject)", d,
                          weights="w"),
        }


NEWDATA = pd.DataFrame({"Days": [1, 5, 9], "grp": ["a", "b", "c"],
                        "Subject": ["308", "309", "310"], "off": [10.0, 20.0, 30.0],
                        "w": 1.0})


# ------------------------------------------------------------------ checked against R
def test_coef_table_satterthwaite(fits):
    """lmerTest ``coef(summary(fw))``: Satterthwaite with weights."""
    ct = fits["fw"].coef_table()
    r = R["coef"]
    np.testing.assert_allclose(ct["estimate"], r["estimate"], rtol=1e-5)
    np.testing.assert_allclose(ct["std_error"], r["se"], rtol=1e-5)
    np.testing.assert_allclose(ct["df"], r["df"], rtol=1e-4)


def test_anova_type3_and_eta_squared(fits):
    """lmerTest ``anova(fw)`` (Type III, Satterthwaite); η² is F·df1/(F·df1 + df2)."""
    a = fits["fw"].anova()
    np.testing.assert_allclose(a["statistic"], R["anova"]["F"], rtol=1e-5)
    np.testing.assert_allclose(a["den_df"], R["anova"]["df"], rtol=1e-4)
    eta = fits["fw"].eta_squared()
    F, df1, df2 = np.asarray(R["anova"]["F"]), a["num_df"].to_numpy(), np.asarray(R["anova"]["df"])
    np.testing.assert_allclose(eta["estimate"], F * df1 / (F * df1 + df2), rtol=1e-5)


def test_emmeans_weights(fits):
    """emmeans ``emmeans(fw, ~grp, lmer.df = "satterthwaite")``."""
    t = fits["fw"].emmeans("grp").table()
    r = R["emmeans"]
    np.testing.assert_allclose(t["estimate"], r["emmean"], rtol=1e-6)
    np.testing.assert_allclose(t["std_error"], r["se"], rtol=1e-5)
    np.testing.assert_allclose(t["df"], r["df"], rtol=1e-4)


def test_r2_and_icc(fits):
    """performance ``r2_nakagawa(fw)`` and ``icc(fw)``."""
    r2 = fits["fw"].r2()
    assert float(r2["marginal"].iloc[0]) == pytest.approx(R["r2"]["marginal"], rel=1e-5)
    assert float(r2["conditional"].iloc[0]) == pytest.approx(R["r2"]["conditional"], rel=1e-5)
    icc = fits["fw"].icc()
    assert float(icc["adjusted"].iloc[0]) == pytest.approx(R["icc"]["adjusted"], rel=1e-5)


def test_ranova_reduced_lm_is_weighted(fits):
    """lmerTest ``ranova(fw)``: the model without random effects is ``lm(weights = w)``
    (its log-likelihood has ½Σlog w and the weighted residuals)."""
    rv = fits["fw"].ranova()
    np.testing.assert_allclose(rv["loglik"], R["ranova"]["loglik"], rtol=1e-6)
    assert rv["statistic"].iloc[1] == pytest.approx(R["ranova"]["lrt"], rel=1e-5)


def test_lrt_ml_refit_keeps_weights(fits):
    """lme4 ``anova(ml, update(ml, . ~ . - grp))`` with weights."""
    d = fits["d"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = cx.lmer("Reaction ~ Days + (1 | Subject)", d, weights="w")
        tab = cx.compare(fits["fw"], small)
    np.testing.assert_allclose(sorted(tab["loglik"]), sorted(R["lrt"]["loglik"]), rtol=1e-6)
    assert tab["statistic"].dropna().iloc[0] == pytest.approx(R["lrt"]["chisq"], rel=1e-4)


def test_step_keeps_weights(fits):
    """lmerTest ``step(fw)``: the refits after dropping grp keep the weights."""
    st = fits["fw"].step()
    last = st.fixed.set_index("term").loc["Days"]
    assert last["statistic"] == pytest.approx(R["step"]["F"], rel=1e-5)
    assert last["den_df"] == pytest.approx(R["step"]["den_df"], rel=1e-4)
    np.testing.assert_allclose(st.model.beta, R["step"]["final_fixef"], rtol=1e-5)
    assert st.model.loglik == pytest.approx(R["step"]["final_loglik"], rel=1e-6)


def test_hatvalues_and_cooks_weights(fits):
    """lme4 ``hatvalues(fw)`` (√w-scaled system) and ``cooks.distance(fw)``."""
    np.testing.assert_allclose(fits["fw"].hatvalues()[:6], R["hatvalues_head"], atol=1e-7)
    np.testing.assert_allclose(fits["fw"].cooks_distance()[:6], R["cooks_head"], rtol=1e-5)


def test_residuals_weights(fits):
    """lme4 ``residuals(fw, type = "pearson")`` (×√w) and ``residuals(fw, scaled = TRUE)``."""
    np.testing.assert_allclose(fits["fw"].residuals(type="pearson")[:6], R["pearson_head"],
                               rtol=1e-6)
    np.testing.assert_allclose(fits["fw"].residuals(scaled=True)[:6], R["scaled_head"],
                               rtol=1e-6)


def test_fitted_and_predict_offset(fits):
    """lme4 ``fitted``/``predict``: the offset is part of fitted values and of
    ``predict(re.form = NA)`` on the fitted data; on newdata an ``offset(x)`` term is
    evaluated there, an ``offset=`` argument is not: lme4 adds nothing for it without a
    word; crossed asks for it (``offset=0`` gives lme4's numbers)."""
    fo, ff = fits["fo"], fits["ff"]
    np.testing.assert_allclose(fo.fitted()[:6], R["fitted_offset_head"], rtol=1e-6)
    np.testing.assert_allclose(fo.predict(include_random=False)[:6],
                               R["predict_offset_arg_orig_pop"], rtol=1e-6)
    with pytest.raises(DataError, match=r"offset= argument.*predict\(newdata, offset="):
        fo.predict(NEWDATA)
    np.testing.assert_allclose(fo.predict(NEWDATA, offset=0), R["predict_offset_arg"],
                               rtol=1e-6)
    np.testing.assert_allclose(fo.predict(NEWDATA, include_random=False, offset=0),
                               R["predict_offset_arg_pop"], rtol=1e-6)
    shift = np.linspace(0.0, 1.0, len(NEWDATA))
    np.testing.assert_allclose(fo.predict(NEWDATA, offset=shift),
                               np.asarray(R["predict_offset_arg"]) + shift, rtol=1e-6)
    np.testing.assert_allclose(ff.predict(NEWDATA), R["predict_offset_term"], rtol=1e-6)
    np.testing.assert_allclose(ff.predict(NEWDATA, include_random=False),
                               R["predict_offset_term_pop"], rtol=1e-6)
    with pytest.raises(DataError, match="offset"):
        ff.predict(NEWDATA.drop(columns="off"))


# ------------------------------------------------------------------ by construction
def test_simulate_weights_and_offset(fits):
    """lme4's simulate: ε ~ N(0, σ²/w) and the offset in the mean."""
    fw = replace(fits["fw"], beta=np.zeros(4))  # mean 0 apart from the random effects
    sims = fw.simulate(nsim=4000, seed=1, use_ranef=True).to_numpy()
    resid = sims - fw.fitted()[:, None]
    w = fw.design.weights
    for wv in (1.0, 2.0, 3.0):
        var = resid[w == wv].var()
        assert var == pytest.approx(fw.sigma**2 / wv, rel=0.03)
    fo = fits["fo"]
    s = fo.simulate(nsim=2000, seed=2).to_numpy()
    pop = fo.design.X @ fo.beta + fo.design.offset
    assert np.abs(s.mean(axis=1) - pop).max() < 5 * np.sqrt(
        (fo.sigma**2 + fo.varcorr()["variance_or_cov"].iloc[0]) / 2000) + 1e-9


def test_refit_and_refitter_keep_weights_and_offset(fits):
    for name in ("fw", "ff"):
        fit = fits[name]
        again = fit.refit(y=fit.design.y)
        assert again.deviance == pytest.approx(fit.deviance, rel=1e-8)
        fast = Refitter(fit).refit(y=fit.design.y)
        assert fast.deviance == pytest.approx(fit.deviance, rel=1e-8)
    # rows: the weights and the offset follow them
    d, keep = fits["d"], np.arange(0, 180, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = cx.lmer("Reaction ~ Days + grp + offset(off) + (1 | Subject)",
                         d.iloc[keep], weights="w")
    sub = Refitter(fits["ff"]).refit(rows=keep)
    assert sub.deviance == pytest.approx(direct.deviance, rel=1e-7)
    np.testing.assert_allclose(sub.beta, direct.beta, rtol=1e-5)


def test_bootstrap_runs_on_weighted_fit(fits):
    res = cx.bootstrap(fits["fw"], nsim=3, seed=1)
    assert res is not None


# ------------------------------------------------------------------ refused
def test_kenward_roger_refused_with_weights(fits):
    """pbkrtest ignores prior weights (R's KR den. df 375 > n = 180 here): refused."""
    with pytest.raises(PriorWeightsError, match="Kenward-Roger.*prior weights"):
        fits["fw"].coef_table(ddf="kenward-roger")
    with pytest.raises(PriorWeightsError, match="Kenward-Roger"):
        fits["fw"].anova(ddf="kenward-roger")


def test_profile_confint_weights_offset(fits):
    """Profile intervals of a fixed effect keep the weights and the offset. lme4 1.1-31's
    own fixed-effect profile intervals are wrong with weights (audit.json's
    ``confint_profile``: [252.77, 254.16] for an intercept whose SE is 10.2), so the check
    is the definition: at each bound b of Days the ML deviance of the model with Days·b
    moved into the offset exceeds the ML deviance by qchisq(0.95, 1) = 3.8415 (2e-3
    relative: spline interpolation). The variance parameters' intervals match lme4's."""
    d = fits["d"]
    for name, off in (("fw", 0.0), ("fo", d["off"].to_numpy())):
        fit = fits[name]
        kw = {"weights": "w"} if name == "fw" else {}
        dev0 = fit.refit(reml=False).deviance
        ci = fit.confint(method="profile", parm=["Days"])
        for b in (float(ci["conf_low"].iloc[0]), float(ci["conf_high"].iloc[0])):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fixed = cx.lmer("Reaction ~ grp + (1 | Subject)", d, reml=False,
                                offset=off + d["Days"].to_numpy() * b, **kw)
            assert fixed.deviance - dev0 == pytest.approx(3.841459, rel=2e-3)
    prof = fits["fw"].confint(method="profile", parm=[".sig01", ".sigma"])
    np.testing.assert_allclose(prof["conf_low"], R["confint_profile"]["lower"][:2], rtol=1e-4)
    np.testing.assert_allclose(prof["conf_high"], R["confint_profile"]["upper"][:2], rtol=1e-4)


def test_emmeans_emtrends_refused_with_offset(fits):
    with pytest.raises(PriorWeightsError, match="emmeans.*offset"):
        fits["fo"].emmeans("grp")
    with pytest.raises(PriorWeightsError, match="emtrends.*offset"):
        fits["ff"].emtrends("grp", var="Days")


def test_extend_refused(fits):
    with pytest.raises(PriorWeightsError, match="extend"):
        cx.extend(fits["fw"], along="Subject", n=30)


def test_compare_different_weights_refused(fits):
    d = fits["d"]
    with pytest.raises(DataError, match="different prior weights"):
        cx.compare(fits["fw"], cx.lm("Reaction ~ Days + grp", d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = cx.lmer(FORMULA, d.assign(w=1.0 + d["Days"] % 2), weights="w")
    with pytest.raises(DataError, match="different prior weights"):
        cx.compare(fits["fw"], other)


def test_other_engines_refuse_weighted_designs(fits):
    for engine in ("statsmodels", "lme4"):
        with pytest.raises((UnsupportedModelError, ValueError), match="weights|offset"):
            fit_with(engine, fits["fw"].design, reml=True, control=None)
        with pytest.raises((UnsupportedModelError, ValueError), match="weights|offset"):
            fit_with(engine, fits["fo"].design, reml=True, control=None)


# ------------------------------------------------------------------ contrasts=
@pytest.fixture(scope="module")
def sum_fit():
    d = _sleep()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("Reaction ~ grp + (1 | Subject)", d, contrasts={"grp": "sum"})


def test_step_keeps_contrasts(sum_fit):
    st = sum_fit.step()
    assert st.model.fixef_names == ("(Intercept)", "grp1", "grp2")
    np.testing.assert_allclose(st.model.beta, sum_fit.beta, rtol=1e-8)


def test_refits_keep_contrasts(sum_fit):
    assert sum_fit.refit(reml=False).fixef_names == sum_fit.fixef_names
    assert Refitter(sum_fit).refit(rows=np.arange(0, 180, 2)).fixef_names == sum_fit.fixef_names
    prof = sum_fit.confint(method="profile", parm=["grp1"])
    assert list(prof["term"]) == ["grp1"]


def test_statsmodels_engine_reproduces_contrasts(sum_fit):
    pytest.importorskip("statsmodels")
    d = _sleep()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = cx.lmer("Reaction ~ grp + (1 | Subject)", d, contrasts={"grp": "sum"},
                     engine="statsmodels")
    assert sm.fixef_names == sum_fit.fixef_names
    np.testing.assert_allclose(sm.beta, sum_fit.beta, rtol=1e-4)


def test_lmertest_tables_refuses_contrasts(sum_fit):
    from crossed.engines.lme4 import lmertest_tables

    with pytest.raises(UnsupportedModelError, match="contrasts="):
        lmertest_tables(sum_fit)


def test_lmertest_tables_refuses_ordered_and_weights(fits):
    from crossed.engines.lme4 import lmertest_tables

    d = _sleep()
    d["grp"] = pd.Categorical(d["grp"], categories=["a", "b", "c"], ordered=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        poly = cx.lmer("Reaction ~ grp + (1 | Subject)", d)
    with pytest.raises(UnsupportedModelError, match="ordered factor"):
        lmertest_tables(poly)
    with pytest.raises(UnsupportedModelError, match="prior weights or an offset"):
        lmertest_tables(fits["fw"])


def test_summary_scaled_residuals_are_pearson(fits):
    """lme4's summary: quantiles of residuals(fit, "pearson", scaled = TRUE)."""
    text = str(fits["fw"].summary())
    q = np.quantile(fits["fw"].residuals(type="pearson", scaled=True), [0, 1])
    assert f"{q[0]:.4f}" in text and f"{q[1]:.4f}" in text


def test_power_and_check_run_on_weighted_fit(fits):
    """power_sim/power_curve/check simulate with σ²/w and refit through Refitter (rows keep
    their weights): smoke test on a few simulations."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ps = cx.power_sim(fits["fw"], "Days", nsim=4, seed=1)
        assert 0.0 <= ps.power <= 1.0
        pc = cx.power_curve(fits["ff"], "Days", along="Subject", breaks=[10, 18], nsim=2,
                            seed=1)
        assert len(pc.table) == 2
        chk = fits["fw"].check(nsim=30, seed=1)
    assert chk is not None


def test_lme4_engine_reproduces_contrasts(sum_fit):
    """The lme4 engine is given the design's columns (positional), so contrasts= carries."""
    from crossed.engines.errors import EngineUnavailableError

    d = _sleep()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = cx.lmer("Reaction ~ grp + (1 | Subject)", d, contrasts={"grp": "sum"},
                        engine="lme4")
    except EngineUnavailableError:
        pytest.skip("R/lme4 not available")
    assert r.fixef_names == sum_fit.fixef_names
    np.testing.assert_allclose(r.beta, sum_fit.beta, rtol=1e-5)


def test_step_keeps_offset_terms(fits):
    """step() on a fit with offset(off): the final model keeps the term (its predictions
    on new data still add it) and the offset values."""
    st = fits["ff"].step()
    model = st.model
    assert "offset(off)" in model.formula
    np.testing.assert_array_equal(model.design.offset, fits["ff"].design.offset)
    pop = model.predict(NEWDATA, include_random=False)
    X = np.column_stack([np.ones(3), NEWDATA["Days"]])
    np.testing.assert_allclose(pop, X @ model.beta + NEWDATA["off"].to_numpy(), rtol=1e-10)


def test_offset_fit_inference_against_r(fits):
    """``fo`` (offset = off, no weights): lmerTest coefficients (Satterthwaite) and ANOVA,
    performance's R², lmerTest's ranova (its lm keeps the offset), lme4's Pearson residuals
    and hat values."""
    fo, r = fits["fo"], R["offset_fit"]
    ct = fo.coef_table()
    np.testing.assert_allclose(ct["std_error"], r["se"], rtol=1e-5)
    np.testing.assert_allclose(ct["df"], r["df"], rtol=1e-4)
    np.testing.assert_allclose(fo.anova()["statistic"], r["anova_F"], rtol=1e-5)
    r2 = fo.r2()
    assert float(r2["marginal"].iloc[0]) == pytest.approx(r["r2_marginal"], rel=1e-5)
    assert float(r2["conditional"].iloc[0]) == pytest.approx(r["r2_conditional"], rel=1e-5)
    np.testing.assert_allclose(fo.ranova()["loglik"], r["ranova_loglik"], rtol=1e-6)
    np.testing.assert_allclose(fo.residuals(type="pearson")[:6], r["pearson_head"], rtol=1e-6)
    np.testing.assert_allclose(fo.hatvalues()[:6], r["hatvalues_head"], atol=1e-7)


def test_ranef_and_coef_weights(fits):
    """lme4 ``ranef(fw, condVar = TRUE)`` (modes, conditional SDs) and ``coef(fw)``."""
    re = fits["fw"].ranef()
    np.testing.assert_allclose(re["estimate"][:3], R["ranef_head"], rtol=1e-5)
    np.testing.assert_allclose(re["cond_sd"][:3], R["ranef_condsd_head"], rtol=1e-5)
    co = fits["fw"].coef()["Subject"]
    np.testing.assert_allclose(co["(Intercept)"][:3], R["coef_subject_head"], rtol=1e-6)
