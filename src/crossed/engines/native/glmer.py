"""The native GLMM engine: lme4's ``glmer`` (Laplace, nAGQ = 0, adaptive Gauss–Hermite).

As lme4 1.1-31: a first stage optimises the nAGQ = 0 deviance (PIRLS over u and β at each
θ) over θ; the second optimises the Laplace (or AGQ) deviance over (θ, β) jointly from
there. Both use NLopt's BOBYQA (lme4's second stage defaults to Nelder–Mead; the optimum is
the same, reached more tightly here); ``LmerControl(optimizer="nelder_mead")`` runs NLopt's
Nelder–Mead in both stages instead (lme4's ``glmerControl(optimizer = "nloptwrap", optCtrl =
list(algorithm = "NLOPT_LN_NELDERMEAD"))``), with the same stage settings (initial steps,
tolerances, β's coordinates) and continuations, so that only the algorithm differs.

With fewer than 10,000 rows (lme4's ``check.conv.nobsmax``) the finite-difference gradient
and Hessian of the criterion over (θ, β) give lme4's convergence checks and ``vcov``
(lme4's ``use.hessian``); otherwise ``vcov`` comes from R_X at the optimum.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from crossed._threads import single_blas_thread
from crossed._warn import warn
from crossed.design import Design
from crossed.design.frame import DataError
from crossed.design.random import ReBlock
from crossed.engines.native.faces import face_probes
from crossed.engines.native.optimize import (
    ROUNDOFF_LIMITED,
    Criterion,
    nlopt_algorithm,
    run_nlopt,
)
from crossed.engines.native.rescale import (
    FIXED_NOTE,
    ColumnRescaling,
    column_rescaling,
    fixed_preconditioner,
)
from crossed.model.control import LmerControl, OptSummary
from crossed.model.convergence import ConvergenceStatus, classify_convergence, derivatives
from crossed.model.factor import basis_inverse, in_basis
from crossed.model.finish import ConvergenceWarning, SingularFitWarning
from crossed.model.glmm.family import Family, family_of
from crossed.model.glmm.pirls import GlmmProblem, PirlsError
from crossed.model.glmm.result import GlmerResult
from crossed.model.status import SINGULAR_MESSAGE

__all__ = ["PirlsStartError", "SeparationWarning", "fit_glmm", "fit_glmm_problem"]

NOBS_MAX_DERIVS = 10_000  # lme4's check.conv.nobsmax
NPAR_MAX_DERIVS = 100  # lme4's check.conv.nparmax


class SeparationWarning(UserWarning):
    """A fixed effect whose estimate and SE explode: (quasi-)complete separation."""


def _bobyqa(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
            step: np.ndarray, ftol_abs: float, xtol_rel: float, maxeval: int,
            control: LmerControl) -> OptSummary:
    """The ``glmer`` stages' settings on the native engine's one NLopt run, with the
    algorithm ``control.optimizer`` names (BOBYQA, or Nelder–Mead for ``"nelder_mead"``)."""
    return run_nlopt(fun, x0, lower, control, algorithm=nlopt_algorithm(control.optimizer),
                     xtol_abs=1e-10, ftol_abs=ftol_abs, xtol_rel=xtol_rel, step=step,
                     maxeval=maxeval, copy_x=True, lowest_logged=True)


def _check_optimizer(control: LmerControl) -> None:
    """Refuse an optimiser the GLMM engine does not have, naming it (lme4's glmer would
    stop too on an unknown one)."""
    if control.optimizer == "lbfgsb":
        raise ValueError(
            "optimizer='lbfgsb' is not available for GLMMs: crossed has no analytic gradient "
            "of the Laplace/AGQ deviance; use optimizer='bobyqa' (the default, 'auto') or "
            "'nelder_mead'")


def fit_glmm(design: Design, family: Family | str = "binomial", nagq: int = 1,
             control: LmerControl | None = None, data_name: str = "data") -> GlmerResult:
    """Fit a GLMM design as lme4's ``glmer``.

    Parameters
    ----------
    design : Design
        ``y`` (binomial: proportions), ``weights`` (binomial: trials), ``offset``.
    family : Family or str
    nagq : int
        0, 1 (Laplace, default) or more (adaptive Gauss–Hermite; one scalar term only).
    control : LmerControl, optional
        ``optimizer`` (``"auto"``/``"bobyqa"``: BOBYQA; ``"nelder_mead"``: Nelder–Mead,
        both stages; ``"lbfgsb"`` raises ValueError), ``maxeval``, ``check_conv``,
        ``conv_tol``, ``singular_tol``, ``restarts``, ``pirls`` are used.

    Returns
    -------
    GlmerResult
    """
    if control is not None:
        _check_optimizer(control)
    with single_blas_thread():
        rescaling = column_rescaling(design.random.blocks)
        basis = fixed_preconditioner(design.X)
        solved = design
        if rescaling is not None:
            # slopes on columns far from 0: the optimiser runs on them centred (rescale.py)
            solved = replace(solved, random=replace(
                design.random, blocks=rescaling.apply(design.random.blocks)))
        if basis is not None:  # nearly collinear X: fitted on X R⁻¹ (rescale.py)
            solved = replace(solved, fixed=replace(
                design.fixed, X=in_basis(design.X, basis)))
        fit = _fit(solved, family_of(family), int(nagq), control or LmerControl(), data_name,
                   separation=basis is None)
        if basis is not None:  # (separation is judged on the formula's columns and β)
            fit = _unrotate(fit, design, basis)
            messages = list(fit.messages)
            _check_separation(design, fit.family, fit.beta, fit.vcov_beta, fit.mu, messages)
            fit = replace(fit, messages=tuple(messages))
        if rescaling is not None:
            fit = _back(fit, design, rescaling)
        return fit


def _unrotate(fit: GlmerResult, design: Design, R: np.ndarray) -> GlmerResult:
    """A fit of the orthogonalised fixed-effect columns X R⁻¹ written for the formula's:
    β = R⁻¹β′, its covariance, the optimiser's (θ, β) points and the check's derivatives
    (g = Jᵀg′, H = JᵀH′J with J = blockdiag(I, R)); η, the criterion, θ and the modes are
    the same model's and unchanged."""
    p = len(R)
    Ri = basis_inverse(R)
    k = len(fit.theta)

    def point(x: np.ndarray) -> np.ndarray:  # (θ, β′) -> (θ, β); stage 1's θ alone
        return x if len(x) == k else np.concatenate([x[:k], Ri @ x[k:]])

    assert fit.opt is not None  # the native fit's record
    opt = replace(fit.opt, theta_start=point(fit.opt.theta_start),
                  theta_final=point(fit.opt.theta_final),
                  log=tuple((point(x), v) for x, v in fit.opt.log))
    info = dict(fit.engine_info)
    g, H = info.get("gradient"), info.get("hessian")
    if g is not None and H is not None and len(g) == k + p:
        J = np.eye(k + p)
        J[k:, k:] = R
        info["gradient"], info["hessian"] = J.T @ g, J.T @ H @ J
    return replace(fit, design=design, beta=Ri @ fit.beta, vcov_beta=Ri @ fit.vcov_beta @ Ri.T,
                   opt=opt, engine_info=info, messages=(*fit.messages, FIXED_NOTE))


