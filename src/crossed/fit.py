"""The fit layer: :class:`LmerFit` (defined in the model core, ``crossed.model.result``)
and the fit-level operations that need an engine (``fit.refit``).

``from crossed.fit import LmerFit`` is the public spelling. This module provides
``LmerFit.refit`` and ``GlmerFit.refit`` to the method tables
(:func:`crossed.model.result.provide`, :func:`crossed.model.glmm.result.provide`): a refit
goes through the engine registry, which sits below this layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from crossed.design.frame import DataError
from crossed.engines import fit_glmm_with, fit_with
from crossed.model.glmm.result import GlmerFit
from crossed.model.glmm.result import provide as _glmm_provide
from crossed.model.result import LmerFit, provide

__all__ = ["GlmerFit", "LmerFit", "refit_glmer"]


def _check_glmm_response(fit: GlmerFit, y: np.ndarray) -> None:
    """The new response must be one the family can have (as ``cx.glmer`` checks)."""
    name = fit.spec.response
    if fit.family.name == "binomial" and np.any((y < 0) | (y > 1)):
        raise DataError(f"refit: the binomial response {name!r} must be proportions in "
                        "[0, 1] (successes / trials, trials = the fit's prior weights)")
    if fit.family.name == "poisson" and np.any(y < 0):
        raise DataError(f"refit: negative values not allowed for the Poisson response "
                        f"{name!r}")


def refit_glmer(fit: GlmerFit, y: np.ndarray | None = None,
                rows: np.ndarray | None = None, control: Any = None) -> GlmerFit:
    """``GlmerFit.refit``: the same GLMM on a new response and/or a subset of rows.

    The stored design (model matrices, prior weights, offset) is reused: no formula
    parsing (lme4's ``refit``). Same engine, family, nAGQ and optimiser settings. The
    native engine starts from its usual starting values (θ = 1), not from the fit's
    estimates: its two-stage optimisation has no warm start.

    Parameters
    ----------
    y : array-like, optional
        New response on the scale of ``design.y``: 0/1 or proportions (binomial, trials =
        the prior weights), counts (Poisson); one value per row of the (subset) design.
    rows : array of int or bool, optional
        Rows of the fitted data to keep.
    control : LmerControl, optional
        Optimiser settings (default: the fit's own).
    """
    design = fit.design if rows is None else fit.design.subset(rows)
    if y is not None:
        try:
            y_new = np.array(y, dtype=float, copy=True)
        except (TypeError, ValueError):
            raise DataError("refit: the new response y must be numbers") from None
        design = design.with_response(y_new)
        _check_glmm_response(fit, design.y)
    if control is None and fit.opt is not None:
        control = fit.opt.control
    out: GlmerFit = fit_glmm_with(fit.engine, design, family=fit.family, nagq=fit.nagq,
                                  control=control, data_name=fit.data_name)
    return out


provide("refit", fit_with)
_glmm_provide("refit", refit_glmer)
