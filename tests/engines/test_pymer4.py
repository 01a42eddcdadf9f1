"""``from_pymer4``: a fitted pymer4 Lmer (lme4 in R) as crossed's fit result.

pymer4 is optional and, in its versions that work with Debian's R stack (0.8.2), needs
pandas < 3; most tests here use a duck-typed stand-in holding a real lme4 fit made through
rpy2 as pymer4 makes it (``model_obj``; with ``factors=``, unnamed contrast matrices), and
the tests marked ``real_pymer4`` fit with pymer4 itself. Those skip where pymer4 is not
installed, except when ``CROSSED_REQUIRE_PYMER4`` is set (CI's oldest-dependencies job,
``scripts/test_oldest``), where they fail instead.
"""

from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.engines.lme4 import to_r_frame
from reference import load_table, r_answers

SLEEP = "Reaction ~ Days + (Days | Subject)"


@dataclass
class FakeLmer:
    """The attributes of pymer4.models.Lmer that from_pymer4 reads."""

    formula: str
    data: pd.DataFrame
    model_obj: object = None
    fitted: bool = False
    family: str = "gaussian"
    warnings: list = field(default_factory=list)


def r_lmer(r, formula: str, data: pd.DataFrame, reml: bool = True):
    frame = data.copy()
    for col in ("Subject",):
        if col in frame:
            frame[col] = pd.Categorical(frame[col], categories=sorted(frame[col].unique()))
    return r.lmer(formula, to_r_frame(frame), r.ro.BoolVector([reml]))[0]


def r_pymer4_lmer(r, formula: str, data: pd.DataFrame, factor: str, levels: list[str],
                  coding: str):
    """lme4 fitted as pymer4's fit(factors={factor: levels}) fits it: the factor's levels
    in the order given and an unnamed contrast matrix (R's contr.treatment or contr.poly,
    or pymer4's con2R matrix of a custom contrast)."""
    frame = data.copy()
    frame[factor] = pd.Categorical(frame[factor].astype(str), categories=levels)
    fit = r.ro.r(f"""function(d) lme4::lmer({formula}, data = d,
                       contrasts = list({factor} = unname({coding})))""")
    return fit(to_r_frame(frame))


@pytest.fixture(scope="module")
def sleep():
    d = load_table("sleepstudy.csv", ("Subject",))
    d["task"] = np.where(d["Days"] < 3, "t1", np.where(d["Days"] < 6, "t2", "t3"))
    return d


@pytest.fixture(scope="module")
def fake(r_stack, sleep):
    return FakeLmer(SLEEP, sleep, r_lmer(r_stack, SLEEP, sleep), fitted=True)


def r_fixef(r, obj) -> pd.Series:
    fe = r.ro.r("lme4::fixef")(obj)
    return pd.Series(list(fe), index=list(fe.names))


def test_from_pymer4_reads_lme4s_fit(fake):
    fit = crossed.from_pymer4(fake)
    r = r_answers("sleepstudy_slopes")
    assert fit.engine == "pymer4" and fit.reml
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-12)
    np.testing.assert_allclose(fit.theta, r["theta"], rtol=1e-8)
    np.testing.assert_allclose(fit.vcov_beta, r["vcov"], rtol=1e-8)
    assert list(fit.fixef.index) == ["(Intercept)", "Days"]
    # downstream inference works on it unchanged (Satterthwaite from the PLS problem)
    tab = fit.coef_table()
    np.testing.assert_allclose(tab["df"], [row["df"] for row in r["coef_satterthwaite"]],
                               rtol=1e-3)
    # conditional modes are lme4's u mapped by level label
    ref = r["ranef"][0]
    vals = np.asarray(ref["values"], dtype=float).reshape(-1, 2)
    modes = fit.ranef()
    np.testing.assert_allclose(modes[modes["term"] == "(Intercept)"]["estimate"], vals[:, 0],
                               rtol=1e-6, atol=1e-8)


def test_ml_fit_and_refit(r_stack, sleep):
    fake = FakeLmer(SLEEP, sleep, r_lmer(r_stack, SLEEP, sleep, reml=False), fitted=True)
    fit = crossed.from_pymer4(fake)
    assert not fit.reml
    assert fit.deviance == pytest.approx(r_answers("sleepstudy_ml")["deviance"], rel=1e-12)
    again = fit.refit()  # refits go to lme4, which is what pymer4 ran
    assert again.engine == "lme4"
    assert again.deviance == pytest.approx(fit.deviance, rel=1e-8)


