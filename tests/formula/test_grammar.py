"""lme4 formula grammar: parsing into a ModelSpec, expansion rules and syntax errors (issue 2).

Table-driven: each row is a formula and what ``crossed.parse`` must make of it. The fits at
the end check that the expansions mean what lme4 (or, for ``||`` with a factor, afex's
``expand_re``) means, against R's numbers in tests/data/reference/extra/extra.json.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crossed
from crossed.formula import RandomTermSpec
from reference import as_array, as_list, explained_by_optimum, load_table


def T(expr, factors, name=None, uncorrelated=False):  # noqa: N802 - table shorthand
    factors = tuple(factors.split(",")) if isinstance(factors, str) else tuple(factors)
    return RandomTermSpec(expr=expr, factors=factors, name=name or ":".join(factors),
                          uncorrelated=uncorrelated)


# ------------------------------------------------------------------ what parse() makes
PARSE_TABLE = [
    # formula, response, random terms
    ("y ~ x + (1 | g)", "y", [T("1", "g")]),
    ("y~x+(1|g)", "y", [T("1", "g")]),
    ("y ~ (1 | g) + x", "y", [T("1", "g")]),
    ("y ~ x + (1 + x | g)", "y", [T("1 + x", "g")]),
    ("y ~ x + (x | g)", "y", [T("x", "g")]),
    ("y ~ x + (0 + x | g)", "y", [T("0 + x", "g")]),
    ("y ~ x + (x || g)", "y", [T("x", "g", uncorrelated=True)]),
    ("y ~ x + (1 + x || g)", "y", [T("1 + x", "g", uncorrelated=True)]),
    # nesting, as lme4's findbars expands it: (1 | a/b) -> (1 | b:a) + (1 | a), innermost
    # first; three levels are named c:(b:a)
    ("y ~ 1 + (1 | a/b)", "y", [T("1", "b,a", "b:a"), T("1", "a")]),
    ("y ~ 1 + (1 | batch/cask)", "y", [T("1", "cask,batch", "cask:batch"), T("1", "batch")]),
    ("y ~ 1 + (1 | a/b/c)", "y", [T("1", "c,b,a", "c:(b:a)"), T("1", "b,a"), T("1", "a")]),
    ("y ~ x + (x | a/b)", "y", [T("x", "b,a", "b:a"), T("x", "a")]),
    # interaction grouping
    ("y ~ 1 + (1 | a:b)", "y", [T("1", "a,b", "a:b")]),
    ("y ~ 1 + (1 | model:dataset)", "y", [T("1", "model,dataset", "model:dataset")]),
    # several terms on one grouping factor, in formula order
    ("y ~ x + (1 | g) + (0 + x | g)", "y", [T("1", "g"), T("0 + x", "g")]),
    ("y ~ x + (1 | g) + (x || g) + (1 | h)", "y",
     [T("1", "g"), T("x", "g", uncorrelated=True), T("1", "h")]),
    # the CCMEM of the reference cases
    ("score ~ seed + lr + (1 | model) + (1 | dataset) + (1 | model:dataset)", "score",
     [T("1", "model"), T("1", "dataset"), T("1", "model,dataset")]),
    # response expressions and dotted names (R's Informed.liking)
    ("np.log(y) ~ x + (1 | g)", "np.log(y)", [T("1", "g")]),
    ("Informed.liking ~ Product + (1 | Consumer)", "Informed.liking", [T("1", "Consumer")]),
    # a number with an exponent is not a '-' between terms
    ("y ~ I(x * 1e-5) + (1 | g)", "y", [T("1", "g")]),
]


@pytest.mark.parametrize("formula,response,random", PARSE_TABLE, ids=[r[0] for r in PARSE_TABLE])
def test_parse_random_terms(formula, response, random):
    spec = crossed.parse(formula)
    assert isinstance(spec, crossed.ModelSpec)
    assert spec.formula == formula
    assert spec.response == response
    assert list(spec.random) == random


FIXED_TABLE = [
    # formula, fixed part must build these lme4 names (checked on a small table)
    ("y ~ x + (1 | g)", ["(Intercept)", "x"]),
    ("y ~ 1 + (1 | g)", ["(Intercept)"]),
    ("y ~ (1 | g)", ["(Intercept)"]),
    ("y ~ 0 + x + (1 | g)", ["x"]),
    ("y ~ x - 1 + (1 | g)", ["x"]),
    ("y ~ -1 + x + (1 | g)", ["x"]),
    ("y ~ x + (1 | g) - 1", ["x"]),
    ("y ~ f + (1 | g)", ["(Intercept)", "fb", "fc"]),
    ("y ~ 0 + f + (1 | g)", ["fa", "fb", "fc"]),
    ("y ~ x * f + (1 | g)", ["(Intercept)", "x", "fb", "fc", "x:fb", "x:fc"]),
    ("y ~ f:x + (1 | g)", ["(Intercept)", "fa:x", "fb:x", "fc:x"]),
    ("y ~ I(x * 2) + (1 | g)", ["(Intercept)", "I(x * 2)"]),
    ("y ~ x + I(x ** 2) + (1 | g)", ["(Intercept)", "x", "I(x ** 2)"]),
    ("y ~ np.log(z) + (1 | g)", ["(Intercept)", "np.log(z)"]),
    ("y ~ log(z) + (1 | g)", ["(Intercept)", "log(z)"]),
    ("y ~ x + z + x:z + (1 | g)", ["(Intercept)", "x", "z", "x:z"]),
]


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    n = 60
    import pandas as pd

    return pd.DataFrame({
        "y": rng.normal(size=n), "x": rng.normal(size=n), "z": rng.uniform(1, 2, size=n),
        "f": np.tile(["a", "b", "c"], n // 3), "g": np.repeat([f"g{i}" for i in range(6)], 10),
        "h": np.tile([f"h{i}" for i in range(4)], n // 4),
    })


@pytest.mark.parametrize("formula,names", FIXED_TABLE, ids=[r[0] for r in FIXED_TABLE])
def test_fixed_part_names(small, formula, names):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # singular fits on random data are fine here
        fit = crossed.lmer(formula, small)
    assert list(fit.fixef.index) == names


def test_reference_is_recorded_in_spec():
    spec = crossed.parse("y ~ f + (1 | g)", reference={"f": "b"})
    assert spec.reference_levels == {"f": "b"}
    assert crossed.parse("y ~ f + (1 | g)").reference_levels == {}


def test_spec_is_immutable():
    spec = crossed.parse("y ~ x + (1 | g)")
    with pytest.raises(AttributeError):
        spec.response = "z"
    with pytest.raises(AttributeError):
        spec.random[0].name = "h"


def test_group_factors():
    spec = crossed.parse("y ~ x + (1 | a/b) + (1 | c:a) + (x || d)")
    assert spec.group_factors == ("b", "a", "c", "d")


# ------------------------------------------------------------------ syntax errors
ERROR_TABLE = [
    # formula, position, words the message must contain
    ("y ~ x + (1 | g", 8, "')'"),                       # unbalanced: unclosed '('
    ("y ~ x + (1 | g))", 15, "unmatched"),              # unbalanced: extra ')'
    ("y ~ x + 1 | g)", 13, "unmatched"),
    ("y x + (1 | g)", 0, "'~'"),                        # missing ~
    ("~ x + (1 | g)", 0, "response"),
    ("y ~ ", 4, "after '~'"),
    ("y ~ x ~ z + (1 | g)", 6, "'~'"),
    ("y ~ x + (1 | )", 12, "grouping factor"),          # empty group
    ("y ~ x + (1 || )", 13, "grouping factor"),
    ("y ~ x + ( | g)", 9, "expression"),                # empty expression
    ("y ~ x | g", 6, "parentheses"),                    # '|' outside parentheses
    ("y ~ x + 1 | g + (1 | h)", 10, "parentheses"),
    ("y ~ x + [1 | g]", 11, "parentheses"),
    ("y ~ x + (1 | g + h)", 15, "grouping factor"),     # bad grouping expressions
    ("y ~ x + (1 | f(g))", 13, "grouping factor"),
    ("y ~ x + (1 | 3g)", 13, "grouping factor"),
    ("y ~ x + (1 | g:)", 12, "grouping factor"),
    ("y ~ x + (1 | a//b)", 12, "grouping factor"),
    ("y ~ x + (x | g | h)", 14, "'|'"),
    ("y ~ x + (1 | g) - (1 | h)", 18, "subtracted"),
    ("y ~ x +", 7, "term"),
    ("", 0, "empty"),
]


@pytest.mark.parametrize("formula,position,words", ERROR_TABLE,
                         ids=[r[0] or "<empty>" for r in ERROR_TABLE])
def test_syntax_errors(formula, position, words):
    with pytest.raises(crossed.FormulaError) as info:
        crossed.parse(formula)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.position == position, str(err)
    msg = str(err)
    assert words in msg
    assert f"position {position}" in msg
    # the message repeats the formula with a caret under the position
    lines = msg.splitlines()
    assert lines[-2] == "  " + formula
    assert lines[-1] == "  " + " " * position + "^"


def test_syntax_error_raised_by_lmer(small):
    with pytest.raises(crossed.FormulaError, match="position 8"):
        crossed.lmer("y ~ x + (1 | g", small)


def test_space_inside_group_is_an_error():
    with pytest.raises(crossed.FormulaError):
        crossed.parse("y ~ x + (1 | g h)")


def test_extra_parentheses_around_random_term():
    assert list(crossed.parse("y ~ x + ((1 | g))").random) == [T("1", "g")]


# ------------------------------------------------------------------ meaning of the expansions
def _fit(formula, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, data, **kw)


def test_nesting_equals_explicit_terms():
    pastes = load_table("Pastes.csv", ("batch", "cask", "sample"))
    a = _fit("strength ~ 1 + (1 | batch/cask)", pastes)
    b = _fit("strength ~ 1 + (1 | batch) + (1 | cask:batch)", pastes)
    assert a.deviance == pytest.approx(b.deviance, rel=1e-10)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6)
    assert a.theta_names == b.theta_names == ("cask:batch.(Intercept)", "batch.(Intercept)")
    assert a.ngroups == {"cask:batch": 30, "batch": 10}


def test_several_terms_on_one_factor_equal_double_bar(extra):
    ss = load_table("sleepstudy.csv", ("Subject",))
    a = _fit("Reaction ~ Days + (Days || Subject)", ss)
    b = _fit("Reaction ~ Days + (1 | Subject) + (0 + Days | Subject)", ss)
    assert a.deviance == pytest.approx(b.deviance, rel=1e-10)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6)
    assert a.theta_names == b.theta_names == ("Subject.(Intercept)", "Subject.Days")


def _ham_with_indicators():
    ham = load_table("ham.csv", ("Consumer", "Product", "Information", "Gender"))
    for lv in ("1", "2", "3", "4"):
        ham[f"P{lv}"] = (ham["Product"] == lv).astype(float)
    return ham


def test_double_bar_with_factor_gives_one_variance_per_indicator(extra):
    """(1 + Product || Consumer) = (1 + P2 + P3 + P4 || Consumer), afex's expand_re."""
    ham = _ham_with_indicators()
    a = _fit("Informed.liking ~ Product + (1 + Product || Consumer)", ham)
    b = _fit("Informed.liking ~ Product + (1 + P2 + P3 + P4 || Consumer)", ham)
    assert len(a.theta) == 4  # one independent variance per model-matrix column
    assert a.theta_names == ("Consumer.(Intercept)", "Consumer.Product2", "Consumer.Product3",
                             "Consumer.Product4")
    assert a.deviance == pytest.approx(b.deviance, rel=1e-10)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(a.fixef.to_numpy(), b.fixef.to_numpy(), rtol=1e-8)
    va, vb = a.varcorr(), b.varcorr()
    assert list(va["term2"].isna()) == [True] * len(va)  # no covariances
    np.testing.assert_allclose(va["variance_or_cov"], vb["variance_or_cov"], rtol=1e-6, atol=1e-10)
    # and R's fit of the explicit expansion
    r = extra["zerocorr_factor_explicit"]
    assert a.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert a.deviance <= r["deviance"] + 1e-6 * abs(r["deviance"])
    np.testing.assert_allclose(a.theta, as_array(r["theta"]), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(a.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6)
    # lme4's own (1 + Product || Consumer) keeps Product's columns correlated (11 theta):
    # crossed deliberately differs
    assert len(as_list(extra["zerocorr_factor_lme4"]["theta_names"])) == 11


def test_double_bar_with_factor_no_intercept():
    ham = _ham_with_indicators()
    a = _fit("Informed.liking ~ Product + (0 + Product || Consumer)", ham)
    b = _fit("Informed.liking ~ Product + (0 + P1 + P2 + P3 + P4 || Consumer)", ham)
    assert a.theta_names == tuple(f"Consumer.Product{i}" for i in range(1, 5))
    assert a.deviance == pytest.approx(b.deviance, rel=1e-10)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6, atol=1e-8)


