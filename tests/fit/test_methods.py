"""The public fit classes' methods (crossed/fit/): the same methods on LmerFit and
GlmerFit wherever the meaning is the same, each a real method, and the ones added with the
fit layer against R or an independent computation:

- ``LmerFit.drop1``: lmerTest 3.1-3's ``drop1`` (the final rows of ``step(fit)``'s fixed
  table are drop1 of the final model: r_ci.R, ham), F and df 1e-5 relative;
- ``LmerFit.bootstrap``: :func:`crossed.bootstrap`'s replicates, identical;
- ``GlmerFit.confint``: lme4 1.1-31's Wald intervals (Estimate ± z·SE of
  ``summary(m)$coefficients``, glmm.json) at the native optimiser's distance from lme4
  (estimates ~1e-5, SEs 1e-4 relative);
- ``GlmerFit.coef``: lme4's ``coef(m)``, i.e. R's fixed effects plus R's conditional modes
  per level (glmm.json, the levels it records), 1e-4 absolute;
- ``GlmerFit.emtrends``: the slopes and SEs of a Poisson GLMM with a covariate × factor
  interaction computed from β̂ and vcov directly (z intervals).
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import crossed as cx
from glmm_reference import case, case_data
from r_ci_cases import answers, data

CBPP = "cbind(incidence, size - incidence) ~ period + (1 | herd)"
HAM = ("Informed.liking ~ Product * Information * Gender + (1 | Consumer) + "
       "(1 | Product:Consumer) + (1 | Information:Consumer)")
SHARED = ["refit", "simulate", "check", "bootstrap", "coef_table", "anova", "drop1",
          "emmeans", "emtrends", "r2", "confint", "coef", "summary", "varcorr", "ranef",
          "predict", "fitted", "residuals"]


@pytest.fixture(scope="module")
def cbpp():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(CBPP, case_data("cbpp"), family="binomial")


@pytest.fixture(scope="module")
def sleep():
    d = pd.read_csv("tests/data/sleepstudy.csv", dtype={"Subject": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("Reaction ~ Days + (1 | Subject)", d)


@pytest.mark.parametrize("name", SHARED)
def test_both_classes_have_the_method_with_a_real_signature(name):
    for cls in (cx.LmerFit, cx.GlmerFit):
        method = getattr(cls, name)
        assert method.__doc__, f"{cls.__name__}.{name} has no docstring"
        kinds = [p.kind for p in inspect.signature(method).parameters.values()]
        assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{cls.__name__}.{name}(**kwargs)"


def test_no_public_method_passes_arbitrary_arguments_through():
    for cls in (cx.LmerFit, cx.GlmerFit):
        for name, method in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_"):
                continue
            kinds = [p.kind for p in inspect.signature(method).parameters.values()]
            assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{cls.__name__}.{name}"
            assert method.__doc__, f"{cls.__name__}.{name} has no docstring"



def test_check_default_max_rows_is_the_simulate_layers():
    # fit/shared.py writes the default out (importing it would load the simulate layer with
    # every fit): it must stay crossed.simulate.diagnostics.MAX_ROWS
    from crossed.simulate.diagnostics import MAX_ROWS, check

    for cls in (cx.LmerFit, cx.GlmerFit):
        default = inspect.signature(cls.check).parameters["max_rows"].default
        assert default == MAX_ROWS == inspect.signature(check).parameters["max_rows"].default

# ------------------------------------------------------------------ LmerFit.drop1
def test_lmer_drop1_matches_lmertest_on_steps_final_model():
    ref = answers()["step_ham"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = cx.lmer(HAM, data("ham.csv", ("Consumer", "Product", "Information",
                                           "Gender"))).step()
    assert isinstance(st.model, cx.LmerFit)
    rows = [r for r in ref["fixed"] if r["Eliminated"] == 0]
    got = st.model.drop1()
    assert list(got["term"]) == [r["term"] for r in rows]
    np.testing.assert_allclose(got["statistic"], [r["F value"] for r in rows], rtol=1e-5)
    np.testing.assert_allclose(got["den_df"], [r["DenDF"] for r in rows], rtol=1e-5)
    np.testing.assert_allclose(got["p_value"], [r["Pr(>F)"] for r in rows], rtol=1e-4)


def test_lmer_drop1_tests_marginal_terms_only(sleep):
    d = pd.read_csv("tests/data/sleepstudy.csv", dtype={"Subject": str})
    d["grp"] = np.array(["a", "b", "c"])[d["Days"] // 4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("Reaction ~ Days * grp + (1 | Subject)", d)
    got = fit.drop1()
    assert list(got["term"]) == ["Days:grp"]  # Days and grp are inside Days:grp
    a3 = fit.anova(type=3)
    row = a3[a3["term"] == "Days:grp"].iloc[0]
    assert got["statistic"].iloc[0] == pytest.approx(row["statistic"], rel=1e-10)


# ------------------------------------------------------------------ LmerFit.bootstrap
def test_lmer_bootstrap_is_crossed_bootstrap_and_refits_are_lmerfits(sleep):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = sleep.bootstrap("fixef", nsim=6, seed=11)
        top = cx.bootstrap(sleep, "fixef", nsim=6, seed=11)
        kinds = sleep.bootstrap(lambda f: {"lmerfit": float(isinstance(f, cx.LmerFit)),
                                           "table": float(len(f.coef_table()))},
                                nsim=3, seed=1)
    pd.testing.assert_frame_equal(own.replicates, top.replicates)
    assert (kinds.replicates["lmerfit"] == 1.0).all()
    assert (kinds.replicates["table"] == 2.0).all()


# ------------------------------------------------------------------ GlmerFit.confint
def test_glmer_wald_confint_matches_lme4(cbpp):
    ref = pd.DataFrame(case("cbpp")["coef"]).set_index("term")
    z = stats.norm.ppf(0.975)
    ci = cbpp.confint(method="Wald")
    assert list(ci["parameter"]) == [".sig01", *ref.index]  # no .sigma: lme4's rows
    assert ci["conf_low"].iloc[:1].isna().all() and ci["conf_high"].iloc[:1].isna().all()
    fe = ci.iloc[1:].set_index("parameter")
    half = z * ref["Std. Error"]
    np.testing.assert_allclose(fe["conf_low"], ref["Estimate"] - half, rtol=2e-4)
    np.testing.assert_allclose(fe["conf_high"], ref["Estimate"] + half, rtol=2e-4)
    assert ci.attrs["method"] == "Wald"


def test_glmer_confint_boot_and_profile(cbpp):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = cbpp.confint(parm="beta_", method="boot", nsim=20, seed=3)
    assert list(ci["parameter"]) == list(cbpp.fixef_names)
    assert np.all(ci["conf_low"] < cbpp.beta) and np.all(cbpp.beta < ci["conf_high"])
    sd = cbpp.confint(parm="theta_", method="boot", nsim=20, seed=3)
    assert list(sd["parameter"]) == [".sig01"] and sd["conf_low"].iloc[0] >= 0
    with pytest.raises(ValueError, match="profile"):
        cbpp.confint(method="profile")


# ------------------------------------------------------------------ GlmerFit.coef
def test_glmer_coef_matches_lme4(cbpp):
    ref = case("cbpp")
    re = ref["ranef"][0]
    beta = pd.Series(ref["beta"], index=ref["fixef_names"])
    modes = np.array(re["values"], dtype=float)[:, 0]
    got = cbpp.coef()["herd"]
    assert len(got) == 15 and list(got.columns) == ["herd", *beta.index]
    got = got.set_index("herd").loc[re["levels"]]  # (the levels R's answer records)
    np.testing.assert_allclose(got["(Intercept)"], beta["(Intercept)"] + modes, atol=1e-4)
    for name in beta.index[1:]:  # no random slope: the fixed effect alone
        np.testing.assert_allclose(got[name], beta[name], atol=1e-4)


# ------------------------------------------------------------------ GlmerFit.emtrends
def test_glmer_emtrends_are_the_slopes_of_the_link():
    rng = np.random.default_rng(1)
    n = 400
    d = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["a", "b", "c"], n),
                      "h": rng.choice([f"h{i}" for i in range(20)], n)})
    u = rng.normal(size=20) * 0.5
    eta = (0.3 + 0.5 * d["x"] + 0.2 * (d["g"] == "b") + 0.4 * d["x"] * (d["g"] == "b")
           + u[d["h"].str[1:].astype(int)])
    d["y"] = rng.poisson(np.exp(eta))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("y ~ x * g + (1 | h)", d, family="poisson")
    got = fit.emtrends("g", "x").table()
    # emmeans names the slope column "<var>.trend": g x.trend SE df asymp.LCL asymp.UCL
    assert list(got.columns[:2]) == ["g", "x.trend"]
    got = got.rename(columns={"x.trend": "estimate"})
    names = list(fit.fixef_names)
    V = fit.vcov_beta
    for level, row in zip(["a", "b", "c"], got.itertuples(), strict=True):
        c = np.zeros(len(names))
        c[names.index("x")] = 1.0
        if level != "a":
            c[names.index(f"x:g{level}")] = 1.0
        est, se = float(c @ fit.beta), float(np.sqrt(c @ V @ c))
        assert row.estimate == pytest.approx(est, rel=1e-10)
        assert row.std_error == pytest.approx(se, rel=1e-10)
        assert np.isinf(row.df)
        assert row.conf_low == pytest.approx(est - stats.norm.ppf(0.975) * se, rel=1e-8)
