"""``from_pymer4``: a fitted pymer4 Lmer (lme4 in R) as crossed's fit result.

pymer4 is optional and, in its versions that work with Debian's R stack (0.8.2), pins
pandas < 3; these tests use a duck-typed stand-in holding a real lme4 fit made through rpy2
(what pymer4 keeps in ``model_obj``), and the real pymer4 where it is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def r_lmer(r, formula: str, data: pd.DataFrame, reml: bool = True):
    frame = data.copy()
    for col in ("Subject",):
        if col in frame:
            frame[col] = pd.Categorical(frame[col], categories=sorted(frame[col].unique()))
    return r.lmer(formula, to_r_frame(frame), r.ro.BoolVector([reml]))[0]


@pytest.fixture(scope="module")
def sleep():
    return load_table("sleepstudy.csv", ("Subject",))


@pytest.fixture(scope="module")
def fake(r_stack, sleep):
    return FakeLmer(SLEEP, sleep, r_lmer(r_stack, SLEEP, sleep), fitted=True)


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


def test_glmer_is_refused(r_stack, sleep):
    obj = r_stack.ro.r(
        "lme4::glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), "
        "family = binomial, data = lme4::cbpp)")
    fake = FakeLmer("incidence ~ period + (1 | herd)", sleep, obj, fitted=True,
                    family="binomial")
    with pytest.raises(crossed.UnsupportedModelError, match="linear mixed models"):
        crossed.from_pymer4(fake)
    with pytest.raises(ValueError, match="not an lme4 merMod"):
        crossed.from_pymer4(FakeLmer(SLEEP, sleep, r_stack.ro.r("1:3"), fitted=True))


def test_real_pymer4(r_stack, sleep):
    pymer4 = pytest.importorskip("pymer4", reason="pymer4 not installed (optional; see "
                                                  "docs/engines.md for its version limits)")
    model = pymer4.models.Lmer(SLEEP, data=sleep)
    model.fit(summarize=False)
    fit = crossed.from_pymer4(model)
    assert fit.deviance == pytest.approx(r_answers("sleepstudy_slopes")["deviance"], rel=1e-10)
