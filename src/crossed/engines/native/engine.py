"""The native engine: lme4's profiled criterion minimised by BOBYQA over theta, or by
L-BFGS-B on its analytic gradient (``model/gradient.py``; ``LmerControl.optimizer``)
(lme4's settings, then continued to the optimum where lme4's checks ask for it:
``converge.py``)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from crossed._threads import single_blas_thread
from crossed.design import Design
from crossed.design.frame import DataError
from crossed.engines.native.converge import (
    CHECK_GRADIENT_THETA,
    optimize_theta,
    restart_message,
)
from crossed.engines.native.optimize import Criterion
from crossed.engines.native.rescale import reparametrisation
from crossed.engines.registry import ALL_GLMMS, Capabilities, FunctionEngine
from crossed.model.batched import objectives
from crossed.model.control import AUTO_LBFGSB_DENSE, LmerControl, OptSummary, Restart
from crossed.model.convergence import ConvergenceCheck
from crossed.model.finish import finish_fit
from crossed.model.gradient import criterion_gradient, value_and_gradient
from crossed.model.pls import PLS, profiled_deviance
from crossed.model.result import LmerResult

__all__ = ["ENGINE", "REFIT_STEP", "correlation_at_the_boundary", "fit_native", "fit_pls",
           "refit_step"]

REFIT_STEP = (0.25, 0.02, 0.2)
"""BOBYQA's initial step in a refit that starts from its fit's θ (``warm``: another
response or criterion on the same rows, as lme4's ``refit``, ``bootMer`` and simr's
``powerSim`` start from it): per θ, a quarter of its size, within [0.02, 0.2]
(:func:`refit_step`). NLopt's default step there (0.75 θ̂ on a bounded θ, as lme4's refits
take) spends the evaluations a start far from the optimum would. 100 parametric-bootstrap
responses, mean evaluations from lme4's start / from θ̂ with NLopt's step / with 0.2 for
every θ / with this step: sleepstudy 60 / 69 / 53 / 46, blurb's CCMEM 92 / 91 / 59 / 61,
blurb's ``(1 | model:dataset) + (1 + num_epochs | dataset)`` 240 / 127 / 200 / 69 (θ̂ of
0.02 and 0.06: 0.2 moves them to their bound's step), Penicillin 36 / 34 / 31 / 31, Pastes
46 / 39 / 33 / 33. The refits' criteria differ from cold starts' by the optimiser's
tolerance, either way (under 6e-6 on deviances of 1,750 to 17,000)."""


def refit_step(theta: np.ndarray) -> np.ndarray:
    """BOBYQA's initial step per θ for a refit starting at ``theta`` (the optimiser's
    parametrisation): :data:`REFIT_STEP`'s fraction of |θ|, clipped to its bounds."""
    fraction, low, high = REFIT_STEP  # (np.clip's numbers; its wrapper costs more)
    return np.minimum(np.maximum(fraction * np.abs(theta), low), high)


def fit_native(design: Design, reml: bool = True, control: LmerControl | None = None,
               data_name: str = "data", warm: np.ndarray | None = None) -> LmerResult:
    """Fit a design with the native engine.

    Parameters
    ----------
    design : Design
    reml : bool
        REML (default) or maximum likelihood.
    control : LmerControl, optional
        Optimiser settings; lme4's defaults when omitted.
    warm : numpy.ndarray, optional
        A fit's θ on the same rows to start from (:func:`fit_pls`).

    Returns
    -------
    LmerResult
    """
    with single_blas_thread():
        return fit_pls(design, PLS.of(design), reml, control or LmerControl(), data_name,
                       warm=warm)