def _back(fit: GlmerResult, design: Design, rescaling: ColumnRescaling) -> GlmerResult:
    """A fit of the centred columns (``rescale.py``) written for the formula's: θ, the
    spherical modes and their conditional variances (η, β, the criterion and β's
    covariance are the same model's and unchanged)."""
    u = rescaling.effects(fit.theta, fit.u)
    cond = rescaling.variances(fit.theta, fit.cond_var_u)
    theta = rescaling.to_original(fit.theta)
    note = rescaling.describe()
    assert fit.opt is not None  # the native fit's record
    opt = replace(fit.opt, theta_final=np.concatenate([theta, fit.opt.theta_final[len(theta):]]),
                  rescaled=note)
    return replace(fit, design=design, theta=theta, u=u, cond_var_u=cond, opt=opt,
                   messages=(*fit.messages, note))


def fit_glmm_problem(design: Design, family: Family, nagq: int, control: LmerControl,
                     data_name: str, problem: object) -> GlmerResult:
    """lme4's two stages on a GLMM whose deviance ``problem`` computes (an object with
    :class:`GlmmProblem`'s methods: e.g. :class:`crossed.engines.partitioned.PartitionedGlmm`,
    PIRLS on partitioned rows). No rescaling of the design's columns and no separation
    check on the rows (the caller's: they need the rows)."""
    return _fit(design, family, nagq, control, data_name, separation=False,
                problem=problem)  # type: ignore[arg-type]


