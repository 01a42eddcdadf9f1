"""The one evaluator (``crossed.formula.evaluate``): what it computes, what it refuses, and a
fuzz of the formula language in every position with a sentinel that proves nothing off the
allow-list ever runs and a clock that proves nothing hangs."""

from __future__ import annotations

import builtins
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from formulaic import model_matrix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crossed as cx
from crossed.design import DataError
from crossed.formula import FormulaError, parse
from crossed.formula.evaluate import evaluate, names_in, r_to_python
from crossed.formula.grammar import MAX_FORMULA_LENGTH, term_bound
from crossed.formula.materializer import registered_materializer
from crossed.model.glmm.pirls import PirlsError

HANG = 30.0
"""Seconds after which a parse or fit counts as hung: a guard, not a timing (speed is
measured in benchmarks/, on a quiet machine; these bounds only catch what never ends)."""

DATA = pd.DataFrame({"x": np.arange(1.0, 13.0), "k": np.arange(12),
                     "f": list("aabbccaabbcc"), "t": [True, False] * 6,
                     "g": list("pqrs") * 3, "y": np.linspace(0, 3, 12) ** 2,
                     "s": np.arange(12) % 4, "n": np.full(12, 5)})


def _col(name: str) -> np.ndarray:
    col = DATA[name]
    return col.to_numpy(dtype=float) if col.dtype.kind in "biuf" else col.to_numpy()