def fit_pls(design: Design, pls: PLS, reml: bool, control: LmerControl,
            data_name: str = "data", theta0: np.ndarray | None = None,
            warm: np.ndarray | None = None) -> LmerResult:
    """Optimise theta for a design whose PLS problem is already built (``PLS.of(design)``,
    or ``PLS.of(design, like=...)`` in simulation loops, or ``PLS.from_products`` for
    partitioned data, whose design holds no rows).

    ``theta0``: the optimiser's start (default: lme4's, from the design's rows). ``warm``:
    instead, the θ (the formula's parametrisation) of a fit of the same rows, which a
    refit starts from with BOBYQA's initial step :func:`refit_step` (lme4's ``refit``
    starts there too)."""
    t0 = time.perf_counter()
    n, p = pls.n, pls.p
    # slopes on columns far from 0, collinear fixed effects: the optimiser's problem is
    # reparametrised (rescale.py; its criterion differs by a constant ``shift``)
    rep = pls.rows_memo(
        ("reparametrisation", reml),
        lambda: reparametrisation(design.random.blocks, pls.X, reml, pls.xtx if p else None))
    pls_opt, shift = pls, 0.0
    if rep is not None and pls.rows is None:
        raise DataError(
            "this model needs the optimiser's reparametrisation (" + rep.describe() + "), "
            "which is computed from the rows: centre the random-slope columns far from zero "
            "before fitting on partitioned data, or fit in memory")
    if rep is not None:
        pls_opt = pls.reparametrised(
            pls.blocks if rep.columns is None else rep.columns.apply(pls.blocks), rep.fixed)
        shift = rep.shift
    blocks = pls_opt.blocks  # (the face probes read their θ structure alone)

    def crit(theta: np.ndarray) -> float:
        return pls_opt.objective(theta, reml) + shift

    def crit_many(thetas: np.ndarray) -> np.ndarray:
        return objectives(pls_opt, thetas, reml) + shift

    best: list = [np.inf, None]  # the optimiser's best value and its factorisation

    def keeping_best(theta: np.ndarray) -> float:
        f = pls_opt.factor(np.array(theta, dtype=float))  # (a copy: NLopt reuses its array)
        value = profiled_deviance(f, n, p, reml) + shift
        if value < best[0]:
            best[:] = [value, f]
        return value

    # small designs: NLopt's runs evaluate the compiled criterion without calling Python
    # (no factorisation is kept: the optimum's is formed at the end)
    crit_keeping_best = Criterion(keeping_best,
                                  pls_opt.compiled_criterion(reml, shift, keeping_best))

    def crit_grad_keeping_best(theta: np.ndarray) -> tuple[float, np.ndarray]:
        f = pls_opt.factor(np.array(theta, dtype=float))
        value = profiled_deviance(f, n, p, reml) + shift
        if value < best[0]:
            best[:] = [value, f]
        if not np.isfinite(value):
            return value, np.full(len(theta), np.nan)
        return value, criterion_gradient(pls_opt, f, reml)

    # the analytic gradient reads the dense factor; the sparse Schur path has none
    has_gradient = not pls_opt.uses_sparse_schur
    if control.optimizer == "lbfgsb" and not has_gradient:
        raise ValueError(
            "optimizer='lbfgsb' needs the criterion's analytic gradient, which is computed "
            "from the dense part of the blocked Cholesky; this design uses the sparse Schur "
            "complement (too many random effects after the first grouping factor), so use "
            "optimizer='bobyqa' or 'auto'")
    def crit_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad, _ = value_and_gradient(pls_opt, theta, reml)
        return value + shift, grad

    if warm is not None and theta0 is not None:
        raise ValueError("fit_pls: give a start (theta0) or a fit's θ (warm), not both")
    step = None
    if warm is not None:
        start = (np.array(warm, dtype=float) if rep is None
                 else rep.optimiser_theta(warm))
        step = refit_step(start)
    else:
        start = design.random.theta_start(pls.y) if theta0 is None else theta0
    opt, check = optimize_theta(
        crit_keeping_best, start, design.random.theta_lower, control, crit_many, crit,
        crit_grad_keeping_best if has_gradient else None,
        crit_grad if has_gradient and len(start) >= CHECK_GRADIENT_THETA else None,
        blocks, costly_evaluations=(pls_opt.dense_order >= AUTO_LBFGSB_DENSE
                                    and pls_opt.scalar_later_blocks), step=step,
        compiled_check=crit_keeping_best.compiled_in_use)
    if (control.optimizer == "auto" and opt.optimizer == "L-BFGS-B"
            and correlation_at_the_boundary(pls_opt, opt.theta_final, control.singular_tol)):
        lme4_start = start if warm is None else design.random.theta_start(pls.y)
        opt, check = _bobyqa_as_well(opt, check, crit_keeping_best, lme4_start, design,
                                     blocks, control, crit_many, crit)
    theta = opt.theta_final.copy()
    f = best[1]
    if f is None or not np.array_equal(f.theta, theta):  # (NLopt returns its best point)
        f = pls_opt.factor(theta)
    dev = profiled_deviance(f, n, p, reml) + shift
    if not np.isfinite(dev):
        raise DataError(
            f"the {'REML' if reml else 'ML'} criterion is not finite at any theta the optimiser "
            f"tried ({opt.feval} evaluations): the response or a predictor holds values too "
            "large (or too small) to square in floating point; rescale the variables")
    note = restart_message(opt.restarts)
    notes = () if note is None else (note,)
    if rep is None:
        return finish_fit(design, pls, f, theta, dev, reml, "native", opt, control,
                          time.perf_counter() - t0, data_name, check, notes=notes)
    # the optimiser's problem solved at its optimum, the estimates mapped back to the
    # formula's columns (the formula's own system may have lost every digit there)
    described = rep.describe()
    opt = replace(opt, theta_final=rep.theta(theta), rescaled=described)
    fit = finish_fit(design, pls_opt, f, opt.theta_final, dev, reml, "native", opt,
                     control, time.perf_counter() - t0, data_name, check,
                     notes=(*notes, described))
    beta, vcov = rep.beta(fit.beta, fit.vcov_beta)
    return replace(fit, beta=beta, vcov_beta=vcov, u=rep.u(theta, fit.u),
                   fixed_basis=rep.fixed)


