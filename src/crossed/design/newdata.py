"""New data for prediction: checked against the fitted columns and levels, as lme4 does.

lme4's ``predict`` refuses a level of a fixed-effect factor that was not seen when fitting
(``factor f has new level x``), matches grouping levels by their R labels (``308`` and
``308.0`` are the level ``"308"``), gives ``NA`` for rows with a missing predictor and
treats a missing grouping value as a new level.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design.frame import DataError, labels_of, level_label

if TYPE_CHECKING:
    from crossed.design.fixed import FixedDesign, MatrixSpec
    from crossed.design.random import RandomDesign, ReBlock
    from crossed.formula.spec import ModelSpec


class Design(Protocol):
    """What encoding new data reads of a :class:`crossed.design.Design` (a protocol, so
    that this module, which ``Design.encode`` calls, does not import ``Design`` back)."""

    @property
    def spec(self) -> ModelSpec: ...
    @property
    def fixed(self) -> FixedDesign: ...
    @property
    def random(self) -> RandomDesign: ...
    @property
    def levels(self) -> dict[str, list[str]]: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def frame(self) -> pd.DataFrame | None: ...

__all__ = ["NewRows", "build_new", "check_new_values", "describe_level", "encode", "missing_rows",
           "new_level_codes"]

_UNSEEN = re.compile(r"not seen in original dataset\): (\{.*\})", re.S)


def missing_rows(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Rows with a missing value in any of ``columns`` (their prediction is NaN)."""
    out = np.zeros(len(frame), dtype=bool)
    for c in columns:
        out |= np.asarray(pd.isna(frame[c]), dtype=bool)
    return out


def check_new_values(frame: pd.DataFrame, design: Design, columns: list[str]) -> pd.DataFrame:
    """Check the value columns (predictors) of new data; numbers as float.

    Factor columns (encoded by :func:`crossed.design.frame.encode_new`) may only hold
    fitted levels, also when the column is part of a grouping factor too; numeric columns
    must hold numbers. Missing values are left for the caller (NaN predictions).

    Raises
    ------
    DataError
        Naming the column and the first unseen level or non-numeric value.
    """
    frame = frame.copy()
    for col in columns:
        values = frame[col]
        present = values[~pd.isna(values)]
        if col in design.levels:
            known = set(design.levels[col])
            bad = [v for v in pd.unique(present) if v not in known]
            if bad:
                shown = ", ".join(map(str, design.levels[col][:10]))
                raise DataError(
                    f"column {col!r} has level {bad[0]!r} not seen when fitting (a fixed "
                    f"effect cannot be predicted for a new level; levels: {shown})"
                )
            continue
        text = any(isinstance(v, str | bool | np.bool_) for v in present.unique())
        if (text or isinstance(values.dtype, pd.CategoricalDtype)
                or pd.api.types.is_bool_dtype(values)):
            # R: variable 'x' was fitted with type "numeric" but type "character" was supplied
            raise DataError(f"column {col!r} was numeric when fitting but is not numeric in "
                            f"the new data (dtype {values.dtype})")
        try:
            frame[col] = pd.to_numeric(values, errors="raise").astype(float)
        except (TypeError, ValueError):
            raise DataError(f"column {col!r} was numeric when fitting but the new data holds "
                            f"{present.iloc[0]!r}") from None
    return frame


