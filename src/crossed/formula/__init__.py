"""lme4 formula grammar -> ModelSpec."""

from crossed.formula.grammar import FormulaError, parse_formula
from crossed.formula.spec import ModelSpec, RandomTermSpec, parse

__all__ = ["FormulaError", "ModelSpec", "RandomTermSpec", "parse", "parse_formula"]
