"""Fixed-effects design: lme4's column names, term order, reference levels, rank deficiency.

R's answers: tests/data/reference/extra/extra.json (computed by extra.R beside it, lme4
1.1-31). Tolerances as in the conformance suite: criterion 1e-6 relative (never worse than
lme4's), fixed effects 1e-6 relative with the floor 1e-6 SE_R.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design.fixed import independent_columns
from reference import as_array, as_list, extra_table, load_table


def _fit(entry: dict, **kw) -> crossed.LmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(entry["formula"], extra_table(entry), reml=entry["reml"], **kw)


def _check_fixef(fit, r):
    assert list(fit.fixef.index) == as_list(r["fixef_names"])
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert fit.deviance <= r["deviance"] + 1e-6 * abs(r["deviance"])
    est, se = as_array(r["fixef"]), as_array(r["se"])
    tol = 1e-6 * np.maximum(np.abs(est), se)
    assert np.all(np.abs(fit.fixef.to_numpy() - est) <= tol), (fit.fixef.to_numpy(), est)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov)), se, rtol=1e-4)


# ------------------------------------------------------------------ names and term order
@pytest.mark.parametrize("name", [
    "fixed_three_way",         # mode * task * language: names follow the formula's factor order
    "fixed_term_order",        # language:task + mode + language + task: by interaction degree
    "fixed_zero_plus_factor",  # 0 + language + task: full dummy coding of the first factor
])
def test_names_order_and_values_match_lme4(extra, name):
    r = extra[name]
    _check_fixef(_fit(r), r)


def test_lme4_names_exist_multi():
    df = crossed.load_dataset("exist_multi")
    fit = crossed.lmer("delta ~ language * task * mode + (1 | architecture)", df)
    assert list(fit.fixef.index) == [
        "(Intercept)", "languagees", "taskt2", "taskt3", "modesoft", "languagees:taskt2",
        "languagees:taskt3", "languagees:modesoft", "taskt2:modesoft", "taskt3:modesoft",
        "languagees:taskt2:modesoft", "languagees:taskt3:modesoft"]
    assert fit.design.fixed.term_labels == (
        "(Intercept)", "language", "task", "mode", "language:task", "language:mode",
        "task:mode", "language:task:mode")


def test_interaction_without_main_effects_matches_lme4(extra):
    r = extra["fixed_interaction_only"]
    fit = _fit(r)
    assert list(fit.fixef.index) == as_list(r["fixef_names"])
    assert list(fit.design.fixed.dropped) == as_list(r["dropped"])
    np.testing.assert_allclose(fit.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov_beta)), as_array(r["se"]), rtol=1e-5)


def test_interaction_without_main_effects_same_model(extra):
    """Whatever the coding, the column space and so the fit are R's."""
    r = extra["fixed_interaction_only"]
    fit = _fit(r)
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert len(fit.fixef) == len(as_list(r["fixef_names"]))


def test_numeric_and_string_columns():
    """Numbers are covariates; strings (even of digits) are factors with R's level order."""
    ss = load_table("sleepstudy.csv", ("Subject",))
    ss["day_str"] = ss["Days"].astype(str)
    fit = crossed.lmer("Reaction ~ day_str + (1 | Subject)", ss)
    # R's sort of character levels: "0" first, then "1", ..., "9"
    assert list(fit.fixef.index) == ["(Intercept)"] + [f"day_str{i}" for i in range(1, 10)]
    ss["day_pad"] = ss["Days"].map(lambda d: str(d + 8))  # "8", "9", "10", ..., "17"
    fit = crossed.lmer("Reaction ~ day_pad + (1 | Subject)", ss)
    # character sort: "10" < "11" < ... < "17" < "8" < "9" (R's factor() on strings)
    assert fit.fixef.index[1] == "day_pad11"
    assert list(fit.fixef.index)[-2:] == ["day_pad8", "day_pad9"]


def test_boolean_column_is_a_factor_named_like_r():
    ss = load_table("sleepstudy.csv", ("Subject",))
    ss["late"] = ss["Days"] >= 5
    fit = crossed.lmer("Reaction ~ late + (1 | Subject)", ss)
    assert list(fit.fixef.index) == ["(Intercept)", "lateTRUE"]


