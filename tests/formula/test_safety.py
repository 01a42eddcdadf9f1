"""The allow-list of what a formula may evaluate (issue 14, section 4).

Each hostile formula must be refused with a FormulaError naming the expression, before
anything is evaluated: the exploits here write a file under tmp_path, and the file must not
exist afterwards. The entry points (API, CLI, named specifications) are in
tests/test_untrusted_formulas.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crossed as cx
from crossed.formula import FormulaError, parse
from crossed.formula.safety import (
    _parsed_factors,
    _plain_lookups,
    check_expression,
    expression_names,
)


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    g = np.repeat([f"s{i}" for i in range(8)], 6)
    x = np.tile(np.arange(1.0, 7.0), 8)
    y = 2 + 0.5 * x + rng.normal(size=len(g)) + np.repeat(rng.normal(size=8), 6)
    return pd.DataFrame({"y": y, "x": x, "g": g, "f": np.where(x > 3, "hi", "lo")})


def hostile(path) -> list[str]:
    """Expressions that, evaluated, would write ``path``."""
    p = str(path)
    return [
        f"I(x.to_csv('{p}'))",
        f"I(np.savetxt('{p}', x))",
        f"np.log(x.to_csv('{p}'))",
        f"I(np.lib._npyio_impl.os.system('touch {p}'))",
        f"I(__import__('os').system('touch {p}'))",
        f"{{x.to_csv('{p}')}}",
        f"I(open('{p}', 'w'))",
        f"I((lambda: x.to_csv('{p}'))())",
        f"I([x.to_csv('{p}') for _ in [0]][0])",
        f"I(getattr(x, 'to_csv')('{p}'))",
        f"poly(x.to_csv('{p}'), 2)",
        f"C(f, levels=x.to_csv('{p}'))",
        f"C(f, contr.treatment(x.to_csv('{p}')))",
        f"scale(x, center=x.to_csv('{p}'))",
        f"Q(x.to_csv('{p}'))",
    ]


@pytest.mark.parametrize("i", range(len(hostile("p"))))
def test_hostile_expressions_are_refused_before_evaluation(tmp_path, i):
    target = tmp_path / "pwned"
    expr = hostile(target)[i]
    data = _data()
    for formula in (f"y ~ {expr} + (1 | g)", f"y ~ x + ({expr} | g)",
                    f"{expr} ~ x + (1 | g)"):
        with pytest.raises(FormulaError) as err:
            cx.lmer(formula, data)
        assert "refused" in str(err.value) or "cannot parse" in str(err.value)
        assert "trusted=True" in str(err.value) or "cannot parse" in str(err.value)
    assert not target.exists()


def test_the_error_names_the_expression_and_where_it_is():
    with pytest.raises(FormulaError) as err:
        parse("y ~ x + I(x.to_csv('out.csv')) + (1 | g)")
    msg = str(err.value)
    assert "I(x.to_csv('out.csv'))" in msg and "x.to_csv" in msg
    assert err.value.position == "y ~ x + I(x.to_csv('out.csv')) + (1 | g)".index("x.to_csv")


@pytest.mark.parametrize("expr", [
    "x.values",  # attribute access on a column: no dotted column x.values
    "np.lib",
    "np.log(x, out=x)",
    "np.log(x, x)",
    "x[0]",
    "I(x if x else 0)",
    "I(x and x)",
    "{x ^ 2}",  # formulaic's Python block: ^ would be XOR (in I(x^2) the grammar gives **)
    "I('text')",
    "C(f, contr.custom)",
    "round(x, x)",
    "I(10 ** 10 ** 10)",  # would hang in Python's integers
    "I(2 ** 100000)",
    "poly(x, 1000000)",
    "poly(x, degree=2.5)",
])
def test_off_the_list_is_refused(expr):
    data = _data()
    with pytest.raises((FormulaError, cx.DataError)):
        cx.lmer(f"y ~ {expr} + (1 | g)", data)


@pytest.mark.parametrize("formula", [
    "y ~ x + I(x^2) + (1 | g)",
    "y ~ x + I(x ** 2) + I(x * 2 - 1 / x) + (1 | g)",
    "y ~ np.log(x) + log1p(x) + (1 | g)",
    "y ~ log(x) + log2(x) + log10(x) + (1 | g)",
    "y ~ np.sqrt(x) + sqrt(x + 1) + abs(x - 3) + (1 | g)",
    "y ~ np.exp(x / 10) + exp(x / 5) + (1 | g)",
    "y ~ np.square(x) + np.power(x, 3) + (1 | g)",
    "y ~ round(x / 3) + np.round(x / 2, decimals=1) + (1 | g)",
    "y ~ scale(x) + (1 | g)",
    "y ~ center(x) + (1 | g)",
    "y ~ poly(x, 2) + (1 | g)",
    "y ~ poly(x, degree=3, raw=True) + (1 | g)",
    "y ~ C(f) + (1 | g)",
    "y ~ C(f, contr.sum) + (1 | g)",
    "y ~ C(f, contr.treatment('lo')) + (1 | g)",
    "y ~ C(f, levels=['lo', 'hi']) + (1 | g)",
    "y ~ C(f, Treatment('lo')) + C(f, Sum) + (1 | g)",
    "y ~ I(x > 3) + (1 | g)",
    "y ~ I(-x) + I(x % 2) + (1 | g)",
    "y ~ Q('x') + (1 | g)",
    "y ~ I(x * np.pi) + (1 | g)",
    "y ~ I(2 ** x) + I(x ** -1) + I(10 ** 3 * x) + (1 | g)",
    "np.log(y + 10) ~ x + (1 | g)",
    "y ~ x + (1 + scale(x) | g)",
])
def test_allowed_expressions_fit(formula):
    fit = cx.lmer(formula, _data())
    assert np.all(np.isfinite(fit.beta))


def test_trusted_evaluates_arbitrary_python():
    data = _data()
    formula = "y ~ I(x.clip(2, 5)) + (1 | g)"
    with pytest.raises(FormulaError):
        cx.lmer(formula, data)
    fit = cx.lmer(formula, data, trusted=True)
    ref = cx.lmer("y ~ clipped + (1 | g)", data.assign(clipped=data["x"].clip(2, 5)))
    np.testing.assert_allclose(fit.beta, ref.beta, rtol=1e-8)
    assert fit.spec.trusted and not ref.spec.trusted


def test_a_hand_made_spec_is_checked_by_the_design_builder(tmp_path):
    from dataclasses import replace

    from crossed.design import build_design

    target = tmp_path / "pwned"
    spec = replace(parse("y ~ x + (1 | g)"), fixed=f"x + I(x.to_csv('{target}'))")
    with pytest.raises(FormulaError):
        build_design(spec, _data())
    assert not target.exists()


def test_dotted_names_are_columns_or_refused():
    data = _data().rename(columns={"x": "Informed.liking"})
    fit = cx.lmer("y ~ np.log(Informed.liking) + (1 | g)", data)
    assert fit.fixef_names[1] == "np.log(Informed.liking)"
    # at parse time a dotted name may be an R column name; the data decide
    parse("y ~ np.log(Days.values) + (1 | g)")
    with pytest.raises((FormulaError, cx.DataError), match="Days.values"):
        cx.lmer("y ~ np.log(Days.values) + (1 | g)", data.assign(Days=1.0))
    with pytest.raises(FormulaError, match="not a column"):
        check_expression("np.log(x.values)", columns={"x", "y"})


def test_expression_names_include_stateful_transform_arguments():
    # formulaic's required_variables leaves out the arguments of scale/center/poly
    assert expression_names("poly(x, 2) + scale(z) + center(w) + np.log(v) + f") == {
        "x", "z", "w", "v", "f"}
    assert expression_names("np.log(`my col` + 1) + Q('other col')") == {"my col",
                                                                         "other col"}
    assert expression_names("C(f, contr.sum)") == {"f"}


def _lookups_of_formulaic(text: str) -> set[str]:
    return {expr for kind, expr in _parsed_factors(text) if kind == "lookup"}


_NAMES = st.sampled_from(["x", "Days", "f", "g2", "_z", "ä", "größe", "日本", "model_name",
                          "I", "C", "np", "poly", "match", "x1"])
_TERMS = st.one_of(st.sampled_from(["0", "1"]),
                   st.lists(st.tuples(st.sampled_from([":", "*", " : ", " * "]), _NAMES),
                            max_size=3).flatmap(
                       lambda rest: _NAMES.map(lambda first: first + "".join(
                           op + n for op, n in rest))))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TERMS, st.sampled_from(["+", " + ", "  +\t"])), min_size=1,
                max_size=5))
def test_a_text_of_columns_has_formulaics_lookups_without_formulaic(parts):
    """The check's shortcut for a text of columns (no formulaic): formulaic parses it without
    error and finds the same columns, each a lookup (which the check lets through)."""
    text = parts[0][0] + "".join(sep + term for term, sep in parts[1:])
    found = _plain_lookups(text)
    assert found is not None
    assert {kind for kind, _ in found} <= {"lookup"}
    assert {expr for _, expr in found} == _lookups_of_formulaic(text)


@pytest.mark.parametrize("text", [
    "x - 1", "-1 + x", "a:1", "a * 1", "x + 2", "01 + x", "I(x)", "np.log(x)", "a.b",
    "`a b`", "lambda + x", "x + None", "+x", "x +", "", "(a + b):c", "a^2", "a / b",
    "a %in% b", "x²", "Q('x')",
])
def test_anything_but_columns_goes_to_formulaics_parser(text):
    assert _plain_lookups(text) is None
