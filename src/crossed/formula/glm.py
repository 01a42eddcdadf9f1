"""The GLM parts of a formula: ``cbind(successes, failures)`` on the left and ``offset(expr)``
terms on the right (lme4's syntax), split off by text and checked against the allow-list;
nothing is evaluated here."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from crossed.formula.grammar import FormulaError
from crossed.formula.safety import check_expression

__all__ = ["GlmFormula", "split_glm_formula"]


@dataclass(frozen=True)
class GlmFormula:
    """A formula with its GLM parts taken out.

    Attributes
    ----------
    formula : str
        The formula without the ``offset(...)`` terms; its response is the successes'
        expression when the left side is ``cbind(...)``.
    offsets : tuple of str
        The expressions inside each ``offset(...)`` term (added together, as R does).
    cbind : tuple of (str, str) or None
        The successes' and failures' expressions of ``cbind(s, f)``.
    """

    formula: str
    offsets: tuple[str, ...] = ()
    cbind: tuple[str, str] | None = None


def _depths(text: str) -> list[int]:
    out, d, quote = [], 0, ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch in "([{":
            d += 1
        elif ch in ")]}":
            d -= 1
        out.append(d)
    return out


def _matching(text: str, open_at: int) -> int:
    d = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            d += 1
        elif text[i] == ")":
            d -= 1
            if d == 0:
                return i
    return -1


def split_glm_formula(formula: str, trusted: bool = False) -> GlmFormula:
    """Take ``offset(...)`` terms and a ``cbind(s, f)`` response out of ``formula``.

    Raises
    ------
    FormulaError
        A malformed ``cbind``/``offset``, a subtracted offset, or (``trusted=False``) an
        expression off the allow-list of :mod:`crossed.formula.safety`.
    """
    if not isinstance(formula, str) or "~" not in formula:
        raise FormulaError(str(formula), 0, "missing '~': expected 'response ~ terms'")
    tilde = formula.index("~")
    lhs, rhs = formula[:tilde], formula[tilde + 1:]
    offsets: list[str] = []
    depth = _depths(rhs)
    pieces: list[tuple[int, int]] = []  # spans of rhs to remove
    i = 0
    while True:
        at = rhs.find("offset(", i)
        if at < 0:
            break
        i = at + 1
        if depth[at] != 0 or (at > 0 and (rhs[at - 1].isalnum() or rhs[at - 1] in "._")):
            continue
        close = _matching(rhs, at + len("offset"))
        if close < 0:
            raise FormulaError(formula, tilde + 1 + at, "unclosed 'offset('")
        before = rhs[:at].rstrip()
        after = rhs[close + 1:].lstrip()
        if before.endswith("-"):
            raise FormulaError(formula, tilde + 1 + at, "an offset cannot be subtracted")
        if not (before == "" or before.endswith("+")) or not (after == "" or after[0] in "+-"):
            raise FormulaError(formula, tilde + 1 + at,
                               "offset(...) must be a term of its own: '... + offset(x)'")
        expr = rhs[at + len("offset("):close].strip()
        if not expr:
            raise FormulaError(formula, tilde + 1 + at, "offset() needs an expression")
        if not trusted:
            check_expression(f"0 + {expr}", formula)
        offsets.append(expr)
        start = len(before) - 1 if before.endswith("+") else at
        pieces.append((start if before else at, close + 1))
    new_rhs = rhs
    for a, b in reversed(pieces):
        new_rhs = new_rhs[:a] + new_rhs[b:]
    new_rhs = " ".join(new_rhs.split()) if pieces else new_rhs.strip()
    if new_rhs.startswith("+"):
        new_rhs = new_rhs[1:].strip()
    if not new_rhs:
        new_rhs = "1"
    cb = None
    text = lhs.strip()
    if text.startswith("cbind"):
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError as exc:
            raise FormulaError(formula, 0, f"cannot read the response {text!r}") from exc
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "cbind" and len(node.args) == 2 and not node.keywords):
            raise FormulaError(formula, 0, "cbind() on the left side takes two expressions: "
                                           "cbind(successes, failures)")
        parts = [ast.get_source_segment(text, a) for a in node.args]
        s, f = (str(p).strip() for p in parts)
        if not trusted:
            check_expression(f"0 + {s}", formula)
            check_expression(f"0 + {f}", formula)
        cb = (s, f)
        text = s
    return GlmFormula(formula=f"{text} ~ {new_rhs}", offsets=tuple(offsets), cbind=cb)