def test_mixed_case_levels_sort_like_r():
    """R (English locale) sorts case-insensitively: 'mBERT' between 'Glot500' and 'XLM-R'."""
    ner = crossed.load_dataset("ner_like")
    fit = crossed.lmer("f1 ~ model + (1 | language)", ner)
    assert list(fit.fixef.index) == [
        "(Intercept)", "modelGlot500 (i)", "modelmBERT (c)", "modelmBERT (i)", "modelXLM-R (c)",
        "modelXLM-R (i)"]


# ------------------------------------------------------------------ reference levels
def test_reference_argument_matches_relevel(extra):
    r = extra["reference_relevel"]  # relevel(language, "es"), relevel(task, "t2")
    fit = _fit(r, reference={"language": "es", "task": "t2"})
    _check_fixef(fit, r)
    assert list(fit.fixef.index) == ["(Intercept)", "languageen", "taskt1", "taskt3",
                                     "languageen:taskt1", "languageen:taskt3"]


def test_categorical_order_matches_factor_levels(extra):
    r = extra["reference_levels"]  # factor(task, levels = c("t3", "t1", "t2")), language es, en
    fit = _fit(r)
    _check_fixef(fit, r)
    assert fit.fixef.index[2] == "taskt1"


def test_reference_overrides_categorical_order():
    df = crossed.load_dataset("exist_multi")
    df["task"] = pd.Categorical(df["task"], categories=["t3", "t1", "t2"])
    fit = crossed.lmer("delta ~ task + (1 | architecture)", df, reference={"task": "t2"})
    assert list(fit.fixef.index) == ["(Intercept)", "taskt3", "taskt1"]


def test_unused_categories_are_dropped():
    df = crossed.load_dataset("exist_multi")
    df["task"] = pd.Categorical(df["task"], categories=["t0", "t1", "t2", "t3"])
    fit = crossed.lmer("delta ~ task + (1 | architecture)", df)
    assert list(fit.fixef.index) == ["(Intercept)", "taskt2", "taskt3"]


def test_reference_changes_parameterisation_not_fit():
    df = crossed.load_dataset("exist_multi")
    a = crossed.lmer("delta ~ language * task + (1 | architecture)", df)
    b = crossed.lmer("delta ~ language * task + (1 | architecture)", df,
                     reference={"task": "t3"})
    assert a.deviance == pytest.approx(b.deviance, rel=1e-9)
    # the same optimum up to where lme4's stopping rule (xtol_rel 1e-4) leaves BOBYQA
    np.testing.assert_allclose(a.fitted(), b.fitted(), rtol=1e-7)
    assert a.fixef["(Intercept)"] != pytest.approx(b.fixef["(Intercept)"])


def test_reference_level_given_as_number_for_string_column():
    """blurb_like's seed is a string column; reference={"seed": 59} means level "59"."""
    df = crossed.load_dataset("blurb_like")
    fit = crossed.lmer("score ~ seed + (1 | model)", df, reference={"seed": 59})
    assert list(fit.fixef.index) == ["(Intercept)", "seed20", "seed47"]


# ------------------------------------------------------------------ rank deficiency
@pytest.mark.parametrize("name,dropped", [
    ("rank_days2", ["Days2"]),  # Days2 = 2 Days
    # model is nested in architecture (one model per architecture in exist_multi)
    ("rank_nested_fixed", ["modeldistilbert-base-multilingual-cased", "modelxlm-roberta-base"]),
    # exist_multi without the language = es, task = t3 cell
    ("rank_missing_cell", ["languagees:taskt3"]),
])
def test_rank_deficient_columns_dropped_like_lme4(extra, name, dropped):
    r = extra[name]
    assert as_list(r["dropped"]) == dropped  # what lme4 dropped
    assert any("rank deficient" in m for m in as_list(r["messages"]))
    with pytest.warns(UserWarning, match="rank deficient") as rec:
        fit = crossed.lmer(r["formula"], extra_table(r), reml=r["reml"])
    msg = " ".join(str(w.message) for w in rec if "rank deficient" in str(w.message))
    for col in dropped:
        assert col in msg  # the warning names the dropped columns
    assert f"dropping {len(dropped)} column" in msg
    assert list(fit.design.fixed.dropped) == dropped
    assert any(all(c in m for c in dropped) for m in fit.messages)
    _check_fixef(fit, r)
    assert fit.fixef.index.intersection(dropped).empty
    assert fit.vcov.shape == (len(fit.fixef), len(fit.fixef))