def build_new(mspec: MatrixSpec, frame: pd.DataFrame, what: str) -> np.ndarray:
    """A model matrix on new data; a level formulaic has not seen raises (formulaic
    would code it as the reference level, with only a warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = mspec.build(frame)
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"cannot build the {what} matrix on the new data: {exc}") from exc
    unseen = [w for w in caught if _UNSEEN.search(str(w.message))]
    if unseen:
        match = _UNSEEN.search(str(unseen[0].message))
        assert match is not None  # unseen holds the warnings it matches
        values = re.sub(r"np\.\w+\(([^)]*)\)", r"\1", match.group(1))
        raise DataError(f"{_culprit(mspec, frame)} has level(s) {values} not seen when fitting "
                        f"({what} part); a new level of a fixed factor cannot be predicted")
    for w in caught:
        if not issubclass(w.category, DeprecationWarning | FutureWarning):
            warn(w.message, w.category)
    return out


def _culprit(mspec: MatrixSpec, frame: pd.DataFrame) -> str:
    """The first term of a formulaic spec whose factors meet a new level."""
    spec = mspec.formulaic
    if spec is None:
        return "a factor"
    for struct in spec.structure:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                spec.subset([struct.term]).get_model_matrix(frame)
            except Exception:  # noqa: BLE001 - only looking for the term at fault
                continue
        if any(_UNSEEN.search(str(w.message)) for w in caught):
            return f"term {str(struct.term)!r}"
    return "a factor"


def new_level_codes(blk: ReBlock, frame: pd.DataFrame) -> np.ndarray:
    """Fitted level of each row of new data for one grouping factor, -1 for a new level
    (or a missing value). Levels are matched by their R labels per column, never by a
    joined label (``x`` with ``y:z`` is not ``x:y`` with ``z``)."""
    index = {key: i for i, key in enumerate(blk.level_keys())}
    n = len(frame)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    columns = [labels_of(frame[f]) for f in blk.factors]
    codes = np.column_stack([pd.factorize(c, use_na_sentinel=True)[0] for c in columns])
    combos, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    found = np.array([-1 if (combo < 0).any() else
                      index.get(tuple(c[i] for c in columns), -1)
                      for combo, i in zip(combos, first, strict=True)], dtype=np.int64)
    return found[inverse.reshape(-1)]


def describe_level(blk: ReBlock, frame: pd.DataFrame, row: int) -> str:
    """A new data row's level of a grouping factor, as lme4 would print it."""
    values = [frame[f].iloc[row] for f in blk.factors]
    if any(_isna(v) for v in values):
        return "a missing value"
    labels = [level_label(v) for v in values]
    if len(labels) > 1 and any(":" in lv for lv in labels):  # the joined label is ambiguous
        return "the cell " + ", ".join(f"{f}={lv!r}" for f, lv in zip(blk.factors, labels,
                                                                    strict=True))
    return f"level {':'.join(labels)!r}"


def _isna(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class NewRows:
    """New data encoded for a design (:meth:`crossed.design.Design.encode`).

    Attributes
    ----------
    rows : numpy.ndarray of bool
        The rows of the new data that have every predictor (the others predict NaN, as
        lme4's ``NA``); ``X``, ``codes`` and ``Z`` hold these rows only.
    X : numpy.ndarray
        Fixed-effects model matrix, the fitted columns in their order.
    codes : list of numpy.ndarray
        Per random-effects block, each row's fitted level code (-1: a level not fitted);
        empty without the random part.
    Z : list of numpy.ndarray
        Per random-effects block, its model-matrix columns for the rows.
    """

    rows: np.ndarray
    X: np.ndarray
    codes: list[np.ndarray]
    Z: list[np.ndarray]


def encode(design: Design, newdata: pd.DataFrame, include_random: bool = True,
           allow_new_levels: bool = False) -> NewRows:
    """Encode ``newdata`` with the fitted columns, levels and transforms of ``design``.

    New levels of fixed-effect factors are refused (also in a column that is part of a
    grouping factor); new grouping levels (and missing grouping values) are refused unless
    ``allow_new_levels``, when their code is -1; rows with a missing predictor are left out
    (``rows``). See :meth:`crossed.design.Design.encode`.
    """
    from crossed.design.frame import encode_new, expression_variables

    if not isinstance(newdata, pd.DataFrame):
        raise DataError(f"newdata must be a pandas DataFrame, got {type(newdata).__name__}")
    spec = design.spec
    known_cols = set(map(str, newdata.columns)) | set(design.columns)
    value_vars = expression_variables(spec.fixed, known_cols)
    group_vars: set[str] = set()
    if include_random:
        for term in spec.random:
            value_vars |= expression_variables(term.expr, known_cols)
            group_vars |= set(term.factors)
    needed = [c for c in design.columns if c in value_vars | group_vars]
    values = [c for c in needed if c in value_vars]
    frame = encode_new(newdata, design.levels, needed)
    frame = check_new_values(frame, design, values)
    ok = ~missing_rows(frame, values)
    frame = frame.loc[ok]
    X = build_new(design.fixed.spec, frame, "fixed-effects")
    codes_list: list[np.ndarray] = []
    Zs: list[np.ndarray] = []
    if include_random:
        for blk in design.random.blocks:
            codes = new_level_codes(blk, frame)
            if not allow_new_levels and np.any(codes < 0):
                row = int(np.flatnonzero(codes < 0)[0])
                raise DataError(
                    f"{describe_level(blk, frame, row)} of grouping factor {blk.group!r} "
                    "was not in the fitted data; use allow_new_levels=True to predict "
                    "it at the population level"
                )
            parts = [build_new(mspec, frame, f"random-effects ({blk.group})")[:, list(c)]
                     for mspec, c in blk.exprs]
            codes_list.append(codes)
            Zs.append(np.column_stack(parts))
    return NewRows(rows=ok, X=X, codes=codes_list, Z=Zs)
