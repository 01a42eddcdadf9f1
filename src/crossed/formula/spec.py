"""ModelSpec: the data-independent description of a linear mixed model."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crossed.formula.evaluate import r_to_python
from crossed.formula.grammar import (
    FormulaError,
    RawRandomTerm,
    parse_formula,
    split_outside_ticks,
)
from crossed.formula.safety import check_expression, check_python

__all__ = ["CODINGS", "ModelSpec", "RandomTermSpec", "check_spec", "expand_group",
           "normalise_coding", "parse"]

CODINGS = ("treatment", "sum", "helmert", "poly")
"""Named contrast codings (R's ``contr.treatment``, ``contr.sum``, ``contr.helmert``,
``contr.poly``)."""

_PLAIN_NAME = re.compile(r"(?:[^\W\d]|\.(?![0-9]))[\w.]*")


@dataclass(frozen=True)
class RandomTermSpec:
    """One random-effects term after lme4's expansion of ``/``.

    Attributes
    ----------
    expr : str
        The model expression left of the bar, as formulaic text (``"1"``, ``"1 + Days"``).
    factors : tuple of str
        Data columns whose interaction defines the grouping factor.
    name : str
        lme4's name of the grouping factor (``"Subject"``, ``"cask:batch"``).
    uncorrelated : bool
        True for ``||``: every column of ``expr``'s model matrix gets its own independent
        variance (afex's ``expand_re``; also for factors, unlike lme4).
    """

    expr: str
    factors: tuple[str, ...]
    name: str
    uncorrelated: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """A parsed lme4 formula, independent of any data.

    Attributes
    ----------
    formula : str
        The formula as given.
    response : str
        Left-hand side (a column or an expression).
    fixed : str
        Right-hand side of the fixed part, as formulaic text.
    random : tuple of RandomTermSpec
        Random terms in formula order (``/`` expanded; lme4's sort by number of levels is
        applied when the design is built, because it depends on the data).
    reference : tuple of (str, str)
        Reference level chosen per categorical column.
    trusted : bool
        True when the formula's expressions may be arbitrary Python (``trusted=True``);
        otherwise they passed :mod:`crossed.formula.safety`'s allow-list.
    contrasts : tuple of (str, coding)
        Contrast coding per factor column of the fixed part (lme4's ``contrasts``
        argument): ``"treatment"``, ``"sum"``, ``"helmert"``, ``"poly"`` or a matrix (levels
        x contrasts) as a tuple of row tuples. Ordered categoricals not listed get
        ``"poly"`` (R's default) when the design is built.
    offsets : tuple of str
        The expression inside each ``offset(...)`` term, as written (R arithmetic:
        ``0.5 * Days``, ``log(exposure)``); their sum is added to the linear predictor.
    cbind : tuple of (str, str) or None
        The successes' and failures' expressions of a ``cbind(s, f)`` response (then
        ``response`` is the ``cbind(...)`` text).
    caret : bool
        Whether the fixed part or a random term was written with R's ``^`` inside a call
        (``I(x^2)``): the design then names such columns with ``^`` as R does.

    The response, offsets and ``cbind`` sides are arithmetic as in R (``Reaction - 100``,
    ``log(y) - 5``, ``Reaction + Days``), evaluated only by :mod:`crossed.formula.evaluate`;
    every later stage reads these fields, never :attr:`formula`, which is kept for display.
    """

    formula: str
    response: str
    fixed: str
    random: tuple[RandomTermSpec, ...]
    reference: tuple[tuple[str, str], ...] = field(default=())
    trusted: bool = False
    contrasts: tuple[tuple[str, str | tuple[tuple[float, ...], ...]], ...] = field(default=())
    offsets: tuple[str, ...] = field(default=())
    cbind: tuple[str, str] | None = None
    caret: bool = False

    @property
    def successes(self) -> str:
        """The expression whose values are the response vector: the response, or the
        successes of ``cbind(s, f)``."""
        return self.cbind[0] if self.cbind is not None else self.response

    @property
    def value_expressions(self) -> tuple[str, ...]:
        """Every arithmetic expression of the formula outside its terms: the response (or
        both sides of ``cbind``) and the offsets, in R's syntax."""
        head = self.cbind if self.cbind is not None else (self.response,)
        return (*head, *self.offsets)

    @property
    def contrast_codings(self) -> dict[str, str | tuple[tuple[float, ...], ...]]:
        return dict(self.contrasts)

    @property
    def reference_levels(self) -> dict[str, str]:
        return dict(self.reference)

    def to_formula(self) -> str:
        """The formula written back from the spec (random terms after expansion of ``/``);
        ``parse(spec.to_formula())`` gives the same terms."""
        terms = [f"({t.expr} {'||' if t.uncorrelated else '|'} "
                 f"{':'.join(_tick(f) for f in t.factors)})" for t in self.random]
        offsets = [f"offset({o})" for o in self.offsets]
        return " + ".join([f"{self.response} ~ {self.fixed}", *offsets, *terms])

    @property
    def group_factors(self) -> tuple[str, ...]:
        """Every data column used in a grouping factor, in order of first use."""
        seen: dict[str, None] = {}
        for term in self.random:
            for f in term.factors:
                seen.setdefault(f, None)
        return tuple(seen)


def _tick(name: str) -> str:
    """A column name as a formula writes it: backticked unless a plain R name."""
    return name if _PLAIN_NAME.fullmatch(name) else f"`{name}`"


def _strip_ticks(name: str) -> str:
    return name[1:-1] if name.startswith("`") and name.endswith("`") else name


def expand_group(raw: RawRandomTerm) -> list[tuple[tuple[str, ...], str]]:
    """Grouping factors of one written term, as lme4's ``findbars`` expands them.

    ``a/b`` gives ``b:a`` then ``a``; ``a/b/c`` gives ``c:(b:a)``, ``b:a``, ``a`` (innermost
    first, lme4's names). Returns (data columns, name) pairs.
    """
    out = []
    outer: tuple[str, ...] = ()
    name = ""
    for level in split_outside_ticks(raw.group, "/"):
        parts = tuple(_strip_ticks(p) for p in split_outside_ticks(level, ":"))
        if not outer:
            name = ":".join(parts)
        else:
            name = ":".join(parts) + ":" + (f"({name})" if ":" in name else name)
        outer = parts + outer
        out.append((outer, name))
    return out[::-1]


def _normalise_expr(expr: str) -> str:
    return re.sub(r"\s+", " ", expr.strip())


def check_spec(spec: ModelSpec, columns: Collection[str] | None = None) -> None:
    """Refuse a spec whose response, fixed part or random expressions hold anything off
    :mod:`crossed.formula.safety`'s allow-list (``columns``: the data's, once known).

    A spec passed with the same columns is not checked again (:func:`_checked`: the
    answer depends on nothing else; a refusal is raised every time)."""
    _checked(spec, None if columns is None else frozenset(columns))


@functools.lru_cache(maxsize=256)
def _checked(spec: ModelSpec, columns: frozenset[str] | None) -> None:
    """:func:`check_spec`'s checks, remembered for the specs and column sets that passed
    (a fitting loop or a simulation builds one design many times; the checks parse each
    expression: 90 µs of sleepstudy's 3 ms fit)."""
    for text in spec.value_expressions:
        check_python(r_to_python(text), spec.formula, columns)
    check_expression(spec.fixed, spec.formula, columns)
    for term in spec.random:
        check_expression(term.expr, spec.formula, columns)


def normalise_coding(column: str, coding: object) -> str | tuple[tuple[float, ...], ...]:
    """A coding as the spec keeps it: one of :data:`CODINGS` (R's ``"contr.sum"`` also
    accepted) or a matrix (levels x contrasts) as a tuple of row tuples."""
    if isinstance(coding, str):
        name = coding.strip().lower()
        name = name[len("contr."):] if name.startswith("contr.") else name
        if name not in CODINGS:
            raise ValueError(f"contrasts[{column!r}]: unknown coding {coding!r}; use one of "
                             f"{', '.join(CODINGS)} or a matrix (levels x contrasts)")
        return name
    try:
        m = np.asarray(coding, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"contrasts[{column!r}] must be a coding name or a numeric matrix, "
                        f"got {type(coding).__name__}") from None
    if m.ndim != 2 or m.shape[1] == 0 or not np.all(np.isfinite(m)):
        raise ValueError(f"contrasts[{column!r}]: a contrast matrix must be 2-D (one row per "
                         f"level, one column per contrast) of finite numbers, got shape "
                         f"{m.shape}")
    return tuple(tuple(float(v) for v in row) for row in m)


def parse(formula: str, reference: dict[str, str] | None = None,
          trusted: bool = False, contrasts: Mapping[str, object] | None = None) -> ModelSpec:
    """Parse an lme4 formula into a :class:`ModelSpec`.

    Parameters
    ----------
    formula : str
        lme4 formula, e.g. ``"delta ~ language * task + (1 | architecture/model)"``.
    reference : dict, optional
        Reference (baseline) level per categorical column, e.g. ``{"lr": "5e-5"}``.
    trusted : bool
        Evaluate any Python expression the formula holds. By default only column names,
        numbers, arithmetic and a short list of functions (``I``, ``C``, ``log``, ``exp``,
        ``sqrt``, ``scale``, ``poly``, ...; :mod:`crossed.formula.safety`) are allowed, so
        a formula from a file or a command line cannot run code.
    contrasts : dict, optional
        Contrast coding per factor column, e.g. ``{"lr": "sum"}``: ``"treatment"``,
        ``"sum"``, ``"helmert"``, ``"poly"`` (R's ``contr.*``; ``"contr.sum"`` is accepted
        too) or a matrix with one row per level and one column per contrast.

    Returns
    -------
    ModelSpec

    Raises
    ------
    FormulaError
        On a syntax error, naming the position and what was expected, or on an expression
        off the allow-list (checked before anything is evaluated).
    """
    ref = tuple(sorted((str(k), str(v)) for k, v in (reference or {}).items()))
    if contrasts is not None and not isinstance(contrasts, Mapping):
        raise TypeError("contrasts must be a dict {column: coding}, got "
                        f"{type(contrasts).__name__}")
    codings = []
    for column, coding in (contrasts or {}).items():
        if not isinstance(column, str):
            raise TypeError(f"contrasts: column names must be strings, got {column!r}")
        codings.append((column, normalise_coding(column, coding)))
    coded = tuple(sorted(codings, key=lambda c: c[0]))  # (hashable: names, tuples of floats)
    if not isinstance(formula, str):
        raise TypeError(f"formula must be a string such as 'y ~ x + (1 | g)', got "
                        f"{type(formula).__name__}")
    return _parse_cached(formula, ref, bool(trusted), coded)


def _parse(formula: str, ref: tuple[tuple[str, str], ...], trusted: bool,
           codings: tuple[tuple[str, Any], ...] = ()) -> ModelSpec:
    """:func:`parse` with the reference levels as sorted (column, level) strings and the
    contrast codings as sorted (column, normalised coding) pairs."""
    parsed = parse_formula(formula)
    terms: list[RandomTermSpec] = []
    for raw in parsed.random:
        for factors, name in expand_group(raw):
            if len(set(factors)) != len(factors):
                raise FormulaError(
                    formula, raw.position, f"grouping factor {name!r} repeats a column"
                )
            terms.append(
                RandomTermSpec(
                    expr=_normalise_expr(raw.expr), factors=factors, name=name,
                    uncorrelated=raw.double_bar,
                )
            )
    spec = ModelSpec(
        formula=formula, response=parsed.response.strip(), fixed=parsed.fixed,
        random=tuple(terms), reference=ref, trusted=bool(trusted),
        contrasts=codings, offsets=parsed.offsets,
        cbind=_cbind(parsed.response.strip(), formula), caret=parsed.caret,
    )
    if not trusted:
        check_spec(spec)
    return spec


def _cbind(response: str, formula: str) -> tuple[str, str] | None:
    """The two sides of a ``cbind(successes, failures)`` response (None for any other)."""
    if not re.match(r"cbind\s*\(", response):
        return None
    source = r_to_python(response)
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        raise FormulaError(formula, 0, f"cannot read the response {response!r}") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "cbind" and len(node.args) == 2 and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args)):
        raise FormulaError(formula, 0, "cbind() on the left side takes two expressions: "
                                       "cbind(successes, failures)")
    s, f = (str(ast.get_source_segment(source, a)).strip() for a in node.args)
    return s, f


# a ModelSpec is immutable and parsing is pure: refits, simulations and repeated fits of one
# formula parse it once (errors are not cached: they are raised again)
_parse_cached = functools.lru_cache(maxsize=256)(_parse)