def correlation_at_the_boundary(pls: PLS, theta: np.ndarray, tol: float) -> bool:
    """Whether a correlated random-effects block has a diagonal θ below ``tol`` with a
    nonzero θ beside it in its row: a correlation of ±1 whose sign the optimiser chose.

    The criterion is then often bimodal in that sign (the two faces of the boundary), and
    a local optimiser stays on the face it reached first."""
    for blk in pls.blocks:
        idx = blk.theta_index
        for a in range(1, idx.shape[0]):
            d = idx[a, a]
            row = [idx[a, b] for b in range(a) if idx[a, b] >= 0]
            if d >= 0 and row and theta[d] < tol and any(abs(theta[j]) >= tol for j in row):
                return True
    return False


def _bobyqa_as_well(opt: OptSummary, check: ConvergenceCheck, crit, theta0: np.ndarray,
                    design: Design, blocks: tuple, control: LmerControl, crit_many,
                    check_crit) -> tuple[OptSummary, ConvergenceCheck]:
    """BOBYQA from lme4's start beside L-BFGS-B's fit; the lower criterion is kept, and
    the run recorded as a continuation (:class:`Restart`) of the fit's optimiser."""
    alt, alt_check = optimize_theta(crit, theta0, design.random.theta_lower,
                                    replace(control, optimizer="bobyqa"), crit_many,
                                    check_crit, blocks=blocks,
                                    compiled_check=crit.compiled_in_use)
    record = Restart(
        "L-BFGS-B ended with a correlation of ±1 (a diagonal θ at its bound): BOBYQA from "
        "lme4's start as well", opt.fmin, min(opt.fmin, alt.fmin), alt.feval,
        alt.return_code, 0, alt.optimizer)
    merged = dict(feval=opt.feval + alt.feval, log=opt.log + alt.log, probes=opt.probes,
                  restarts=(*opt.restarts, record, *alt.restarts))
    if alt.fmin < opt.fmin:
        return replace(alt, geval=opt.geval, **merged), alt_check
    return replace(opt, **merged), check


# crossed's own engine: every design the grammar builds (crossed.engines registers it)
def _fit_glmm(*args: object, **kwargs: object) -> object:
    from crossed.engines.native.glmer import fit_glmm

    return fit_glmm(*args, **kwargs)  # type: ignore[arg-type]


ENGINE = FunctionEngine("native", fit_native, glmm_function=_fit_glmm,
                        capabilities=Capabilities(weights=True, offsets=True, glmm=ALL_GLMMS,
                                                  glmm_weights=True, glmm_offsets=True,
                                                  max_nagq=25))