def test_single_bar_with_factor_is_correlated():
    ham = _ham_with_indicators()
    a = _fit("Informed.liking ~ Product + (0 + Product | Consumer)", ham)
    assert len(a.theta) == 10  # 4 x 4 lower triangle


def test_I_and_numpy_functions_match_r(extra):
    ss = load_table("sleepstudy.csv", ("Subject",))
    r = extra["fixed_I_log"]  # log(Reaction) ~ Days + I(Days^2) + (1 | Subject)
    fit = _fit("np.log(Reaction) ~ Days + I(Days ** 2) + (1 | Subject)", ss)
    assert list(fit.fixef.index) == ["(Intercept)", "Days", "I(Days ** 2)"]
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    np.testing.assert_allclose(fit.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6)
    r = extra["fixed_log_pred"]  # Reaction ~ log(Days + 1) + (1 | Subject)
    for formula in ("Reaction ~ np.log(Days + 1) + (1 | Subject)",
                    "Reaction ~ log(Days + 1) + (1 | Subject)"):
        fit = _fit(formula, ss)
        assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
        np.testing.assert_allclose(fit.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6)
    assert list(fit.fixef.index) == as_list(r["fixef_names"])  # "log(Days + 1)"


def test_caret_in_I_is_power_or_an_error():
    ss = load_table("sleepstudy.csv", ("Subject",))
    try:
        fit = _fit("Reaction ~ Days + I(Days^2) + (1 | Subject)", ss)
    except (crossed.FormulaError, crossed.DataError) as exc:
        assert "**" in str(exc) or "power" in str(exc)
        return
    ref = _fit("Reaction ~ Days + I(Days ** 2) + (1 | Subject)", ss)
    assert fit.deviance == pytest.approx(ref.deviance, rel=1e-10)


