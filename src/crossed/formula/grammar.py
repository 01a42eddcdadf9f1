"""Split an lme4 model formula into its response, fixed part and random terms.

The fixed part is left as text for formulaic; this module only understands the lme4 syntax
around it: ``response ~ rhs``, top-level ``+``/``-`` separated pieces, and parenthesised
random terms ``(expr | g)`` / ``(expr || g)`` whose grouping side may use ``:`` and ``/``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["FormulaError", "ParsedFormula", "RawRandomTerm", "parse_formula", "plain_message",
           "power_in_calls", "split_outside_ticks"]

# R's names: letters (any alphabet), digits, '.' and '_', not starting with a digit; or
# anything but a backtick inside backticks
_NAME = re.compile(r"`[^`]+`|(?:[^\W\d]|\.)[\w.]*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def plain_message(exc: BaseException) -> str:
    """An exception's message without terminal escape codes (formulaic colours its own)."""
    text = _ANSI.sub("", str(exc))
    return "".join("?" if unicodedata.category(ch) == "Cc" and ch != "\n" else ch
                   for ch in text)


class FormulaError(ValueError):
    """A formula that cannot be parsed; the message shows where and what was expected."""

    def __init__(self, formula: str, position: int, message: str):
        self.formula = formula
        self.position = position
        pointer = " " * position + "^"
        shown = _printable(formula)
        super().__init__(f"{message} at position {position}:\n  {shown}\n  {pointer}")


def _printable(text: str) -> str:
    """The formula as shown in an error: control characters (escape codes, newlines)
    replaced one for one, so the pointer below stays aligned."""
    return "".join(" " if ch in "\t\n\r" else "?" if unicodedata.category(ch) == "Cc"
                   else ch for ch in str(text))


@dataclass(frozen=True)
class RawRandomTerm:
    """One parenthesised random term as written: ``(expr | group)`` or ``(expr || group)``."""

    expr: str
    group: str
    double_bar: bool
    position: int
    caret: bool = False
    """Whether ``expr`` was written with R's ``^`` (now ``**``)."""


@dataclass(frozen=True)
class ParsedFormula:
    """The lme4 formula split into pieces (text, not yet evaluated against data)."""

    response: str
    fixed: str
    random: tuple[RawRandomTerm, ...]
    offsets: tuple[str, ...] = ()
    """The expressions inside each ``offset(...)`` term, as written."""
    caret: bool = False
    """Whether the fixed part or a random term was written with R's ``^``."""


MAX_FORMULA_LENGTH = 8_000
"""Longest formula accepted (characters): R parses longer ones, but no model of an
evaluation table needs them, and a limit keeps every stage's time bounded."""
MAX_NESTING = 50
"""Deepest nesting of parentheses accepted."""


