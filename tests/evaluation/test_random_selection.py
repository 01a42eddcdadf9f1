"""cx.select_random: backward selection of the random-effects structure (issue 33).

Every model of a step is also fitted by lme4 1.1-31 in R
(tests/data/reference/selection/selection.R, its ``lrt`` section: REML fits for the LMMs,
the Laplace likelihood for the GLMM); crossed's −2 log-likelihood of each step's model and
the LRT statistics must equal R's to 1e-4 (the criteria agree to ~1e-6 relative, as the
optimisers' tolerances allow), and the decisions follow from them.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.evaluation.random_selection import (
    STEP_COLUMNS,
    RandomSelection,
    select_random,
)
from crossed.formula import parse

HERE = Path(__file__).resolve().parents[1]
REF = json.loads((HERE / "data/reference/selection/selection.json").read_text())["lrt"]
BLURB = ("score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset)"
         " + (1 | model:dataset) + (0 + seed + lr + batch_size + num_epochs || model:dataset)")


def _carrots() -> pd.DataFrame:
    d = pd.read_csv(HERE / "data/carrots.csv")
    for c in ("Consumer", "Product", "Homesize"):
        d[c] = d[c].astype(str)
    return d


def _quiet(*args, **kwargs) -> RandomSelection:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_random(*args, **kwargs)


@pytest.fixture(scope="module")
def blurb() -> pd.DataFrame:
    return cx.load_dataset("blurb_like")


def test_sleepstudy_lrt_matches_lme4() -> None:
    sel = _quiet("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"))
    s = sel.steps
    assert list(s.columns) == STEP_COLUMNS
    np.testing.assert_allclose(s.criterion, REF["sleepstudy"], atol=1e-4, rtol=0)
    r = np.array(REF["sleepstudy"])
    np.testing.assert_allclose(s.statistic[1:], [r[1] - r[0], r[2] - r[1]], atol=1e-4)
    assert s.df[1:].tolist() == [1, 1]
    assert s.decision.tolist() == [
        "start (maximal model)", "dropped the correlations of (1 + Days | Subject)",
        "kept the slope of Days in (1 + Days || Subject)"]
    assert s.test[1:].tolist() == ["LRT vs step 0", "LRT vs step 1"]
    assert sel.maximal == "Reaction ~ Days + (1 + Days | Subject)"
    assert sel.formula == "Reaction ~ Days + (1 + Days || Subject)"
    assert sel.fit.reml and sel.reml
    assert isinstance(sel.fit, cx.LmerFit)


def test_two_grouping_factors_match_lme4() -> None:
    sel = _quiet("Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product)",
                 _carrots())
    s = sel.steps
    np.testing.assert_allclose(s.criterion, REF["carrots_two"], atol=1e-4, rtol=0)
    r = np.array(REF["carrots_two"])
    np.testing.assert_allclose(s.statistic[1:], [r[1] - r[0], r[2] - r[1], r[3] - r[1]],
                               atol=1e-4)
    # correlation dropped (p = .40 > .20); the slope (p = .006) and (1 | Product) kept
    assert [d.split(" ")[0] for d in s.decision[1:]] == ["dropped", "kept", "kept"]
    assert sel.formula.endswith("(1 + sens2 || Consumer) + (1 | Product)")


def test_glmm_lrt_matches_lme4() -> None:
    sel = _quiet("TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD) + (1 | LOCATION)",
                 cx.load_dataset("grouseticks"), family="poisson")
    r = REF["grouseticks"]
    s = sel.steps
    # R: of step 1's three candidates, dropping LOCATION raises -2 logLik least
    assert int(np.argmin(np.array(r[1:4]) - r[0])) == 0
    np.testing.assert_allclose(s.criterion, [r[0], r[1], r[4]], atol=1e-3, rtol=0)
    assert s.decision[1] == "dropped the random intercept (1 | LOCATION)"
    assert s.decision[2] == "kept the random intercept (1 | BROOD)"
    assert isinstance(sel.fit, cx.GlmerFit) and not sel.reml
    assert "Laplace" in sel.methods_sentence()


def test_decisions_follow_the_rule(blurb: pd.DataFrame) -> None:
    lrt = _quiet(BLURB, blurb, strategy="lrt")
    for row in lrt.steps.iloc[1:].itertuples():
        assert row.decision.startswith("dropped") == (row.p_value > 0.2)
    aic = _quiet(BLURB, blurb, strategy="aic")
    for row in aic.steps.iloc[1:].itertuples():
        assert row.decision.startswith("dropped") == (row.statistic <= 0)
    # each step's formula is a model crossed parses to the same terms
    for m in lrt.steps.model:
        assert parse(m).to_formula() == m


def test_maximal_converging_keeps_the_first_clean_fit(blurb: pd.DataFrame) -> None:
    sel = _quiet(BLURB, blurb, strategy="maximal-converging")
    s = sel.steps
    clean = (s.converged & ~s.singular).to_numpy()
    assert s.singular[0]  # the tutorial's maximal model is singular
    assert clean[-1] and not clean[:-1].any()
    assert sel.formula == s.model.iloc[-1]
    assert not sel.fit.is_singular and sel.fit.converged
    # the dropped slope each time holds the column with the least variance: seed first
    # (one seed indicator's variance is 0 in the maximal fit)
    assert "slope of seed" in s.decision[1]


def test_repca_strategy_ends_without_empty_dimensions(blurb: pd.DataFrame) -> None:
    from crossed.inference.repca import deficient_groups

    sel = _quiet(BLURB, blurb, strategy="rePCA")
    assert deficient_groups(sel.fit.rePCA()) == []
    assert all(t.startswith("rePCA of step") for t in sel.steps.test[1:])
    assert (sel.steps.statistic[1:] < 1e-4).all()


def test_maximal_from_the_design() -> None:
    sel = _quiet("Reaction ~ Days + (1 | Subject)", cx.load_dataset("sleepstudy"),
                 maximal="design")
    assert sel.maximal == "Reaction ~ Days + (1 + Days | Subject)"
    # Homesize is a consumer's attribute (constant within Consumer): not a slope; sens2 is
    sel = _quiet("Preference ~ sens2 + Homesize + (1 | Consumer)", _carrots(),
                 maximal="design", strategy="maximal-converging")
    assert sel.maximal == "Preference ~ sens2 + Homesize + (1 + sens2 | Consumer)"


def test_methods_sentence_carries_the_table_numbers() -> None:
    sel = _quiet("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"))
    text = sel.methods_sentence()
    assert text.startswith("The random-effects structure was selected by backward "
                           "likelihood-ratio tests on REML fits (α = .20")
    assert "from the maximal model (1 + Days | Subject)" in text
    found = re.findall(r"χ²\((\d+)\) = ([0-9.]+), p ([=<]) (\.\d+)", text)
    assert len(found) == 2
    for (df, chi, op, p), row in zip(found, sel.steps.iloc[1:].itertuples(), strict=True):
        assert int(df) == row.df and float(chi) == round(row.statistic, 2)
        if op == "<":
            assert p == ".001" and row.p_value < 0.001
        else:
            assert float(p) == round(row.p_value, 3)
    assert text.endswith("The final random-effects structure was (1 + Days || Subject).")
    assert "Final model" in repr(sel) and "<table" in sel._repr_html_()


def test_bad_input_is_named() -> None:
    d = cx.load_dataset("sleepstudy")
    with pytest.raises(ValueError, match="unknown strategy 'bic'"):
        select_random("Reaction ~ Days + (1 | Subject)", d, strategy="bic")
    with pytest.raises(ValueError, match="no random terms"):
        select_random("Reaction ~ Days", d)
    with pytest.raises(ValueError, match="maximal must be"):
        select_random("Reaction ~ Days + (1 | Subject)", d, maximal="full")
    with pytest.raises(ValueError, match="alpha"):
        select_random("Reaction ~ Days + (1 | Subject)", d, alpha=1.5)
    with pytest.raises(ValueError, match=r"maximal model built from the design.*"
                                         r"\(1 \+ period \| herd\)"):
        select_random("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                      cx.load_dataset("cbpp"), family="binomial", maximal="design")


def test_the_last_random_term_is_never_dropped() -> None:
    sel = _quiet("Reaction ~ Days + (1 | Subject)", cx.load_dataset("sleepstudy"),
                 strategy="aic")
    assert len(sel.steps) == 1 and sel.formula == "Reaction ~ Days + (1 | Subject)"
    assert "no reduction was needed" in sel.methods_sentence()


def test_candidates_hold_every_reduction_tried() -> None:
    """At step 1 of grouseticks the three intercepts are each tried; the step's row is the
    candidate with the largest p, and R's criteria of all three agree."""
    sel = _quiet("TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD) + (1 | LOCATION)",
                 cx.load_dataset("grouseticks"), family="poisson")
    c = sel.candidates
    first = c[c.step == 1]
    assert len(first) == 3 and first.chosen.sum() == 1
    r = REF["grouseticks"]
    by_name = dict(zip(first.reduction, first.criterion, strict=True))
    np.testing.assert_allclose(
        [by_name["the random intercept (1 | LOCATION)"],
         by_name["the random intercept (1 | BROOD)"],
         by_name["the random intercept (1 | INDEX)"]], r[1:4], atol=1e-3, rtol=0)
    second = c[c.step == 2]
    by_name = dict(zip(second.reduction, second.criterion, strict=True))
    np.testing.assert_allclose([by_name["the random intercept (1 | BROOD)"],
                                by_name["the random intercept (1 | INDEX)"]], r[4:6],
                               atol=1e-3, rtol=0)
    chosen = first[first.chosen].iloc[0]
    assert chosen.p_value == first.p_value.max()
    assert chosen.model == sel.steps.model[1]
    # the other strategies fit one model per step
    d = cx.load_dataset("sleepstudy")
    assert _quiet("Reaction ~ Days + (Days | Subject)", d,
                  strategy="maximal-converging").candidates.empty


def test_a_factor_slope_is_one_term_of_its_bar(monkeypatch) -> None:
    """(1 + D3 | Subject) with D3 a 3-level factor: one droppable term D3 (its two
    columns), as formulaic's term structure gives it."""
    import crossed.design.fixed as fixed_mod
    from crossed.evaluation.random_selection import _structure

    data = pd.read_csv(HERE / "data/sleepstudy.csv")
    data["Subject"] = data["Subject"].astype(str)
    data["D3"] = pd.cut(data["Days"], [-1, 2, 5, 9], labels=["a", "b", "c"]).astype(str)
    spec = parse("Reaction ~ Days + (1 + Days + D3 | Subject)")
    direct = _structure(spec, data)
    with monkeypatch.context() as m:
        m.setattr(fixed_mod, "_coded_columns", lambda rhs, frame: None)
        general = _structure(spec, data)
    assert direct == general
    assert [t.text for t in direct[0].terms] == ["Days", "D3"]
