"""Fixed-effects model matrices through formulaic, with lme4's column names and checks.

A part of an intercept, numeric columns, treatment-coded factors and their interactions
(with their margins: :func:`_coded_columns`) is coded here directly, in R's order of terms
and columns; formulaic is imported only for the rest (:func:`_model_matrix`,
:meth:`MatrixSpec.build`).
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design import _rank
from crossed.design.frame import (
    BARE_NAME,
    DataError,
    PreparedFrame,
    check_finite,
    check_numeric_response,
    clearly_finite,
    expression_variables,
    is_categorical,
    quote_dotted,
)
from crossed.design.names import r_column_names
from crossed.design.rcodes import r_coded_text, variable_order
from crossed.formula.evaluate import evaluate, r_to_python
from crossed.formula.grammar import FormulaError, plain_message, power_in_calls
from crossed.formula.safety import SAFE_CONTEXT
from crossed.formula.spec import ModelSpec

if TYPE_CHECKING:
    from formulaic.model_spec import ModelSpec as FormulaicSpec

__all__ = ["FixedDesign", "MatrixSpec", "RANK_TOL", "Table", "build_fixed", "build_matrix",
           "build_response", "check_reserved_levels", "evaluate_numeric",
           "independent_columns", "subset_fixed", "table_of"]

RANK_TOL = 1e-7
GRAM_PIVOT_MIN = 1e-2
"""The Gram-matrix shortcut of :func:`independent_columns` accepts X as of full rank only
when every pivot of the scaled XᵀX's Cholesky factor is at least this. Rounding moves a
pivot's square by about ε / (the smallest earlier pivot)², so a pivot of 1e-4 can be noise
where an earlier column is nearly collinear: z = 2x − 3999 beside x ≈ 2000 (pivot 5e-4)
and an intercept had a pivot of 1.2e-4 under the SkylakeX kernel and 3.3e-5 under
Haswell (its true residual is 1e-12), so z was kept under one kernel and dropped under
the other, with estimates of 1e15. From 1e-2 on the noise is below 1e-8 of the pivot."""


def _model_matrix(text: str, frame: pd.DataFrame, failure: str,
                  context: Mapping[str, Any] | None = None, trusted: bool = False,
                  **kw: Any) -> Any:
    """formulaic's ``model_matrix``, each factor evaluated by crossed's one evaluator
    (:mod:`crossed.formula.evaluate`; formulaic's own ``eval`` only when ``trusted``); its
    errors, and values outside the levels given to ``C()`` (which it would silently code as
    the reference level), become a DataError starting with ``failure``."""
    from formulaic import model_matrix
    from formulaic.errors import DataMismatchWarning

    from crossed.formula.materializer import registered_materializer

    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=DataMismatchWarning)
        try:
            return model_matrix(text, frame, na_action="raise",
                                context=context or SAFE_CONTEXT,
                                materializer=None if trusted else registered_materializer(),
                                **kw)
        except (DataError, FormulaError):
            raise
        except Exception as exc:  # formulaic's errors carry the expression at fault
            refused = _refusal(exc)
            if refused is not None:
                raise refused from None
            raise DataError(f"{failure}: "
                            f"{_unlisted_message(exc) or plain_message(exc)}") from exc


def _refusal(error: BaseException) -> FormulaError | None:
    """The evaluator's refusal inside formulaic's wrapping error, if that is the cause."""
    exc: BaseException | None = error
    while exc is not None:
        if isinstance(exc, FormulaError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _unlisted_message(error: BaseException) -> str | None:
    """Plain words for a DataMismatchWarning raised (as an error) inside formulaic."""
    from formulaic.errors import DataMismatchWarning

    exc: BaseException | None = error
    while exc is not None:
        if isinstance(exc, DataMismatchWarning):
            found = re.search(r"\{.*\}", str(exc))
            return ("the data hold values outside the levels given to C(..., levels=...)"
                    f"{': ' + found.group(0) if found else ''}; R's factor(x, levels=) "
                    "would make those rows missing: drop them first, or list every level")
        exc = exc.__cause__ or exc.__context__
    return None


@dataclass(frozen=True)
class MatrixSpec:
    """Rebuilds one model matrix on new data (formulaic's spec plus what lme4 adds)."""

    formulaic: FormulaicSpec | None
    names: tuple[str, ...]
    keep: tuple[int, ...]
    """Indices of formulaic's columns kept (rank-deficient columns dropped)."""
    plain: tuple[str, ...] = ()
    """Without formulaic: the model terms in R's order, ``"1"`` for the intercept, a column
    name, or an interaction's variables joined by ``:`` (random terms and fixed parts of
    an intercept, numeric columns, treatment-coded factors and their products)."""
    context: Mapping[str, Any] | None = field(default=None, compare=False)
    """formulaic's evaluation context when it differs from the allow-listed one (the
    contrast codings of :mod:`crossed.design.contrasts`)."""
    factors: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Columns of ``plain`` that are factors, with their levels (reference first): each
    gives the treatment-coded indicator columns of its later levels."""

    def direct_terms(self) -> list[tuple[str, tuple[int, ...]]]:
        """A matrix coded without formulaic (``formulaic`` None): each model term of
        :attr:`plain` (``"1"``, a column, variables joined by ``:``) with its columns'
        positions among every column (before :attr:`keep`)."""
        factors = dict(self.factors)
        out, pos = [], 0
        for term in self.plain:
            width = len(_term_columns(term, factors))
            out.append((term, tuple(range(pos, pos + width))))
            pos += width
        return out

    @property
    def width(self) -> int:
        """The number of columns it builds before :attr:`keep` (rank-dropped ones too)."""
        if self.formulaic is not None:
            return len(self.formulaic.column_names)
        return sum(len(cols) for _, cols in self.direct_terms())

    def build(self, frame: pd.DataFrame) -> np.ndarray:
        if self.formulaic is None:
            if self.factors:
                return _coded_matrix(self.plain, dict(self.factors), frame)[:, list(self.keep)]
            return _plain_matrix(self.plain, frame)[:, list(self.keep)]
        from crossed.formula.materializer import registered_materializer

        registered_materializer()  # (a spec made in another process names it)
        mm = self.formulaic.get_model_matrix(frame, output="numpy",
                                             context=self.context or SAFE_CONTEXT)
        return np.asarray(mm, dtype=float)[:, list(self.keep)]


Table: TypeAlias = pd.DataFrame | PreparedFrame
"""The data a model matrix is built on: a table, or :func:`prepare`'s columns (read as
arrays; its table is built only where formulaic evaluates an expression)."""


def _plain_matrix(columns: tuple[str, ...], frame: Table) -> np.ndarray:
    out = np.empty((len(frame), len(columns)))  # (np.column_stack's array, column by column)
    for j, c in enumerate(columns):
        if c == "1":
            out[:, j] = 1.0
        elif isinstance(frame, PreparedFrame):  # (its columns, without a Series each)
            out[:, j] = np.asarray(frame.values[c], dtype=float)  # (plain columns: numeric)
        else:
            out[:, j] = frame[c].to_numpy(dtype=float)
    return out


def _column(frame: Table, name: str) -> Any:
    """The values of a column that is not a prepared factor (None: no such column): a
    prepared numeric array, or the table's ``frame[name].array``."""
    if isinstance(frame, PreparedFrame):
        return frame.values.get(name)
    return frame[name].array if name in frame.columns else None


def _prepared_factors(frame: Table) -> Mapping[str, Any]:
    return frame.codes if isinstance(frame, PreparedFrame) else {}


def table_of(frame: Table) -> pd.DataFrame:
    """The table (a prepared frame's, built on first use)."""
    return frame.data if isinstance(frame, PreparedFrame) else frame


def _level_codes(values: Any, levels: tuple[str, ...], column: str) -> np.ndarray:
    """Each row's position in ``levels`` (a prepared factor's codes when its categories are
    ``levels``); a value outside them, or a missing one, raises (formulaic would code an
    unseen level as the reference, with only a warning)."""
    if isinstance(values, pd.Series):
        values = values.array
    if (isinstance(values, pd.Categorical)
            and tuple(values.categories.tolist()) == levels):
        codes = np.asarray(values.codes, dtype=np.int64)
    else:
        codes = pd.Index(list(levels), dtype=object).get_indexer(
            np.asarray(values, dtype=object)).astype(np.int64)
    if len(codes) and codes.min() < 0:
        bad = pd.Series(values)[codes < 0].iloc[0]
        what = ("a missing value" if _is_missing(bad) else
                f"level {bad!r} not seen when fitting")
        raise DataError(f"factor {column!r} has {what} (levels: "
                        f"{', '.join(levels[:10])}); a fixed effect cannot be computed for it")
    return codes


def _is_missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


_FEW_LEVELS = 8
"""Up to this many levels a factor's indicator columns are filled by comparisons."""


def _coded_matrix(columns: tuple[str, ...], factors: dict[str, tuple[str, ...]],
                  frame: pd.DataFrame | dict[str, Any],
                  codes_of: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """The matrix of an intercept, numeric columns, treatment-coded factors (one 0/1
    column per level after the first) and their interactions (``"a:b"``: the products of
    the terms' columns, the first variable's varying fastest, as R's ``model.matrix``), in
    Fortran order as formulaic returns it. ``frame``: a table, or its numeric columns as
    arrays; ``codes_of``: the codes of factors whose levels are ``factors[c]`` (other
    factors are matched to their levels)."""
    codes_of = codes_of or {}
    if isinstance(frame, pd.DataFrame):
        n = len(frame)
    else:
        n = len(next(iter(frame.values())) if frame else next(iter(codes_of.values())))
    X = np.zeros((n, sum(len(_term_columns(c, factors)) for c in columns)), order="F")
    flat = X.T.reshape(-1)  # (a view: column after column)
    read: dict[str, np.ndarray] = {}

    def variable(v: str) -> np.ndarray:
        """A factor's codes (a prepared column's, else matched to its levels) or a numeric
        column's values, read once for all the terms that use it."""
        if v not in read:
            read[v] = ((codes_of[v] if v in codes_of else _level_codes(frame[v], factors[v], v))
                       if v in factors else np.asarray(frame[v], dtype=float))
        return read[v]

    j = 0
    for c in columns:
        if c == "1":
            X[:, j] = 1.0
            j += 1
        elif ":" in c:  # an interaction: each column the product of one column per variable
            for parts in _term_columns(c, factors):
                col = np.ones(n)
                for v, k in parts:
                    col = col * (variable(v) == k if k else variable(v))
                X[:, j] = col
                j += 1
        elif c in factors:
            codes, levels = variable(c), factors[c]
            if len(levels) <= _FEW_LEVELS:  # a comparison per column: fewer passes
                for k in range(1, len(levels)):
                    X[:, j - 1 + k] = codes == k
            else:
                rows = np.flatnonzero(codes > 0)
                flat[(j - 1 + codes[rows]) * n + rows] = 1.0  # X[rows, j - 1 + code]
            j += len(levels) - 1
        else:
            X[:, j] = variable(c)
            j += 1
    return X


def _term_columns(term: str, factors: dict[str, tuple[str, ...]]
                  ) -> list[tuple[tuple[str, int], ...]]:
    """The columns of a term of :func:`_coded_matrix` (``"1"``, a column, or variables
    joined by ``:``), each as its (variable, level code) per variable: code k ≥ 1 is the
    indicator of a factor's level k, 0 a numeric variable's values. The first variable
    varies fastest (R's order)."""
    if term == "1":
        return [()]
    per_variable = [[(v, k) for k in range(1, len(factors[v]))] if v in factors else [(v, 0)]
                    for v in term.split(":")]
    return [tuple(reversed(combo)) for combo in itertools.product(*reversed(per_variable))]


def _coded_columns(rhs: str, frame: Table) -> tuple[
        tuple[str, ...], dict[str, tuple[str, ...]], dict[str, Any],
        dict[str, np.ndarray]] | None:
    """A fixed part (or random-term expression) of ``1``, bare column names and their
    products (``a * b``, ``a:b``) joined by ``+`` that can be coded without formulaic:
    with an intercept, every factor a prepared (unordered) categorical of at least two
    levels, coded by contrasts in every term (each interaction's margins present:
    :func:`_r_terms`), at most two numeric variables in a term (their product is then
    one rounding, in either order). Returns the terms in R's order (``"1"`` first, an
    interaction as its variables joined by ``:``), the factors' levels, the numeric
    columns' arrays and the factors' codes, or None for anything formulaic must
    evaluate."""
    terms = _r_terms(rhs)
    if terms is None:
        return None
    factors: dict[str, tuple[str, ...]] = {}
    arrays: dict[str, Any] = {}
    codes: dict[str, np.ndarray] = {}
    prepared = frame.codes if isinstance(frame, PreparedFrame) else {}
    for t in dict.fromkeys(v for term in terms for v in term.split(":")):
        if t in prepared:  # (unordered, its levels distinct labels)
            codes[t], levels_list = prepared[t]
            if len(levels_list) < 2:
                return None
            factors[t] = tuple(levels_list)
            continue
        values = _column(frame, t)
        if values is None:
            return None
        dtype = values.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            levels = tuple(dtype.categories.tolist())
            if (dtype.ordered or len(levels) < 2
                    or not all(isinstance(lv, str) for lv in levels)):
                return None
            factors[t] = levels
            codes[t] = np.asarray(values.codes, dtype=np.int64)
        elif not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
            return None
        else:
            arrays[t] = values
    if not factors and all(":" not in term for term in terms):
        return None  # (the plain path)
    present: set[frozenset[str]] = {frozenset(t.split(":")) for t in terms} | {frozenset()}
    for term in terms:
        variables = term.split(":")
        if sum(v not in factors for v in variables) > 2:
            return None
        if any(frozenset(variables) - {v} not in present for v in variables if v in factors):
            return None  # (R codes that factor by indicators of every level there)
    return ("1", *terms), factors, arrays, codes


def _r_terms(rhs: str) -> list[str] | None:
    """R's terms of ``1``, bare names and their products joined by ``+`` (``"a * b + x"``,
    ``"a:b"``), in R's order: by degree, then as the formula expands them (``a * b * c``
    is a + b + a:b + c + a:c + b:c + a:b:c), duplicates once; an interaction's variables
    in the order they first appear in the formula. None for any other expression (an
    intercept removed, parentheses, powers, calls, ``/``, ``-``)."""
    tokens = [t.strip() for t in rhs.split("+")]
    if not tokens or any(not t for t in tokens) or "0" in tokens:
        return None
    order: dict[str, int] = {}  # variables in the order they first appear
    expanded: list[frozenset[str]] = []
    for token in tokens:
        if token == "1":
            continue
        star, colon = "*" in token, ":" in token
        if star and colon:
            return None
        names = [v.strip() for v in token.split("*" if star else ":")]
        if any(not BARE_NAME.fullmatch(v) for v in names) or len(set(names)) != len(names):
            return None
        for v in names:
            order.setdefault(v, len(order))
        if star:  # a * b * c: (a * b) * c, each step X + c + X:c
            step: list[frozenset[str]] = []
            for v in names:
                step = [*step, frozenset((v,)), *(t | {v} for t in step)]
        else:
            step = [frozenset(names)]
        expanded.extend(t for t in step if t not in expanded)
    expanded.sort(key=len)  # (stable: within a degree, the expansion's order)
    return [":".join(sorted(t, key=order.__getitem__)) for t in expanded]


def _plain_columns(expr: str, frame: Table) -> tuple[str, ...] | None:
    """``1``, ``0`` and numeric column names joined by ``+`` (``"1 + Days"``, ``"0 + x"``);
    None for anything formulaic must evaluate."""
    tokens = [t.strip() for t in expr.split("+")]
    if not tokens or any(not t for t in tokens) or len(set(tokens)) != len(tokens):
        return None
    cols = [t for t in tokens if t not in ("0", "1")]
    for c in cols:
        if not BARE_NAME.fullmatch(c):  # "a:b" is an interaction, `a:b` a column
            return None
        values = None if c in _prepared_factors(frame) else _column(frame, c)
        if values is None:  # (not a column, or a prepared factor)
            return None
        if is_categorical(values):  # (one column access: each costs ~10 µs in pandas 3)
            return None
    if "0" in tokens and "1" in tokens:
        return None
    return (() if "0" in tokens else ("1",)) + tuple(cols)


@dataclass(frozen=True)
class FixedDesign:
    """The fixed-effects matrix and its metadata."""

    X: np.ndarray
    names: tuple[str, ...]
    term_labels: tuple[str, ...]
    """Term labels in R's order, ``"(Intercept)"`` first when present."""
    assign: tuple[int, ...]
    """For each column of X, the index of its term in ``term_labels``."""
    dropped: tuple[str, ...]
    spec: MatrixSpec
    codings: tuple[tuple[str, Any], ...] = ()
    """The non-default contrast codings used (column, coding), in column order."""


def independent_columns(X: np.ndarray, tol: float = RANK_TOL) -> np.ndarray:
    """Columns of X kept after dropping those linearly dependent on earlier ones.

    Like R's ``qr()`` with limited pivoting (LINPACK dqrdc2, tolerance 1e-7): a column whose
    part orthogonal to the earlier kept columns is below ``tol`` times its norm is dropped.
    In compiled code (``_rank.independent``): the Cholesky factor of the scaled XᵀX
    accepts X as of full rank where every pivot is at least ``GRAM_PIVOT_MIN``, and
    anything else takes the verdict from X's QR factor.
    """
    return _rank.independent(X, tol, GRAM_PIVOT_MIN)


def check_reserved_levels(expr: str, frame: pd.DataFrame) -> None:
    """Raise for a factor level starting with ``__`` in a column ``expr`` uses.

    formulaic treats such names as its own internal fields and silently leaves their
    indicator column out, merging those rows into the reference level (formulaic 1.2).
    """
    for col in frame.columns:
        s = frame[col]
        if not isinstance(s.dtype, pd.CategoricalDtype):
            continue
        bad = [lv for lv in s.cat.categories if str(lv).startswith("__")]
        if bad and col in expression_variables(expr, set(frame.columns)):
            raise DataError(
                f"level {bad[0]!r} of factor {col!r} starts with '__', which the model-matrix "
                "library (formulaic) reserves and would silently drop; rename the level"
            )


def _coded(text: str, codings: Mapping[str, Any] | None
           ) -> tuple[str, dict[str, Any] | None, tuple[tuple[str, Any], ...]]:
    """``text`` with its coded factors wrapped for formulaic, the evaluation context and
    the codings used (:func:`crossed.design.formulaic_contrasts.rewrite_formula`)."""
    wanted = {c: k for c, k in (codings or {}).items() if k != "treatment"}
    if not wanted:
        return text, None, ()
    from crossed.design.formulaic_contrasts import rewrite_formula

    new, ctx, found = rewrite_formula(text, wanted)
    if not found:
        return text, None, ()
    return new, {**SAFE_CONTEXT, **ctx}, tuple((c, wanted[c]) for c in wanted if c in found)


def build_fixed(rhs: str, frame: Table, caret: bool = False,
                codings: Mapping[str, Any] | None = None, trusted: bool = False
                ) -> FixedDesign:
    """Fixed-effects design for a formulaic right-hand side on prepared data.

    Rank-deficient columns are dropped with a warning naming them, as lme4 does.
    ``codings`` maps factor columns to their contrast coding (R's ``contrasts``;
    :mod:`crossed.design.contrasts`); unlisted factors get treatment contrasts.
    ``frame``: the table, or :func:`prepare`'s columns.
    """
    plain = _plain_columns(rhs, frame)
    coded = None if plain else _coded_columns(rhs, frame)
    fspec = None
    context = None
    used: tuple[tuple[str, Any], ...] = ()
    if plain:  # intercept and numeric columns only: no formulaic round trip
        X = _plain_matrix(plain, frame)
        names = ["(Intercept)" if c == "1" else c for c in plain]
        labels, assign = list(names), list(range(len(names)))
    elif (coded is not None and all(k == "treatment" for k in (codings or {}).values())
          and (fast := _coded_fixed(*coded)) is not None):
        return fast  # intercept, numeric columns and treatment-coded factors, full rank
    else:
        frame = table_of(frame)
        check_reserved_levels(rhs, frame)
        text, context, used = _coded(rhs, codings)
        text = quote_dotted(text, set(frame.columns))
        failure = f"cannot build the fixed-effects matrix for {rhs!r}"
        mm = _model_matrix(text, frame, failure, context=context, trusted=trusted,
                           output="pandas")
        mm = _as_r_codes(mm, frame, failure, context, variable_order(text), trusted)
        fspec = mm.model_spec
        X = np.asarray(mm.to_numpy(), dtype=float)
        names, labels, assign = r_column_names(fspec, list(mm.columns), caret)
        _check_terms_have_columns(labels, assign, frame)
    if not clearly_finite(X):  # before the rank check: inf is not "dependent"
        for j, name in enumerate(names):
            check_finite(name, X[:, j])
    keep = independent_columns(X) if X.shape[1] else np.zeros(0, dtype=bool)
    dropped = tuple(n for n, k in zip(names, keep, strict=True) if not k)
    if dropped:
        warn(
            f"fixed-effect model matrix is rank deficient so dropping {len(dropped)} "
            f"column{'s' if len(dropped) > 1 else ''} / coefficient"
            f"{'s' if len(dropped) > 1 else ''}: {', '.join(dropped)}",
        )
    idx = tuple(np.asarray(keep).nonzero()[0].tolist())
    kept_names = tuple(names[i] for i in idx)
    return FixedDesign(
        X=X[:, list(idx)],
        names=kept_names,
        term_labels=tuple(labels),
        assign=tuple(assign[i] for i in idx),
        dropped=dropped,
        spec=MatrixSpec(formulaic=fspec, names=kept_names, keep=idx, plain=plain or (),
                        context=context),
        codings=used,
    )


def _check_terms_have_columns(labels: list[str], assign: list[int],
                              frame: pd.DataFrame, part: str = "fixed term") -> None:
    """Refuse a term that got no column of the model matrix: a factor with a single level
    in the rows used (R's model.matrix stops there too: "contrasts can be applied only to
    factors with 2 or more levels"), which would otherwise vanish silently. ``part``
    names the kind of term in the message."""
    have = set(assign)
    for i, term in enumerate(labels):
        if i in have or term == "(Intercept)":
            continue
        names = [p.strip().strip("`") for p in term.split(":")] + [
            a or b for a, b in re.findall(r"`([^`]+)`|([^\W\d][\w.]*)", term)]
        for name in dict.fromkeys(names):
            if name in frame.columns:
                values = pd.unique(frame[name].dropna())
                if len(values) == 1:
                    raise DataError(
                        f"factor {name!r} has a single level ({str(values[0])!r}) in the "
                        f"rows used, so the {part} {term!r} has no column; a factor "
                        "needs two levels or more to have an effect (R: contrasts can "
                        "be applied only to factors with 2 or more levels): drop it from "
                        "the formula")
        raise DataError(f"the {part} {term!r} has no column in the model matrix "
                        "(a factor with a single level?): drop it from the formula")


def _as_r_codes(mm: Any, frame: pd.DataFrame, failure: str, context: Any,
                order: dict[str, int], trusted: bool = False) -> Any:
    """formulaic's matrix ``mm``, or the matrix with R's coding of interactions whose
    margins are absent and R's order of each term's variables (``rcodes.py``); a term
    still coded otherwise is said."""
    text, differ = r_coded_text(mm.model_spec, order)
    if text is not None:
        recoded = _model_matrix(text, frame, failure, context=context, trusted=trusted,
                                output="pandas")
        again, rest = r_coded_text(recoded.model_spec, order)
        if again is None and not rest:
            mm = recoded
        else:  # pragma: no cover - formulaic coded the rewritten terms otherwise
            differ = sorted({*differ, *rest})
    if differ:
        warn(f"the fixed-effect term{'s' if len(differ) > 1 else ''} {', '.join(differ)} "
             "are coded otherwise than R codes them (a factor coded by contrasts beside "
             "one coded by indicators, without the term's margins): the model and its "
             "criterion are lme4's, its coefficients are another parametrisation")
    return mm


def subset_fixed(fixed: FixedDesign, rows: np.ndarray) -> FixedDesign:
    """The fixed design on a subset of rows; columns that become dependent are dropped."""
    X = fixed.X[rows]
    keep = independent_columns(X) if X.shape[1] else np.zeros(0, dtype=bool)
    if keep.all():
        return replace(fixed, X=X)
    dropped = tuple(n for n, k in zip(fixed.names, keep, strict=True) if not k)
    warn(
        f"fixed-effect model matrix is rank deficient on this subset so dropping "
        f"{len(dropped)} column(s): {', '.join(dropped)}",
    )
    idx = np.flatnonzero(keep)
    names = tuple(fixed.names[i] for i in idx)
    spec = replace(fixed.spec, names=names, keep=tuple(fixed.spec.keep[i] for i in idx))
    return FixedDesign(X=X[:, idx], names=names, term_labels=fixed.term_labels,
                       assign=tuple(fixed.assign[i] for i in idx),
                       dropped=fixed.dropped + dropped, spec=spec, codings=fixed.codings)


def _coded_fixed(columns: tuple[str, ...], factors: dict[str, tuple[str, ...]],
                 arrays: dict[str, Any], codes: dict[str, np.ndarray]) -> FixedDesign | None:
    """The fixed design of an intercept, numeric columns and factors, built directly: the
    columns, names, term labels and assignment formulaic and R give (validated against the
    formulaic route in ``tests/design/test_fixed.py``). None when the matrix is rank
    deficient: the general route then builds it and says what it drops."""
    X = _coded_without_formulaic(columns, factors, arrays, codes)
    names, assign = _coded_names(columns, factors)
    labels = ["(Intercept)" if c == "1" else c for c in columns]
    if not clearly_finite(X):  # (as the general route, column by column; the intercept
        for j, t_index in enumerate(assign):  # and the indicators are finite)
            if columns[t_index] != "1" and columns[t_index] not in factors:
                check_finite(names[j], X[:, j])
    keep = independent_columns(X)
    if not keep.all():
        return None
    idx = tuple(range(X.shape[1]))
    return FixedDesign(
        X=X, names=tuple(names), term_labels=tuple(labels),
        assign=tuple(assign), dropped=(),
        spec=MatrixSpec(formulaic=None, names=tuple(names), keep=idx, plain=columns,
                        factors=tuple(factors.items())),
    )


def _coded_without_formulaic(columns: tuple[str, ...], factors: dict[str, tuple[str, ...]],
                             arrays: dict[str, Any], codes: dict[str, np.ndarray]
                             ) -> np.ndarray:
    """:func:`_coded_matrix` of :func:`_coded_columns`' answer, after the check formulaic's
    route makes (:func:`check_reserved_levels`): a level starting with ``__`` is refused."""
    for c, levels in factors.items():
        bad = [lv for lv in levels if lv.startswith("__")]
        if bad:
            raise DataError(
                f"level {bad[0]!r} of factor {c!r} starts with '__', which the model-matrix "
                "library (formulaic) reserves and would silently drop; rename the level"
            )
    return _coded_matrix(columns, factors, arrays, codes)


def _coded_names(columns: tuple[str, ...], factors: dict[str, tuple[str, ...]]
                 ) -> tuple[list[str], list[int]]:
    """R's column names of :func:`_coded_matrix`'s matrix and each column's term (its
    position in ``columns``): ``(Intercept)``, a numeric column's name, a factor's name
    and level for each level after the first, an interaction's names joined by ``:``."""
    names: list[str] = []
    assign: list[int] = []
    for t_index, c in enumerate(columns):
        for parts in _term_columns(c, factors):
            names.append(":".join(f"{v}{factors[v][k]}" if k else v for v, k in parts)
                         or "(Intercept)")
            assign.append(t_index)
    return names, assign


def build_matrix(
    expr: str, frame: Table, caret: bool = False,
    codings: Mapping[str, Any] | None = None, trusted: bool = False,
) -> tuple[np.ndarray, tuple[str, ...], MatrixSpec]:
    """Model matrix of a random-term expression (no rank reduction), with R names
    (``frame``, ``codings``: as :func:`build_fixed`).

    An intercept with numeric columns and treatment-coded factors (``1 + condition``) is
    coded here, as the fixed part's (:func:`_coded_columns`, without interactions); other
    expressions by formulaic (validated against it in ``tests/design/test_fixed_fast.py``)."""
    plain = _plain_columns(expr, frame)
    if plain:
        names = tuple("(Intercept)" if c == "1" else c for c in plain)
        spec = MatrixSpec(formulaic=None, names=names, keep=tuple(range(len(plain))),
                          plain=plain)
        return _plain_matrix(plain, frame), names, spec
    coded = (_coded_columns(expr, frame)
             if all(k == "treatment" for k in (codings or {}).values()) else None)
    if coded is not None and all(":" not in term for term in coded[0]):  # (interactions
        # in a random term: formulaic's term structure, which the LRTs read, names them)
        columns, factors = coded[0], coded[1]
        names = tuple(_coded_names(columns, factors)[0])
        spec = MatrixSpec(formulaic=None, names=names, keep=tuple(range(len(names))),
                          plain=columns, factors=tuple(factors.items()))
        return _coded_without_formulaic(*coded), names, spec
    frame = table_of(frame)
    check_reserved_levels(expr, frame)
    text, context, _ = _coded(power_in_calls(expr), codings)
    text = quote_dotted(text, set(frame.columns))
    mm = _model_matrix(text, frame, f"cannot build the random-effects matrix for {expr!r}",
                       context=context, trusted=trusted, output="pandas")
    r_names, r_labels, r_assign = r_column_names(mm.model_spec, list(mm.columns), caret)
    _check_terms_have_columns(list(r_labels), list(r_assign), frame, "random-effects term")
    keep = tuple(range(len(r_names)))
    return (
        np.asarray(mm.to_numpy(), dtype=float),
        tuple(r_names),
        MatrixSpec(formulaic=mm.model_spec, names=tuple(r_names), keep=keep, context=context),
    )


def build_response(spec: ModelSpec, frame: Table) -> np.ndarray:
    """The response vector: a column, an R arithmetic expression (``Reaction - 100``,
    ``log(y) - 5``, ``Reaction + Days``) or the successes of ``cbind(s, f)``, evaluated as
    R evaluates it. (``frame``: as :func:`build_fixed`.)"""
    response = spec.successes
    if isinstance(frame, PreparedFrame) and response in frame.values:
        values = frame.values[response]  # (prepare() made it float64)
        if isinstance(values, np.ndarray) and values.dtype.kind in "biufc":  # (numeric)
            return check_numeric_response(values.view(), response)
    frame = table_of(frame)
    if response in frame.columns:
        col = frame[response]
        if isinstance(col.dtype, pd.CategoricalDtype):  # prepare() made it a factor
            shown = ", ".join(map(str, col.cat.categories[:5]))
            raise DataError(f"response {response!r} is not numeric: it holds labels or "
                            f"booleans ({shown}{', ...' if len(col.cat.categories) > 5 else ''}"
                            f"); convert it to numbers, e.g. data[{response!r}].astype(float)")
        if not pd.api.types.is_numeric_dtype(col):
            raise DataError(f"response {response!r} is not numeric (dtype {col.dtype})")
        return check_numeric_response(col.to_numpy(), response)
    values = evaluate_numeric(response, frame, "response", trusted=spec.trusted,
                              formula=spec.formula)
    return check_numeric_response(values, response)


def evaluate_numeric(text: str, frame: pd.DataFrame, what: str, trusted: bool = False,
                     formula: str | None = None) -> np.ndarray:
    """An R arithmetic expression of numeric columns on every row of ``frame`` (a
    response, an offset, a side of ``cbind``), as float64; NaN where a value is missing.

    The expression is evaluated by :func:`crossed.formula.evaluate.evaluate` (only
    ``trusted`` formulas go through formulaic's Python ``eval``).

    Raises
    ------
    DataError
        A column that is not numeric, a result that is not one number per row.
    """
    source = r_to_python(text)
    if trusted:
        mm = _model_matrix(f"0 + I({quote_dotted(source, set(frame.columns))})", frame,
                           f"cannot evaluate the {what} {text!r}", trusted=True,
                           output="numpy")
        arr = np.asarray(mm, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != 1:
            raise DataError(f"the {what} {text!r} is not a single numeric column")
        return arr[:, 0]

    def lookup(name: str) -> np.ndarray:
        if name not in frame.columns:
            raise DataError(f"column {name!r} of the {what} {text!r} is not in the data")
        col = frame[name]
        if pd.api.types.is_bool_dtype(col.dtype):
            return np.asarray(col.to_numpy(dtype=float, na_value=np.nan), dtype=float)
        if (isinstance(col.dtype, pd.CategoricalDtype)
                or not pd.api.types.is_numeric_dtype(col.dtype)):
            raise DataError(f"column {name!r} of the {what} {text!r} is not numeric "
                            f"(dtype {col.dtype})")
        return np.asarray(col.to_numpy(dtype=float, na_value=np.nan), dtype=float)

    value = evaluate(source, lookup, formula=formula)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"the {what} {text!r} does not evaluate to numbers") from None
    if arr.ndim == 0:
        return np.full(len(frame), float(arr))
    if arr.shape != (len(frame),):
        raise DataError(f"the {what} {text!r} is not a single numeric column")
    return arr
