"""Refits for simulation loops: the numbers of ``LmerFit.refit``, less set-up per refit.

When only the response changes (parametric bootstrap, power analysis) the cross-products
that do not involve y are reused (:meth:`PLS.with_response`); row subsets (missing-data
ablation) build a fresh design without copying the private data frame that reference grids
need. ``check_conv=False`` skips lme4's post-fit gradient/Hessian check (2k² extra
criterion evaluations for k variance parameters): estimates are unchanged, only
``converged`` and the convergence messages are not computed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from crossed._threads import single_blas_thread
from crossed.engines.native.engine import fit_native, fit_pls
from crossed.engines.refit import refit_glmer, refit_lmer
from crossed.model.control import LmerControl
from crossed.model.pls import PLS
from crossed.simulate.response import is_glmm

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["FIT_ERRORS", "Refitter"]


FIT_ERRORS = (Exception,)
"""Exceptions recorded as a failed replicate of a simulation (with the message) instead of
ending the run: every ``Exception``. ``KeyboardInterrupt`` and ``SystemExit`` are not
caught here (an interrupt stops the run, keeping the finished replicates)."""


class Refitter:
    """Repeated refits of one fitted model (native engine).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
        The model whose design is reused. A GLMM is refitted by
        :func:`crossed.engines.refit.refit_glmer` (its engine, family and nAGQ; no reuse of
        products). Fits from other engines are refitted by
        :func:`crossed.engines.refit.refit_lmer` (no speed-up). Refits have the class of
        ``fit`` (an ``LmerFit`` gives ``LmerFit`` refits, with all their methods).
    check_conv : bool, optional
        Run lme4's convergence derivative check after each refit (default: as the fit's
        own control). Skipping it skips the continuation after a failed check
        (``engines/native/converge.py``): a fit whose check would fail keeps lme4's stop.
    keep_frame : bool
        Keep the private data frame on row-subset refits (needed for EMMs computed from
        scratch on the refit, e.g. ``refit.emmeans(...)``); off by default for speed.

    Notes
    -----
    A refit on the fit's rows starts the optimiser at the fit's θ, as ``fit.refit`` does
    (lme4's ``refit``); a subset of rows where a new fit would. Validated by
    ``tests/simulate/test_fastrefit.py``: theta, beta, sigma, deviance and vcov are
    identical (``assert_array_equal``) to those of ``fit.refit``.
    """

    def __init__(self, fit: LmerFit, check_conv: bool | None = None, keep_frame: bool = False):
        self.fit = fit
        self.glmm = is_glmm(fit)
        self.native = fit.engine == "native" and not self.glmm
        base = fit.opt.control if fit.opt is not None else LmerControl()
        if check_conv is not None:
            base = replace(base, check_conv=check_conv)
        self.control = base
        self.keep_frame = keep_frame
        # held here as well as in the fit's cache: a pickled fit (a worker's copy) starts
        # from an empty cache, the refitter ships the response-free products with it
        self._pls = fit.pls if self.native else None

    def refit(self, y: np.ndarray | None = None, rows: np.ndarray | None = None,
              reml: bool | None = None) -> LmerFit:
        """As :meth:`crossed.LmerFit.refit` (new response and/or subset of rows)."""
        fit = self.fit
        if self.glmm:  # GLMMs: refit_glmer with this refitter's control
            if reml:
                raise ValueError("a GLMM has no REML criterion (reml must be None)")
            return refit_glmer(fit, y=y, rows=rows, control=self.control)  # type: ignore[type-var]
        if not self.native:  # other engines: through the registry
            return refit_lmer(fit, y=y, rows=rows, reml=reml)
        if y is not None:  # a copy: the refit freezes its arrays, never the caller's
            y = np.array(y, dtype=float, copy=True)
        reml = fit.reml if reml is None else reml
        if rows is None:
            design = fit.design if y is None else fit.design.with_response(y)
            with single_blas_thread():
                pls = PLS.of(design, like=self._pls)
                return fit.like(fit_pls(design, pls, reml, self.control, fit.data_name,
                                        warm=fit.theta))
        design = fit.design.subset(rows, keep_frame=self.keep_frame)
        if y is not None:
            design = design.with_response(y)
        return fit.like(fit_native(design, reml, self.control, fit.data_name))
