"""emmeans features of issue 18 against R: ``at``/``cov_reduce``/``by``, ``emtrends``, the
contrast methods with their default adjustments, and ``type="response"``.

Reference: tests/data/reference/r_features/emmeans_features.R (emmeans 1.8.4-1, lmerTest
3.1-3, lme4 1.1-31) on lme4's cake data (tests/data/cake.csv). The R call behind each
number is named in the test. Tolerances: estimates 1e-5 absolute (both optimisers stop near
the optimum), SE 1e-4 relative, df 1e-3 relative, t ratios 1e-4 relative, p values 1e-4
relative (+1e-12 absolute); ``mvt`` p values 1e-3 absolute and mvt interval limits 5e-3·SE:
emmeans calls mvtnorm's randomised quasi-Monte Carlo (``GenzBretz``, abseps 0.001), whose
own error is of that size (repeating R's call with other seeds moves the consec quantile
2.5617..2.5655; a tight mvtnorm run gives 2.56354, crossed 2.56337).
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.inference.emm_contrasts import poly_weights
from crossed.inference.emm_response import response_transform

DATA = Path(__file__).resolve().parents[1] / "data"
REF = json.loads((DATA / "reference" / "r_features" / "emmeans_features.json").read_text())


def _cake() -> pd.DataFrame:
    d = pd.read_csv(DATA / "cake.csv", dtype={"replicate": str, "recipe": str,
                                               "temperature": str})
    levels = sorted(d["temperature"].unique(), key=float)
    d["temperature"] = pd.Categorical(d["temperature"], categories=levels, ordered=True)
    return d


@pytest.fixture(scope="module")
def fits():
    d = _cake()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "lin": cx.lmer(REF["at"]["formula"], d),
            "quad": cx.lmer(REF["emtrends"]["formula_quad"], d),
            "fac": cx.lmer(REF["methods"]["formula"], d),
            "log": cx.lmer(REF["response"]["formula_log"], d),
            "sqrt": cx.lmer(REF["response"]["formula_sqrt"], d),
        }


def _quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **k)


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _check(tab, ref, est="emmean", keys=(), p=True, est_col="estimate", ci=True):
    for k in keys:
        assert [str(v) if not isinstance(v, float) else v for v in tab[k]] == \
            [r[k] if isinstance(r[k], str) else float(r[k]) for r in ref]
    assert np.max(np.abs(tab[est_col] - [r[est] for r in ref])) < 1e-5
    assert _rel(tab["std_error"], [r["SE"] for r in ref]) < 1e-4
    assert _rel(tab["df"], [r["df"] for r in ref]) < 1e-3
    if "t.ratio" in ref[0]:
        assert _rel(tab["statistic"], [r["t.ratio"] for r in ref]) < 1e-4
    if p and "p.value" in ref[0]:
        theirs = np.array([r["p.value"] for r in ref])
        assert np.all(np.abs(tab["p_value"] - theirs) <= 1e-4 * theirs + 1e-12)
    if ci and "lower.CL" in ref[0]:
        assert np.max(np.abs(tab["conf_low"] - [r["lower.CL"] for r in ref])) < 1e-4
        assert np.max(np.abs(tab["conf_high"] - [r["upper.CL"] for r in ref])) < 1e-4


# ------------------------------------------------------------------ at / cov_reduce / by
def test_default_grid(fits):  # emmeans(fit2, ~ recipe)
    _check(_quiet(cx.emmeans, fits["lin"], "recipe").table(), REF["at"]["default"],
           keys=["recipe"])


def test_at_averages_over_the_given_values(fits):
    # emmeans(fit2, ~ recipe, at = list(temp = c(180, 220)))
    tab = _quiet(cx.emmeans, fits["lin"], "recipe", at={"temp": [180, 220]}).table()
    _check(tab, REF["at"]["at_avg"], keys=["recipe"])


@pytest.mark.parametrize("ddf,key", [("satterthwaite", "at_by"), ("kenward-roger", "at_by_kr")])
def test_at_with_by(fits, ddf, key):
    # emmeans(fit2, ~ recipe | temp, at = list(temp = c(180, 220)), lmer.df = ...)
    emm = _quiet(cx.emmeans, fits["lin"], "recipe", by="temp", at={"temp": [180, 220]},
                 ddf=ddf)
    _check(emm.table(), REF["at"][key], keys=["recipe", "temp"])
    same = _quiet(cx.emmeans, fits["lin"], "recipe | temp", at={"temp": [180, 220]}, ddf=ddf)
    assert np.allclose(same.table()["estimate"], emm.table()["estimate"])


def test_at_with_by_pairs(fits):
    # pairs(emmeans(fit2, ~ recipe | temp, at = list(temp = c(180, 220))))
    emm = _quiet(cx.emmeans, fits["lin"], "recipe", by="temp", at={"temp": [180, 220]})
    ref = REF["at"]["at_by_pairs"]
    tab = emm.pairs()
    assert list(tab["contrast"]) == [r["contrast"] for r in ref]
    assert list(tab["temp"]) == [float(r["temp"]) for r in ref]
    _check(tab, ref, est="estimate")


@pytest.mark.parametrize("how,key", [("max", "cov_max"), ("min", "cov_min"),
                                     ("median", "cov_median"),
                                     (lambda x: np.quantile(x, 0.25), "cov_fn")])
def test_cov_reduce(fits, how, key):
    # emmeans(fit2, ~ recipe, cov.reduce = max / min / median / function(x) quantile(x, .25))
    _check(_quiet(cx.emmeans, fits["lin"], "recipe", cov_reduce=how).table(),
           REF["at"][key], keys=["recipe"])


def test_at_refusals(fits):
    with pytest.raises(ValueError, match="not a variable"):
        cx.emmeans(fits["lin"], "recipe", at={"nope": [1]})
    with pytest.raises(ValueError, match="not a level"):
        _quiet(cx.emmeans, fits["lin"], "recipe", at={"recipe": ["Z"]})
    with pytest.raises(ValueError, match="cov_reduce"):
        _quiet(cx.emmeans, fits["lin"], "recipe", cov_reduce="mode")


# ------------------------------------------------------------------ emtrends
@pytest.mark.parametrize("ddf,key", [("satterthwaite", "linear"), ("kenward-roger", "linear_kr")])
def test_emtrends_linear(fits, ddf, key):
    # emtrends(fit2, ~ recipe, var = "temp", lmer.df = ...)
    emt = _quiet(cx.emtrends, fits["lin"], "recipe", var="temp", ddf=ddf)
    tab = emt.table()
    assert tab.attrs["estimate_name"] == "temp.trend"
    # names(as.data.frame(emtrends(fit2, ~ recipe, var = "temp"))):
    #   "recipe" "temp.trend" "SE" "df" "lower.CL" "upper.CL"
    # the slope column as emmeans names it; the rest in crossed's snake_case
    assert list(tab.columns) == ["recipe", "temp.trend", "std_error", "df", "conf_low",
                                 "conf_high"]
    _check(tab, REF["emtrends"][key], est="temp.trend", keys=["recipe"],
           est_col="temp.trend")


def test_emtrends_pairs_overall_and_method(fits):
    # pairs(emtrends(fit2, ~ recipe, var = "temp")); emtrends(fit2, ~ 1, var = "temp")
    emt = _quiet(fits["lin"].emtrends, "recipe", var="temp")
    _check(emt.pairs(), REF["emtrends"]["linear_pairs"], est="estimate")
    tab = _quiet(cx.emtrends, fits["lin"], "1", var="temp").table()
    assert list(tab["1"]) == ["overall"]
    _check(tab, REF["emtrends"]["overall"], est="temp.trend", est_col="temp.trend")


def test_emtrends_nonlinear_term_is_emmeans_difference_quotient(fits):
    # emtrends(fit3, ~ recipe, var = "temp") with I(temp^2): forward difference at the mean
    tab = _quiet(cx.emtrends, fits["quad"], "recipe", var="temp").table()
    _check(tab, REF["emtrends"]["quad"], est="temp.trend", keys=["recipe"],
           est_col="temp.trend")
    # emtrends(fit3, ~ recipe | temp, var = "temp", at = list(temp = c(180, 220)))
    tab = _quiet(cx.emtrends, fits["quad"], "recipe | temp", var="temp",
                 at={"temp": [180, 220]}).table()
    _check(tab, REF["emtrends"]["quad_at"], est="temp.trend", keys=["recipe", "temp"],
           est_col="temp.trend")


def test_emtrends_refuses_a_factor(fits):
    with pytest.raises(ValueError, match="factor"):
        cx.emtrends(fits["fac"], "recipe", var="temperature")


# ------------------------------------------------------------------ contrast methods
METHODS = [  # (call, R key, adjust reported)
    (("pairwise",), {}, "pairwise", "tukey"),
    (("revpairwise",), {}, "revpairwise", "tukey"),
    (("trt.vs.ctrl",), {}, "trt_vs_ctrl", "dunnettx"),
    (("trt.vs.ctrl",), {"ref": 2}, "trt_vs_ctrl_ref3", "dunnettx"),  # R: ref = 3
    (("trt.vs.ctrlk",), {}, "trt_vs_ctrlk", "dunnettx"),
    (("eff",), {}, "eff", "fdr"),
    (("poly",), {}, "poly", "none"),
    (("consec",), {"adjust": "none"}, "consec_none", "none"),
]


@pytest.mark.parametrize("args,kw,key,adjust", METHODS, ids=[m[2] for m in METHODS])
def test_contrast_methods(fits, args, kw, key, adjust):
    # contrast(emmeans(fit1, ~ temperature), <method>)
    emm = _quiet(cx.emmeans, fits["fac"], "temperature")
    tab = emm.contrast(*args, **kw)
    ref = REF["methods"][key]
    assert list(tab["contrast"]) == [r["contrast"] for r in ref]
    assert tab.attrs["adjust"] == adjust
    _check(tab, ref, est="estimate", ci=False)


def test_trt_vs_ctrl_ref_by_level(fits):
    emm = _quiet(cx.emmeans, fits["fac"], "temperature")
    a = emm.contrast("trt.vs.ctrl", ref="195")
    b = emm.contrast("trt.vs.ctrl", ref=2)
    assert list(a["contrast"]) == list(b["contrast"])


@pytest.mark.parametrize("key,call", [
    ("consec", lambda e: e.contrast("consec")),
    ("trt_vs_ctrl_mvt", lambda e: e.contrast("trt.vs.ctrl", adjust="mvt")),
])
def test_mvt_adjustment(fits, key, call):
    # contrast(e1, "consec") (default mvt); contrast(e1, "trt.vs.ctrl", adjust = "mvt")
    tab = call(_quiet(cx.emmeans, fits["fac"], "temperature"))
    ref = REF["methods"][key]
    assert tab.attrs["adjust"] == "mvt"
    _check(tab, ref, est="estimate", p=False, ci=False)
    assert np.max(np.abs(tab["p_value"] - [r["p.value"] for r in ref])) < 1e-3


def test_mvt_intervals(fits):
    # confint(contrast(e1, "consec"))
    tab = _quiet(cx.emmeans, fits["fac"], "temperature").contrast("consec")
    ref = REF["methods"]["mvt_confint"]
    se = tab["std_error"].to_numpy()
    assert np.all(np.abs(tab["conf_low"] - [r["lower.CL"] for r in ref]) < 5e-3 * se)
    assert np.all(np.abs(tab["conf_high"] - [r["upper.CL"] for r in ref]) < 5e-3 * se)


def test_consec_by_groups_and_eff_of_recipe(fits):
    # contrast(emmeans(fit1, ~ temperature | recipe), "consec"); contrast(emm recipe, "eff")
    tab = _quiet(cx.emmeans, fits["fac"], "temperature", by="recipe").contrast("consec")
    ref = REF["methods"]["consec_by"]
    assert list(tab["recipe"]) == [r["recipe"] for r in ref]
    _check(tab, ref, est="estimate", p=False, ci=False)
    assert np.max(np.abs(tab["p_value"] - [r["p.value"] for r in ref])) < 1e-3
    tab = _quiet(cx.emmeans, fits["fac"], "recipe").contrast("eff")
    _check(tab, REF["methods"]["eff_recipe"], est="estimate", ci=False)


def test_poly_weights_are_emmeans_integers():
    W, names = poly_weights(4)
    assert W.tolist() == [[-3, -1, 1, 3], [1, -1, -1, 1], [-1, 3, -3, 1]]
    assert names == ["linear", "quadratic", "cubic"]


# ------------------------------------------------------------------ type = "response"
def test_log_response_back_transformed(fits):
    # emmeans(fitl, ~ recipe) and emmeans(fitl, ~ recipe, type = "response")
    emm = _quiet(cx.emmeans, fits["log"], "recipe")
    _check(emm.table(), REF["response"]["log_link"], keys=["recipe"])
    tab = emm.table(type="response")
    _check(tab, REF["response"]["log_response"], est="response", est_col="response",
           keys=["recipe"])
    resp = _quiet(cx.emmeans, fits["log"], "recipe", type="response")
    assert np.allclose(resp.table()["response"], tab["response"])


@pytest.mark.parametrize("key,method", [("log_pairs", "pairwise"), ("log_trt", "trt.vs.ctrl")])
def test_log_contrasts_are_ratios(fits, key, method):
    # pairs(el, type = "response"); contrast(el, "trt.vs.ctrl", type = "response")
    emm = _quiet(cx.emmeans, fits["log"], "recipe", type="response")
    tab = emm.contrast(method)
    ref = REF["response"][key]
    assert list(tab["contrast"]) == [r["contrast"] for r in ref]
    _check(tab, ref, est="ratio", est_col="ratio")


def test_sqrt_response(fits):
    # emmeans(fits, ~ recipe, type = "response"); pairs(es, type = "response")
    emm = _quiet(cx.emmeans, fits["sqrt"], "recipe")
    _check(emm.table(type="response"), REF["response"]["sqrt_response"], est="response",
           est_col="response", keys=["recipe"])
    tab = emm.pairs(type="response")  # stays on the sqrt scale, as in emmeans
    _check(tab, REF["response"]["sqrt_pairs"], est="estimate")
    assert any("sqrt scale" in m for m in tab.attrs["messages"])


def test_response_transform_recognition():
    assert response_transform("np.log(y)").name == "log"
    assert response_transform("log10(y)").ratio_base == 10.0
    assert response_transform("sqrt(y)").ratio_base is None
    assert response_transform("y") is None
    assert response_transform("log(y + 1)") is None  # not a column: left on the link scale


def test_unrecognised_transform_refused_on_the_response_scale():
    d = _cake()
    fit = _quiet(cx.lmer, "log(angle + 1) ~ recipe + (1 | recipe:replicate)", d)
    with pytest.raises(ValueError, match="cannot back-transform"):
        cx.emmeans(fit, "recipe", type="response")
    plain = _quiet(cx.lmer, "angle ~ recipe + (1 | recipe:replicate)", d)
    tab = _quiet(cx.emmeans, plain, "recipe", type="response").table()
    assert "estimate" in tab  # an untransformed response: the same numbers
