"""Refits: the same model on a new response and/or a subset of the rows (lme4's ``refit``).

The stored design is reused (no formula parsing, no model-matrix building) and the fit goes
through the engine registry with the fit's engine and optimiser settings. A native LMM's
refit on the same rows (another response or criterion) starts from the fit's θ, as lme4's
``refit`` does, with small initial steps (``engines/native/engine.py``'s ``refit_step``);
other engines, row subsets and GLMMs start where a new fit would. A refit has the
class of the fit it comes from (:meth:`crossed.model.fitbase.FitBase.like`): refits of a
:class:`crossed.LmerFit` are ``LmerFit`` with all their methods. ``LmerFit.refit`` and
``GlmerFit.refit`` call these functions; inference and simulation call them directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np

from crossed.design.frame import DataError, check_response_varies
from crossed.engines.registry import fit_glmm_with, fit_with

if TYPE_CHECKING:
    from crossed.design import Design
    from crossed.model.control import LmerControl
    from crossed.model.glmm.result import GlmerResult
    from crossed.model.result import LmerResult

__all__ = ["refit_glmer", "refit_lmer"]

L = TypeVar("L", bound="LmerResult")
G = TypeVar("G", bound="GlmerResult")


def _new_design(design: Design, y: object, rows: np.ndarray | None) -> Design:
    """The design on ``rows`` with the response ``y`` (a copy: the fit freezes its arrays,
    never the caller's)."""
    if rows is not None:
        design = design.subset(rows)
    if y is not None:
        try:
            y_new = np.array(y, dtype=float, copy=True)
        except (TypeError, ValueError):
            raise DataError("refit: the new response y must be numbers") from None
        design = design.with_response(y_new)
    return design


def refit_lmer(fit: L, y: object = None, rows: np.ndarray | None = None,
               reml: bool | None = None) -> L:
    """Fit the same linear mixed model again on a new response and/or a subset of rows.

    Parameters
    ----------
    fit : LmerResult
        The fit whose design, engine, optimiser settings and data name are reused.
    y : array-like, optional
        New response, one value per row of the (subset) design.
    rows : array of int or bool, optional
        Rows of the fitted data to keep (e.g. to drop a random fraction).
    reml : bool, optional
        Criterion of the refit; defaults to the original one.

    Returns
    -------
    LmerResult
        Of the class of ``fit``. The native engine's refit on the fit's rows starts from
        the fit's θ (lme4's ``refit``; module docstring).

    Raises
    ------
    DataError
        A response that is not numbers or does not vary.
    """
    if reml is not None and not isinstance(reml, bool | np.bool_):
        raise TypeError(f"reml must be True, False or None (the fit's), got {reml!r}")
    design = _new_design(fit.design, y, rows)
    if y is not None:
        check_response_varies(design.y, fit.spec.response)
    control = fit.opt.control if fit.opt is not None else None
    reml = fit.reml if reml is None else bool(reml)
    if fit.engine == "native" and rows is None:  # (the same rows: from the fit's θ)
        from crossed.engines.native.engine import fit_native

        return fit.like(fit_native(design, reml, control, fit.data_name, warm=fit.theta))
    out = fit_with(fit.engine, design, reml=reml, control=control, data_name=fit.data_name)
    return fit.like(out)


def _check_glmm_response(fit: GlmerResult, y: np.ndarray) -> None:
    """The new response must be one the family can have (as ``cx.glmer`` checks)."""
    name = fit.spec.response
    if fit.family.name == "binomial" and np.any((y < 0) | (y > 1)):
        raise DataError(f"refit: the binomial response {name!r} must be proportions in "
                        "[0, 1] (successes / trials, trials = the fit's prior weights)")
    if fit.family.name == "poisson" and np.any(y < 0):
        raise DataError(f"refit: negative values not allowed for the Poisson response "
                        f"{name!r}")


def refit_glmer(fit: G, y: object = None, rows: np.ndarray | None = None,
                control: LmerControl | None = None) -> G:
    """Fit the same GLMM again on a new response and/or a subset of rows.

    The stored design (model matrices, prior weights, offset) is reused: no formula
    parsing (lme4's ``refit``). Same engine, family, nAGQ and optimiser settings. The
    native engine starts from its usual starting values (θ = 1), not from the fit's
    estimates: its two-stage optimisation has no warm start.

    Parameters
    ----------
    fit : GlmerResult
    y : array-like, optional
        New response on the scale of ``design.y``: 0/1 or proportions (binomial, trials =
        the prior weights), counts (Poisson); one value per row of the (subset) design.
    rows : array of int or bool, optional
        Rows of the fitted data to keep.
    control : LmerControl, optional
        Optimiser settings (default: the fit's own).

    Returns
    -------
    GlmerResult
        Of the class of ``fit``.
    """
    design = _new_design(fit.design, y, rows)
    if y is not None:
        _check_glmm_response(fit, design.y)
    if control is None and fit.opt is not None:
        control = fit.opt.control
    out: G = fit_glmm_with(fit.engine, design, family=fit.family, nagq=fit.nagq,
                           control=control, data_name=fit.data_name)
    return fit.like(out)