@pytest.mark.parametrize("name,formula", [
    ("fixed_zero_plus", "Reaction ~ 0 + Days + (Days | Subject)"),
    ("fixed_minus_one", "Reaction ~ Days - 1 + (1 | Subject)"),
])
def test_no_intercept_names_and_criterion(extra, name, formula):
    ss = load_table("sleepstudy.csv", ("Subject",))
    r = extra[name]
    fit = _fit(formula, ss)
    assert list(fit.fixef.index) == as_list(r["fixef_names"]) == ["Days"]
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert fit.deviance <= r["deviance"] * (1 + 1e-6)
    assert list(fit.theta_names) == as_list(r["theta_names"])
    np.testing.assert_allclose(fit.theta, as_array(r["theta"]), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name,formula", [
    ("fixed_zero_plus", "Reaction ~ 0 + Days + (Days | Subject)"),
    ("fixed_minus_one", "Reaction ~ Days - 1 + (1 | Subject)"),
])
def test_no_intercept_fixef_matches_r(extra, name, formula):
    """Fixed effects 1e-6 relative, as in the conformance suite; on the flat criterion of
    ``0 + Days + (Days | Subject)`` (theta[0] = 9.87) a difference must come from where R's
    optimiser stopped (reference.explained_by_optimum)."""
    ss = load_table("sleepstudy.csv", ("Subject",))
    r = extra[name]
    fit = _fit(formula, ss)
    assert list(fit.fixef.index) == as_list(r["fixef_names"]) == ["Days"]
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    assert fit.deviance <= r["deviance"] * (1 + 1e-6)
    explained_by_optimum(fit, r, lambda f: np.testing.assert_allclose(
        f.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6))


