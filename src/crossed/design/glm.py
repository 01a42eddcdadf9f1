"""Designs with prior weights, an offset and a GLM response (lme4's ``glmer``/``lmer``
``weights=``, ``offset=``, ``offset(x)`` terms and ``cbind(successes, failures)``).

Rows with a missing weight, offset, successes or failures are dropped before the formula's
own missing values, counted in ``Design.n_dropped`` and reported; negative weights are
refused naming the column.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design.fixed import evaluate_numeric
from crossed.design.frame import DataError, no_rows_left
from crossed.formula.spec import ModelSpec

__all__ = ["attach", "evaluate_column", "glm_inputs", "newdata_offset"]


def evaluate_column(expr: str, data: pd.DataFrame, what: str, spec: ModelSpec | None = None
                    ) -> np.ndarray:
    """A numeric column, or an expression of the formula (``log(exposure)``,
    ``size - incidence``) on every row of ``data`` (NaN where missing), by the one
    evaluator (:func:`crossed.design.fixed.evaluate_numeric`)."""
    if expr in data.columns:
        col = data[expr]
        if pd.api.types.is_bool_dtype(col):
            return np.asarray(col.to_numpy(dtype=float), dtype=float)
        if not pd.api.types.is_numeric_dtype(col) or isinstance(col.dtype,
                                                                pd.CategoricalDtype):
            raise DataError(f"{what} {expr!r} is not numeric (dtype {col.dtype})")
        return np.asarray(col.to_numpy(dtype=float, na_value=np.nan), dtype=float)
    return evaluate_numeric(expr, data, what, trusted=bool(spec and spec.trusted),
                            formula=spec.formula if spec is not None else None)



def _vector(value: Any, data: pd.DataFrame, what: str) -> tuple[np.ndarray, str]:
    """``weights=``/``offset=``: a column name or one value per row of ``data``."""
    if isinstance(value, str):
        if value not in data.columns:
            raise DataError(f"{what} column {value!r} is not in the data")
        return evaluate_column(value, data, what), value
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape[0] != len(data):
        raise DataError(f"{what} has {arr.shape[0]} values for {len(data)} rows of data")
    return arr, what


MAX_COUNT = 2.0 ** 53
"""The largest count of successes or failures in ``cbind``: past it counts are no longer
exact integers in doubles (and the binomial's trials overflow the working weights)."""


def glm_inputs(spec: ModelSpec, data: pd.DataFrame, weights: Any = None,
               offset: Any = None, used: tuple[str, ...] = (), na_action: str = "omit",
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows of ``data`` to build the design on, and the GLM arrays for them.

    Returns
    -------
    data : pandas.DataFrame
        ``data`` without the rows whose weight, offset, successes or failures is missing.
    extra : dict
        ``weights`` and ``offset`` (arrays on those rows, or None), ``failures`` (the
        failures of ``cbind``, or None), ``n_dropped`` and ``weights_name``.
    """
    n = len(data)
    missing = np.zeros(n, dtype=bool)
    where: list[str] = []
    w = off = fail = None
    wname = "weights"
    if weights is not None:
        w, wname = _vector(weights, data, "weights")
        bad = ~np.isfinite(w) & ~np.isnan(w)
        if bad.any():
            raise DataError(f"{wname} holds infinite values")
        if np.any(w[~np.isnan(w)] < 0):
            raise DataError(f"negative weights not allowed: column {wname!r} has "
                            f"{int(np.sum(w < 0))} negative values")
        if np.isnan(w).any():
            where.append(wname)
        missing |= np.isnan(w)
        given = w[~np.isnan(w)]
        if given.size and not np.any(given > 0):
            raise DataError(f"{wname}: every weight is 0: no observation carries any "
                            "weight")
    offs = []
    if offset is not None:
        offs.append(_vector(offset, data, "offset"))
    for expr in spec.offsets:
        offs.append((evaluate_column(expr, data, "offset", spec), f"offset({expr})"))
    if offs:
        off = np.zeros(n)
        for arr, name in offs:
            if np.any(np.isinf(arr)):
                raise DataError(f"{name} holds infinite values (log of 0?)")
            if np.isnan(arr).any():
                where.append(name)
            missing |= np.isnan(arr)
            off = off + arr
    if spec.cbind is not None:
        s_expr, f_expr = spec.cbind
        fail = evaluate_column(f_expr, data, "response (failures)", spec)
        succ = evaluate_column(s_expr, data, "response (successes)", spec)
        for arr, name in ((succ, s_expr), (fail, f_expr)):
            given = arr[~np.isnan(arr)]
            bad = given[np.isinf(given) | (given < 0) | (given > MAX_COUNT)]
            if len(bad):
                raise DataError(f"cbind({s_expr}, {f_expr}): the counts of {name!r} must be "
                                f"finite, non-negative and at most {MAX_COUNT:.0e} (found "
                                f"{bad[0]:g})")
            if np.isnan(arr).any():
                where.append(name)
            missing |= np.isnan(arr)
    for col in used:  # the formula's columns too, so that the design drops no row
        na = np.asarray(pd.isna(data[col]), dtype=bool)
        if na.any():
            where.append(col)
            missing |= na
    n_dropped = int(missing.sum())
    where = list(dict.fromkeys(where))  # (a cbind column is a used column too: once)
    if n_dropped and na_action == "raise":
        raise DataError(f"{n_dropped} rows have missing values in: {', '.join(where)}")
    if n and n_dropped == n:
        masks = {c: np.asarray(pd.isna(data[c]), dtype=bool) for c in used}
        if w is not None:
            masks = {wname: np.isnan(w), **masks}
        if any(m.all() for m in masks.values()):
            raise no_rows_left(masks)
        raise DataError("no rows left after dropping rows with missing values: every row "
                        f"has a missing value in one of: {', '.join(where)}")
    if n_dropped:
        warn(f"{n_dropped} of {n} rows dropped for missing values in: {', '.join(where)}")
        keep = ~missing
        data = data.loc[keep]
        w = None if w is None else w[keep]
        off = None if off is None else off[keep]
        fail = None if fail is None else fail[keep]
    return data, {"weights": w, "offset": off, "failures": fail, "n_dropped": n_dropped,
                  "weights_name": wname, "offset_argument": offset is not None}


def newdata_offset(design: Any, newdata: pd.DataFrame, offset: Any = None
                   ) -> np.ndarray | None:
    """The offset of a fitted design's linear predictor on ``newdata``.

    The formula's ``offset(expr)`` terms are evaluated on ``newdata`` (as lme4's
    ``predict``). An ``offset=`` argument of the fit cannot be: lme4 leaves it out of
    new-data predictions without a word; here ``offset`` (a column of ``newdata``, one
    value per row, or one number for all: ``0`` gives lme4's predictions) supplies it, and
    without one the prediction refuses.

    Returns
    -------
    numpy.ndarray or None
        One value per row of ``newdata`` (None: no offset); NaN where a value it needs
        is missing (the prediction is then NaN, R's NA).

    Raises
    ------
    DataError
        The fit had an ``offset=`` argument and ``offset`` is None; an infinite offset.
    """
    if design.offset_argument and offset is None:
        raise DataError("the model was fitted with an offset= argument, which new data do "
                        "not carry: pass predict(newdata, offset=...) (a column of newdata "
                        "or one value per row; 0 for none)")
    parts = []
    if isinstance(offset, int | float | np.number) and not isinstance(offset, bool):
        parts.append((np.full(len(newdata), float(offset)), "offset"))
    elif offset is not None:
        parts.append(_vector(offset, newdata, "offset"))
    for expr in design.spec.offsets:
        parts.append((evaluate_column(expr, newdata, "offset", design.spec),
                      f"offset({expr})"))
    if not parts:
        return None
    out = np.zeros(len(newdata))
    for arr, name in parts:
        if np.any(np.isinf(arr)):
            raise DataError(f"{name} holds infinite values in newdata (log of 0?)")
        out = out + arr
    return out


def attach(design: Any, extra: dict[str, Any], y: np.ndarray | None,
           spec: ModelSpec | None = None) -> Any:
    """``design`` (built on the rows :func:`glm_inputs` kept) with the GLM arrays."""
    def take(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        if len(a) != design.n:
            raise DataError("the design dropped rows the weights/offset were not told of")
        return np.ascontiguousarray(a, dtype=float)
    kw: dict[str, Any] = {"weights": take(extra["weights"]), "offset": take(extra["offset"]),
                          "n_dropped": design.n_dropped + extra["n_dropped"],
                          "offset_argument": bool(extra.get("offset_argument", False))}
    if y is not None:
        kw["y"] = y
    if spec is not None:
        kw["spec"] = spec
    return replace(design, **kw)
