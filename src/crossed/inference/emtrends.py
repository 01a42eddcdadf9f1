"""Estimated marginal trends: slopes of a covariate per level of factors, as emmeans 1.8.4's
``emtrends`` computes them.

emmeans builds the reference grid twice, with the covariate ``var`` at its grid values and
at those values plus h = ``delta_var`` (default 0.001 × the range of ``var`` in the data),
and takes the difference quotient of the two model matrices, (X(x + h) − X(x)) / h, as the
linear functions of the trends. It is exact for terms linear in ``var`` (``x``, ``x:f``) and
a forward difference otherwise (``I(x^2)``, ``poly(x, 2)``, ``log(x)``): the same number R
reports. The trends are then averaged over the grid like EMMs, with SE, Satterthwaite or
Kenward–Roger df and intervals from the same machinery (:mod:`crossed.inference.emmeans`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.inference.ddf import normalise_ddf
from crossed.inference.emmeans import INTERACTION_NOTE, EMMeans, split_specs
from crossed.inference.estimability import fit_null_basis
from crossed.inference.grid import (
    full_grid_matrix,
    grid_variables,
    involved_in_interactions,
    marginal_linfct,
    reference_grid,
)
from crossed.model.prior import refuse_prior

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["emtrends"]


def emtrends(fit: LmerFit, specs: str | list[str], var: str,
             by: str | list[str] | None = None, ddf: str = "satterthwaite",
             level: float = 0.95, at: dict | None = None, cov_reduce="mean",
             delta_var: float | None = None) -> EMMeans:
    """Slopes of the covariate ``var`` per level of ``specs`` (emmeans'
    ``emtrends(fit, ~ specs, var = "x")``).

    Parameters
    ----------
    fit : LmerFit
    specs : str or list of str
        Factors whose trends are wanted (``"model"``), ``"a | b"``, or ``"1"`` for the
        overall trend.
    var : str
        A numeric column of the fixed part (it may appear inside ``I(x^2)``, ``poly()``,
        ``log()``: the trend is d prediction / d ``var``).
    by : str or list of str, optional
        Conditioning variables.
    ddf : {"satterthwaite", "kenward-roger", "none"}
        emmeans' ``lmer.df``.
    level : float
        Confidence level.
    at, cov_reduce
        Grid values, as :func:`crossed.inference.emmeans.emmeans` (``at={"x": [1, 3]}``
        gives the trend of a nonlinear term at those values).
    delta_var : float, optional
        Step of the difference quotient (default 0.001 × the range of ``var``).

    Returns
    -------
    EMMeans
        ``table()`` gives the trends in the column ``<var>.trend`` (``Days.trend``, as
        emmeans names it; also ``attrs["estimate_name"]``) with ``std_error``, ``df``,
        ``conf_low``, ``conf_high``; ``pairs()``/``contrast()`` compare them (their
        differences in ``estimate``, as for EMMs). Validated against emmeans
        1.8.4 (linear and quadratic terms; Satterthwaite and Kenward–Roger).
    """
    refuse_prior(fit, "emtrends()", weights=False,
                 why="an offset that depends on var changes the trend, not handled here")
    specs_l, by_l = split_specs(specs, by)
    method = normalise_ddf(ddf)
    frame = fit.design.frame
    if frame is None:
        raise ValueError("the fit keeps no data columns; emtrends needs them")
    if not isinstance(var, str) or var not in grid_variables(fit):
        raise ValueError(f"var={var!r} is not a variable of the fixed part (it has "
                         f"{', '.join(grid_variables(fit)) or 'none'})")
    if var in fit.design.levels:
        raise ValueError(f"var={var!r} is a factor; emtrends needs a numeric covariate")
    x = frame[var].to_numpy(dtype=float)
    h = 0.001 * float(np.ptp(x)) if delta_var is None else float(delta_var)
    if not np.isfinite(h) or h == 0:
        raise ValueError(f"delta_var must be a nonzero number (the range of {var!r} is "
                         f"{np.ptp(x)!r})")
    grid, X0 = reference_grid(fit, cov_reduce=cov_reduce, at=at)
    _, X1 = reference_grid(fit, cov_reduce=cov_reduce, at=at, shift={var: h})
    D = (X1 - X0) / h
    facs = specs_l + [b for b in by_l if b not in specs_l]
    keys, L = marginal_linfct(grid, D, facs)
    if not facs:
        keys = pd.DataFrame({"1": ["overall"]})
    messages = []
    if facs and involved_in_interactions(fit, facs):
        messages.append(INTERACTION_NOTE)
        warn(INTERACTION_NOTE, UserWarning)
    nb = fit_null_basis(fit)
    L_full = None
    if nb is not None:
        F0 = full_grid_matrix(fit, nb, cov_reduce, at)
        F1 = full_grid_matrix(fit, nb, cov_reduce, at, shift={var: h})
        _, L_full = marginal_linfct(grid, (F1 - F0) / h, facs)
    return EMMeans(fit=fit, specs=specs_l or ["1"], by=by_l, grid=keys, linfct=L,
                   ddf=method, level=level, messages=messages, linfct_full=L_full,
                   nbasis=nb, estimate_name=f"{var}.trend")