def test_r_formula_verbatim_gives_r_fit(extra):
    """R's own spelling, log(Reaction) ~ Days + I(Days^2), fits R's model."""
    ss = load_table("sleepstudy.csv", ("Subject",))
    r = extra["fixed_I_log"]
    fit = _fit(r["formula"], ss)
    assert fit.deviance == pytest.approx(r["deviance"], rel=1e-6)
    np.testing.assert_allclose(fit.fixef.to_numpy(), as_array(r["fixef"]), rtol=1e-6)


def test_r_formula_verbatim_gives_r_names(extra):
    ss = load_table("sleepstudy.csv", ("Subject",))
    r = extra["fixed_I_log"]
    fit = _fit(r["formula"], ss)
    assert list(fit.fixef.index) == as_list(r["fixef_names"])


# ------------------------------------------------------------------ names as R writes them
@pytest.mark.parametrize("formula, factors, name", [
    ("y ~ x + (1 | `my group`)", ("my group",), "my group"),
    ("y ~ x + (1 | ` two  spaces `)", (" two  spaces ",), " two  spaces "),
    ("y ~ x + (1 | `a b`:c)", ("a b", "c"), "a b:c"),
    ("y ~ x + (1 | `a/b`)", ("a/b",), "a/b"),
    ("y ~ Días + (1 | Sujeto_ñ)", ("Sujeto_ñ",), "Sujeto_ñ"),
    ("y ~ x + (1 | 被试)", ("被试",), "被试"),
    ("y ~ x + (1 | .g)", (".g",), ".g"),
])
def test_group_names_as_r_accepts_them(formula, factors, name):
    # R: lmer(y ~ x + (1 | `my group`), d) and non-ASCII letters in names both work
    (term,) = crossed.parse(formula).random
    assert term.factors == factors and term.name == name