class PirlsStartError(DataError, PirlsError):
    """PIRLS failed at the starting values, where lme4 stops too ("pwrssUpdate did not
    converge in (maxit) iterations"): a PirlsError, and a DataError (bad input: the
    command line reports it as such, with the response it names)."""


def _fit(design: Design, family: Family, nagq: int, control: LmerControl,
         data_name: str, separation: bool = True, problem: GlmmProblem | None = None
         ) -> GlmerResult:
    """lme4's two stages on ``design`` (``problem``: its deviance, when not the rows'
    :class:`GlmmProblem`: a fit on partitioned data, whose caller has checked the
    response)."""
    t0 = time.perf_counter()
    if nagq < 0 or nagq > 100:
        raise ValueError(f"nAGQ must be between 0 and 100, got {nagq}")
    blocks = design.random.blocks
    if nagq > 1 and (len(design.random.terms) != 1 or blocks[0].q != 1):
        raise ValueError("nAGQ > 1 is only available for models with a single, scalar "
                         "random-effects term")
    y = np.asarray(design.y if problem is None else [], dtype=float)
    w = None if design.weights is None else np.asarray(design.weights, dtype=float)
    if len(y) and np.all(y == y[0]) and (family.degenerate_constant(float(y[0]))
                                         or w is None or np.all(w == w[0])):
        # lme4: "Response is constant" (a binomial proportion too, with the same trials in
        # every row: cbind(1, 3) on every row; with varying trials PIRLS fails below)
        raise DataError(f"the response {design.spec.response!r} is constant ({y[0]:g}) on "
                        f"all {len(y)} rows used: a GLMM cannot be fitted to it (lme4: "
                        "'Response is constant')")
    prob = GlmmProblem(design, family) if problem is None else problem
    prob.exact = control.pirls == "exact"
    lower = np.asarray(design.random.theta_lower, dtype=float)
    k = len(lower)
    p = len(design.fixed.names)
    theta0 = np.where(np.isfinite(lower), 1.0, 0.0)
    # lme4's initial PIRLS (from mustart, at the starting θ) fixes lp0 for stage 1
    prob.deviance0(theta0)
    if prob.last is None:  # PIRLS failed at the start, where lme4 stops too
        raise PirlsStartError(
            f"cannot start the GLMM of {design.spec.response!r}: PIRLS (the penalised "
            "iteratively reweighted least squares of the conditional modes) did not "
            f"converge at the starting values; lme4 stops there too ('{prob.last_error}'). "
            "Check the response and the weights (a response the fixed part fits exactly, "
            "such as one proportion in every row?)")
    prob.set_lp0(prob.last, joint=True)
    # stage 1: nAGQ = 0 over θ
    messages: list[str] = design.messages()
    settings0 = (np.full(k, 0.2), 1e-6 if nagq else 1e-10, 1e-4 if nagq else 1e-8)
    # (a scalar first term: NLopt's C loop on the compiled criterion, the same values)
    stage1 = Criterion(prob.deviance0, prob.compiled_deviance(joint=True))
    opt0 = _bobyqa(stage1, theta0, lower, *settings0, control.maxeval, control)
    opt0 = _off_faces(stage1, opt0, lower, settings0, control, blocks, messages)
    theta = opt0.theta_final.copy()
    crit0 = prob.deviance0(theta)
    s0 = prob.last
    assert s0 is not None
    beta = s0.beta.copy()
    prob.set_lp0(s0, joint=False)
    derivs: tuple[np.ndarray, np.ndarray] | None = None
    opt = opt0
    err: float | None = None  # lme4's PIRLS rule's criterion error at its optimum
    if nagq == 0:
        if control.pirls != "exact":
            err, opt0 = _pirls_check(prob, prob.deviance0, opt0, lower, np.full(k, 0.05),
                                     1e-10, control, messages)
            theta = opt0.theta_final.copy()
            crit0 = prob.deviance0(theta)
            s0 = prob.last
            assert s0 is not None
        opt = opt0
        crit = crit0
        state = s0
        x = theta.copy()
    else:
        # BOBYQA in coordinates where the β part of the Hessian is about I: β = β₀ + Rγ,
        # R R' = 2·(R_X'R_X)⁻¹ from the first stage (its first quadratic model is then
        # nearly exact in β, so it needs far fewer evaluations)
        try:
            V = prob.unscaled_vcov(theta, s0)
        except np.linalg.LinAlgError:  # R_X singular at the weights (separation)
            V = np.eye(p)
        try:
            R = np.linalg.cholesky(2.0 * V) if p else np.zeros((0, 0))
        except np.linalg.LinAlgError:
            R = np.diag(np.sqrt(np.maximum(2.0 * np.diag(V), 1e-12)))
        R = np.ascontiguousarray(R)  # (C order: the compiled criterion's products are these)
        x0 = np.concatenate([theta, beta])
        # and in θ: β follows the first stage's profile β̂(θ), each θ_j scaled by that
        # stage's curvature (2 more first-stage evaluations per θ_j): θ = θ̂ + s∘t,
        # β = β̂ + B(s∘t) + Rγ, optimised over g = (t, γ)
        theta_step = np.maximum(0.1 * np.maximum(np.abs(theta), 0.1), 0.02)
        B, scale = _theta_profile(prob, theta, lower, crit0, theta_step)
        theta_start, beta_start = theta.copy(), beta.copy()

        def to_x(g: np.ndarray) -> np.ndarray:
            t = scale * g[:k]
            return np.concatenate([theta_start + t, beta_start + B @ t + R @ g[k:]])

        def from_x(x: np.ndarray) -> np.ndarray:
            t = x[:k] - theta_start
            gamma = np.linalg.solve(R, x[k:] - beta_start - B @ t) if p else x[k:]
            return np.concatenate([t / scale, gamma])

        lower2 = np.concatenate([(lower - theta_start) / scale, np.full(p, -np.inf)])
        step = np.concatenate([np.minimum(0.5, theta_step / scale), np.full(p, 0.5)])

        def fun(x: np.ndarray) -> float:
            return prob.deviance(x, nagq)

        g0 = np.zeros(k + p)
        # criterion tolerance relative to its size (1e-10 at cbpp's 184), never below
        # what double precision can resolve in a sum of n terms
        ftol = 1e-10 * max(1.0, abs(crit0) / 200.0)
        stage2 = Criterion(lambda g: fun(to_x(g)), None if nagq > 1 else prob.compiled_deviance(
            joint=False, mapping=(theta_start, beta_start, scale, B, R)))
        optg = _bobyqa(stage2, g0, lower2, step, ftol, 1e-8, control.maxeval, control)
        optg = _off_faces(stage2, optg, lower2, (step, ftol, 1e-8), control, blocks, messages,
                          (to_x, from_x))
        if control.pirls != "exact":
            err, optg = _pirls_check(prob, lambda g: fun(to_x(g)), optg, lower2, 0.25 * step,
                                     ftol, control, messages)
        if stage2.compiled is not None and optg.log:  # (every to_x in one compiled call)
            points = stage2.compiled.mapped(np.array([g for g, _ in optg.log]))
            log = tuple(zip(points, (v for _, v in optg.log), strict=True))
        else:
            log = tuple((to_x(g), v) for g, v in optg.log)
        opt = replace(optg, theta_start=x0, theta_final=to_x(optg.theta_final), log=log)
        x = opt.theta_final.copy()
        theta, beta = x[:k], x[k:]
        if (design.n < NOBS_MAX_DERIVS and len(x) < NPAR_MAX_DERIVS and control.check_conv):
            at_x = None if nagq > 1 else prob.compiled_deviance(joint=False)
            with np.errstate(all="ignore"):
                derivs = derivatives(fun, x, np.ones(len(x), dtype=bool), opt.fmin,
                                     compiled=at_x)
        crit = prob.deviance(x, nagq)
        state = prob.last
        assert state is not None
    theta = x[:k].copy()
    beta = state.beta.copy() if nagq == 0 else x[k:].copy()
    singular = bool(np.any(theta[np.isfinite(lower)] < control.singular_tol))
    issues: list[ConvergenceStatus | None] = []
    name = "nelder_mead" if opt.optimizer == "NLOPT_LN_NELDERMEAD" else "bobyqa"
    if opt.return_code == 5:
        issues.append(ConvergenceStatus.MAX_EVALUATIONS)
        messages.append(f"optimizer ({name}) stopped at maxeval = {control.maxeval}")
    elif opt.return_code < 0 and opt.return_code != ROUNDOFF_LIMITED:
        issues.append(ConvergenceStatus.FAILED)
        messages.append(f"optimizer ({name}) failed: code {opt.return_code}")
    if singular:
        messages.append(SINGULAR_MESSAGE)
        warn(SINGULAR_MESSAGE, SingularFitWarning)
    elif derivs is not None:
        for m, kind in classify_convergence(derivs[0], derivs[1], control.conv_tol):
            messages.append(m)
            issues.append(kind)
            warn(m, ConvergenceWarning)
    status = ConvergenceStatus.combine(singular, *issues)
    # vcov: lme4's use.hessian when the Hessian over (θ, β) was computed
    try:
        unsc = prob.unscaled_vcov(theta, state)
    except np.linalg.LinAlgError:
        # R_X is singular at the optimum's working weights: weights numerically 0 where
        # fitted probabilities are 0 or 1 (separation); no Wald covariance exists there
        unsc = np.full((p, p), np.nan)
        messages.append("R_X is singular at the optimum (working weights numerically 0: "
                        "separation?): the fixed effects' covariance is NaN (the "
                        "finite-difference Hessian's is not used either: the likelihood is "
                        "flat along the separated direction)")
    vcov = unsc
    if derivs is not None and p and np.all(np.isfinite(unsc)):
        vcov = _hessian_vcov(derivs[1], k, unsc, messages)
    if separation:
        _check_separation(design, family, beta, vcov, state.mu, messages)
    u = tuple(prob.split(state.u))
    fit = GlmerResult(
        design=design, family=family, nagq=nagq, engine="native", theta=theta, beta=beta,
        u=u, deviance=prob.deviance_of(state), criterion=float(crit), vcov_beta=vcov,
        linear_predictor=state.eta, cond_var_u=tuple(prob.cond_var(theta, state)),
        opt=opt, is_singular=singular, converged=status.converged, convergence=status,
        messages=tuple(messages), data_name=data_name,
        fit_seconds=time.perf_counter() - t0,
        engine_info={"feval_stage1": opt0.feval, "feval": opt.feval if nagq else 0,
                     "pirls_evaluations": prob.evaluations, "pirls_error": err,
                     "gradient": None if derivs is None else derivs[0],
                     "hessian": None if derivs is None else derivs[1]},
    )
    return fit


