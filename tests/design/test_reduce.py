"""Reduced random-effects designs (the refits behind ranova) equal fits of reduced formulas."""

import warnings

import pytest

import crossed
from crossed.design.reduce import TermPiece, reduced_design
from crossed.engines import fit_with
from reference import load_table


def _fit(formula, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, data)


def test_drop_slope_equals_intercept_only_model():
    data = load_table("sleepstudy.csv", ("Subject",))
    full = _fit("Reaction ~ Days + (Days | Subject)", data)
    design = reduced_design(full.design, [TermPiece(0, (0,), "Subject")])
    assert design.random.theta_names == ("Subject.(Intercept)",)
    red = fit_with("native", design, reml=True, control=None)
    ref = _fit("Reaction ~ Days + (1 | Subject)", data)
    assert red.deviance == pytest.approx(ref.deviance, rel=1e-8)


def test_drop_a_crossed_term_and_add_an_intercept():
    data = load_table("Penicillin.csv", ("plate", "sample"))
    full = _fit("diameter ~ 1 + (1 | plate) + (1 | sample)", data)
    keep = [i for i, t in enumerate(full.design.random.terms) if t.group == "sample"]
    design = reduced_design(full.design, [TermPiece(keep[0], (0,), "sample"),
                                          TermPiece(-1, (0,), "plate")])
    red = fit_with("native", design, reml=True, control=None)
    assert red.deviance == pytest.approx(full.deviance, rel=1e-8)
    assert [t.group for t in design.random.terms] == ["plate", "sample"]