@pytest.mark.parametrize("formula", ["y ~ x + (1 | 1g)", "y ~ x + (1 | a b)",
                                     "y ~ x + (1 | g$)"])
def test_group_names_r_refuses(formula):
    with pytest.raises(crossed.FormulaError):
        crossed.parse(formula)


def test_spaces_and_non_ascii_names_fit_like_plain_ones():
    d = load_table("sleepstudy.csv", ("Subject",))
    plain = crossed.lmer("Reaction ~ Days + (Days | Subject)", d)
    d2 = d.rename(columns={"Subject": "my subject", "Days": "Días"})
    d2["Sujeto_ñ"] = d2["my subject"]
    for formula in ("Reaction ~ Días + (Días | `my subject`)",
                    "Reaction ~ `Días` + (1 + Días | Sujeto_ñ)"):
        fit = crossed.lmer(formula, d2)
        np.testing.assert_allclose(fit.beta, plain.beta, rtol=1e-6)
        np.testing.assert_allclose(fit.sigma, plain.sigma, rtol=1e-6)
        assert fit.fixef_names == ("(Intercept)", "Días")
    fit = crossed.lmer("Reaction ~ Días + (Días | `my subject`)", d2)
    assert set(fit.ranef()["group"]) == {"my subject"}
    assert fit.ngroups == {"my subject": 18}


def test_caret_in_the_response_is_a_power():
    # R: lmer(I(Reaction^2) ~ Days + (1 | Subject), sleepstudy) squares the response
    d = load_table("sleepstudy.csv", ("Subject",))
    fit = crossed.lmer("I(Reaction^2) ~ Days + (1 | Subject)", d)
    ref = crossed.lmer("R2 ~ Days + (1 | Subject)", d.assign(R2=d["Reaction"] ** 2))
    np.testing.assert_allclose(fit.beta, ref.beta, rtol=1e-8)


def test_non_ascii_dotted_names_inside_calls():
    d = load_table("sleepstudy.csv", ("Subject",)).rename(columns={"Days": "Días.n"})
    fit = crossed.lmer("Reaction ~ np.log(Días.n + 1) + (1 | Subject)", d)
    ref = crossed.lmer("Reaction ~ ld + (1 | Subject)", d.assign(ld=np.log(d["Días.n"] + 1)))
    np.testing.assert_allclose(fit.beta, ref.beta, rtol=1e-8)
    assert fit.fixef_names[1] == "np.log(Días.n + 1)"
