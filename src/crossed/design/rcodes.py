"""R's coding of factors in interactions whose margins are absent.

R codes a factor in a term by contrasts where the term without it is contained in an
earlier term (the intercept counts as the empty term), and by indicators (one column per
level) elsewhere: the 1s and 2s of the ``factors`` attribute of ``terms()``. Without an
intercept, the first factor of the first term that has one is coded by indicators. lme4
then drops the columns that the coding makes linearly dependent (the last ones).

formulaic (patsy's algorithm) codes such terms otherwise: for ``y ~ f1:f2 + x`` it
writes a column ``f2[T.v]`` and contrasts of f1 within f2, a full-rank parametrisation of
the same model, where R has all six f1 × f2 indicators less the last. The criterion is the
same; the coefficients are not lme4's, under lme4's names ("(Intercept)" is the cell
f1 = a, f2 = u in one, the last cell in the other). :func:`r_coded_text` finds such terms
and rewrites them for formulaic with the factors coded by indicators
(``C(f, spans_intercept=False)``), which gives R's columns; the rank check then drops
the dependent ones as lme4 does. Validated against lme4 in ``tests/design/test_rcodes.py``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from crossed.design.contrasts import alias_column, wrapped_column

if TYPE_CHECKING:
    from formulaic.model_spec import ModelSpec as FormulaicSpec

__all__ = ["FULL_CODED", "factors_attribute", "full_coded_column", "r_coded_text", "r_codes",
           "variable_order"]

FULL_CODED = ", spans_intercept=False)"
_FULL = re.compile(r"^C\((.*), spans_intercept=False\)$", re.S)
_NAME = re.compile(r"^(?:`[^`]+`|(?:[^\W\d]|\.)[\w.]*)$")


def full_coded_column(expr: str) -> str | None:
    """The column of a factor written by :func:`r_coded_text` as coded by indicators."""
    return wrapped_column(_FULL, expr)


def factors_attribute(terms: list[tuple[str, ...]]) -> list[dict[str, int]]:
    """R's ``factors`` attribute of ``terms()`` for ``terms`` (R's order: by degree): per
    term, 1 for a variable coded by contrasts (the term without it is contained in an
    earlier one, or empty), 2 for one coded by indicators (numeric variables too, where the
    code does not change their column). lmerTest's term containment reads it as well."""
    codes: list[dict[str, int]] = []
    for i, term in enumerate(terms):
        code = {}
        for v in term:
            rest = set(term) - {v}
            code[v] = 1 if not rest or any(rest <= set(u) for u in terms[:i]) else 2
        codes.append(code)
    return codes


def r_codes(terms: list[tuple[str, ...]], categorical: set[str], intercept: bool
            ) -> list[dict[str, int]]:
    """The codes ``model.matrix`` uses: :func:`factors_attribute`, and without an
    intercept the first factor of the first term that has one by indicators."""
    codes = factors_attribute(terms)
    if not intercept:  # the first factor of the first term with one: indicators
        for term, code in zip(terms, codes, strict=True):
            first = next((v for v in term if v in categorical), None)
            if first is not None:
                code[first] = 2
                break
    return codes


def _variable(expr: str) -> str:
    """The variable a factor expression codes: its column for a coded factor (a contrast
    coding, or indicators written by :func:`r_coded_text`), else the expression."""
    return full_coded_column(expr) or alias_column(expr) or expr


def _quoted(column: str) -> str:
    return column if _NAME.match(column) else f"`{column}`"


def variable_order(text: str) -> dict[str, int]:
    """R's order of the variables of a right-hand side: that of their first appearance
    (``x + f:x`` -> x, f), which orders the variables of each term (its label ``x:f`` and
    its columns ``x:fb``); empty where formulaic does not parse ``text``."""
    order: dict[str, int] = {}
    try:
        from formulaic import Formula

        terms = list(Formula(text, _ordering="none"))
    except Exception:  # (model_matrix reports the formula's errors)
        return order
    for term in terms:
        for factor in term.factors:
            variable = _variable(str(factor.expr))
            if variable != "1":
                order.setdefault(variable, len(order))
    return order


def r_coded_text(spec: FormulaicSpec, order: dict[str, int] | None = None
                 ) -> tuple[str | None, list[str]]:
    """A right-hand side giving R's coding where formulaic's differs, and each term's
    variables in R's ``order`` (:func:`variable_order`), and the labels of the terms
    coded otherwise that cannot be rewritten.

    Returns
    -------
    text : str or None
        The rewritten right-hand side (None: formulaic's coding is R's, or no term can be
        rewritten).
    differ : list of str
        Terms whose coding differs from R's and that are not rewritten (a factor of the
        term coded by contrasts beside one coded by indicators, or an expression other
        than a column name).
    """
    state: dict[str, Any] = spec.encoder_state
    structure = [s for s in spec.structure
                 if [str(f.expr) for f in s.term.factors] != ["1"]]
    intercept = len(structure) < len(list(spec.structure))
    exprs = [[str(f.expr) for f in s.term.factors] for s in structure]
    terms = [tuple(_variable(e) for e in t) for t in exprs]
    categorical = {_variable(e) for e, (kind, _) in state.items()
                   if str(getattr(kind, "value", kind)) == "categorical"}
    codes = r_codes(terms, categorical, intercept)
    parts: list[str] = [] if intercept else ["0"]
    changed, differ = False, []
    rank = order or {}
    for s, texts, term, code in zip(structure, exprs, terms, codes, strict=True):
        r_order = sorted(range(len(term)), key=lambda a: rank.get(term[a], len(rank) + a))
        if r_order != list(range(len(term))):  # R's variable order: rewritten
            texts = [texts[a] for a in r_order]
            term = tuple(term[a] for a in r_order)
            changed = True
        want = {(v, code[v] == 1) for v in term if v in categorical}
        scoped = s.scoped_terms
        have = ({(_variable(str(f.factor.expr)), bool(f.reduced)) for f in scoped[0].factors
                 if _variable(str(f.factor.expr)) in categorical}
                if len(scoped) == 1 else None)
        if have == want:
            parts.append(":".join(texts))
            continue
        simple = all(e == v and _NAME.match(e) or alias_column(e) is not None
                     or full_coded_column(e) is not None for e, v in zip(texts, term, strict=True))
        if any(code[v] == 1 for v in term if v in categorical) or not simple:
            differ.append(":".join(term))
            parts.append(":".join(texts))
            continue
        parts.append(":".join(f"C({_quoted(v)}{FULL_CODED}" if v in categorical else e
                              for e, v in zip(texts, term, strict=True)))
        changed = True
    return (" + ".join(parts) if changed else None), differ