def test_not_fitted_or_not_a_model(sleep):
    with pytest.raises(ValueError, match="not fitted"):
        crossed.from_pymer4(FakeLmer(SLEEP, sleep))
    with pytest.raises(ValueError, match="no attribute 'formula'"):
        crossed.from_pymer4(object())


def test_other_formula_is_detected(r_stack, sleep):
    fake = FakeLmer(SLEEP, sleep, r_lmer(r_stack, "Reaction ~ 1 + (Days | Subject)", sleep),
                    fitted=True)
    with pytest.raises(RuntimeError, match="fixed effects"):
        crossed.from_pymer4(fake)


@pytest.mark.parametrize("levels, coding", [
    (["t1", "t2", "t3"], "contr.treatment(3)"),       # factors={"task": [...]}
    (["t2", "t1", "t3"], "contr.treatment(3)"),       # another reference level
    (["t1", "t2", "t3"], "contr.poly(3)"),            # ordered=True
    (["t1", "t2", "t3"], "cbind(c(-1, .5, .5), c(0, -1, 1))"),  # a custom contrast
])
def test_factors_coding_is_read_from_the_r_model(r_stack, sleep, levels, coding):
    """pymer4's factors= passes unnamed contrast matrices: lme4 names the coefficients
    task1, task2; crossed reads the levels and the matrix from the model and builds the
    same coding (it refused these fits: 'lme4's fixed effects [...] differ')."""
    formula = "Reaction ~ task + Days + (1 | Subject)"
    obj = r_pymer4_lmer(r_stack, formula, sleep, "task", levels, coding)
    fit = crossed.from_pymer4(FakeLmer(formula.replace(" ", ""), sleep, obj, fitted=True))
    expected = r_fixef(r_stack, obj)
    assert list(fit.fixef.index) == ["(Intercept)", "task1", "task2", "Days"]
    np.testing.assert_array_equal(fit.fixef.to_numpy(), expected.to_numpy())
    assert fit.design.levels["task"] == levels
    # EMMs are coding-free: the same as with crossed's default coding
    emm = crossed.emmeans(fit, "task").table()
    default = crossed.emmeans(crossed.lmer(formula, sleep), "task").table()
    got = emm.set_index("task")["estimate"].sort_index()
    np.testing.assert_allclose(got, default.set_index("task")["estimate"].sort_index(),
                               rtol=1e-6)


def test_downstream_on_a_factors_fit(r_stack, sleep):
    """Kenward-Roger, profile intervals, the bootstrap, ranova and pickling work on a
    converted factors= fit (its matrix coding)."""
    formula = "Reaction ~ task + Days + (Days | Subject)"
    obj = r_pymer4_lmer(r_stack, formula, sleep, "task", ["t2", "t1", "t3"],
                        "contr.treatment(3)")
    fit = crossed.from_pymer4(FakeLmer(formula, sleep, obj, fitted=True))
    kr = fit.coef_table(ddf="kenward-roger")
    assert list(kr["term"]) == ["(Intercept)", "task1", "task2", "Days"]
    assert np.all(np.isfinite(kr["df"]))
    ci = fit.confint(method="profile")
    assert np.all(np.isfinite(ci[["conf_low", "conf_high"]].to_numpy()))
    boot = crossed.bootstrap(fit, nsim=5, seed=1)
    assert boot is not None
    assert len(fit.ranova()) == 2
    again = pickle.loads(pickle.dumps(fit))
    np.testing.assert_array_equal(again.fixef, fit.fixef)


