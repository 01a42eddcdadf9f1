"""The native engine: lme4's profiled criterion minimised by BOBYQA over theta
(lme4's settings, then continued to the optimum where lme4's checks ask for it:
``converge.py``)."""

from __future__ import annotations

import time
import warnings

import numpy as np

from crossed._threads import single_blas_thread
from crossed.design import Design
from crossed.design.frame import DataError
from crossed.engines.native.batched import objectives
from crossed.engines.native.converge import (
    ConvergenceCheck,
    assess,
    optimize_theta,
    restart_message,
)
from crossed.engines.native.optimize import LmerControl, OptSummary
from crossed.engines.native.pls import PLS, profiled_deviance
from crossed.fit import LmerFit


class ConvergenceWarning(UserWarning):
    """The optimiser did not converge cleanly (lme4's convergence warnings)."""


class SingularFitWarning(UserWarning):
    """A bounded variance parameter is on the boundary (lme4's ``boundary (singular) fit``)."""


def fit_native(design: Design, reml: bool = True, control: LmerControl | None = None,
               data_name: str = "data") -> LmerFit:
    """Fit a design with the native engine.

    Parameters
    ----------
    design : Design
    reml : bool
        REML (default) or maximum likelihood.
    control : LmerControl, optional
        Optimiser settings; lme4's defaults when omitted.

    Returns
    -------
    LmerFit
    """
    with single_blas_thread():
        pls = PLS(design.random.blocks, design.X, design.y)
        return fit_pls(design, pls, reml, control or LmerControl(), data_name)


def fit_pls(design: Design, pls: PLS, reml: bool, control: LmerControl,
            data_name: str = "data") -> LmerFit:
    """Optimise theta for a design whose PLS problem is already built (e.g. by
    :meth:`PLS.with_response` in simulation loops)."""
    t0 = time.perf_counter()
    n, p = design.X.shape

    def crit(theta: np.ndarray) -> float:
        return pls.objective(theta, reml)

    def crit_many(thetas: list[np.ndarray]) -> np.ndarray:
        return objectives(pls, thetas, reml)

    best: list = [np.inf, None]  # the optimiser's best value and its factorisation

    def crit_keeping_best(theta: np.ndarray) -> float:
        f = pls.factor(np.array(theta, dtype=float))  # (a copy: NLopt reuses its array)
        value = profiled_deviance(f, n, p, reml)
        if value < best[0]:
            best[:] = [value, f]
        return value

    opt, check = optimize_theta(crit_keeping_best, design.random.theta_start(pls.y),
                                design.random.theta_lower, control, crit_many, crit)
    theta = opt.theta_final.copy()
    f = best[1]
    if f is None or not np.array_equal(f.theta, theta):  # (NLopt returns its best point)
        f = pls.factor(theta)
    dev = profiled_deviance(f, n, p, reml)
    if not np.isfinite(dev):
        raise DataError(
            f"the {'REML' if reml else 'ML'} criterion is not finite at any theta the optimiser "
            f"tried ({opt.feval} evaluations): the response or a predictor holds values too "
            "large (or too small) to square in floating point; rescale the variables")
    return finish_fit(design, pls, f, theta, dev, reml, "native", opt, control, t0, data_name,
                      check)


def finish_fit(design: Design, pls: PLS, f, theta: np.ndarray, dev: float, reml: bool,
               engine: str, opt: OptSummary | None, control: LmerControl, t0: float,
               data_name: str, check: ConvergenceCheck | None = None) -> LmerFit:
    """Solve for β, u, σ and vcov at ``theta``, report the checks and build the result.

    ``check`` is lme4's verdict at ``theta`` (:func:`converge.assess`); without it the fit
    is only checked for singularity (engines that run their own optimiser and checks).
    """
    n, p = design.X.shape
    messages: list[str] = []
    if design.n_dropped:
        messages.append(f"{design.n_dropped} rows dropped for missing values")
    if design.fixed.dropped:
        messages.append("rank-deficient fixed-effect columns dropped: "
                        + ", ".join(design.fixed.dropped))
    if check is None:
        check = assess(theta, dev, design.random.theta_lower, control, None)
    if opt is not None:
        note = restart_message(opt.restarts)
        if note is not None:
            messages.append(note)
        if opt.return_code < 0 or opt.return_code == 5:
            messages.append(f"optimizer ({opt.optimizer}) stopped: {opt.message}")
    for m in check.messages:
        messages.append(m)
        warnings.warn(m, ConvergenceWarning, stacklevel=6)
    singular = check.singular
    if singular:
        msg = "boundary (singular) fit: see help('isSingular')"
        messages.append(msg)
        warnings.warn(msg, SingularFitWarning, stacklevel=6)
    try:
        beta, u = pls.solve(f)
        Ri = pls.rx_inverse(f)
    except np.linalg.LinAlgError as exc:
        raise DataError(
            f"the penalised least-squares system at the optimum is numerically not positive "
            f"definite ({exc}): the predictors are on very different scales or nearly "
            "collinear; rescale the variables (lme4 stops here with 'Downdated VtV is not "
            "positive definite')") from None
    denom = n - p if reml else n
    sigma = float(np.sqrt(f.pwrss / denom))
    vcov = sigma**2 * (Ri.T @ Ri)
    fit = LmerFit(
        design=design, reml=reml, engine=engine, theta=theta, beta=beta, sigma=sigma,
        deviance=float(dev), vcov_beta=vcov, u=tuple(u), opt=opt, is_singular=singular,
        converged=check.converged, messages=tuple(messages), data_name=data_name,
    )
    fit._cache["pls"] = pls
    fit._cache["factor"] = f
    fit._cache["fit_seconds"] = time.perf_counter() - t0
    return fit