@pytest.mark.parametrize("source, expected", [
    ("x - 100", DATA.x - 100),
    ("x * 2 + k", DATA.x * 2 + DATA.k),
    ("np.log(x) - 5", np.log(DATA.x) - 5),
    ("x ** 2 / 3", DATA.x ** 2 / 3),
    ("I(x % 5) // 2", (DATA.x % 5) // 2),
    ("sqrt(abs(-x))", np.sqrt(DATA.x)),
    ("round(x / 7, 2)", np.round(DATA.x / 7, 2)),
    ("np.power(x, 0.5) + np.pi", np.power(DATA.x.to_numpy(), 0.5) + np.pi),
    ("Q('x') + np.e", DATA.x + np.e),
    ("x / 0", DATA.x / 0.0),
])
def test_values_are_numpy_arithmetic_in_doubles(source: str, expected: pd.Series) -> None:
    got = np.asarray(evaluate(source, _col), dtype=float)
    np.testing.assert_array_equal(got, np.asarray(expected, dtype=float))


def test_numbers_are_doubles_so_huge_powers_are_inf_at_once() -> None:
    t = time.perf_counter()
    assert evaluate("((9 ** 999) ** 999) ** 999", _col) == np.inf
    assert evaluate("10 ** 10 ** 10 ** 10", _col) == np.inf
    assert time.perf_counter() - t < HANG


@pytest.mark.parametrize("source", [
    "np.f2py.os.system('true')", "x.to_csv('/tmp/x')", "__import__('os')", "f.__class__",
    "getattr(np, 'sys')", "(lambda: 1)()", "[x for x in k]", "x if x else k", "x[0]",
    "np.load('a')", "open('a')", "exec('1')", "x.sum()", "np.sum(x)", "'a' + 'b'",
    "x and k", "~x", "x | k", "x @ k", "{1: 2}", "f'{x}'", "np.log(*x)", "log(x, **k)",
    "poly(x, 99)", "round(x, 1000)", "C(f, np.f2py)", "C(f, levels=open('a'))",
    "scale(1)", "center(2.5)", "poly(3, 2)",  # (a fuzzer's find: NumPy's axis error before)
])
def test_anything_off_the_list_is_refused(source: str) -> None:
    with pytest.raises(FormulaError):
        evaluate(source, _col)


def test_r_syntax_and_names() -> None:
    assert r_to_python("x^2 - `a^b`") == "x**2 - `a^b`"
    assert names_in("np.log(x) + Q('k') + Informed.liking - `my col`") == {
        "x", "k", "Informed.liking", "my col"}


@pytest.mark.parametrize("term", ["np.log(x)", "I(x ** 2)", "scale(x)", "center(x)",
                                  "poly(x, 3)", "C(f, contr.sum)", "C(f, Helmert)",
                                  "C(f, levels=['c', 'b', 'a'])", "I(x > 3)", "x:f",
                                  "I(k ** 2)", "C(f, contr.treatment('b'))"])
def test_the_safe_materializer_equals_formulaics_eval(term: str) -> None:
    """formulaic with its own eval and with crossed's evaluator: the same matrix, on the
    data and on new rows (the stateful transforms keep formulaic's state)."""
    mine = model_matrix(term, DATA, materializer=registered_materializer())
    theirs = model_matrix(term, DATA)
    assert list(mine.columns) == list(theirs.columns)
    np.testing.assert_array_equal(mine.to_numpy(), theirs.to_numpy())
    new = DATA.iloc[[5, 0, 7]]
    np.testing.assert_array_equal(mine.model_spec.get_model_matrix(new).to_numpy(),
                                  theirs.model_spec.get_model_matrix(new).to_numpy())


def test_term_bound_counts_expansions() -> None:
    assert term_bound("a * b * c") == 7
    assert term_bound("(a + b + c)^2") == 6
    assert term_bound("a + log(x) + I(a * b)") == 3
    big = " * ".join(f"x{i}" for i in range(20))
    with pytest.raises(FormulaError, match="more than 5,000 terms"):
        parse(f"y ~ {big} + (1 | g)")
    with pytest.raises(FormulaError, match="more than 5,000 terms"):
        parse(f"y ~ 1 + ({big} | g)")


@pytest.mark.parametrize("size", [200_000, 1_000_000])
def test_long_formulas_are_refused_at_once(size: int) -> None:
    f = "y ~ " + " + ".join(f"x{i}" for i in range(size // 7)) + " + (1 | g)"
    t = time.perf_counter()
    with pytest.raises(FormulaError, match="characters"):
        parse(f)
    assert time.perf_counter() - t < HANG


def test_the_longest_accepted_formula_parses() -> None:
    terms, f = [], "y ~ "
    i = 0
    while len(f) < MAX_FORMULA_LENGTH - 20:
        terms.append(f"x{i}")
        f = "y ~ " + " + ".join(terms)
        i += 1
    f += " + (1 | g)"
    t = time.perf_counter()
    spec = parse(f)
    assert time.perf_counter() - t < HANG
    assert len(spec.fixed.split("+")) == len(terms)


# --------------------------------------------------------------------- the fuzz
CALLS: list[str] = []


def _sentinel(*args: object, **kwargs: object) -> float:
    CALLS.append("called")
    return 1.0


@pytest.fixture(autouse=False)
def sentinel(monkeypatch: pytest.MonkeyPatch):
    """``sentinel`` reachable every way an unchecked ``eval`` could reach it: a builtin, a
    NumPy attribute and a pandas Series method."""
    monkeypatch.setattr(builtins, "crossed_sentinel", _sentinel, raising=False)
    monkeypatch.setattr(np, "sentinel", _sentinel, raising=False)
    monkeypatch.setattr(pd.Series, "sentinel", _sentinel, raising=False)
    CALLS.clear()
    yield CALLS


ATOMS = ["x", "k", "n", "s", "1", "2.5", "1e308", "9", "np.pi", "`x`", "Q('x')"]
HOSTILE = ["crossed_sentinel()", "np.sentinel(x)", "x.sentinel()", "np.sentinel",
           "__builtins__['crossed_sentinel']()", "getattr(np, 'sentinel')(x)",
           "(lambda: crossed_sentinel())()", "[crossed_sentinel() for _ in k]",
           "crossed_sentinel() if x else 1", "np.f2py.os.system('true')",
           "vars()['crossed_sentinel']()", "x.__class__", "np.sentinel.__call__(x)",
           "__import__('builtins').crossed_sentinel()", "'a'", "x[0]", "x.sentinel",
           "9 ** 999 ** 999", "10 ** 10 ** 10", "crossed_sentinel"]
FUNCS = ["I", "log", "np.log", "sqrt", "abs", "np.exp", "exp", "np.square", "scale",
         "center", "crossed_sentinel", "np.sentinel", "round", "np.power", "eval", "exec"]
OPS = [" + ", " - ", " * ", " / ", " ** ", " % ", " // ", " > ", " == ", " | ", " & ",
       " @ ", " ^ "]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> str:
    kind = draw(st.integers(0, 4 if depth > 0 else 1))
    if kind == 0:
        return draw(st.sampled_from(ATOMS))
    if kind == 1:
        return draw(st.sampled_from(HOSTILE))
    if kind == 2:
        a, b = draw(expressions(depth - 1)), draw(expressions(depth - 1))
        return f"({a}{draw(st.sampled_from(OPS))}{b})"
    if kind == 3:
        func = draw(st.sampled_from(FUNCS))
        args = draw(st.lists(expressions(depth - 1), min_size=1, max_size=2))
        return f"{func}({', '.join(args)})"
    return f"{draw(expressions(depth - 1))}.{draw(st.sampled_from(['sentinel', 'T', 'x']))}"


POSITIONS = {
    "response": "{e} ~ x + (1 | g)",
    "fixed": "y ~ {e} + (1 | g)",
    "fixed in I()": "y ~ I({e}) + (1 | g)",
    "offset": "y ~ x + offset({e}) + (1 | g)",
    "random": "y ~ x + ({e} | g)",
    "C() argument": "y ~ C(f, {e}) + (1 | g)",
    "C() levels": "y ~ C(f, levels=[{e}]) + (1 | g)",
}
GLMM_POSITIONS = {
    "cbind successes": "cbind({e}, n - s) ~ x + (1 | g)",
    "cbind failures": "cbind(s, {e}) ~ x + (1 | g)",
}


# derandomize: the same 120 formulas on every run, so that CI's verdict is reproducible (a
# random draw found a new input now and then: offset(scale(1)) and cbind(s, 1e140), both
# refused now with the evaluator's and the data's errors); raise max_examples locally to
# explore further
@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(expr=expressions(), position=st.sampled_from(sorted(POSITIONS) + sorted(GLMM_POSITIONS)))
def test_fuzzed_formulas_never_run_anything_off_the_list(sentinel, expr: str,
                                                         position: str) -> None:
    """Either a FormulaError/DataError (before anything off the list is evaluated), or a
    fit through the one evaluator: the sentinel is never called, nothing takes seconds."""
    template = POSITIONS.get(position) or GLMM_POSITIONS[position]
    formula = template.format(e=expr)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if position in GLMM_POSITIONS:
                cx.glmer(formula, DATA, family="binomial")
            else:
                fit = cx.lmer(formula, DATA)
                fit.predict(DATA.iloc[:3])
        except (FormulaError, DataError, PirlsError):  # (PirlsError: lme4's own stop)
            pass
    assert sentinel == [], f"{formula!r} ran code off the allow-list"
    assert time.perf_counter() - t < HANG, f"{formula!r} took {time.perf_counter() - t:.0f} s"


@pytest.mark.parametrize("formula", [3, None, b"y ~ x + (1 | g)", ["y ~ x"]])
def test_a_formula_that_is_not_text_is_a_type_error(formula: object) -> None:
    with pytest.raises(TypeError, match="formula must be a string"):
        parse(formula)  # type: ignore[arg-type]
