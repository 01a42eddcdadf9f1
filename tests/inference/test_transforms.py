"""Transformed covariates in fits, ANOVA, predictions and EMMs (issue 14, section 2, items 7
and 8), against lme4 1.1 / lmerTest 3.1-3 / emmeans 1.8.4.

R code (sleepstudy from tests/data; ``g`` splits even and odd days)::

    library(lmerTest); library(emmeans)
    d <- read.csv("tests/data/sleepstudy.csv"); d$Subject <- factor(d$Subject)
    d$g <- factor(ifelse(d$Days %% 2 == 0, "a", "b"))
    nd <- data.frame(Days = c(0.5, 3, 7.25, 10), g = factor(c("a", "b", "b", "a")))
    m1 <- lmer(Reaction ~ Days + I(Days^2) + (Days | Subject), d)
    m2 <- lmer(Reaction ~ g * log(Days + 1) + (1 | Subject), d)
    m3 <- lmer(Reaction ~ g * poly(Days, 2) + (1 | Subject), d)
    m4 <- lmer(Reaction ~ g * scale(Days) + (1 | Subject), d)
    m6 <- lmer(Reaction ~ g * I(Days^2) + (1 | Subject), d)
    fixef(m); anova(m, type = 3); anova(m, type = 2)
    predict(m, newdata = nd, re.form = NA); summary(emmeans(m, ~ g))

R's ``I(Days^2)`` is Days squared: crossed reads ``^`` inside a call as a power too (in
Python ``^`` would be XOR, which for these integer days gives different numbers).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from reference import load_table

NEW = pd.DataFrame({"Days": [0.5, 3, 7.25, 10], "g": ["a", "b", "b", "a"]})

CASES = {
    "m1": {
        "formula": "Reaction ~ Days + I(Days^2) + (Days | Subject)",
        "fixef": {"(Intercept)": 255.449372777778, "Days": 7.434085012626,
                  "I(Days^2)": 0.3370223274411},
        "a3": (["Days", "I(Days^2)"], [6.955115808766, 1.655752260173],
               [114.431190691329, 143.000120170897]),
        "a2": (["Days", "I(Days^2)"], [6.955115808766, 1.655752260173],
               [114.431190691329, 143.000120170897]),
    },
    "m2": {
        "formula": "Reaction ~ g * np.log(Days + 1) + (1 | Subject)",
        "fixef": {"(Intercept)": 245.04212777231, "gb": -22.566275206077,
                  "np.log(Days + 1)": 34.192661927319,
                  "gb:np.log(Days + 1)": 15.876084833571},
        "a3": (["g", "np.log(Days + 1)", "g:np.log(Days + 1)"],
               [3.112814620162, 123.72700832485, 4.392319292335], [159.0, 159.0, 159.0]),
        "a2": (["g", "np.log(Days + 1)", "g:np.log(Days + 1)"],
               [3.112814620162, 121.141950043815, 4.392319292335], [159.0, 159.0, 159.0]),
    },
    "m3": {
        "formula": "Reaction ~ g * poly(Days, 2) + (1 | Subject)",
        "fixef": {"(Intercept)": 297.346718293649, "gb": 2.669528640873,
                  "poly(Days, 2)1": 420.234906425901, "poly(Days, 2)2": 55.226555414463,
                  "gb:poly(Days, 2)1": -26.757793118025,
                  "gb:poly(Days, 2)2": -34.48510197801},
        # poly() is a matrix in R's model frame, so g counts as contained in g:poly() for
        # lmerTest's Type II (unlike g in g:log(Days + 1))
        "a3": (["g", "poly(Days, 2)", "g:poly(Days, 2)"],
               [0.3177954116326, 70.59784373008, 0.2052554126727], [157.0, 157.0, 157.0]),
        "a2": (["g", "poly(Days, 2)", "g:poly(Days, 2)"],
               [0.3632560976036, 80.2782316018, 0.2052554126727], [157.0, 157.0, 157.0]),
        "pred": [258.116716884919, 283.423622857141, 327.949448200643, 369.787515555554],
        "emm": ([292.673148948411, 298.260993139879], 10.106645689002, 26.268285188278),
    },
    "m4": {
        "formula": "Reaction ~ g * scale(Days) + (1 | Subject)",
        "fixef": {"(Intercept)": 297.063471666665, "gb": 2.84639625,
                  "scale(Days)": 29.778164912979, "gb:scale(Days)": 0.2445008959043},
        "a3": (["g", "scale(Days)", "g:scale(Days)"],
               [0.3643629038496, 159.933115490321, 0.002673528837805],
               [159.0, 159.0, 159.0]),
        "a2": (["g", "scale(Days)", "g:scale(Days)"],
               [0.3643629038496, 159.933115490321, 0.002673528837805],
               [159.0, 159.0, 159.0]),
        "pred": [255.709120555554, 284.274654999998, 328.574424930554, 353.925704444442],
        "emm": ([297.063471666665, 299.909867916665], 9.361025390763, 19.450624335072),
    },
    "m6": {
        "formula": "Reaction ~ g * I(Days^2) + (1 | Subject)",
        "a3": (["g", "I(Days^2)", "g:I(Days^2)"],
               [2.059469727821, 152.058299126801, 1.69336571557], [159.0, 159.0, 159.0]),
        "a2": (["g", "I(Days^2)", "g:I(Days^2)"],
               [2.059469727821, 151.950987111215, 1.69336571557], [159.0, 159.0, 159.0]),
    },
}


@pytest.fixture(scope="module")
def fits() -> dict[str, cx.LmerFit]:
    d = load_table("sleepstudy.csv", ("Subject",))
    d["g"] = np.where(d["Days"] % 2 == 0, "a", "b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {k: cx.lmer(c["formula"], d) for k, c in CASES.items()}


@pytest.mark.parametrize("case", [k for k in CASES if "fixef" in CASES[k]])
def test_coefficients_and_names(fits, case):
    got = fits[case].fixef
    ref = CASES[case]["fixef"]
    assert list(got.index) == list(ref)
    np.testing.assert_allclose(got.to_numpy(), list(ref.values()), rtol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("type", [3, 2])
def test_anova(fits, case, type):
    terms, F, ddf = CASES[case][f"a{type}"]
    got = fits[case].anova(type=type)
    assert list(got["term"]) == terms
    np.testing.assert_allclose(got["statistic"], F, rtol=1e-4)
    np.testing.assert_allclose(got["den_df"], ddf, rtol=1e-4)


@pytest.mark.parametrize("case", ["m3", "m4"])
def test_predict_uses_the_training_transform(fits, case):
    # the new days are not the training days: the fit's poly basis and scale's training
    # mean and sd must be applied, not ones recomputed from NEW
    got = fits[case].predict(NEW, include_random=False)
    np.testing.assert_allclose(got, CASES[case]["pred"], rtol=1e-6)


@pytest.mark.parametrize("case", ["m3", "m4"])
def test_emmeans_at_the_covariate_mean(fits, case):
    # emmeans reduces Days to its mean, then applies the transform with the fit's state
    est, se, df = CASES[case]["emm"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fits[case].emmeans("g").table()
    np.testing.assert_allclose(got["estimate"], est, rtol=1e-6)
    np.testing.assert_allclose(got["std_error"], se, rtol=1e-4)
    np.testing.assert_allclose(got["df"], df, rtol=1e-3)


def test_center_is_x_minus_its_training_mean(fits):
    d = load_table("sleepstudy.csv", ("Subject",))
    d["g"] = np.where(d["Days"] % 2 == 0, "a", "b")
    centred = cx.lmer("Reaction ~ g * center(Days) + (1 | Subject)", d)
    by_hand = cx.lmer("Reaction ~ g * Dc + (1 | Subject)", d.assign(Dc=d["Days"] - 4.5))
    np.testing.assert_allclose(centred.beta, by_hand.beta, rtol=1e-8)
    np.testing.assert_allclose(centred.predict(NEW, include_random=False),
                               by_hand.predict(NEW.assign(Dc=NEW["Days"] - 4.5),
                                               include_random=False), rtol=1e-10)
    np.testing.assert_allclose(centred.emmeans("g").table()["estimate"],
                               by_hand.emmeans("g").table()["estimate"], rtol=1e-8)


def test_ratio_labels_of_level_names_holding_a_dash():
    # before: a label with a parenthesised "a - b" level kept " - " under a ratio column
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"f": np.resize(["gpt-4 - mini", "base"], 60),
                      "g": np.repeat(list("abcdef"), 10)})
    d["y"] = np.exp(rng.normal(size=60))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("log(y) ~ f + (1 | g)", d)
    pairs = fit.emmeans("f", type="response").pairs()
    assert list(pairs["contrast"]) == ["base / (gpt-4 - mini)"]