HESSIAN_SE_FLOOR = 0.5
"""A Hessian-based SE below this fraction of R_X's is taken as a failed Hessian."""


def _hessian_vcov(H: np.ndarray, k: int, unsc: np.ndarray, messages: list[str]
                  ) -> np.ndarray:
    """β's covariance from the finite-difference Hessian of the deviance over (θ, β), as
    lme4's ``use.hessian``, else R_X's (``unsc``) with lme4's message where it is not
    positive definite, and also where it gives an SE below :data:`HESSIAN_SE_FLOOR` times
    R_X's: the β-block of the inverse of the full Hessian is at least the inverse of its
    β-block, which is about R_X's information, so such an SE comes from a failed Hessian
    (fuzzed: a probit fit stopping at θ = 0.0023, within the differences' step of the
    boundary, under one BLAS kernel: SEs 0.0023 against R_X's and glmer's 0.66)."""
    try:
        hi = np.linalg.inv(H)[k:, k:]
        vh = hi + hi.T
        if not (np.all(np.isfinite(vh)) and np.linalg.eigvalsh(vh).min() > 0):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        msg = ("variance-covariance matrix computed from finite-difference Hessian is "
               "not positive definite or contains NA values: falling back to var-cov "
               "estimated from RX")
        messages.append(msg)
        warn(msg, ConvergenceWarning)
        return unsc
    with np.errstate(invalid="ignore"):
        ratio = np.sqrt(np.diag(vh) / np.diag(unsc))
    low = np.flatnonzero(ratio < HESSIAN_SE_FLOOR)  # (NaN: R_X's is unavailable)
    if len(low):
        msg = (f"standard errors from the finite-difference Hessian are below "
               f"{HESSIAN_SE_FLOOR:g} times those from RX ({float(ratio[low].min()):.3g} "
               "times at the least): the Hessian is unreliable; falling back to var-cov "
               "estimated from RX")
        messages.append(msg)
        warn(msg, ConvergenceWarning)
        return unsc
    return vh