def _scan(formula: str) -> tuple[list[int], list[bool]]:
    """Parenthesis depth before each character, and whether it lies inside quotes (one
    pass); raises on unbalanced parentheses or quotes."""
    depths, inside, depth, stack, quote = [], [], 0, [], ""
    for i, ch in enumerate(formula):
        depths.append(depth)
        inside.append(bool(quote))
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`":
            quote = ch
        elif ch in "([":
            depth += 1
            if depth > MAX_NESTING:
                raise FormulaError(formula, i, f"parentheses nested deeper than "
                                               f"{MAX_NESTING} levels")
            stack.append(i)
        elif ch in ")]":
            if depth == 0:
                raise FormulaError(formula, i, f"unmatched '{ch}'")
            depth -= 1
            stack.pop()
    if quote:
        raise FormulaError(formula, formula.rindex(quote), f"unterminated quote {quote}")
    if stack:
        raise FormulaError(formula, stack[-1], "unclosed '(': expected ')'")
    return depths, inside


def _scan_depths(formula: str) -> list[int]:
    """Parenthesis depth before each character; raises on unbalanced parentheses."""
    return _scan(formula)[0]


def _split_top(text: str, offset: int, formula: str, seps: str) -> list[tuple[str, str, int]]:
    """Split ``text`` on top-level separator characters; returns (sign, piece, start)."""
    depths, inside = _scan(text)
    pieces, sign, start = [], "+", 0
    for i, ch in enumerate(text):
        if depths[i] == 0 and ch in seps and not inside[i]:
            if _is_exponent_sign(text, i):
                continue
            pieces.append((sign, text[start:i], offset + start))
            sign, start = ch, i + 1
    pieces.append((sign, text[start:], offset + start))
    out = []
    for sign, piece, pos in pieces:
        stripped = piece.strip()
        if not stripped:
            if pos == offset and sign == "+":  # leading sign, e.g. "-1 + x"
                continue
            raise FormulaError(formula, pos, "expected a term")
        out.append((sign, stripped, pos + (len(piece) - len(piece.lstrip()))))
    return out


def _is_exponent_sign(text: str, i: int) -> bool:
    """True for the sign in a number such as ``1e-5``."""
    return i >= 2 and text[i - 1] in "eE" and text[i - 2].isdigit() and i + 1 < len(text) and (
        text[i + 1].isdigit()
    )


def _find_bar(inner: str) -> tuple[int, bool] | None:
    """Position of the top-level ``|`` or ``||`` in a parenthesised piece, if any."""
    depths, inside = _scan(inner)
    for i, ch in enumerate(inner):
        if ch == "|" and depths[i] == 0 and not inside[i]:
            double = i + 1 < len(inner) and inner[i + 1] == "|"
            return i, double
    return None


def parse_formula(formula: str) -> ParsedFormula:
    """Parse an lme4 formula.

    Parameters
    ----------
    formula : str
        For example ``"y ~ a * b + (1 + a | g) + (1 | h/k)"``.

    Returns
    -------
    ParsedFormula
        The response text, the fixed part as a formulaic right-hand side, and the random
        terms as written (expansion of ``/`` and ``||`` happens in :mod:`.spec`).

    Raises
    ------
    FormulaError
        With the position of the problem and what was expected there.
    """
    if not isinstance(formula, str) or not formula.strip():
        raise FormulaError(str(formula)[:200], 0, "empty formula: expected 'response ~ terms'")
    if len(formula) > MAX_FORMULA_LENGTH:
        raise FormulaError(formula[:60] + "...", 0,
                           f"the formula has {len(formula):,} characters, more than the "
                           f"{MAX_FORMULA_LENGTH:,} accepted")
    depths = _scan_depths(formula)
    tildes = [i for i, ch in enumerate(formula) if ch == "~" and depths[i] == 0]
    if not tildes:
        raise FormulaError(formula, 0, "missing '~': expected 'response ~ terms'")
    if len(tildes) > 1:
        raise FormulaError(formula, tildes[1], "a second '~': expected one 'response ~ terms'")
    tilde = tildes[0]
    response = formula[:tilde].strip()
    if not response:
        raise FormulaError(formula, 0, "missing response: expected a column before '~'")
    rhs_start = tilde + 1
    rhs = formula[rhs_start:]
    if not rhs.strip():
        raise FormulaError(formula, len(formula), "expected terms after '~'")

    fixed_parts: list[str] = []
    random_terms: list[RawRandomTerm] = []
    offsets: list[str] = []
    for sign, piece, pos in _split_top(rhs, rhs_start, formula, "+-"):
        if piece.startswith("offset(") and _is_wrapped(piece[len("offset"):]):
            if sign == "-":
                raise FormulaError(formula, pos, "an offset cannot be subtracted")
            inner = piece[len("offset("):-1].strip()
            if not inner:
                raise FormulaError(formula, pos, "offset() needs an expression")
            offsets.append(inner)
            continue
        while _is_wrapped(piece) and _is_wrapped(piece[1:-1].strip()):
            piece = piece[1:-1].strip()  # ((1 | g)) is (1 | g), as lme4's findbars reads it
            pos += 1
        if _is_wrapped(piece):
            inner = piece[1:-1]
            bar = _find_bar(inner)
            if bar is not None:
                if sign == "-":
                    raise FormulaError(formula, pos, "a random term cannot be subtracted")
                random_terms.append(_random_term(formula, inner, pos + 1, *bar))
                continue
        if "|" in piece and not _scan(piece)[1][piece.index("|")]:
            raise FormulaError(
                formula, pos + piece.index("|"),
                "a '|' outside parentheses: expected a random term written as (expr | group)",
            )
        fixed_parts.append(piece if sign == "+" else f"- {piece}")
    written = " + ".join(fixed_parts).replace("+ -", "-")
    if term_bound(written) > MAX_TERMS:
        raise FormulaError(formula, rhs_start, f"the fixed part expands to more than "
                                               f"{MAX_TERMS:,} terms")
    fixed = power_in_calls(written)
    caret = fixed != written or any(t.caret for t in random_terms)
    if not fixed:
        fixed = "1"
    return ParsedFormula(response=response, fixed=fixed, random=tuple(random_terms),
                         offsets=tuple(offsets), caret=caret)


def split_outside_ticks(text: str, seps: str) -> list[str]:
    """Split on any of ``seps`` outside backticked names."""
    parts, start, tick = [], 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            tick = not tick
        elif ch in seps and not tick:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def power_in_calls(text: str) -> str:
    """R's ``^`` inside a function call (``I(x^2)``, ``log(x^2)``) is arithmetic power:
    written ``**`` for formulaic; a ``^`` outside calls, ``(a + b)^2``, stays a formula
    operator."""
    out, stack, quote, last, calls = [], [], None, "", 0
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            call = last.isalnum() or last in "._"
            stack.append(call)
            calls += call
        elif ch == ")" and stack:
            calls -= stack.pop()
        elif ch == "^" and calls:
            out.append("**")
            last = "*"
            continue
        out.append(ch)
        if not ch.isspace():
            last = ch
    return "".join(out)


def _is_wrapped(piece: str) -> bool:
    """True for ``( ... )`` whose opening parenthesis is closed by the last character."""
    return piece.startswith("(") and piece.endswith(")") and _closes_at_end(piece)


def _closes_at_end(piece: str) -> bool:
    """True when the opening parenthesis at 0 is closed by the last character."""
    depths = _scan_depths(piece)
    return all(d > 0 for d in depths[1:])


def _random_term(formula: str, inner: str, pos: int, bar: int, double: bool) -> RawRandomTerm:
    expr = inner[:bar].strip()
    group_start = bar + (2 if double else 1)
    group = inner[group_start:].strip()
    if not expr:
        raise FormulaError(formula, pos, "expected a model expression before '|' (e.g. 1)")
    if not group:
        raise FormulaError(formula, pos + group_start, "expected a grouping factor after '|'")
    if "|" in group:
        at = pos + group_start + group.index("|")
        raise FormulaError(formula, at, "a second '|' in one term")
    names = [tok.strip() for tok in split_outside_ticks(group, ":/")]
    for tok in names:
        if not tok or not _NAME.fullmatch(tok):
            at = pos + group_start
            if tok:
                at += max(0, inner[group_start:].find(tok))
                bad = re.search(r"\s", tok)
                if bad:
                    at += bad.start() + 1
            raise FormulaError(
                formula, at,
                f"expected a grouping factor name (or a:b, a/b) after '|', got {group!r}",
            )
    check = "".join(p if p.startswith("`") else re.sub(r"\s+", "", p)
                    for p in re.split(r"(`[^`]*`)", group))
    if term_bound(expr) > MAX_TERMS:
        raise FormulaError(formula, pos, f"the random term's expression expands to more than "
                                         f"{MAX_TERMS:,} terms")
    python = power_in_calls(expr)
    return RawRandomTerm(expr=python, group=check, double_bar=double, position=pos,
                         caret=python != expr)


