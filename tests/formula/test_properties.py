"""Property tests of the formula grammar (issue 14, section 5).

- Random valid formulas parse, and the spec written back as a formula parses to the same
  spec (``parse(spec.to_formula())``).
- Random invalid ones (garbage, truncated valid formulas, unbalanced parentheses, bad
  operators) raise FormulaError, and building a design from whatever parses raises
  FormulaError or DataError: never another exception type, never a message with terminal
  escape codes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crossed
from crossed.design import DataError, build_design
from crossed.formula import FormulaError

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

NUMERIC = ["x", "z", "Días"]
FACTORS = ["a", "b"]
GROUPS = ["g", "h", "`my group`", "Sujeto_ñ"]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 48
    return pd.DataFrame({
        "y": rng.normal(size=n), "x": rng.uniform(1, 5, n), "z": rng.normal(size=n),
        "Días": np.tile(np.arange(6.0), 8), "a": np.tile(["p", "q"], 24),
        "b": np.tile(["r", "s", "t"], 16), "g": np.repeat([f"g{i}" for i in range(8)], 6),
        "h": np.tile([f"h{i}" for i in range(6)], 8), "my group": np.repeat(list("uvwx"), 12),
        "Sujeto_ñ": np.repeat(list("klmnop"), 8),
    })


FRAME = _frame()

space = st.sampled_from(["", " ", "  "])
numeric_term = st.one_of(
    st.sampled_from(NUMERIC),
    st.sampled_from(["I(x^2)", "I(x ** 2)", "np.log(x)", "log1p(z ** 2)", "sqrt(x)",
                     "scale(z)", "center(x)", "poly(x, 2)", "I(x * z)", "np.exp(z / 3)",
                     "abs(z)", "I(x > 2)"]),
)
factor_term = st.one_of(st.sampled_from(FACTORS), st.just("C(a)"))
simple_term = st.one_of(numeric_term, factor_term)
interaction = st.lists(simple_term, min_size=1, max_size=3, unique=True).flatmap(
    lambda ts: st.sampled_from([":", "*"]).map(lambda op: op.join(ts)))


@st.composite
def fixed_part(draw) -> str:
    terms = draw(st.lists(interaction, min_size=1, max_size=3))
    lead = draw(st.sampled_from(["", "1 + ", "0 + ", "-1 + "]))
    sep = draw(space)
    return lead + f"{sep}+{sep}".join(terms)


@st.composite
def random_term(draw) -> str:
    expr = draw(st.sampled_from(["1", "x", "1 + x", "0 + x", "z", "1 + x + z", "a",
                                 "0 + a", "scale(x)"]))
    groups = draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2, unique=True))
    op = draw(st.sampled_from([":", "/"]))
    bar = draw(st.sampled_from(["|", "||"]))
    s = draw(space)
    return f"({s}{expr}{s}{bar}{s}{op.join(groups)}{s})"


@st.composite
def formulas(draw) -> str:
    response = draw(st.sampled_from(["y", "np.log(y + 10)", "I(y * 2)"]))
    rand = draw(st.lists(random_term(), min_size=1, max_size=2))
    s = draw(space)
    return f"{response}{s}~{s}" + f"{s}+{s}".join([draw(fixed_part()), *rand])


def _key(spec):
    return (spec.response, spec.fixed, spec.reference,
            tuple((t.expr, t.factors, t.uncorrelated) for t in spec.random))


@SETTINGS
@given(formulas())
def test_valid_formulas_round_trip(formula):
    spec = crossed.parse(formula)
    again = crossed.parse(spec.to_formula())
    assert _key(again) == _key(spec)
    assert crossed.parse(again.to_formula()).to_formula() == again.to_formula()


def _check_error(exc: Exception) -> None:
    assert isinstance(exc, FormulaError | DataError), f"{type(exc).__name__}: {exc}"
    assert "\x1b" not in str(exc)


def _parse_and_build(text: str) -> None:
    try:
        spec = crossed.parse(text)
    except Exception as exc:  # noqa: BLE001 - the property: only FormulaError
        assert isinstance(exc, FormulaError), f"{type(exc).__name__}: {exc}"
        assert "\x1b" not in str(exc)
        assert 0 <= exc.position <= len(text)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            build_design(spec, FRAME)
        except Exception as exc:  # noqa: BLE001
            _check_error(exc)


@SETTINGS
@given(formulas(), st.data())
def test_truncated_formulas_raise_formula_errors(formula, data):
    cut = data.draw(st.integers(0, len(formula) - 1))
    _parse_and_build(formula[:cut])


BAD_PIECES = ["$", "@", "!", "~", "(", ")", "|", "||", "+ +", "I(", ", ", "^^", "**", "`",
              "'", '"', "[", "]", "{", "}", "%", "%in%", "\\", "\x1b[31m", "\n", ":", "/",
              "-", "*", ".", "1e", "np.", "..."]


@SETTINGS
@given(formulas(), st.data())
def test_mutated_formulas_raise_formula_errors(formula, data):
    at = data.draw(st.integers(0, len(formula)))
    piece = data.draw(st.sampled_from(BAD_PIECES))
    _parse_and_build(formula[:at] + piece + formula[at:])


@SETTINGS
@given(st.text(max_size=30))
def test_garbage_raises_formula_errors(text):
    _parse_and_build(text)


@pytest.mark.parametrize("formula", [
    "y ~ x $ 2 + (1 | g)", "y ~ I(x + ) + (1 | g)", "y ~ x + (1 | g", "y ~ x) + (1 | g)",
    "y ~ (x + (1 | g)", "y ~ x + + (1 | g)", "y ~ x ++ z + (1 | g)", "y ~ x + (1 | g))",
    "y ~ x + ( | g)", "y ~ x + (1 | )", "y ~ I(x ^) + (1 | g)", "y ~ np.log() + (1 | g)",
    "y ~ x + (1 | g) ~ z", "~ x + (1 | g)", "y ~", "y ~ x + {x + } + (1 | g)",
    "y ~ x + (1 | g) + `unclosed", "y ~ x \x1b[31m + (1 | g)", "y ~ x %% z + (1 | g)",
])
def test_known_bad_formulas(formula):
    with pytest.raises((FormulaError, DataError)) as err:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_design(crossed.parse(formula), FRAME)
    assert "\x1b" not in str(err.value)


@pytest.mark.parametrize("formula, at", [
    ("y ~ x $ 2 + (1 | g)", "$"), ("y ~ x + I(x $ 2) + (1 | g)", "$"),
    ("y ~ x + I(x + ) + (1 | g)", ")"), ("y ~ x + z : + (1 | g)", ":"),
])
def test_errors_point_at_the_fault(formula, at):
    with pytest.raises(FormulaError) as err:
        crossed.parse(formula)
    assert err.value.position == formula.index(at)