def _off_faces(fun: Callable[[np.ndarray], float], opt: OptSummary, lower: np.ndarray,
               settings: tuple[np.ndarray, float, float], control: LmerControl,
               blocks: tuple[ReBlock, ...], messages: list[str],
               coordinates: tuple[Callable[[np.ndarray], np.ndarray],
                                  Callable[[np.ndarray], np.ndarray]] | None = None
               ) -> OptSummary:
    """Continue BOBYQA (``settings``: its initial step, ftol_abs, xtol_rel) from a probe
    off a singular face of a correlated term (``faces.py``) while one lowers the
    criterion, at most ``control.restarts`` times; the probes and continuations are in
    the returned summary's ``feval`` and ``log``, and a message says what was gained.
    ``coordinates``: (to_x, from_x) between the optimiser's coordinates and (θ, β), where
    they are not θ first (the probes move θ)."""
    start_fmin = opt.fmin
    to_x, from_x = coordinates or (lambda g: g, lambda x: x)
    for _ in range(control.restarts):
        tried, start = face_probes(lambda x: fun(from_x(x)), to_x(opt.theta_final),
                                   opt.fmin, blocks, control)
        tried = [(from_x(x), v) for x, v in tried]
        start = None if start is None else from_x(start)
        log = opt.log + tuple(tried)
        if start is None:
            opt = replace(opt, feval=len(log), log=log)
            break
        more = _bobyqa(fun, start, lower, *settings, control.maxeval, control)
        log = log + more.log
        if more.fmin < opt.fmin:
            opt = replace(more, theta_start=opt.theta_start)
        opt = replace(opt, feval=len(log), log=log)
    if opt.fmin < start_fmin:
        messages.append(
            "optimizer continued from a singular correlated term's covariance written with "
            "another factor (a flat face BOBYQA had stopped on): criterion lowered by "
            f"{start_fmin - opt.fmin:.3g}")
    return opt


