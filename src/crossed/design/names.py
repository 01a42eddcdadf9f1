"""lme4's column names and term labels for formulaic's model matrices
(``language[T.es]:task[T.t2]`` -> ``languagees:taskt2``), and splitting names on ``:``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from crossed.design.contrasts import alias_column
from crossed.design.frame import level_label
from crossed.design.rcodes import full_coded_column

if TYPE_CHECKING:
    from formulaic.model_spec import ModelSpec as FormulaicSpec

__all__ = ["r_column_names", "split_colons"]


def _r_part(part: str, expr: str, categories: list[Any] | None) -> str | None:
    """Translate one formulaic column-name part to R's ``factorlevel`` form."""
    full = full_coded_column(expr)
    if full is not None:  # coded by indicators (rcodes.py): a column per level
        m = re.fullmatch(r"\[(.*)\]", part[len(expr):], re.S) if part.startswith(expr) else None
        return None if m is None else f"{full}{level_label(m.group(1))}"
    column = alias_column(expr)
    if column is not None:  # a coded factor: RCoding names its columns as R suffixes them
        if part.startswith(expr) and re.fullmatch(r"\[.*\]", part[len(expr):], re.S):
            return f"{column}{part[len(expr) + 1:-1]}"
        return None
    bare = expr[1:-1] if expr.startswith("`") and expr.endswith("`") else expr
    for prefix in (expr, bare):
        if not part.startswith(prefix):
            continue
        rest = part[len(prefix):]
        if rest == "":
            return bare
        if categories is None:
            # a matrix-valued transform (poly(x, 2)[1]): R pastes the column label on
            m = re.fullmatch(r"\[([^\[\]]+)\]", rest)
            return f"{bare}{m.group(1)}" if m else None
        for lv in sorted(categories, key=lambda v: -len(str(v))):
            if rest in (f"[T.{lv}]", f"[{lv}]"):
                return f"{bare}{level_label(lv)}"  # R's label: C(g) of 1.0 is C(g)1
    return None


def r_column_names(
    spec: FormulaicSpec, columns: list[str], caret: bool = False
) -> tuple[list[str], list[str], list[int]]:
    """R names for formulaic's columns, term labels and the column-to-term assignment."""
    state = spec.encoder_state
    names: list[str] = []
    labels: list[str] = []
    assign: list[int] = []
    for t_index, struct in enumerate(spec.structure):
        factors = list(struct.term.factors)
        label = _power(":".join(_factor_label(str(f.expr)) for f in factors), caret)
        labels.append("(Intercept)" if label == "1" else label)
        for col in struct.columns:
            assign.append(t_index)
            if label == "1":
                names.append("(Intercept)")
                continue
            names.append(_power(_r_column_name(col, factors, state), caret))
    return [_untick(n) for n in names], [_untick(t) for t in labels], assign


_TICKED_R_NAME = re.compile(r"`((?:[^\W\d]|\.)[\w.]*)`")


def _untick(name: str) -> str:
    """R quotes only non-syntactic names: ``np.log(`Informed.liking`)`` ->
    ``np.log(Informed.liking)``; ``log(`my x`)`` keeps its backticks."""
    return _TICKED_R_NAME.sub(r"\1", name)


def _r_column_name(col: str, factors: list[Any], state: dict[str, Any]) -> str:
    """R's name of one formulaic column (``language[T.es]:task[T.t2]`` ->
    ``languagees:taskt2``); each part is matched against the term's factors (formulaic may
    code a term with a subset of them). Untranslatable names are kept as they are."""
    out = []
    for part in split_colons(col):
        for factor in factors:
            kind_state = state.get(str(factor.expr))
            cats = None
            if kind_state is not None and kind_state[1].get("categories") is not None:
                cats = list(kind_state[1]["categories"])
            r = _r_part(part, str(factor.expr), cats)
            if r is not None:
                out.append(r)
                break
        else:
            return col
    return ":".join(out)


def _power(name: str, caret: bool) -> str:
    """A formula written with R's ``x^2`` gets R's names back (formulaic prints x ** 2)."""
    return name.replace(" ** ", "^") if caret else name


def _factor_label(expr: str) -> str:
    """R's label of a factor of a term: the column for a coded factor
    (``C(lr, cx_contr_0)`` -> ``lr``), the expression without backticks otherwise."""
    column = alias_column(expr) or full_coded_column(expr)
    return _strip(expr) if column is None else column


def _strip(expr: str) -> str:
    return expr[1:-1] if expr.startswith("`") and expr.endswith("`") else expr


def split_colons(text: str) -> list[str]:
    """Split a column name or term label on ':' outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == ":" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
