"""ModelSpec + data -> X, y and the random-effects blocks."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design.contrasts import contrast_matrix
from crossed.design.fixed import FixedDesign, build_fixed, build_response, subset_fixed
from crossed.design.frame import (
    DataError,
    PreparedFrame,
    check_finite,
    check_scale,
    clearly_finite,
    prepare,
)
from crossed.design.newdata import NewRows
from crossed.design.newdata import encode as encode_newdata
from crossed.design.random import (
    RandomDesign,
    ReBlock,
    ReTerm,
    build_random,
    subset_random,
)
from crossed.formula.spec import ModelSpec, check_spec

__all__ = ["DataError", "Design", "ReBlock", "ReTerm", "build_design"]


class _LazyFrame:
    """:attr:`Design.frame`: given :func:`prepare`'s columns, the table is built on first
    read (a fit does not read it; on a small table it costs about a tenth of the design);
    a table or None is kept as it is."""

    _KEY = "_frame_source"

    def __get__(self, obj: object, objtype: type | None = None) -> pd.DataFrame | None:
        if obj is None:
            return None  # (the dataclass default)
        state = obj.__dict__
        value = state.get(self._KEY, state.get("frame"))  # ("frame": an older pickle)
        return value.data if isinstance(value, PreparedFrame) else value

    def __set__(self, obj: object, value: object) -> None:
        obj.__dict__[self._KEY] = None if value is self else value


@dataclass(frozen=True)
class Design:
    """Everything an engine needs, built once from a ModelSpec and a table.

    Attributes
    ----------
    spec : ModelSpec
    y : numpy.ndarray
        Response, length n.
    fixed : FixedDesign
        X (n x p) with lme4's column names, term labels and assignment.
    random : RandomDesign
        lme4's terms, the engine's blocks, theta's bounds and names.
    n_dropped : int
        Rows removed for missing values.
    levels : dict
        Factor levels of every categorical column used (R's order, reference first).
    columns : tuple of str
        Data columns used by the model.
    frame : pandas.DataFrame or None
        Private copy of the used columns after dropping missing rows (factors encoded as
        categoricals): what inference needs to rebuild reference grids, lmerTest's Type III
        design and reduced or ML refits. Not the user's table.
    weights : numpy.ndarray or None
        Prior weights aligned with ``y`` (None: all 1); for a binomial GLMM the number of
        trials (``cbind(s, f)`` gives ``y = s / (s + f)``, ``weights = s + f``, as lme4).
    offset : numpy.ndarray or None
        Offset of the linear predictor aligned with ``y`` (None: 0): the ``offset(x)``
        terms of the formula plus the ``offset=`` argument.
    offset_argument : bool
        Whether part of ``offset`` came from an ``offset=`` argument (which, unlike the
        formula's terms, cannot be re-evaluated on new data).
    """

    holds_rows: ClassVar[bool] = True
    """False for a design without rows (a fit on partitioned data: row-level quantities
    are refused, :class:`crossed.model.partitioned.RowlessDesign`)."""

    spec: ModelSpec
    y: np.ndarray
    fixed: FixedDesign
    random: RandomDesign
    n_dropped: int
    levels: dict[str, list[str]]
    columns: tuple[str, ...]
    frame: pd.DataFrame | None = field(default=_LazyFrame(), repr=False, compare=False)
    weights: np.ndarray | None = field(default=None, repr=False, compare=False)
    offset: np.ndarray | None = field(default=None, repr=False, compare=False)
    offset_argument: bool = field(default=False, repr=False, compare=False)
    # objects derived from this design (the model core's PLS problem): created empty in
    # every instance, written only by :meth:`derived`, left out of pickles
    _derived: dict[str, Any] = field(init=False, default_factory=dict, repr=False,
                                     compare=False)

    def __post_init__(self) -> None:
        for arr in (self.y, self.fixed.X, *(b.Z for b in self.random.blocks),
                    *(b.codes for b in self.random.blocks),
                    *(a for a in (self.weights, self.offset) if a is not None)):
            arr.flags.writeable = False

    @property
    def X(self) -> np.ndarray:
        return self.fixed.X

    @property
    def n(self) -> int:
        return len(self.y)

    def derived(self, key: str, compute: Callable[[], Any]) -> Any:
        """An object derived from this design alone, computed once by ``compute()`` (the
        model core's PLS problem: ``PLS.of(design)``); replaced designs start empty."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_derived"] = {}  # rebuilt on demand (a PLS can be large)
        state[_LazyFrame._KEY] = self.frame  # the table, not the columns it is built from
        return state

    def encode(self, newdata: pd.DataFrame, include_random: bool = True,
               allow_new_levels: bool = False) -> NewRows:
        """New data encoded with this design's columns, levels and transforms (for
        ``predict``): fixed-effects matrix, grouping codes and random-effects columns.

        Parameters
        ----------
        newdata : pandas.DataFrame
        include_random : bool
            Encode the random part too (grouping codes and Z columns).
        allow_new_levels : bool
            Grouping levels not fitted (and missing grouping values) get code -1 instead
            of an error.

        Returns
        -------
        NewRows
            ``rows`` (the rows with every predictor), ``X``, ``codes``, ``Z``.

        Raises
        ------
        DataError
            A new level of a fixed-effect factor (lme4: ``factor f has new level x``), a
            new grouping level without ``allow_new_levels``, a missing column, text in a
            numeric column.
        """
        return encode_newdata(self, newdata, include_random, allow_new_levels)

    def messages(self) -> list[str]:
        """What building the design left out or warned of, as a fit reports it: rows
        dropped for missing values, rank-deficient fixed-effect columns dropped, an
        uncorrelated intercept beside a slope far from zero."""
        out = []
        if self.n_dropped:
            out.append(f"{self.n_dropped} rows dropped for missing values")
        if self.fixed.dropped:
            out.append("rank-deficient fixed-effect columns dropped: "
                       + ", ".join(self.fixed.dropped))
        if self.random.far_uncorrelated_slope is not None:
            out.append(self.random.far_uncorrelated_slope)
        return out

    def with_response(self, y: np.ndarray) -> Design:
        """The same design with another response vector (e.g. a simulated one)."""
        y = np.asarray(y, dtype=float)
        if y.shape != self.y.shape:
            raise DataError(f"new response has shape {y.shape}, the design has {self.y.shape}")
        if not np.isfinite(y).all():
            raise DataError("new response has missing or infinite values")
        # ``replace(self, y=y)`` without the constructor's route (every simulation refit
        # makes one): the same fields, the data table still unbuilt where it was, y frozen
        # as ``__post_init__`` freezes it, nothing derived
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(y=y, _derived={})
        y.flags.writeable = False
        return new

    def subset(self, rows: np.ndarray, keep_frame: bool = True) -> Design:
        """The same model on a subset of rows, without re-evaluating the formula.

        Grouping factors lose the levels left without rows; fixed-effect columns that become
        linearly dependent are dropped with a warning (as a fit on the subset would). Term
        and theta order stay those of the full design, so refits are comparable.

        Parameters
        ----------
        rows : array of int or bool
            Row positions (or a mask) into this design.
        keep_frame : bool
            Keep the private copy of the used columns (needed by EMMs and ANOVA computed on
            the subset); simulation loops that only need estimates skip it.
        """
        rows = np.asarray(rows)
        if rows.dtype != bool and not np.issubdtype(rows.dtype, np.integer) and rows.size:
            raise DataError(f"rows must be whole-number positions or a boolean mask, got "
                            f"dtype {rows.dtype}")
        if rows.dtype == bool and rows.shape != (self.n,):
            raise DataError(f"a boolean mask of rows needs {self.n} values, got {rows.size}")
        if rows.dtype != bool and rows.size and not (-self.n <= rows.min()
                                                     and rows.max() < self.n):
            raise DataError(f"rows holds positions outside 0..{self.n - 1}")
        idx = np.arange(self.n)[rows.astype(int) if rows.size == 0 else rows]
        if idx.size == 0:
            raise DataError("the subset has no rows")
        fixed = subset_fixed(self.fixed, idx)
        random = subset_random(self.random, idx)
        frame = None
        if keep_frame and self.frame is not None:
            frame = self.frame.iloc[idx].reset_index(drop=True)
        return replace(self, y=self.y[idx], fixed=fixed, random=random, frame=frame,
                       weights=None if self.weights is None else self.weights[idx],
                       offset=None if self.offset is None else self.offset[idx])


def _user_codings(spec: ModelSpec, levels: dict[str, list[str]]) -> dict[str, Any]:
    """``contrasts=`` checked against the factors of the model (a named column that is not
    a factor raises; a coding matrix must fit the factor's levels)."""
    out = spec.contrast_codings
    for col, coding in out.items():
        if col not in levels:
            raise DataError(f"contrasts given for {col!r}, which is not a factor of the model "
                            "(a numeric column? convert it with .astype(str))")
        if not isinstance(coding, str):
            contrast_matrix(coding, levels[col], col)  # raises on a wrong shape
    return out


_STATEFUL = re.compile(r"\b(poly|scale|center)\s*\(")


def _warn_stateful_after_dropping(spec: ModelSpec, n_dropped: int) -> None:
    """poly(), scale() and center() learn from the rows they see: crossed's see the rows
    left after dropping missing values, R's model.frame evaluates them on every row and
    drops afterwards, so the bases (and coefficients) differ from lme4's once rows were
    dropped (found by fuzzing: y ~ poly(x, 2) + (1 | g) with missing y, criterion 0.077
    apart). Said, not silent."""
    used = sorted({m.group(1) for part in (spec.fixed, *(t.expr for t in spec.random))
                   for m in _STATEFUL.finditer(part)})
    if used:
        names = ", ".join(f"{u}()" for u in used)
        warn(f"{names} computed on the rows left after dropping {n_dropped} "
             f"row{'s' if n_dropped != 1 else ''} with missing values; R evaluates {names} "
             "on all rows "
             "before dropping them, so these columns and their coefficients differ from "
             "lme4's: drop the incomplete rows from the data first to compare")


def build_design(spec: ModelSpec, data: pd.DataFrame, na_action: str = "omit",
                 glmm: bool = False) -> Design:
    """Build the design of ``spec`` on ``data``.

    Parameters
    ----------
    spec : ModelSpec
    data : pandas.DataFrame
    na_action : {"omit", "raise"}

    Raises
    ------
    DataError
        Naming the column, term or level at fault.
    FormulaError
        When an expression is off the allow-list (:mod:`crossed.formula.safety`) and
        ``spec.trusted`` is False.
    """
    prepared = prepare(spec, data, na_action=na_action)
    frame = prepared  # (its table is built on first use: a fit does not need it)
    if not spec.trusted:  # the allow-list again, now that the columns are known
        check_spec(spec, columns=prepared.data_columns)
    y = build_response(spec, frame)  # non-finite values refused there
    # a formula written with R's ^ gets R's column names (I(x^2)) back
    caret = spec.caret
    # R codes ordered factors with contr.poly unless contrasts= names another coding; the
    # random-effects matrices (lme4's mkReTrms) use only the defaults
    ordered = {c: "poly" for c in prepared.ordered}
    fixed = build_fixed(spec.fixed, frame, caret=caret,
                        codings=ordered | _user_codings(spec, prepared.levels),
                        trusted=spec.trusted)
    used = dict(fixed.codings)
    for col, coding in spec.contrasts:
        if coding != "treatment" and col not in used:
            warn(f"contrasts for {col!r} ignored: the fixed part does not use it as a plain "
                 "factor term (R: 'variable is absent, its contrast will be ignored')")
    if spec.response in fixed.term_labels:  # R drops it with a warning; it explains y by y
        raise DataError(f"the response {spec.response!r} is also a term of the fixed part; "
                        "remove it from the right-hand side")
    if fixed.X.shape[1] >= len(y):  # lme4: "objective in x0 returns NA"
        raise DataError(f"the fixed part has {fixed.X.shape[1]} independent columns for "
                        f"{len(y)} observations: no residual degrees of freedom are left to "
                        "estimate the variances; simplify the fixed part (a numeric column "
                        "read as a factor?)")
    check_scale(fixed.X, fixed.names)
    if prepared.n_dropped:
        _warn_stateful_after_dropping(spec, prepared.n_dropped)
    if not spec.random:
        raise DataError("no random-effects terms in the formula: use (expr | group)")
    random = build_random(spec.random, frame, caret=caret, codings=ordered, glmm=glmm,
                          trusted=spec.trusted)
    for blk in random.blocks:
        if clearly_finite(blk.Z):
            continue
        for j, name in enumerate(blk.column_names):
            check_finite(f"{name} | {blk.group}", blk.Z[:, j], what="random-effects column")
    return Design(spec=spec, y=y, fixed=fixed, random=random, n_dropped=prepared.n_dropped,
                  levels=prepared.levels, columns=prepared.names, frame=prepared)