PROFILE_STEP = 0.02
"""The first stage's θ_j ± h, h = PROFILE_STEP·max(|θ_j|, 0.1), for :func:`_theta_profile`."""


def _theta_profile(prob: GlmmProblem, theta: np.ndarray, lower: np.ndarray, crit0: float,
                   fallback: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The second stage's coordinates for θ, from the first stage (nAGQ = 0, β profiled
    out) at its optimum θ̂ (criterion ``crit0``): for each θ_j, central differences at
    θ̂ ± h e_j give dβ̂/dθ_j (B's column) and the curvature c_j, and θ_j is scaled by
    s_j = 2/√c_j, where the second stage's Hessian along it is then about 4, as along
    γ. Without the differences (θ_j within h of its bound, a failed PIRLS, c_j ≤ 0) the
    column is 0 and s_j = 2·``fallback``_j: a step of 0.5 is the old step in θ_j.

    Without these coordinates BOBYQA, whose first model is diagonal, had to learn θ's
    coupling with β point by point: on a 2M-row binary GLMM with 50 fixed effects it
    took 400–800 evaluations and stopped where it did 0.1 apart in deviance.
    """
    k, p = len(theta), len(prob.design.fixed.names)
    B = np.zeros((p, k))
    scale = 2.0 * np.asarray(fallback, dtype=float)
    for j in range(k):
        h = PROFILE_STEP * max(abs(theta[j]), 0.1)
        if theta[j] - h < lower[j]:
            continue
        values, betas = [], []
        for sign in (1.0, -1.0):
            point = theta.copy()
            point[j] += sign * h
            values.append(prob.deviance0(point))
            last = prob.last
            betas.append(None if last is None else last.beta.copy())
        c = (values[0] - 2.0 * crit0 + values[1]) / (h * h)
        if not (np.isfinite(c) and c > 0) or betas[0] is None or betas[1] is None:
            continue
        B[:, j] = (betas[0] - betas[1]) / (2.0 * h)
        scale[j] = 2.0 / np.sqrt(c)
    return B, scale


def _pirls_check(prob: GlmmProblem, fun: Callable[[np.ndarray], float], opt: OptSummary,
                 lower: np.ndarray, step: np.ndarray, ftol: float, control: LmerControl,
                 messages: list[str]) -> tuple[float, OptSummary]:
    """Measure lme4's PIRLS rule's criterion error at the optimiser's stop; above
    ``control.pirls_limit`` say so in ``messages`` and, with ``pirls="auto"``, continue
    BOBYQA from there on the criterion at the exact modes (``prob`` stays exact).

    Returns
    -------
    err : float
        lme4's criterion minus the exact one at ``opt.theta_final``.
    opt : OptSummary
        ``opt``, or the continuation's summary with both runs' evaluations.
    """
    x = opt.theta_final
    try:
        prob.exact = False
        loose = fun(x)
        prob.exact = True
        tight = fun(x)
    finally:
        prob.exact = False
    err = float(loose - tight) if math.isfinite(loose) and math.isfinite(tight) else 0.0
    if abs(err) <= control.pirls_limit:
        return err, opt
    head = (f"lme4's PIRLS stopping rule (tolPwrss) leaves the criterion {abs(err):.3g} "
            f"{'above' if err > 0 else 'below'} the Laplace deviance at the exact "
            "conditional modes at the optimum")
    if control.pirls != "auto":
        messages.append(head + " (deviance units, the scale of likelihood-ratio "
                        "statistics); control pirls='exact' fits the Laplace approximation "
                        "itself")
        return err, opt
    prob.exact = True
    more = _bobyqa(fun, x, lower, step, ftol, 1e-8, control.maxeval, control)
    messages.append(head + ": the fit continued with PIRLS run to the modes (control "
                    "pirls='auto'), so its criterion and estimates are the Laplace "
                    "approximation's optimum, not lme4's numbers")
    return err, replace(more, theta_start=opt.theta_start, feval=opt.feval + more.feval,
                        log=opt.log + more.log)


def _check_separation(design: Design, family: Family, beta: np.ndarray, vcov: np.ndarray,
                      mu: np.ndarray, messages: list[str]) -> None:
    """Warn about (quasi-)complete separation: lme4 does not detect it (it may warn about
    convergence or a large eigenvalue); crossed names the fixed effect whose estimate is
    large with a huge SE, or says that fitted probabilities are numerically 0 or 1."""
    if not family.binary_outcome or not len(beta):
        return
    warned = False  # (this check's own warnings: R_X's message also says "separation")
    with np.errstate(invalid="ignore"):
        se = np.sqrt(np.maximum(np.diag(vcov), 0.0))
    names = design.fixed.names
    X, y = design.X, np.asarray(design.y)
    w = np.ones(len(y)) if design.weights is None else np.asarray(design.weights)
    for j, name in enumerate(names):
        col = X[:, j]
        on = (col == 1) & (w > 0)
        if name == "(Intercept)" or not np.all((col == 0) | (col == 1)) or not on.any():
            continue
        if np.all(y[on] == 1) or np.all(y[on] == 0):
            value = int(y[on][0])
            msg = (f"complete separation: every response is {value} where {name} = 1, so its "
                   f"estimate ({beta[j]:.3g}) would be infinite; its Wald test and SE are "
                   "meaningless (lme4 reports where its optimiser stopped): use a "
                   "likelihood-ratio test, or merge or drop the level")
            messages.append(msg)
            warn(msg, SeparationWarning)
            warned = True
    bad = [names[j] for j in range(len(beta)) if abs(beta[j]) > 10 and not se[j] <= 0.5 * abs(
        beta[j]) and not any(names[j] in m for m in messages)]  # (a NaN SE counts as huge)
    if bad:
        msg = (f"possible complete separation: the estimate of {', '.join(bad)} is large "
               "with a huge standard error (some level or range of it has only 0s or only "
               "1s); its Wald test is meaningless, use a likelihood-ratio test or a "
               "penalised model")
        messages.append(msg)
        warn(msg, SeparationWarning)
        return
    # R's glm.fit rule: a fitted probability within 10 eps of 0 or 1 (a level separated
    # where no column is its own indicator: the reference level, an interaction cell)
    eps = 10 * np.finfo(float).eps
    at_edge = (w > 0) & ((mu < eps) | (mu > 1 - eps))
    if at_edge.any() and not warned:
        large = [names[j] for j in range(len(beta)) if abs(beta[j]) > 10]
        which = (f"; the estimates of {', '.join(large)} are large (|estimate| > 10), "
                 "their SEs and Wald tests meaningless" if large else "")
        msg = (f"fitted probabilities numerically 0 or 1 occurred in {int(at_edge.sum())} "
               f"of {int((w > 0).sum())} rows: (quasi-)complete separation{which}; use a "
               "likelihood-ratio test, or merge or drop the separated level")
        messages.append(msg)
        warn(msg, SeparationWarning)