def test_numeric_factor_column(r_stack, sleep):
    """factors= on a numeric column: pymer4 writes each value as a string."""
    d = sleep.assign(block=sleep["Days"] // 4)
    formula = "Reaction ~ block + (1 | Subject)"
    obj = r_pymer4_lmer(r_stack, formula, d, "block", ["2", "0", "1"], "contr.treatment(3)")
    fit = crossed.from_pymer4(FakeLmer(formula, d, obj, fitted=True))
    np.testing.assert_array_equal(fit.fixef.to_numpy(), r_fixef(r_stack, obj).to_numpy())


def test_changed_data_is_refused(fake, sleep):
    """model.data changed after fit(): refused with what differs, not converted silently
    (the subset was converted with 144 observations against lme4's 180)."""
    with pytest.raises(ValueError, match="lme4 fitted 180 observations but model.data "
                                         "gives 144"):
        crossed.from_pymer4(replace_data(fake, sleep[sleep["Days"] < 8]))
    with pytest.raises(ValueError, match="response 'Reaction' in model.data differs"):
        crossed.from_pymer4(replace_data(fake, sleep.assign(Reaction=sleep["Reaction"] + 1)))
    with pytest.raises(ValueError, match="fixed-effects columns"):
        crossed.from_pymer4(replace_data(fake, sleep.assign(Days=sleep["Days"] * 2)))
    # pymer4 adds its own columns (fits, residuals) to model.data: that is the same data
    fit = crossed.from_pymer4(replace_data(fake, sleep.assign(fits=0.0, residuals=1.0)))
    assert fit.design.n == 180


def replace_data(fake: FakeLmer, data: pd.DataFrame) -> FakeLmer:
    return FakeLmer(fake.formula, data, fake.model_obj, fitted=True)


def test_summary_shows_rs_formula_and_the_data(r_stack, sleep):
    """pymer4 keeps the formula without spaces; the summary writes it as R does."""
    obj = r_lmer(r_stack, SLEEP, sleep)
    fit = crossed.from_pymer4(FakeLmer(SLEEP.replace(" ", ""), sleep, obj, fitted=True))
    text = str(fit.summary())
    assert "Formula: Reaction ~ Days + (Days | Subject)" in text
    assert "Data: model.data (pymer4)" in text
    named = crossed.from_pymer4(FakeLmer(SLEEP, sleep, obj, fitted=True), data_name="sleep")
    assert "Data: sleep" in str(named.summary())
    written = "Reaction ~ 1 + Days + (1 + Days | Subject)"
    obj = r_lmer(r_stack, written, sleep)
    fit = crossed.from_pymer4(FakeLmer(written.replace(" ", ""), sleep, obj, fitted=True))
    assert f"Formula: {written}" in str(fit.summary())


def test_singular_fit_is_warned_once(r_stack, sleep):
    """pymer4 already reported lme4's singular fit (R printed it, model.warnings keeps
    it): the conversion does not warn again; the fit's messages keep it."""
    d = sleep.assign(g3=(np.arange(len(sleep)) % 3).astype(str))
    formula = "Reaction ~ Days + (1 | Subject) + (1 | g3)"
    obj = r_lmer(r_stack, formula, d)
    msg = "boundary (singular) fit: see help('isSingular')"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = crossed.from_pymer4(FakeLmer(formula, d, obj, fitted=True, warnings=[msg]))
    assert fit.is_singular and msg in fit.messages
    assert not [w for w in caught if "singular" in str(w.message)]
    # an object that did not report it (no warnings attribute) is warned as lme4's fits
    with pytest.warns(crossed.SingularFitWarning):
        crossed.from_pymer4(FakeLmer(formula, d, obj, fitted=True))


@pytest.fixture(scope="module")
def cbpp(r_stack):
    d = pd.DataFrame({k: list(v) for k, v in r_stack.ro.r("lme4::cbpp").items()})
    for col in ("herd", "period"):
        d[col] = d[col].astype(int).astype(str)
    d["any"] = (d["incidence"] > 0).astype(float)
    return d


def test_glmer_converts(r_stack, cbpp):
    """pymer4's glmer fits (binomial, Poisson) convert with lme4's numbers (they were
    refused: 'crossed handles linear mixed models (lmer) only')."""
    cases = [("cbind(incidence, size - incidence) ~ period + (1 | herd)", "binomial"),
             ("any ~ period + (1 | herd)", "binomial"),
             ("incidence ~ period + (1 | herd)", "poisson")]
    for formula, family in cases:
        obj = r_stack.ro.r(f"function(d) lme4::glmer({formula}, data = d, family = {family})")(
            to_r_frame(cbpp.assign(herd=pd.Categorical(cbpp["herd"]),
                                   period=pd.Categorical(cbpp["period"]))))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", crossed.SingularFitWarning)
            fit = crossed.from_pymer4(FakeLmer(formula, cbpp, obj, fitted=True, family=family))
            ref = crossed.glmer(formula, cbpp, family=family, engine="lme4")
        assert fit.engine == "pymer4" and fit.family.name == family
        np.testing.assert_array_equal(fit.fixef.to_numpy(), r_fixef(r_stack, obj).to_numpy())
        np.testing.assert_allclose(fit.fixef, ref.fixef, rtol=1e-6)
        np.testing.assert_allclose(fit.vcov_beta, ref.vcov_beta, rtol=1e-4)
        assert fit.deviance == pytest.approx(ref.deviance, rel=1e-8)
        assert fit.criterion == pytest.approx(ref.criterion, rel=1e-8)
        tab = fit.coef_table()
        assert np.all(np.isfinite(tab["p_value"]))


def test_glmer_other_family_is_refused(r_stack, sleep):
    obj = r_stack.ro.r("function(d) lme4::glmer(Reaction ~ Days + (1 | Subject), data = d, "
                       "family = Gamma(link = 'log'))")(to_r_frame(
                           sleep.assign(Subject=pd.Categorical(sleep["Subject"]))))
    fake = FakeLmer("Reaction ~ Days + (1 | Subject)", sleep, obj, fitted=True,
                    family="gamma")
    with pytest.raises(crossed.UnsupportedModelError,
                       match="family 'gamma'.*binomial and Poisson.*cx.glmer"):
        crossed.from_pymer4(fake)
    with pytest.raises(ValueError, match="not an lme4 merMod"):
        crossed.from_pymer4(FakeLmer(SLEEP, sleep, r_stack.ro.r("1:3"), fitted=True))
    with pytest.raises(ValueError, match="not an lme4 merMod"):
        crossed.from_pymer4(FakeLmer(SLEEP, sleep, object(), fitted=True))


def test_pymer4_lm_points_to_crossed(sleep):
    """pymer4's Lm (OLS) and Lm2 (two-stage) are not lme4 fits: say what to use instead."""
    Lm = type("Lm", (FakeLmer,), {})
    Lm2 = type("Lm2", (FakeLmer,), {})
    with pytest.raises(crossed.UnsupportedModelError, match=r"cx.lm\(formula, data\)"):
        crossed.from_pymer4(Lm("Reaction ~ Days", sleep, object(), fitted=True))
    with pytest.raises(crossed.UnsupportedModelError, match="two-stage.*cx.lmer"):
        crossed.from_pymer4(Lm2("Reaction ~ Days", sleep, object(), fitted=True))


# ---- pymer4 itself ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def pymer4(r_stack):
    try:
        import pymer4.models
    except ImportError as exc:
        if os.environ.get("CROSSED_REQUIRE_PYMER4"):
            pytest.fail(f"CROSSED_REQUIRE_PYMER4 is set but pymer4 does not import: {exc}")
        pytest.skip("pymer4 not installed (optional; scripts/test_oldest installs 0.8.2, "
                    "see docs/engines.md)")
    return pymer4.models


def pymer4_fit(pymer4, formula, data, family="gaussian", **kw):
    model = pymer4.Lmer(formula, data=data, family=family)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pymer4 calls DataFrame.applymap
        model.fit(summarize=False, **kw)
    return model


def assert_as_pymer4(fit, model, df=True):
    co = model.coefs
    np.testing.assert_array_equal(fit.fixef.to_numpy(), co["Estimate"].to_numpy())
    assert list(fit.fixef.index) == list(co.index)
    np.testing.assert_allclose(fit.coef_table()["std_error"], co["SE"], rtol=1e-10)
    if df:
        np.testing.assert_allclose(fit.coef_table()["df"], co["DF"], rtol=5e-8)


def test_real_pymer4(pymer4, sleep):
    model = pymer4_fit(pymer4, SLEEP, sleep)
    fit = crossed.from_pymer4(model)
    assert fit.deviance == pytest.approx(r_answers("sleepstudy_slopes")["deviance"], rel=1e-10)
    assert_as_pymer4(fit, model)
    assert "Formula: Reaction ~ Days + (Days | Subject)" in str(fit.summary())
    # downstream functions, refits (lme4) and pickling work on the converted fit
    assert len(fit.anova()) == 1
    assert fit.ranova() is not None
    again = pickle.loads(pickle.dumps(fit))
    np.testing.assert_array_equal(again.fixef, fit.fixef)


@pytest.mark.parametrize("kw", [
    {"factors": {"task": ["t1", "t2", "t3"]}},
    {"factors": {"task": ["t3", "t1", "t2"]}},
    {"factors": {"task": ["t1", "t2", "t3"]}, "ordered": True},
    {"factors": {"task": {"t1": -1, "t2": 0.5, "t3": 0.5}}},
    {},
])
def test_real_pymer4_factors(pymer4, sleep, kw):
    """Every pymer4 fit that used factors= was refused; now each converts with lme4's
    names and numbers (Satterthwaite df as lmerTest's through pymer4)."""
    model = pymer4_fit(pymer4, "Reaction ~ task * Days + (1 | Subject)", sleep, **kw)
    fit = crossed.from_pymer4(model)
    assert_as_pymer4(fit, model)
    if kw:
        assert list(fit.fixef.index)[1:3] == ["task1", "task2"]
    emm = crossed.emmeans(fit, "task").table()
    assert sorted(emm["task"].astype(str)) == ["t1", "t2", "t3"]
    assert len(fit.anova()) == 3


def test_real_pymer4_changed_data(pymer4, sleep):
    model = pymer4_fit(pymer4, SLEEP, sleep)
    model.data = model.data[model.data["Days"] < 8]
    with pytest.raises(ValueError, match="lme4 fitted 180 observations but model.data "
                                         "gives 144"):
        crossed.from_pymer4(model)


def test_real_pymer4_singular_warned_once(pymer4, sleep):
    d = sleep.assign(g3=(np.arange(len(sleep)) % 3).astype(str))
    model = pymer4_fit(pymer4, "Reaction ~ Days + (1 | Subject) + (1 | g3)", d)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = crossed.from_pymer4(model)
    assert fit.is_singular
    assert not [w for w in caught if "singular" in str(w.message)]


def test_real_pymer4_glmer(pymer4, cbpp):
    model = pymer4_fit(pymer4, "any ~ period + (1 | herd)", cbpp, family="binomial",
                       factors={"period": ["1", "2", "3", "4"]})
    fit = crossed.from_pymer4(model)
    np.testing.assert_array_equal(fit.fixef.to_numpy(), model.coefs["Estimate"].to_numpy())
    np.testing.assert_allclose(fit.coef_table()["std_error"], model.coefs["SE"], rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", crossed.SingularFitWarning)
        native = crossed.glmer("any ~ period + (1 | herd)", cbpp, family="binomial")
    np.testing.assert_allclose(fit.fixef, native.fixef, rtol=1e-4)
    model = pymer4_fit(pymer4, "incidence ~ period + (1 | herd)", cbpp, family="poisson")
    fit = crossed.from_pymer4(model)
    assert fit.family.name == "poisson"
    np.testing.assert_array_equal(fit.fixef.to_numpy(), model.coefs["Estimate"].to_numpy())


def test_real_pymer4_three_factor_repeated_measures(pymer4):
    """The tutorial's repeated-measures model with factors= on its three factors (level
    orders other than crossed's): lme4's names and numbers, Satterthwaite df as pymer4's."""
    d = crossed.load_dataset("exist_multi")
    factors = {"language": ["es", "en"], "task": ["t1", "t2", "t3"], "mode": ["soft", "hard"]}
    model = pymer4_fit(pymer4, "delta ~ language * task * mode + (1 | model)", d,
                       factors=factors)
    fit = crossed.from_pymer4(model)
    assert_as_pymer4(fit, model)
    assert "language1:task1:mode1" in fit.fixef.index
    assert len(fit.anova()) == 7
    emm = crossed.emmeans(fit, "language").table()
    assert sorted(emm["language"].astype(str)) == ["en", "es"]


def test_real_pymer4_lm_is_refused(pymer4, sleep):
    model = pymer4.Lm("Reaction ~ Days", data=sleep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(summarize=False)
    with pytest.raises(crossed.UnsupportedModelError, match=r"cx.lm\(formula, data\)"):
        crossed.from_pymer4(model)
