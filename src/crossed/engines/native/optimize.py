"""Optimiser settings, the optimisation log (OptSummary) and lme4's convergence checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import nlopt
import numpy as np

_NLOPT_CODES = {
    1: "success", 2: "stopval reached", 3: "ftol reached", 4: "xtol reached",
    5: "maxeval reached", 6: "maxtime reached", -1: "failure", -2: "invalid arguments",
    -3: "out of memory", -4: "roundoff limited", -5: "forced stop",
}


@dataclass(frozen=True)
class LmerControl:
    """Optimiser settings; the defaults are lme4's (``lmerControl()`` with ``nloptwrap``).

    Attributes
    ----------
    optimizer : str
        ``"bobyqa"`` (NLopt's LN_BOBYQA, lme4's default).
    xtol_abs, ftol_abs : float
        Absolute tolerances on theta and on the criterion (1e-8 each in lme4).
    xtol_rel : float
        Relative tolerance on theta: 1e-4, the default of R's ``nloptr``, which lme4's
        ``nloptwrap`` does not override, so lme4 stops on it too.
    maxeval : int
        Maximum number of criterion evaluations.
    check_conv : bool
        Run lme4's gradient/Hessian check at the optimum (costs about 2k² evaluations).
    conv_tol : float
        Tolerance on the scaled gradient (lme4's ``check.conv.grad``, 2e-3).
    singular_tol : float
        A bounded theta below this marks the fit singular (lme4's ``isSingular``, 1e-4).
    restarts : int
        How many times the optimiser may continue after lme4's stopping rule (default 3; 0
        gives lme4's path and nothing more). It continues, from its best point with the
        ``restart_*`` tolerances, when lme4's derivative check fails (``check_conv``) or a
        bounded theta ends below ``edge_tol`` (near the boundary, where the singular/not
        singular decision depends on where the optimiser happened to stop). See
        ``engines/native/converge.py``.
    edge_tol : float
        A bounded theta below this (but the fit not yet re-optimised) triggers one restart.
    restart_step : float
        BOBYQA's initial trust-region radius on a restart.
    restart_xtol_abs, restart_ftol_abs : float
        The restart's absolute tolerances on theta and on the criterion (its relative
        tolerance on theta is 0: it stops on these alone).
    """

    optimizer: str = "bobyqa"
    xtol_abs: float = 1e-8
    ftol_abs: float = 1e-8
    xtol_rel: float = 1e-4
    maxeval: int = 100_000
    check_conv: bool = True
    conv_tol: float = 2e-3
    singular_tol: float = 1e-4
    restarts: int = 3
    edge_tol: float = 1e-3
    restart_step: float = 1e-2
    restart_xtol_abs: float = 1e-10
    restart_ftol_abs: float = 1e-12

    def __post_init__(self) -> None:
        if self.optimizer != "bobyqa":
            raise ValueError(f"unknown optimizer {self.optimizer!r}; available: 'bobyqa'")
        for name in ("xtol_abs", "ftol_abs", "xtol_rel", "conv_tol", "singular_tol",
                     "edge_tol", "restart_xtol_abs", "restart_ftol_abs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise ValueError(f"LmerControl.{name} must be a finite number >= 0, "
                                 f"got {value!r}")
        if not (isinstance(self.restart_step, (int, float)) and self.restart_step > 0):
            raise ValueError(f"LmerControl.restart_step must be > 0, got {self.restart_step!r}")
        for name in ("maxeval", "restarts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"LmerControl.{name} must be an integer >= 0, got {value!r}")
        if not isinstance(self.check_conv, (bool, np.bool_)):
            raise TypeError(f"LmerControl.check_conv must be True or False, "
                            f"got {self.check_conv!r}")


@dataclass(frozen=True)
class OptSummary:
    """What the optimiser was asked and what it did.

    Attributes
    ----------
    optimizer : str
    theta_start, theta_final : numpy.ndarray
    lower : numpy.ndarray
    fmin : float
        Criterion at ``theta_final``.
    feval : int
        Number of criterion evaluations by the optimiser.
    return_code : int
        NLopt's code (positive: converged by a tolerance).
    message : str
    log : tuple of (theta, criterion)
        Every evaluation in order.
    gradient, hessian : numpy.ndarray or None
        Finite-difference derivatives of the criterion at the optimum over the parameters
        not on a boundary (``free``); None when the check was skipped.
    free : numpy.ndarray
        Boolean mask of parameters off their bound at the optimum.
    restarts : tuple of Restart
        The continuations after lme4's stopping rule, in order (empty when lme4's rule
        was enough); ``feval`` and ``log`` include their evaluations.
    """

    optimizer: str
    theta_start: np.ndarray
    theta_final: np.ndarray
    lower: np.ndarray
    fmin: float
    feval: int
    return_code: int
    message: str
    control: LmerControl
    log: tuple[tuple[np.ndarray, float], ...] = field(repr=False, default=())
    gradient: np.ndarray | None = None
    hessian: np.ndarray | None = None
    free: np.ndarray | None = None
    restarts: tuple[Restart, ...] = ()


@dataclass(frozen=True)
class Restart:
    """One continuation of the optimiser after lme4's stopping rule.

    Attributes
    ----------
    reason : str
        Why it continued (the failed check's message, or the theta near its bound).
    fmin_before, fmin_after : float
        Criterion at the start and at the end of the continuation (never larger).
    feval : int
        Criterion evaluations of this continuation.
    return_code : int
        NLopt's code for the continuation.
    """

    reason: str
    fmin_before: float
    fmin_after: float
    feval: int
    return_code: int


def bobyqa(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
           control: LmerControl, restart: bool = False) -> OptSummary:
    """Minimise ``fun`` with NLopt's BOBYQA under lower bounds, logging every evaluation.

    With ``restart=True`` it continues from ``x0`` with the control's ``restart_*``
    settings (a small initial radius, no relative tolerance) instead of lme4's.
    """
    k = len(x0)
    log: list[tuple[np.ndarray, float]] = []

    def objective(x: np.ndarray, grad: np.ndarray) -> float:
        val = float(fun(x))
        log.append((x.copy(), val))
        return val if math.isfinite(val) else 1e300

    opt = nlopt.opt(nlopt.LN_BOBYQA, k)
    opt.set_lower_bounds(np.where(np.isfinite(lower), lower, -np.inf))
    opt.set_min_objective(objective)
    if restart:
        opt.set_xtol_abs(control.restart_xtol_abs)
        opt.set_ftol_abs(control.restart_ftol_abs)
        opt.set_xtol_rel(0.0)
        opt.set_initial_step(control.restart_step)
    else:
        opt.set_xtol_abs(control.xtol_abs)
        opt.set_ftol_abs(control.ftol_abs)
        opt.set_xtol_rel(control.xtol_rel)
    opt.set_maxeval(control.maxeval)
    try:
        x = opt.optimize(np.asarray(x0, dtype=float))
        code = opt.last_optimize_result()
        fmin = float(opt.last_optimum_value())
    except nlopt.RoundoffLimited:
        # NLopt raises where nloptr returns status -4 with its best point ("the returned
        # minimum may still be useful"): keep the best point evaluated; the convergence
        # checks that follow judge it
        code = -4
        if log:
            x, fmin = min(log, key=lambda e: e[1] if math.isfinite(e[1]) else math.inf)
        else:
            x, fmin = np.asarray(x0, dtype=float), float(fun(np.asarray(x0, dtype=float)))
    return OptSummary(
        optimizer="NLOPT_LN_BOBYQA", theta_start=np.asarray(x0, dtype=float).copy(),
        theta_final=np.asarray(x), lower=lower.copy(), fmin=fmin,
        feval=len(log), return_code=int(code), message=_NLOPT_CODES.get(code, str(code)),
        control=control, log=tuple(log),
    )


def derivatives(fun: Callable[[np.ndarray], float], x: np.ndarray, free: np.ndarray,
                fx: float, delta: float = 1e-4,
                fun_many: Callable[[list[np.ndarray]], np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Central-difference gradient and Hessian over the ``free`` coordinates (lme4's deriv12).

    The 2m + 2m(m - 1) points are those of lme4's deriv12; ``fun_many``, when given,
    evaluates them all in one call (a batched criterion), else ``fun`` one by one.
    """
    idx = np.flatnonzero(free)
    m = len(idx)
    points: list[np.ndarray] = []
    for a, i in enumerate(idx):
        for s in (1, -1):
            xx = x.copy()
            xx[i] += s * delta
            points.append(xx)
        for b in range(a):
            j = idx[b]
            for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                xx = x.copy()
                xx[i] += si * delta
                xx[j] += sj * delta
                points.append(xx)
    values = iter(fun_many(points) if fun_many is not None and points
                  else [fun(p) for p in points])
    g = np.zeros(m)
    H = np.zeros((m, m))
    for a in range(m):
        plus, minus = next(values), next(values)
        g[a] = (plus - minus) / (2 * delta)
        H[a, a] = (plus - 2 * fx + minus) / delta**2
        for b in range(a):
            v = [next(values) for _ in range(4)]
            H[a, b] = H[b, a] = (v[0] - v[1] - v[2] + v[3]) / (4 * delta**2)
    return g, H


def check_convergence(g: np.ndarray, H: np.ndarray, tol: float,
                      hess_tol: float = 1e-6) -> list[str]:
    """lme4's ``check.conv.grad`` and ``check.conv.hess`` messages (empty when fine).

    lme4 runs these only for non-singular fits, on the derivatives of the criterion
    with respect to theta.
    """
    msgs: list[str] = []
    if len(g) == 0:
        return msgs
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
        msgs.append("Model failed to converge: the criterion is not finite near the optimum, "
                    "so its gradient and Hessian cannot be evaluated")
        return msgs
    try:
        Lh = np.linalg.cholesky(H)
        scgrad = np.linalg.solve(Lh.T, g)  # lme4: solve(chol(Hessian), gradient)
    except np.linalg.LinAlgError:
        msgs.append("unable to evaluate scaled gradient")
    else:
        maxmin = float(np.max(np.minimum(np.abs(scgrad), np.abs(g))))
        if maxmin > tol:
            comp = int(np.argmax(np.minimum(np.abs(scgrad), np.abs(g)))) + 1
            msgs.append(f"Model failed to converge with max|grad| = {maxmin:.6g} "
                        f"(tol = {tol:g}, component {comp})")
    ev = np.linalg.eigvalsh(0.5 * (H + H.T))[::-1]
    negative = int(np.sum(ev < -hess_tol))
    if negative:
        msgs.append(f"Model failed to converge: degenerate Hessian with {negative} negative "
                    "eigenvalues")
    elif np.any(np.abs(ev) < hess_tol) or ev[-1] <= 0:
        msgs.append("Hessian is numerically singular: parameters are not uniquely determined")
    else:
        if ev[0] * hess_tol > 1:
            msgs.append("Model is nearly unidentifiable: very large eigenvalue - Rescale "
                        "variables?")
        if ev[-1] / ev[0] < hess_tol:
            msgs.append("Model is nearly unidentifiable: large eigenvalue ratio - Rescale "
                        "variables?")
    return msgs