def test_full_rank_design_drops_nothing():
    df = crossed.load_dataset("exist_multi")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = crossed.lmer("delta ~ language * task * mode + (1 | architecture)", df)
    assert fit.design.fixed.dropped == ()
    assert not any("rank" in m for m in fit.messages)


def test_a_column_collinear_beside_a_year_is_dropped_under_every_kernel():
    """z = 2x − 3999 (to rounding: relative residual 1e-12) beside x ≈ 2000, fuzzed: lme4
    drops z from ``y ~ x*z``. The Gram-matrix shortcut read the rounding noise of the
    Cholesky pivot of z as a residual of 1.2e-4 under the SkylakeX kernel (3.3e-5 under
    Haswell) and kept z, with estimates of 1e15 and a criterion 57 below the other
    kernel's; pivots under ``GRAM_PIVOT_MIN`` now take the QR route (CI runs both kernels).
    """
    d = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "collinear_year_rank.csv.gz")
    X = np.column_stack([np.ones(len(d)), d.x, d.z, d.x * d.z])
    assert independent_columns(X).tolist() == [True, True, False, True]
    assert independent_columns(np.asfortranarray(X[:, :3])).tolist() == [True, True, False]


@pytest.mark.parametrize(("formula", "reference"), [
    ("y ~ trt + (1 | g)", {"trt": "a"}),  # formulaic left trt__label__x out: 2 columns, not 3
    ("y ~ 0 + trt + (1 | g)", None),  # (no intercept: every level needs its column)
    ("y ~ 1 + (0 + trt | g)", None),  # the same in a random term
    ("y ~ 1 + (1 + trt | g)", None),  # (coded without formulaic: refused there too)
])
def test_level_starting_with_two_underscores_is_rejected(formula, reference):
    # formulaic 1.2 skips fields starting with "__" when it names the indicator columns, so
    # a level "__label__x" (fastText's labels) lost its column and its rows were silently
    # counted in the reference level (found by tests/engines/test_engine_properties.py)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": rng.normal(size=40),
                       "trt": np.array(["a", "__label__x", "b"], dtype=object)[np.arange(40) % 3],
                       "g": np.array(["__g1", "g2", "g3", "g4"])[np.arange(40) % 4]})
    with pytest.raises(crossed.DataError, match=r"level '__label__x' of factor 'trt' starts with"):
        crossed.lmer(formula, df, reference=reference)
    # grouping factors do not go through formulaic: their "__" levels are fine
    fit = crossed.lmer("y ~ 1 + (1 | g)", df)
    assert "__g1" in fit.ranef()["level"].tolist()


@pytest.mark.parametrize("formula", [
    "y ~ x + h + (1 | g)", "y ~ f * h + (1 | g)", "y ~ f + C(h) + (1 | g)",
    "y ~ 0 + h + (1 | g)", "y ~ x:h + (1 | g)",
])
def test_a_one_level_factor_is_refused_not_dropped(formula):
    # before: the term vanished from the fit without a word (or, without an intercept,
    # became it). R 4.2 / lme4 1.1-31 stop on each of these formulas: "contrasts can be
    # applied only to factors with 2 or more levels"
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"x": rng.normal(size=40), "f": np.resize(["a", "b"], 40),
                      "h": "only", "g": np.repeat(list("abcde"), 8),
                      "y": rng.normal(size=40)})
    with pytest.raises(crossed.DataError,
                       match="factor 'h' has a single level \\('only'\\) in the rows used"):
        crossed.lmer(formula, d)
    d["k"] = (d["y"] > 0).astype(int)
    with pytest.raises(crossed.DataError, match="factor 'h' has a single level"):
        crossed.glmer(formula.replace("y ~", "k ~"), d, family="binomial")


def test_a_one_level_factor_left_by_dropped_rows_is_named():
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"f": np.resize(["a", "b"], 40), "g": np.repeat(list("abcde"), 8),
                      "y": rng.normal(size=40)})
    d.loc[d["f"] == "b", "y"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(crossed.DataError, match="factor 'f' has a single level \\('a'\\)"):
            crossed.lmer("y ~ f + (1 | g)", d)


def test_a_numeric_column_made_a_one_level_factor_has_no_column():
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"k": 1.0, "g": np.repeat(list("abcde"), 8), "y": rng.normal(size=40)})
    with pytest.raises(crossed.DataError, match="the fixed term 'C\\(k\\)' has no column"):
        crossed.lmer("y ~ C(k) + (1 | g)", d)
