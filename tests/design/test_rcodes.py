"""R's coding of interactions without their margins (design/rcodes.py).

lme4's coefficients, for the record (R 4.2.2, lme4 1.1-31; ``rcodes.csv`` is 240 rows of
random f1 (a, b, c), f2 (u, v), g (12 levels), x and y)::

    d <- read.csv("tests/data/rcodes.csv", stringsAsFactors = TRUE)
    round(fixef(lmer(y ~ f1:f2 + x + (1 | g), d)), 5)   # drops f1c:f2v
    #  (Intercept) x       f1a:f2u  f1b:f2u  f1c:f2u  f1a:f2v  f1b:f2v
    #  0.48511     0.28791 -0.69806 -0.02394 -0.52438 -0.17445 0.44599
    round(fixef(lmer(y ~ f1 + f1:f2 + (1 | g), d)), 5)
    #  (Intercept) f1b     f1c     f1a:f2v f1b:f2v f1c:f2v
    #  -0.16189    0.59541 0.14839 0.40774 0.45621 0.39442
    round(fixef(lmer(y ~ x:f1:f2 + (1 | g), d)), 5)
    #  (Intercept) x:f1a:f2u x:f1b:f2u x:f1c:f2u x:f1a:f2v x:f1b:f2v x:f1c:f2v
    #  0.33320     0.05881   0.07854   0.26417   0.63466   0.48146   0.05739
    round(fixef(lmer(y ~ 0 + f1:f2 + (1 | g), d)), 5)
    #  f1a:f2u  f1b:f2u f1c:f2u f1a:f2v f1b:f2v f1c:f2v
    #  -0.16189 0.43352 -0.01350 0.24585 0.88973 0.38092
    REMLcrit of the four: 703.522, 716.1286, 724.1177, 716.1286
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import crossed
from crossed.design.rcodes import full_coded_column, r_codes

DATA = Path(__file__).resolve().parents[1] / "data"

LME4 = {
    "y ~ f1:f2 + x + (1 | g)": (703.522, {
        "(Intercept)": 0.48511, "x": 0.28791, "f1a:f2u": -0.69806, "f1b:f2u": -0.02394,
        "f1c:f2u": -0.52438, "f1a:f2v": -0.17445, "f1b:f2v": 0.44599}),
    "y ~ f1 + f1:f2 + (1 | g)": (716.1286, {
        "(Intercept)": -0.16189, "f1b": 0.59541, "f1c": 0.14839, "f1a:f2v": 0.40774,
        "f1b:f2v": 0.45621, "f1c:f2v": 0.39442}),
    "y ~ x:f1:f2 + (1 | g)": (724.1177, {
        "(Intercept)": 0.33320, "x:f1a:f2u": 0.05881, "x:f1b:f2u": 0.07854,
        "x:f1c:f2u": 0.26417, "x:f1a:f2v": 0.63466, "x:f1b:f2v": 0.48146,
        "x:f1c:f2v": 0.05739}),
    "y ~ 0 + f1:f2 + (1 | g)": (716.1286, {
        "f1a:f2u": -0.16189, "f1b:f2u": 0.43352, "f1c:f2u": -0.01350, "f1a:f2v": 0.24585,
        "f1b:f2v": 0.88973, "f1c:f2v": 0.38092}),
}


@pytest.mark.parametrize("formula", list(LME4))
def test_coefficients_are_lme4s(formula):
    d = pd.read_csv(DATA / "rcodes.csv", dtype={"f1": str, "f2": str, "g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(formula, d)
    crit, coefs = LME4[formula]
    assert fit.deviance == pytest.approx(crit, abs=1e-3)
    assert list(fit.fixef.index) == list(coefs)  # R's columns, in R's order
    for name, value in coefs.items():
        assert fit.fixef[name] == pytest.approx(value, abs=2e-5), name


def test_the_dropped_cell_is_reported():
    d = pd.read_csv(DATA / "rcodes.csv", dtype={"f1": str, "f2": str, "g": str})
    with pytest.warns(UserWarning, match="dropping 1 column / coefficient: f1c:f2v"):
        crossed.lmer("y ~ f1:f2 + x + (1 | g)", d)


F = {"f1", "f2", "f3"}


@pytest.mark.parametrize(("terms", "intercept", "expected"), [
    # main effects: contrasts with an intercept, the first by indicators without one
    ([("f1",), ("f2",)], True, [{"f1": 1}, {"f2": 1}]),
    ([("f1",), ("f2",)], False, [{"f1": 2}, {"f2": 1}]),
    # an interaction without margins: every factor by indicators
    ([("x",), ("f1", "f2")], True, [{"x": 1}, {"f1": 2, "f2": 2}]),
    # one margin present: the other factor by contrasts
    ([("f2",), ("f1", "f2")], True, [{"f2": 1}, {"f1": 1, "f2": 2}]),
    # the full hierarchy: contrasts everywhere
    ([("f1",), ("f2",), ("f1", "f2")], True, [{"f1": 1}, {"f2": 1}, {"f1": 1, "f2": 1}]),
    # contained in an earlier term, not equal to one (R's TermCode: a subset)
    ([("f1", "f2"), ("f1", "f2", "f3")], True,
     [{"f1": 2, "f2": 2}, {"f1": 2, "f2": 2, "f3": 1}]),
    # x in x:f where f is absent: indicators (numeric: the same column)
    ([("f1",), ("x", "f2")], True, [{"f1": 1}, {"x": 2, "f2": 2}]),
])
def test_r_codes(terms, intercept, expected):
    assert r_codes(terms, F, intercept) == expected


@pytest.mark.parametrize(("expr", "column"), [
    ("C(f1, spans_intercept=False)", "f1"),
    ("C(`my f`, spans_intercept=False)", "my f"),
    ("C(f1)", None),
    ("f1", None),
])
def test_full_coded_column(expr, column):
    assert full_coded_column(expr) == column


# R's names and term labels (R 4.2.2, lme4 1.1-31): the variables of a term in the order
# they first appear in the formula
#   names(fixef(lmer(y ~ x + f1:x + (1 | g), d)))    # (Intercept) x x:f1b x:f1c
#   attr(terms(y ~ x + f1:x), "term.labels")          # x x:f1
@pytest.mark.parametrize(("formula", "names", "labels"), [
    ("y ~ x + f1:x + (1 | g)", ["(Intercept)", "x", "x:f1b", "x:f1c"], ["x", "x:f1"]),
    ("y ~ f2 + f1:f2 + (1 | g)",
     ["(Intercept)", "f2v", "f2u:f1b", "f2v:f1b", "f2u:f1c", "f2v:f1c"], ["f2", "f2:f1"]),
    ("y ~ f2 * f1 + (1 | g)",
     ["(Intercept)", "f2v", "f1b", "f1c", "f2v:f1b", "f2v:f1c"], ["f2", "f1", "f2:f1"]),
    ("y ~ f1:f2 + f2 + (1 | g)",
     ["(Intercept)", "f2v", "f1b:f2u", "f1c:f2u", "f1b:f2v", "f1c:f2v"], ["f2", "f1:f2"]),
    ("y ~ x * f1 + (1 | g)",
     ["(Intercept)", "x", "f1b", "f1c", "x:f1b", "x:f1c"], ["x", "f1", "x:f1"]),
    ("y ~ f1 * x + (1 | g)",
     ["(Intercept)", "f1b", "f1c", "x", "f1b:x", "f1c:x"], ["f1", "x", "f1:x"]),
])
def test_names_and_labels_are_rs(formula, names, labels):
    d = pd.read_csv(DATA / "rcodes.csv", dtype={"f1": str, "f2": str, "g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(formula, d)
    assert list(fit.fixef.index) == names
    assert list(fit.design.fixed.term_labels) == ["(Intercept)", *labels]
