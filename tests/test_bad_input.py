"""Bad input: clear errors naming the culprit, and missing values dropped and counted (issue 2)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from reference import fit_case, load_table

FORMULA = "Reaction ~ Days + (Days | Subject)"


@pytest.fixture(scope="module")
def sleep():
    return load_table("sleepstudy.csv", ("Subject",))


@pytest.fixture(scope="module")
def sleep_fit(sleep):
    return crossed.lmer(FORMULA, sleep)


# ------------------------------------------------------------------ unknown columns
@pytest.mark.parametrize("formula,culprit", [
    ("Reaction ~ Dayz + (1 | Subject)", "Dayz"),            # fixed part
    ("Reaction ~ Days + (1 | Subjct)", "Subjct"),           # grouping factor
    ("Reaction ~ Days + (Dayz | Subject)", "Dayz"),         # random-term expression
    ("Reactio ~ Days + (1 | Subject)", "Reactio"),          # response
    ("Reaction ~ Days + (1 | Subject/Nest)", "Nest"),       # nested factor
    ("Reaction ~ Days + (1 | Subject:Nest)", "Nest"),       # interaction factor
    ("np.log(Reactio) ~ Days + (1 | Subject)", "Reactio"),  # inside an expression
])
def test_unknown_column_is_named(sleep, formula, culprit):
    with pytest.raises(crossed.DataError, match=f"'{culprit}'") as info:
        crossed.lmer(formula, sleep)
    assert "not in the data" in str(info.value)


def test_unknown_column_suggests_the_close_one(sleep):
    with pytest.raises(crossed.DataError, match="did you mean 'Days'"):
        crossed.lmer("Reaction ~ Dayz + (1 | Subject)", sleep)


# ------------------------------------------------------------------ grouping factors
def test_grouping_factor_with_one_level(sleep):
    with pytest.raises(crossed.DataError, match="'one'") as info:
        crossed.lmer("Reaction ~ Days + (1 | one)", sleep.assign(one="a"))
    assert "1 level" in str(info.value)


def test_grouping_factor_with_one_level_after_dropping_rows(sleep):
    data = sleep.assign(g=np.where(np.arange(len(sleep)) < 10, "a", None))
    with pytest.raises(crossed.DataError, match="'g'"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crossed.lmer("Reaction ~ Days + (1 | g)", data)


def test_one_level_per_observation(sleep):
    data = sleep.assign(row=[f"r{i}" for i in range(len(sleep))])
    with pytest.raises(crossed.DataError, match="'row'") as info:
        crossed.lmer("Reaction ~ Days + (1 | row)", data)
    assert "180" in str(info.value)


def test_more_random_effects_than_observations(sleep):
    """90 levels x 2 columns = 180 random effects for 180 rows (lme4: 'number of
    observations (=180) <= number of random effects (=180)')."""
    data = sleep.assign(pair=[f"p{i // 2}" for i in range(len(sleep))])
    with pytest.raises(crossed.DataError, match="random effects") as info:
        crossed.lmer("Reaction ~ Days + (Days | pair)", data)
    msg = str(info.value)
    assert "180" in msg and "pair" in msg


def test_random_effects_checked_per_term_like_lme4(sleep):
    """lme4 checks each term: (Days || pair) is two terms of 90 effects each, and lme4 fits
    it (REML criterion printed as 1750.678 by lme4 1.1-31), though 90 + 90 + 18 > 180."""
    data = sleep.assign(pair=[f"p{i // 2}" for i in range(len(sleep))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("Reaction ~ Days + (Days || pair) + (1 | Subject)", data)
    assert fit.deviance == pytest.approx(1750.678, abs=6e-4)


# ------------------------------------------------------------------ the response
@pytest.mark.parametrize("column", ["Subject", "text", "flag"])
def test_non_numeric_response(sleep, column):
    data = sleep.assign(text=sleep["Reaction"].map(lambda v: f"{v:.1f} ms"),
                        flag=sleep["Days"] > 4)
    with pytest.raises(crossed.DataError, match=f"response '{column}' is not numeric"):
        crossed.lmer(f"{column} ~ Days + (1 | Subject)", data)


def test_infinite_response(sleep):
    data = sleep.copy()
    data.loc[3, "Reaction"] = np.inf
    with pytest.raises(crossed.DataError, match="Reaction"):
        crossed.lmer(FORMULA, data)


# ------------------------------------------------------------------ the table itself
def test_empty_table(sleep):
    with pytest.raises(crossed.DataError, match="empty"):
        crossed.lmer(FORMULA, sleep.iloc[:0])


def test_empty_after_dropping_missing_rows(sleep):
    data = sleep.assign(Reaction=np.nan)
    with pytest.raises(crossed.DataError, match="no rows"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crossed.lmer(FORMULA, data)


def test_data_must_be_a_dataframe(sleep):
    with pytest.raises(crossed.DataError, match="DataFrame"):
        crossed.lmer(FORMULA, sleep.to_dict(orient="list"))


def test_formula_without_random_terms(sleep):
    with pytest.raises(crossed.DataError, match=r"random-effects terms"):
        crossed.lmer("Reaction ~ Days", sleep)


def test_unknown_engine(sleep):
    with pytest.raises(ValueError, match="unknown engine 'fast'"):
        crossed.lmer(FORMULA, sleep, engine="fast")


# ------------------------------------------------------------------ missing values
@pytest.fixture(scope="module")
def with_na(sleep):
    data = sleep.copy()
    data.loc[[0, 5], "Reaction"] = np.nan
    data.loc[7, "Subject"] = None
    data.loc[[7, 9], "Days"] = np.nan       # row 7 twice missing: counted once
    data["unused"] = np.nan                  # a column the model does not use: ignored
    return data


def test_missing_rows_dropped_counted_and_warned(with_na, sleep):
    with pytest.warns(UserWarning, match="4 of 180 rows dropped") as rec:
        fit = crossed.lmer(FORMULA, with_na)
    msg = " ".join(str(w.message) for w in rec)
    assert "Reaction (2)" in msg and "Subject (1)" in msg and "Days (2)" in msg
    assert "unused" not in msg
    assert fit.n_dropped == 4
    assert fit.nobs == 176
    assert any("4 rows dropped" in m for m in fit.messages)
    # the same fit as on the complete rows (lme4's na.omit)
    complete = sleep.drop(index=[0, 5, 7, 9]).reset_index(drop=True)
    ref = crossed.lmer(FORMULA, complete)
    assert ref.n_dropped == 0
    assert fit.deviance == pytest.approx(ref.deviance, rel=1e-10)
    np.testing.assert_allclose(fit.fixef, ref.fixef, rtol=1e-8)
    assert len(fit.fitted()) == len(fit.residuals()) == 176


def test_missing_rows_raise_when_asked(with_na):
    with pytest.raises(crossed.DataError) as info:
        crossed.lmer(FORMULA, with_na, na_action="raise")
    msg = str(info.value)
    assert "4 rows" in msg and "Reaction" in msg and "Subject" in msg and "Days" in msg


def test_no_missing_values_no_warning(sleep):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = crossed.lmer(FORMULA, sleep.assign(unused=np.nan), na_action="raise")
    assert fit.n_dropped == 0


def test_bad_na_action(sleep):
    with pytest.raises(ValueError, match="na_action"):
        crossed.lmer(FORMULA, sleep, na_action="drop")


def test_missing_values_of_a_reference_case_counted_like_r():
    """carrots: 3 missing Preference values; R's nobs is 1233 of 1236 rows."""
    with pytest.warns(UserWarning, match="3 of 1236 rows dropped"):
        fit = fit_case("carrots_slopes")
    assert fit.n_dropped == 3
    assert fit.nobs == 1233


# ------------------------------------------------------------------ reference levels
def test_unknown_reference_level(sleep):
    with pytest.raises(crossed.DataError, match="'999'") as info:
        crossed.lmer(FORMULA, sleep, reference={"Subject": "999"})
    assert "Subject" in str(info.value)


def test_unknown_reference_level_of_fixed_factor():
    df = crossed.load_dataset("exist_multi")
    with pytest.raises(crossed.DataError, match="'fr'") as info:
        crossed.lmer("delta ~ language + (1 | architecture)", df, reference={"language": "fr"})
    msg = str(info.value)
    assert "language" in msg and "en" in msg  # names the column and its levels


def test_reference_for_column_not_in_model(sleep):
    with pytest.raises(crossed.DataError, match="'colour'"):
        crossed.lmer(FORMULA, sleep, reference={"colour": "red"})


# ------------------------------------------------------------------ prediction
def test_predict_unknown_group_level_raises(sleep_fit):
    new = pd.DataFrame({"Days": [1, 2], "Subject": ["308", "999"]})
    with pytest.raises(crossed.DataError, match="'999'") as info:
        sleep_fit.predict(new)
    msg = str(info.value)
    assert "Subject" in msg and "allow_new_levels" in msg


def test_predict_allow_new_levels_gives_population_prediction(sleep_fit):
    new = pd.DataFrame({"Days": [1.0, 2.0], "Subject": ["308", "999"]})
    pred = sleep_fit.predict(new, allow_new_levels=True)
    beta = sleep_fit.fixef
    assert pred[1] == pytest.approx(beta["(Intercept)"] + 2.0 * beta["Days"], rel=1e-12)
    re_ = sleep_fit.ranef().query("group == 'Subject' and level == '308'").set_index("term")
    known = (beta["(Intercept)"] + re_.loc["(Intercept)", "estimate"]
             + 1.0 * (beta["Days"] + re_.loc["Days", "estimate"]))
    assert pred[0] == pytest.approx(known, rel=1e-12)


def test_predict_without_random_effects_ignores_unknown_levels(sleep_fit):
    new = pd.DataFrame({"Days": [3.0], "Subject": ["999"]})
    pred = sleep_fit.predict(new, include_random=False)
    assert pred[0] == pytest.approx(sleep_fit.fixef["(Intercept)"] + 3 * sleep_fit.fixef["Days"])
    # and the grouping column is not even needed
    assert sleep_fit.predict(new[["Days"]], include_random=False)[0] == pytest.approx(pred[0])


def test_predict_missing_column_is_named(sleep_fit):
    with pytest.raises(crossed.DataError, match="'Subject'"):
        sleep_fit.predict(pd.DataFrame({"Days": [1.0]}))


def test_predict_unknown_level_of_fixed_factor():
    df = crossed.load_dataset("exist_multi")
    fit = crossed.lmer("delta ~ language + (1 | architecture)", df)
    new = pd.DataFrame({"language": ["fr"], "architecture": ["bert"]})
    with pytest.raises(crossed.DataError, match="'fr'") as info:
        fit.predict(new)
    assert "language" in str(info.value)
    with pytest.raises(crossed.DataError, match="'fr'"):
        fit.predict(new, allow_new_levels=True)  # only grouping factors may be new


# ------------------------------------------------------------------ silently wrong predictions
# (issue 14 §2): each of these returned a number without a word before.
def test_predict_new_level_of_a_factor_made_in_the_formula(sleep):
    """C(Days) with Days = 99 was predicted as the reference level (formulaic only warns).

    R: predict(lmer(Reaction ~ factor(Days) + (1|Subject), d), data.frame(Days = 99,
    Subject = "308")) -> Error: factor factor(Days) has new level 99"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("Reaction ~ C(Days) + (1 | Subject)", sleep)
    new = pd.DataFrame({"Days": [99.0], "Subject": ["308"]})
    for include_random in (True, False):
        with pytest.raises(crossed.DataError, match=r"'C\(Days\)' has level.*99") as info:
            fit.predict(new, include_random=include_random)
        assert "not seen when fitting" in str(info.value)


@pytest.fixture(scope="module")
def both_fit():
    """A column both a fixed effect and part of a grouping factor: dataset."""
    rng = np.random.default_rng(3)
    rows = [(f"m{m}", f"d{d}", 80 + m + 2 * d + rng.normal())
            for m in range(6) for d in range(4) for _ in range(3)]
    data = pd.DataFrame(rows, columns=["model", "dataset", "score"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular
        return crossed.lmer("score ~ dataset + (1 | model) + (1 | model:dataset)", data)


@pytest.mark.parametrize("allow_new_levels", [False, True])
def test_predict_new_fixed_level_in_a_grouping_column(both_fit, allow_new_levels):
    """A new dataset was predicted as the intercept (81.367 in the issue) with
    allow_new_levels=True: the check skipped columns that are also grouping factors.
    R: predict(fit, data.frame(model = "m1", dataset = "d9"), allow.new.levels = TRUE)
    errors (the fixed-effect level is new)."""
    new = pd.DataFrame({"model": ["m1"], "dataset": ["d9"]})
    with pytest.raises(crossed.DataError, match="column 'dataset' has level 'd9'"):
        both_fit.predict(new, allow_new_levels=allow_new_levels)


def test_predict_new_group_with_known_fixed_level(both_fit):
    """A new model with a known dataset: population value of that dataset."""
    new = pd.DataFrame({"model": ["m9"], "dataset": ["d2"]})
    pred = both_fit.predict(new, allow_new_levels=True)
    assert pred[0] == pytest.approx(both_fit.fixef["(Intercept)"] + both_fit.fixef["datasetd2"])


# R: fit <- lmer(Reaction ~ Days + (1|Subject), sleepstudy)
#    predict(fit, data.frame(Days = 1, Subject = c(308, 308.0)))  # 302.656100648 (both)
#    predict(fit, data.frame(Days = 1, Subject = "308"))          # 302.656100648
@pytest.mark.parametrize("fitted_as", ["int", "str", "float"])
@pytest.mark.parametrize("value", [308, 308.0, "308", np.int64(308)])
def test_predict_grouping_level_matches_across_dtypes(sleep, fitted_as, value):
    """Fitted with int Subject, 308.0 was a 'new level' (the population value) with
    allow_new_levels=True. The same level as R sees it must match whatever the dtype."""
    subject = sleep["Subject"].astype(int).astype(fitted_as)
    fit = crossed.lmer("Reaction ~ Days + (1 | Subject)", sleep.assign(Subject=subject))
    new = pd.DataFrame({"Days": [1.0], "Subject": pd.Series([value], dtype=object)})
    pred = fit.predict(new, allow_new_levels=True)
    assert pred[0] == pytest.approx(302.656100648, rel=1e-7)
    assert fit.predict(new)[0] == pytest.approx(pred[0], rel=1e-12)


def test_predict_interaction_cell_is_matched_by_its_levels():
    """(1 | a:b) fitted on (x, y:z), (x, z), (x:y, y:z): the new cell (x:y, z) has the
    joined label 'x:y:z' of the fitted cell (x, y:z) and was predicted with its effect."""
    rng = np.random.default_rng(5)
    cells = [("x", "y:z"), ("x", "z"), ("x:y", "y:z")]
    rows = [(a, b, s, rng.normal() + 4.0 * (i == 0)) for i, (a, b) in enumerate(cells)
            for s in "pqrst"]
    data = pd.DataFrame(rows, columns=["a", "b", "s", "y"])
    fit = crossed.lmer("y ~ 1 + (1 | a:b) + (1 | s)", data)
    new = pd.DataFrame({"a": ["x:y", "x"], "b": ["z", "y:z"], "s": ["p", "p"]})
    with pytest.raises(crossed.DataError, match="b='z'"):
        fit.predict(new)
    pred = fit.predict(new, allow_new_levels=True)
    s_effect = fit.ranef().query("group == 's' and level == 'p'")["estimate"].iloc[0]
    cell = fit.ranef().query("group == 'a:b' and level == 'x:y:z'")["estimate"].iloc[0]
    assert pred[0] == pytest.approx(fit.fixef["(Intercept)"] + s_effect, rel=1e-12)
    assert pred[1] == pytest.approx(fit.fixef["(Intercept)"] + s_effect + cell, rel=1e-12)


# R: nd <- data.frame(Days = c(1, NA, 2, 3), Subject = factor(c("308", "308", NA, "999")))
#    predict(fit, nd[1:3, ])  # Error: NAs are not allowed in prediction data for grouping
#                             # variables unless allow.new.levels is TRUE
#    predict(fit, nd, allow.new.levels = TRUE)  # 273.3299 NA 272.3397 282.8070
#    (fit <- lmer(Reaction ~ Days + (Days|Subject), sleepstudy))
def test_predict_missing_values_like_lme4(sleep_fit):
    new = pd.DataFrame({"Days": [1.0, np.nan, 2.0, 3.0], "Subject": ["308", "308", None, "999"]})
    with pytest.raises(crossed.DataError, match="missing value of grouping factor 'Subject'"):
        sleep_fit.predict(new.iloc[:3])
    pred = sleep_fit.predict(new, allow_new_levels=True)
    assert np.isnan(pred[1])
    np.testing.assert_allclose(pred[[0, 2, 3]], [273.3299, 272.3397, 282.8070], atol=1e-3)


@pytest.mark.parametrize("days", [["three"], ["1"], pd.array(["1"], dtype="string"), [True]])
def test_predict_text_in_a_numeric_column_is_refused(sleep_fit, days):
    """R: variable 'Days' was fitted with type "numeric" but type "character" was supplied."""
    new = pd.DataFrame({"Days": days, "Subject": ["308"]})
    with pytest.raises(crossed.DataError, match="'Days' was numeric"):
        sleep_fit.predict(new)


def test_predict_numbers_of_any_numeric_dtype(sleep_fit):
    new = pd.DataFrame({"Days": [1.0, 2.0], "Subject": ["308", "308"]})
    expected = sleep_fit.predict(new)
    for days in (pd.array([1, 2], dtype="Int64"), np.array([1, 2], dtype="int8"),
                 pd.Series([1, 2.0], dtype=object)):
        np.testing.assert_allclose(sleep_fit.predict(new.assign(Days=days)), expected,
                                   rtol=1e-12)
    with_na = sleep_fit.predict(new.assign(Days=pd.array([1, pd.NA], dtype="Int64")))
    assert with_na[0] == pytest.approx(expected[0], rel=1e-12) and np.isnan(with_na[1])


@pytest.mark.parametrize("kw", [{"allow_new_levels": "yes"}, {"include_random": None}])
def test_predict_flags_must_be_booleans(sleep_fit, kw):
    new = pd.DataFrame({"Days": [1.0], "Subject": ["308"]})
    with pytest.raises(TypeError, match=next(iter(kw))):
        sleep_fit.predict(new, **kw)


# ------------------------------------------------------------------ lmer's arguments
@pytest.mark.parametrize("kw,error,culprit", [
    ({"reml": "FALSE"}, TypeError, "reml"),           # was fitted by REML ("FALSE" is truthy)
    ({"reml": None}, TypeError, "reml"),              # was fitted by ML
    ({"reml": 0}, TypeError, "reml"),
    ({"engine": None}, ValueError, "engine"),
    ({"engine": "Native"}, ValueError, "engine"),
    ({"na_action": None}, ValueError, "na_action"),
    ({"na_action": "pass"}, ValueError, "na_action"),
    ({"reference": ["Subject"]}, TypeError, "reference"),
    ({"reference": {"Subject": ["308"]}}, TypeError, "reference"),
    ({"reference": {"colour": "red"}}, crossed.DataError, "colour"),
    ({"reference": {"Subject": "999"}}, crossed.DataError, "999"),
    ({"control": {"optimizer": "bobyqa"}}, TypeError, "control"),
    ({"data_name": 3}, TypeError, "data_name"),
])
def test_lmer_arguments_are_validated(sleep, kw, error, culprit):
    with pytest.raises(error, match=culprit):
        crossed.lmer(FORMULA, sleep, **kw)


def test_lmer_formula_must_be_text(sleep):
    with pytest.raises(TypeError, match="formula must be a string"):
        crossed.lmer(None, sleep)


def test_lmer_accepts_numpy_booleans(sleep):
    fit = crossed.lmer(FORMULA, sleep, reml=np.bool_(False))
    assert fit.reml is False
    assert fit.deviance == pytest.approx(crossed.lmer(FORMULA, sleep, reml=False).deviance)


def test_refit_reml_must_be_a_boolean(sleep_fit):
    with pytest.raises(TypeError, match="reml"):
        sleep_fit.refit(reml="FALSE")
    assert sleep_fit.refit(reml=np.bool_(False)).reml is False
