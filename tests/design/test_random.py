"""Random-effects design: lme4's term order, theta's names and layout, grouping-factor names.

lme4 (``mkReTrms``) keeps the terms in formula order (``/`` expanded as ``b:a`` then ``a``,
``||`` split into one term per column) unless some term has more levels than the one
before it; then it orders them by ``rev(order(nlevels))``, which puts tied terms in reverse
formula order. R's answers: tests/data/reference/extra/extra.json (extra.R beside it).
Tolerances as in the conformance suite: criterion 1e-6 relative, theta 1e-3 relative + 1e-4.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design import build_design
from crossed.formula import parse
from reference import as_array, as_list, extra_table, load_table, read_csv


def _fit(entry: dict) -> crossed.LmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(entry["formula"], extra_table(entry), reml=entry["reml"],
                            reference=entry.get("relevel"))


def _check_against_r(fit, r):
    assert list(fit.theta_names) == as_list(r["theta_names"])
    assert list(fit.ngroups.items()) == list(r["ngrps"].items())
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert fit.deviance <= r["deviance"] + 1e-6 * abs(r["deviance"])
    np.testing.assert_allclose(fit.theta, as_array(r["theta"]), rtol=1e-3, atol=1e-4)
    assert fit.is_singular is bool(r["singular"])


ORDER_CASES = [
    # (1|g1) + (1|g3), 5 and 5 levels: no reordering
    "order_tie",
    # 5, 10, 5 levels: rev(order(nl)) -> g2, g3, g1 (the tie g1/g3 reversed)
    "order_untied",
    # (1|g1) + (x|g2) + (1|g4) + (1|g3): 5, 10, 5, 5 -> g2, g3, g4, g1
    "order_mixed",
    # (x||g1) + (1|g2): g1.(Intercept), g1.x, g2 = 5, 5, 10 -> g2, g1.x, g1.(Intercept)
    "order_zerocorr",
    # (1|g2) + (0+x|g2) + (1|g1): 10, 10, 5 never increases: formula order
    "order_same_factor",
    # (x|g2) + (1|g1) + (1|g3): 10, 5, 5: formula order
    "order_decreasing",
    # (1 | architecture/model) on exist_mono: model:architecture (6), architecture (3)
    "nested_exist_mono",
    # (1 | batch:cask) + (1 | batch)
    "interaction_group",
]


@pytest.mark.parametrize("name", ORDER_CASES)
def test_theta_order_and_names_match_lme4(extra, name):
    r = extra[name]
    _check_against_r(_fit(r), r)


def test_nested_terms_with_tied_levels_keep_lme4_order(extra):
    r = extra["nested_tied"]
    fit = _fit(r)
    assert list(fit.theta_names) == as_list(r["theta_names"])
    assert list(fit.ngroups) == list(r["ngrps"])


def test_three_level_nesting_names(extra):
    r = extra["nested_three"]
    fit = _fit(r)
    assert list(fit.theta_names) == as_list(r["theta_names"])
    assert list(fit.ngroups) == list(r["ngrps"])


def test_three_level_nesting_values(extra):
    """Names aside, the three-level nested fit is lme4's (104, 25 and 5 levels).

    lme4's default stopping leaves theta[0] at 0.108489 on this flat criterion (2.2e-3 from
    the tightly converged 0.108243, tight_nested_three); crossed follows lme4's path (its
    moment-based start for random intercepts and its stopping rule) to the same point.
    """
    r, tight = extra["nested_three"], extra["tight_nested_three"]
    fit = _fit(r)
    assert list(fit.ngroups.values()) == list(r["ngrps"].values())
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert fit.deviance <= r["deviance"] + 1e-6 * abs(r["deviance"])
    assert fit.deviance == pytest.approx(tight["deviance"], rel=1e-6)
    np.testing.assert_allclose(fit.theta, as_array(r["theta"]), rtol=1e-4)


def test_theta_layout_of_correlated_term():
    """(1 + Days | Subject): theta is the lower triangle of the 2x2 factor, column-wise."""
    ss = load_table("sleepstudy.csv", ("Subject",))
    fit = crossed.lmer("Reaction ~ Days + (Days | Subject)", ss)
    assert fit.theta_names == ("Subject.(Intercept)", "Subject.Days.(Intercept)", "Subject.Days")
    t = fit.theta
    L = np.array([[t[0], 0.0], [t[1], t[2]]])
    S = fit.sigma**2 * L @ L.T
    vc = fit.varcorr()
    np.testing.assert_allclose(vc["variance_or_cov"].iloc[:3], [S[0, 0], S[1, 1], S[1, 0]],
                               rtol=1e-10)
    # lower bounds: 0 on the diagonal, -inf off it; start at 1/0 (lme4's defaults)
    rd = fit.design.random
    assert list(rd.theta_lower) == [0.0, -np.inf, 0.0]
    assert list(rd.theta_start()) == [1.0, 0.0, 1.0]


def test_interaction_grouping_levels_are_observed_combinations():
    """(1 | a:b) has one level per observed combination (R's interaction with drop)."""
    pastes = load_table("Pastes.csv", ("batch", "cask", "sample"))
    sub = pastes[~((pastes["batch"] == "A") & (pastes["cask"] == "a"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("strength ~ 1 + (1 | cask:batch) + (1 | batch)", sub)
    assert fit.ngroups == {"cask:batch": 29, "batch": 10}
    levels = fit.ranef().query("group == 'cask:batch'")["level"].tolist()
    assert "a:A" not in levels and levels[0] == "a:B"  # first factor varies slowest


def test_group_factor_levels_from_numbers_and_categoricals():
    """A numeric grouping column is a factor of its values; a Categorical keeps its order."""
    ss = load_table("sleepstudy.csv", ("Subject",))
    num = ss.assign(Subject=ss["Subject"].astype(int))
    a = crossed.lmer("Reaction ~ Days + (1 | Subject)", ss)
    b = crossed.lmer("Reaction ~ Days + (1 | Subject)", num)
    assert a.deviance == pytest.approx(b.deviance, rel=1e-12)
    assert b.ngroups == {"Subject": 18}
    order = sorted(ss["Subject"].unique(), reverse=True)
    cat = ss.assign(Subject=pd.Categorical(ss["Subject"], categories=order))
    c = crossed.lmer("Reaction ~ Days + (1 | Subject)", cat)
    assert c.ranef()["level"].astype(str).tolist() == order
    assert c.deviance == pytest.approx(a.deviance, rel=1e-12)


# R (lme4 1.1-31): the theta lme4 starts BOBYQA from
#   start <- function(f, d) {lf <- lFormula(f, d); environment(do.call(mkLmerDevfun, lf))$pp$theta}
#   start(diameter ~ 1 + (1|plate) + (1|sample), Penicillin)   # 1.74491502214429 3.59401348179836
#   start(strength ~ 1 + (1|batch/cask), Pastes)               # 1 1 (var(y) < sum of v_f)
#   start(Reaction ~ Days + (1|Subject) + (0+Days|Subject), sleepstudy)  # 1 1 (shared factor)
@pytest.mark.parametrize("table,formula,factors,expected", [
    ("Penicillin.csv", "diameter ~ 1 + (1|plate) + (1|sample)", ("plate", "sample"),
     [1.74491502214429, 3.59401348179836]),
    ("Pastes.csv", "strength ~ 1 + (1|batch/cask)", ("batch", "cask"), [1.0, 1.0]),
    ("sleepstudy.csv", "Reaction ~ Days + (1|Subject) + (0+Days|Subject)", ("Subject",),
     [1.0, 1.0]),
    ("sleepstudy.csv", "Reaction ~ Days + (Days|Subject)", ("Subject",), [1.0, 0.0, 1.0]),
])
def test_theta_start_is_lme4s(table, formula, factors, expected):
    """Random intercepts on distinct factors start from lme4's moment estimates
    sqrt(var(ave(y, f)) / (var(y) - Σ var(ave(y, f)))); otherwise from 1 (0 off-diagonal)."""
    fit = crossed.lmer(formula, load_table(table, factors))
    np.testing.assert_allclose(fit.opt.theta_start, expected, rtol=1e-12)
    assert list(fit.design.random.theta_start()) == [1.0 if e != 0 else 0.0 for e in expected]


# ------------------------------------------------------------------ levels with ':' (issue 14)
def _colon_table(cells=(("x", "y:z"), ("x", "z"), ("x:y", "y:z"), ("x:y", "z"))):
    rng = np.random.default_rng(5)
    rows = [(a, b, s, rng.normal() + 3.0 * i) for i, (a, b) in enumerate(cells)
            for s in "pqrst"]
    return pd.DataFrame(rows, columns=["a", "b", "s", "y"])


def test_interaction_cells_with_the_same_label_are_refused():
    """a in {x, x:y}, b in {y:z, z}: (x, y:z) and (x:y, z) would both print 'x:y:z'.

    R: levels(factor(c("x","x","x:y","x:y")):factor(c("y:z","z","y:z","z"))) is
    "x:y:z" "x:z" "x:y:y:z" "x:y:z" (a duplicated level, which predict() cannot tell apart).
    Before: two levels labelled 'x:y:z' and predict() used the first for both."""
    with pytest.raises(crossed.DataError, match="two cells labelled 'x:y:z'") as info:
        crossed.lmer("y ~ 1 + (1 | a:b) + (1 | s)", _colon_table())
    msg = str(info.value)
    assert "a='x', b='y:z'" in msg and "a='x:y', b='z'" in msg and "'a:b'" in msg


def test_interaction_levels_are_keyed_by_their_cells():
    fit = crossed.lmer("y ~ 1 + (1 | a:b) + (1 | s)",
                       _colon_table((("x", "y:z"), ("x", "z"), ("x:y", "y:z"))))
    blk = next(b for b in fit.design.random.blocks if b.group == "a:b")
    assert set(blk.keys) == {("x", "y:z"), ("x", "z"), ("x:y", "y:z")}
    assert [":".join(k) for k in blk.keys] == list(blk.levels)


def test_unique_codes_by_counting_match_numpy_unique():
    from crossed.design.random import _unique_codes

    rng = np.random.default_rng(7)
    for size in (1, 5, 300, 5000, 10**7):
        key = rng.integers(0, size, size=2000)
        uniq, codes = _unique_codes(key, float(size))
        u_ref, c_ref = np.unique(key, return_inverse=True)
        np.testing.assert_array_equal(uniq, u_ref)
        np.testing.assert_array_equal(codes, c_ref.reshape(-1))
        assert codes.dtype == np.int64


@pytest.mark.parametrize("formula, warned", [
    ("y ~ 1 + (x || g) + (1 | h)", True),
    ("y ~ 1 + (1 | g) + (0 + x | g) + (1 | h)", True),  # the same model written out
    ("y ~ 1 + (x | g) + (1 | h)", False),  # correlated: centred by the optimiser
    ("y ~ 1 + (xc || g) + (1 | h)", False),  # centred
    ("y ~ 1 + (0 + x | g) + (1 | h)", False),  # no intercept
])
def test_an_uncorrelated_intercept_beside_a_slope_far_from_zero_is_warned(formula, warned):
    """x a year (2000 ± 10, tests/data/yearx_uncorrelated.csv): the uncorrelated
    intercept's variance is the spread at x = 0. The design says so, naming the term and
    the column; a correlated term, a centred column or no intercept are not warned."""
    d = read_csv(Path(__file__).resolve().parents[1] / "data" / "yearx_uncorrelated.csv",
                 dtype={"g": str, "h": str})
    d["xc"] = d["x"] - d["x"].mean()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        design = build_design(parse(formula), d)
    notes = [str(w.message) for w in caught if "far from 0" in str(w.message)]
    assert len(notes) == int(warned)
    # the fit's messages keep it (summary() shows them)
    assert [m for m in design.messages() if "far from 0" in m] == notes
    if warned:
        assert "intercept on 'g' is uncorrelated with the slope on 'x'" in notes[0]
        assert "Centre 'x'" in notes[0]


def test_a_random_slope_of_a_one_level_factor_is_refused_not_dropped():
    # before: (h | g) with a one-level h was silently (1 | g)
    rng = np.random.default_rng(4)
    d = pd.DataFrame({"x": rng.normal(size=40), "h": "only", "g": np.repeat(list("abcde"), 8),
                      "y": rng.normal(size=40)})
    with pytest.raises(crossed.DataError, match="factor 'h' has a single level \\('only'\\) "
                                                "in the rows used"):
        crossed.lmer("y ~ x + (h | g)", d)


@pytest.mark.parametrize("formula", ["y ~ 1 + (1 | g)", "y ~ x + (x | g)", "y ~ x + (0 + x | g)"])
def test_column_stats_are_each_columns_mean_and_sd(formula):
    """``ReBlock.column_stats``: per column of Z whether it is all ones, its mean and its
    population SD (intercepts alone: 1 and 0 without passes over Z, the same values)."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"g": rng.integers(0, 6, 50).astype(str), "x": rng.normal(3, 2, 50),
                       "y": rng.normal(size=50)})
    blk = build_design(parse(formula), df).random.blocks[0]
    ones, mean, sd = blk.column_stats
    np.testing.assert_array_equal(ones, np.all(blk.Z == 1.0, axis=0))
    np.testing.assert_array_equal(mean, blk.Z.mean(axis=0))
    np.testing.assert_array_equal(sd, blk.Z.std(axis=0))


@pytest.mark.parametrize("values", [
    np.array([309, 308, 310, 308, 331, 309], dtype=np.int64),
    np.array([-3, 7, 0, -3, 2**62, 7], dtype=np.int64),
    np.array([5, 1, 5, 2], dtype=np.uint8),
    np.array([2**63 + 5, 3, 2**63 + 5], dtype=np.uint64),
    np.array([4], dtype=np.int32),
])
def test_whole_number_groups_are_coded_as_their_categorical(values):
    """An ID column of whole numbers is coded without a pd.Categorical: the codes and R
    labels of the Categorical route, bitwise."""
    from crossed.design.frame import level_label
    from crossed.design.random import _factor_labels

    codes, labels = _factor_labels(values, "id")
    cat = pd.Categorical(values)
    np.testing.assert_array_equal(codes, cat.codes.astype(np.int64))
    assert codes.dtype == np.int64
    assert labels == [level_label(v) for v in cat.categories.tolist()]


@pytest.mark.parametrize("kind", ["int", "negative", "uint8", "str", "colon", "float",
                                  "merged floats", "bool", "object", "categorical"])
def test_one_grouping_column_is_coded_as_the_interaction_path_codes_it(kind):
    """One grouping column's codes and levels (the direct route) are those of the
    general route over factor columns: each occurring value's R label once, in R's order,
    labels merged where R prints them alike."""
    from crossed.design.random import _factor_labels, _unique_codes, group_codes

    rng = np.random.default_rng(4)
    values = {
        "int": rng.integers(300, 420, 400), "negative": rng.integers(-5, 5, 400),
        "uint8": rng.integers(0, 7, 400).astype(np.uint8),
        "str": rng.choice(["b", "a", "10", "9"], 400), "colon": rng.choice(["x:y", "x"], 400),
        "float": rng.choice([0.5, 2.0, 1e-20, -3.25], 400),
        "merged floats": rng.choice([0.1 + 0.2, 0.3, 1.0], 400),
        "bool": rng.random(400) < 0.5,
        "object": np.array(rng.choice(["u", "v"], 400), dtype=object),
        "categorical": pd.Categorical(rng.choice(["p", "q"], 400),
                                      categories=["q", "p", "unused"]),
    }[kind]
    frame = pd.DataFrame({"g": values})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        codes, levels, keys = group_codes(frame, ("g",))
        c, labels = _factor_labels(frame["g"].array, "g")
    present, position = _unique_codes(c, len(labels))
    assert keys == ()
    assert levels == tuple(np.asarray(labels, dtype=object)[present].tolist())
    np.testing.assert_array_equal(codes, position)
    assert codes.dtype == np.int64 and len(set(levels)) == len(levels)
    assert np.bincount(codes).all()


def test_theta_start_is_lmes_moment_start_when_every_term_is_an_intercept():
    """lme4's ``mkLmerDevfun``: with v_f = var(ave(y, f)) per grouping factor and
    v_e = var(y) - Σ v_f, θ starts at sqrt(v_f / v_e) when every term is an intercept on a
    factor of its own and v_e > 0; else at 1 on the diagonal and 0 off it. Written out
    here with pandas' group means (R's ``ave``) and R's n - 1 variance; the design keeps
    the codes, counts and divisors it reads (computed once)."""
    rng = np.random.default_rng(7)
    n = 3000
    df = pd.DataFrame({"g": rng.integers(0, 12, n).astype(str),
                       "h": rng.integers(0, 5, n).astype(str), "x": rng.normal(size=n)})
    df["y"] = (rng.normal(size=12)[df["g"].astype(int)] + 0.5 * rng.normal(size=5)[
        df["h"].astype(int)] + rng.normal(size=n))
    rd = build_design(parse("y ~ x + (1 | g) + (1 | h) + (1 | g:h)"), df).random
    y = df["y"].to_numpy()
    factors = {"g": df["g"], "h": df["h"], "g:h": df["g"] + ":" + df["h"]}
    v = np.array([np.var(df.groupby(factors[t.group])["y"].transform("mean"), ddof=1)
                  for t in rd.terms])
    v_e = np.var(y, ddof=1) - v.sum()
    assert v_e > 0
    np.testing.assert_allclose(rd.theta_start(y), np.sqrt(v / v_e), rtol=1e-12)
    np.testing.assert_array_equal(rd.theta_start(y), rd.theta_start(y.copy()))  # (kept)
    assert list(rd.theta_start()) == [1.0, 1.0, 1.0]  # no response: the defaults
    # the factors' spread exceeds var(y): v_e <= 0, the defaults
    tight = np.where(df["g"].astype(int) < 6, 10.0, -10.0)
    assert list(rd.theta_start(tight)) == [1.0, 1.0, 1.0]
    # a slope: the defaults (lme4 starts from moments only for intercepts)
    slope = build_design(parse("y ~ x + (1 + x | g)"), df).random
    assert list(slope.theta_start(y)) == [1.0, 0.0, 1.0]
