"""parse() caches a formula's ModelSpec (immutable): the same object for the same formula,
reference levels and trust, and check_spec the specs and columns that passed; errors are
raised every time."""

from __future__ import annotations

import pytest

from crossed.formula import parse
from crossed.formula.grammar import FormulaError


def test_same_formula_gives_the_cached_spec():
    a = parse("y ~ x + (1 | g)", reference={"f": "b"})
    b = parse("y ~ x + (1 | g)", reference={"f": "b"})
    assert a is b
    assert parse("y ~ x + (1 | g)", reference={"f": "c"}) is not a
    assert parse("y ~ x + (1 | g)", reference={"f": "b"}, trusted=True) is not a
    assert parse("y ~ x + (1 | g)", reference={"f": "b"}, trusted=True).trusted


def test_reference_levels_given_as_numbers_share_the_spec_of_strings():
    assert parse("y ~ f + (1 | g)", reference={"f": 3}) is parse("y ~ f + (1 | g)",
                                                                 reference={"f": "3"})


@pytest.mark.parametrize("formula", ["y ~ x + (1 | g", "y ~ __import__('os') + (1 | g)"])
def test_errors_are_raised_each_time(formula):
    for _ in range(2):
        with pytest.raises(FormulaError):
            parse(formula)


def test_a_spec_passed_with_the_same_columns_is_not_checked_again(monkeypatch):
    """check_spec remembers a spec and column set that passed; other columns are checked;
    a refusal is raised every time (the checks run each time)."""
    from crossed.formula import spec as spec_module

    spec = parse("y ~ x + log(z) + (x | g)", contrasts={"f": [[1.0], [-1.0]]})
    trusted = parse("y ~ open(x) + (1 | g)", trusted=True)
    calls: list[str] = []
    real = spec_module.check_expression

    def counted(text, *args, **kwargs):
        calls.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(spec_module, "check_expression", counted)
    spec_module._checked.cache_clear()
    spec_module.check_spec(spec, columns=["y", "x", "z", "g"])
    first = len(calls)
    assert first == 2  # (the fixed part and the random term's expression)
    spec_module.check_spec(spec, columns=("g", "z", "x", "y"))  # (the same set)
    assert len(calls) == first
    spec_module.check_spec(spec, columns=["y", "x", "z", "g", "log"])
    assert len(calls) == 2 * first
    for _ in range(2):
        with pytest.raises(FormulaError):
            spec_module.check_spec(trusted, columns=["y", "x", "g"])
    assert len(calls) == 2 * first + 2  # (the fixed part refused, each time)
