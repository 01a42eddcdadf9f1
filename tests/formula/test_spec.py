"""parse() caches a formula's ModelSpec (immutable): the same object for the same formula,
reference levels and trust; errors are raised every time."""

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