MAX_TERMS = 5_000
"""Most fixed-effect terms a formula may expand to (``a * b * c`` is 7): a 20-way
interaction would expand to a million terms before any data are read."""

_TERM_TOKEN = re.compile(r"\s*(?:(`[^`]*`|[^\W\d][\w.]*|\.[\w.]*|\d[\w.]*)|(%in%|[-+*/:^()]))")


def term_bound(text: str) -> int:
    """An upper bound of the number of terms formula operators expand ``text`` to
    (``+ - * / : ^``, ``%in%`` and parentheses; a call such as ``log(x)`` or ``I(a * b)``
    is one term). Read in one pass, before formulaic expands anything."""
    tokens: list[str] = []
    i = 0
    while i < len(text):
        m = _TERM_TOKEN.match(text, i)
        if m is None:
            if text[i].isspace():
                i += 1
                continue
            return 1  # (anything else: formulaic parses it and says what is wrong)
        tok = m.group(1) or m.group(2)
        i = m.end()
        if m.group(1) is not None and i < len(text) and text[i] == "(":  # a call: one atom
            depth = 0
            while i < len(text):
                depth += text[i] == "("
                depth -= text[i] == ")"
                i += 1
                if depth == 0:
                    break
        tokens.append("a" if m.group(1) is not None else tok)
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> int:
        tok = take() if pos < len(tokens) else ""
        if tok == "(":
            n = additive()
            if peek() == ")":
                take()
            return n
        if tok in ("-", "+"):
            return atom()
        return 1

    def power() -> int:
        n = atom()
        while peek() == "^":
            take()
            k = 2
            if pos < len(tokens) and tokens[pos] == "a":
                take()
                k = _power_of(text)
            n = min(sum(math.comb(n, j) for j in range(1, min(k, n) + 1)), MAX_TERMS + 1)
        return n

    def colon() -> int:
        n = power()
        while peek() in (":", "%in%"):
            take()
            n = min(n * power(), MAX_TERMS + 1)
        return n

    def product() -> int:
        n = colon()
        while peek() in ("*", "/"):
            take()
            m = colon()
            n = min(n + m + n * m, MAX_TERMS + 1)
        return n

    def additive() -> int:
        n = product()
        while peek() in ("+", "-"):
            take()
            n = min(n + product(), MAX_TERMS + 1)
        return n

    total = 0
    while pos < len(tokens):
        before = pos
        total = min(total + additive(), MAX_TERMS + 1)
        if pos == before:
            pos += 1
    return total


def _power_of(text: str) -> int:
    """The largest whole number after a ``^`` in ``text`` (a bound for every power)."""
    found = [int(m) for m in re.findall(r"\^\s*(\d{1,6})", text)]
    return max(found) if found else 2
