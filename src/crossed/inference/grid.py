"""The reference grid of a fit, as emmeans 1.8.4 builds it, and the linear functions of
marginal means over it.

The grid crosses every level of every factor of the fixed part with each numeric covariate
reduced to its mean (``cov.reduce = mean``, or another reduction, or the values of ``at``;
a covariate inside ``scale()``/``poly()`` is reduced before the transform, as emmeans
does). Used by :mod:`crossed.inference.emmeans`
and by the adjusted means of :mod:`crossed.inference.adjusted`.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.design.frame import expression_variables
from crossed.inference.estimability import NullBasis
from crossed.inference.hypotheses import TermInfo
from crossed.model.partitioned import RowlessDesign, RowsNotHeldError

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["as_list", "full_grid_matrix", "grid_labels", "grid_variables",
           "involved_in_interactions", "marginal_linfct", "reference_grid"]


def as_list(x) -> list[str]:
    if x is None:
        return []
    if isinstance(x, str):
        names = [v.strip() for v in x.replace("*", ":").split(":") if v.strip()]
        if not names:
            raise ValueError(f"specs and by take variable names, got {x!r}")
        return list(dict.fromkeys(names))
    if not isinstance(x, list | tuple) or not all(isinstance(v, str) for v in x):
        raise TypeError(f"specs and by take a variable name or a list of names, got {x!r}")
    return list(dict.fromkeys(x))


def grid_variables(fit: LmerFit) -> list[str]:
    """Data columns of the fixed part, in order of first appearance in the terms."""
    cols = set(fit.design.columns)
    used = expression_variables(fit.design.spec.fixed, cols) if fit.design.spec.fixed else set()
    info = TermInfo(fit)
    order: list[str] = []
    for t in info.labels:
        for v in info.vars[t]:
            for c in ([v] if v in cols else sorted(expression_variables(v, cols))):
                if c in used and c not in order:
                    order.append(c)
    order += sorted(used - set(order))
    return order


def _factor_made_columns(fit: LmerFit) -> set[str]:
    """Numeric columns the fixed part turns into factors with ``C(column, ...)``: emmeans
    puts every level of such a column in the reference grid, not its mean."""
    cols = set(fit.design.columns)
    out: set[str] = set()
    for node in ast.walk(_parse_or_none(fit.design.spec.fixed or "")):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "C" and node.args):
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in cols:
                out.add(arg.id)
            elif (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name)
                  and arg.func.id == "Q" and arg.args and isinstance(arg.args[0], ast.Constant)
                  and arg.args[0].value in cols):
                out.add(str(arg.args[0].value))
    return out


def _parse_or_none(text: str) -> ast.AST:
    """``text`` (a fixed part such as ``C(g) * x``) as a Python expression, or an empty
    module when it is not one (backticked names: no ``C()`` to find then)."""
    try:
        return ast.parse(text.replace("~", " "), mode="eval")
    except SyntaxError:
        return ast.parse("")


_REDUCERS = {"mean": np.mean, "min": np.min, "max": np.max, "median": np.median}


def _reduce(values: np.ndarray, how, column: str) -> list[float]:
    """A covariate's grid values under emmeans' ``cov.reduce``."""
    if isinstance(how, dict):
        how = how.get(column, "mean")
    if how == "meanint":
        m = float(np.mean(values))
        return [m - 1.0, m + 1.0]
    if isinstance(how, str):
        if how not in _REDUCERS:
            raise ValueError(f"cov_reduce must be 'mean', 'min', 'max', 'median', a function "
                             f"or a dict of them per covariate, got {how!r}")
        how = _REDUCERS[how]
    if not callable(how):
        raise TypeError(f"cov_reduce for {column!r} must be a name or a function, got "
                        f"{type(how).__name__}")
    out = np.atleast_1d(np.asarray(how(values), dtype=float)).ravel()
    if out.size == 0 or not np.all(np.isfinite(out)):
        raise ValueError(f"cov_reduce gave no finite value for {column!r}")
    return [float(v) for v in out]


def _at_values(v: str, wanted, levels: dict, numeric: bool) -> list:
    """The grid values ``at`` gives a variable: levels of a factor (checked), numbers of a
    covariate."""
    vals = list(wanted) if isinstance(wanted, list | tuple | np.ndarray | pd.Series | pd.Index) \
        else [wanted]
    if not vals:
        raise ValueError(f"at[{v!r}] is empty")
    if v in levels:
        known = {str(lv): lv for lv in levels[v]}
        out = []
        for x in vals:
            if str(x) not in known:
                raise ValueError(f"at[{v!r}]: {x!r} is not a level of {v!r} (levels: "
                                 f"{', '.join(map(str, levels[v][:10]))})")
            out.append(known[str(x)])
        return out
    if not numeric:
        raise ValueError(f"at[{v!r}]: cannot set values for this variable")
    try:
        return [float(x) for x in vals]
    except (TypeError, ValueError):
        raise ValueError(f"at[{v!r}] must hold numbers for the covariate {v!r}, got "
                         f"{vals!r}") from None


def _rowless_value(design: RowlessDesign, v: str, how: Any, made_factor: bool
                   ) -> list[float]:
    """A covariate's grid value for a fit on partitioned data: its mean over the rows,
    summed by the levels pass; other reductions need the rows."""
    if isinstance(how, dict):
        how = how.get(v, "mean")
    if made_factor or not (isinstance(how, str) and how == "mean") or v not in design.means:
        what = "its distinct values" if made_factor else repr(how)
        raise RowsNotHeldError(
            f"the reference grid's value of {v!r} ({what}) "
            "needs the rows, which a fit on partitioned data does not hold: use the mean "
            "(cov_reduce='mean'), give the values with at={...}, or fit in memory")
    return [float(design.means[v])]


def reference_grid(fit: LmerFit, cov_reduce="mean", at: dict | None = None,
                   shift: dict | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """emmeans' reference grid and its model matrix.

    Parameters
    ----------
    fit : LmerFit
    cov_reduce : str, callable or dict
        How each numeric covariate enters the grid (emmeans' ``cov.reduce``): ``"mean"``
        (default), ``"min"``, ``"max"``, ``"median"``, a function of the column's values
        returning one number or several, ``"meanint"`` (mean − 1 and mean + 1, what
        ``joint_tests`` uses), or a dict of those per covariate (others: mean).
    at : dict, optional
        Grid values per variable (emmeans' ``at``): numbers for a covariate (replacing
        ``cov_reduce``), a subset of the levels for a factor.
    shift : dict, optional
        Amounts added to covariates after the grid is built (the finite difference of
        :func:`crossed.inference.emtrends.emtrends`); the returned grid shows the values
        before the shift.

    Returns
    -------
    grid : pandas.DataFrame
        One row per combination, the first variable varying fastest (``expand.grid``).
    X : numpy.ndarray
        The fixed-effects model matrix of the grid (rows x p).
    """
    frame = fit.design.frame
    rowless = isinstance(fit.design, RowlessDesign)
    if frame is None and not rowless:
        raise ValueError("the fit keeps no data columns; a reference grid needs them")
    levels = fit.design.levels
    if at is not None and not isinstance(at, Mapping):
        raise TypeError(f"at must be a dict {{variable: values}}, got {type(at).__name__}")
    at = dict(at or {})
    values: dict[str, list] = {}
    made_factors = _factor_made_columns(fit)
    names_in_grid = grid_variables(fit)
    for v in at:
        if v not in names_in_grid:
            raise ValueError(f"at: {v!r} is not a variable of the fixed part (reference grid "
                             f"has {', '.join(names_in_grid) or 'no variables'})")
    for v in names_in_grid:
        if v in at:
            values[v] = _at_values(v, at[v], levels, v not in made_factors)
        elif v in levels:
            values[v] = list(levels[v])
        elif rowless:  # (a fit on partitioned data: the means of the levels pass)
            values[v] = _rowless_value(fit.design, v, cov_reduce, v in made_factors)
        elif v in made_factors:  # C(g) of a numeric g: emmeans uses factor(g)'s levels
            values[v] = sorted(pd.unique(frame[v].to_numpy()).tolist())
        else:
            values[v] = _reduce(frame[v].to_numpy(dtype=float), cov_reduce, v)
    names = list(values)
    combos = list(itertools.product(*[values[n] for n in reversed(names)]))
    grid = pd.DataFrame([tuple(reversed(c)) for c in combos], columns=names)
    build = grid.copy()
    for v in names:
        if v in levels:
            build[v] = pd.Categorical(build[v], categories=levels[v])
    for v, h in (shift or {}).items():
        build[v] = build[v].astype(float) + h
    X = fit.design.fixed.spec.build(build) if names else np.ones((1, len(fit.beta)))
    return grid, X


class _WithDesign:
    """A fit seen with another design (the full, pre-drop fixed-effects columns)."""

    def __init__(self, fit: LmerFit, design):
        self._fit = fit
        self.design = design

    def __getattr__(self, name):
        return getattr(self._fit, name)


def full_grid_matrix(fit: LmerFit, nb: NullBasis, cov_reduce="mean", at: dict | None = None,
                     shift: dict | None = None) -> np.ndarray:
    """The reference grid's model matrix over every column of the fixed part, including
    those the fit dropped for rank (emmeans' ``X`` with ``NA`` coefficients)."""
    design = replace(fit.design, fixed=replace(fit.design.fixed, spec=nb.spec))
    _, X_full = reference_grid(_WithDesign(fit, design), cov_reduce=cov_reduce, at=at,
                               shift=shift)
    return X_full


def marginal_linfct(grid: pd.DataFrame, X: np.ndarray, facs: list[str]):
    """Equally weighted averages of grid rows per combination of ``facs`` (first fastest)."""
    for f in facs:
        if f not in grid.columns:
            have = ", ".join(grid.columns) or "no variables: the fixed part is an intercept"
            raise ValueError(f"{f!r} is not a variable of the fixed part (reference grid has "
                             f"{have})")
    levs = [list(dict.fromkeys(grid[f])) for f in facs]
    combos = [tuple(reversed(c)) for c in itertools.product(*reversed(levs))]
    keys = list(zip(*[grid[f] for f in facs], strict=True)) if facs else [()] * len(grid)
    rows = []
    for c in combos:
        idx = [i for i, k in enumerate(keys) if k == c]
        rows.append(X[idx].mean(axis=0))
    return pd.DataFrame(combos, columns=facs), np.vstack(rows)


def involved_in_interactions(fit: LmerFit, facs: list[str]) -> bool:
    """emmeans' ``.some.term.contains``: a term holds all ``facs`` and other variables."""
    info = TermInfo(fit)
    for t in info.labels:
        vs = set(info.vars[t])
        if set(facs) <= vs and len(vs) > len(facs):
            return True
    return False


def _is_num(values) -> bool:
    try:
        [float(str(v)) for v in values]
    except ValueError:
        return False
    return True


def _level_text(value: object) -> str:
    """A grid value as R writes it in a label (``as.character``): a covariate held at
    ``at`` values 0 and 3 reads ``0`` and ``3``, not ``0.0`` (15 significant digits)."""
    if isinstance(value, float | np.floating) and not isinstance(value, bool):
        return format(float(value), ".15g")
    return str(value)


def grid_labels(sub: pd.DataFrame) -> list[str]:
    """emmeans' contrast labels: numeric-looking levels get the factor's name as prefix
    (``enhance.levels``), labels containing - + / * are parenthesised (``parens``)."""
    cols = []
    for c in sub.columns:
        vals = [_level_text(v) for v in sub[c]]
        cols.append([f"{c}{v}" for v in vals] if _is_num(vals) else vals)
    labels = [" ".join(parts) for parts in zip(*cols, strict=True)]
    return [f"({lb})" if re.search(r"-|\+|/|\*", lb) else lb for lb in labels]
