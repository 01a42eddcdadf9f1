"""Optimise theta to the optimum: lme4's BOBYQA run (or L-BFGS-B on the analytic
gradient, or NLopt's Nelder–Mead: ``LmerControl.optimizer``), its checks, and
continuations.

lme4 stops BOBYQA when the trust radius falls below ``xtol_rel = 1e-4`` and then checks
the result (``checkConv``: scaled gradient and Hessian by finite differences, skipped for
singular fits). On a flat criterion, where that rule stops depends on the last bits of the
arithmetic (BLAS kernel, summation order), so the same data can end "converged and
singular" on one machine and "failed to converge, not singular" on another.

crossed therefore continues after lme4's rule, from the best point found, with a small
trust radius and absolute tolerances only (:class:`LmerControl`'s ``restart_*`` settings),
after a first run by BOBYQA or by Nelder–Mead alike (a Nelder–Mead fit's continuations are
BOBYQA's),

* when the derivative check fails (a gradient or Hessian message, or a criterion that is
  not finite near the optimum), or
* once, when a bounded theta ends below ``edge_tol`` (near the boundary, including on it:
  lme4's ``restart_edge`` idea), from that point with those thetas moved off the bound
  (``edge_start``), because there the singular / not singular decision and the check
  itself depend on where the optimiser happened to stop, and the optimum may lie on
  another face of the boundary,

until the check passes, the fit is singular (lme4 skips the check then), no kind of
continuation lowers the criterion any more, or ``control.restarts`` continuations were
made. A failed gradient check is continued first, once a fit, by the Newton step of the
check's own gradient and Hessian (one evaluation): where that point is lower, the check at
it decides, and BOBYQA continues where it is not lower or the check fails again (the
leaderboard under one BLAS kernel: 52 BOBYQA evaluations to lower the criterion by 8e-6,
where the step's one reached it to 1e-15 relative). A kind that no longer helps is not
repeated, and the next is tried (the face probes
below, then the far θ's continuation): an edge restart that did not help had ended the
fit on a face under one BLAS kernel (as lme4's, 0.51 above the face the other kernel
reached, ``tests/data/face_after_edge_lmm.csv``). What was done is recorded in
:attr:`OptSummary.restarts` and in the fit's messages.

After L-BFGS-B the edge restart is a second-order test instead (:func:`_probe_edges`).
A step projected onto a bound puts a diagonal θ at exactly 0, where the criterion is even
in it (a column of Λ's template), so its derivative and its cross-derivatives vanish there
and the projected gradient is zero whether 0 is a minimum or a saddle (ham_crossed stops
there once). Each θ near its bound is moved off it alone (:data:`EDGE_PROBES`); where
no probe lowers the criterion, the stop is a local minimum and the fit ends (blurb CCMEM
+ 8 slopes: 3 evaluations where a BOBYQA continuation took ~220). Where one does, L-BFGS-B
continues from the best probe, and the test repeats at its stop; the last allowed
continuation is BOBYQA's, which does not come back to a saddle (restarted L-BFGS-B, blind,
had come back to θ = 0 on ner_like with five crossed intercepts, 2.3 above BOBYQA's
criterion). A failed derivative check is continued by BOBYQA, as after BOBYQA.

When neither applies and a correlated term ends with a diagonal θ near 0, the same
covariance written with another factor is probed off that face (``faces.py``); BOBYQA
continues from a probe that descends. lme4 stops on such a face too: on random
``(x | g)`` tables 4 % of fits ended there, up to 0.98 above the optimum.

Where the check passes but its gradient and Hessian predict a lower point by a Newton
step (:func:`_probe_newton`: a valley nearly flat along one θ, where BOBYQA's ftol stop
has a small gradient), that step is evaluated, and BOBYQA continues from it when it
descends. Elsewhere the predicted decrease is below :data:`NEWTON_GAIN` and nothing is
evaluated.

Last, where a BOBYQA fit ends with a θ over ``FAR_THETA`` (two decades from lme4's start),
L-BFGS-B on the exact gradient continues once from its stop, with tight tolerances
(:func:`far_from_start`): BOBYQA's trust region, started at lme4's scale, stalls in the
long curved valley such a variance makes.

Validated by ``tests/engines/test_native_converge.py`` and, under both BLAS kernels in CI,
by the conformance suite: on every reference case the criterion is at most lme4's
+ 1e-9 relative, and ``converged`` / ``is_singular`` agree with R.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from crossed.design.random import ReBlock
from crossed.engines.native.faces import face_probes
from crossed.engines.native.optimize import ROUNDOFF_LIMITED, bobyqa, lbfgsb, nelder_mead
from crossed.model import _core
from crossed.model.control import AUTO_LBFGSB_THETA, LmerControl, OptSummary, Restart
from crossed.model.convergence import ConvergenceCheck, ConvergenceStatus, assess

__all__ = ["CHECK_GRADIENT_THETA", "FAR_THETA", "far_from_start", "optimize_theta",
           "restart_message"]

CHECK_GRADIENT_THETA = AUTO_LBFGSB_THETA
"""From this many θ on, lme4's derivative check runs on the exact gradient (and the
Hessian by differences of exact gradients: 2k + 1 gradients) when the engine has it;
below, on lme4's finite differences (2k² criterion evaluations, batched), which cost less
there."""


def _near_bound(theta: np.ndarray, lower: np.ndarray, control: LmerControl) -> np.ndarray:
    """The bounded thetas below ``control.edge_tol`` (indices)."""
    return (np.isfinite(lower) & (theta < control.edge_tol)).nonzero()[0]


def _restart(theta: np.ndarray, check: ConvergenceCheck, lower: np.ndarray,
             control: LmerControl, edge: bool) -> tuple[str, np.ndarray, bool] | None:
    """Why the optimiser should continue, from where, and whether for a theta near its
    bound; None when it should not.

    A failed check continues from ``theta``. Where ``edge`` is allowed, a theta near its
    bound continues from ``theta`` with those coordinates moved to ``control.edge_start``:
    BOBYQA restarted on the bound itself stays on that face of the boundary, while the
    optimum may lie on another (a variance that is zero at the stop but not at the
    optimum, another one going to zero instead).
    """
    if ConvergenceStatus.GRADIENT in check.issues and check.gradient is not None:
        if not np.all(np.isfinite(check.gradient)):
            return "criterion not finite near the optimum", theta.copy(), False
        return (f"gradient check failed, max|grad| = {np.max(np.abs(check.gradient)):.3g}",
                theta.copy(), False)
    if ConvergenceStatus.HESSIAN in check.issues:
        failed = check.messages[check.issues.index(ConvergenceStatus.HESSIAN)]
        return ("Hessian check failed: " + failed.removeprefix("Model failed to converge: "),
                theta.copy(), False)
    near = _near_bound(theta, lower, control) if edge else np.zeros(0, dtype=np.intp)
    if not len(near):
        return None
    start = theta.copy()
    start[near] = np.maximum(start[near], control.edge_start)
    return (f"theta[{int(near[0])}] = {theta[near[0]]:.3g} ended within "
            f"{control.edge_tol:g} of its bound", start, True)


FAR_THETA = 100.0
"""A fit with a θ over this (two decades from lme4's start, Λ = I) is continued once by
L-BFGS-B on the exact gradient (:func:`far_from_start`)."""


FAR_FTOL = 1e-15
FAR_GTOL = 1e-10
"""That continuation's L-BFGS-B tolerances: its steps along the valley lower the criterion
by less than the default ``lbfgsb_ftol`` (1e-12 relative) long before its floor."""


def far_from_start(theta: np.ndarray) -> int | None:
    """The first θ whose magnitude exceeds ``FAR_THETA``, or None.

    BOBYQA's trust region starts at lme4's scale (θ = 1, steps of 0.2 shrinking to
    ``xtol_rel``) and stalls in the long curved valley a criterion has where a variance is
    orders of magnitude off that scale. ``y ~ 1 + (x || g) + (1 | h)`` with x a year
    divided by c (fuzzed; the intercept's θ is 423 at the optimum, the slope's 0.49·c)
    stopped with lme4's check passed at up to 0.048 above the optimum, depending on c and
    the last bits; lme4 1e-4 above it for c = 100 (with a gradient warning), 0.002 for
    c = 10. L-BFGS-B on the exact gradient reaches the floor from any of those stops."""
    far = (np.abs(theta) > FAR_THETA).nonzero()[0]
    return int(far[0]) if len(far) else None


EDGE_PROBES = (1e-3, 1e-2, 1e-1)
"""Where :func:`_probe_edges` moves each θ that L-BFGS-B left at (or near) its bound."""
PROBE_GAIN = 1e-10
"""A probe counts as a descent when it lowers the criterion by more than this, relative."""


NEWTON_GAIN = 1e-9
"""Where lme4's check passes but its derivatives' quadratic model predicts a decrease of
more than this (relative) by the Newton step, that step is probed (:func:`_probe_newton`)."""


def _probe_newton(crit: Callable[[np.ndarray], float], theta: np.ndarray, fmin: float,
                  lower: np.ndarray, check: ConvergenceCheck, gain: float = NEWTON_GAIN,
                  descent: float = PROBE_GAIN,
                  ) -> tuple[list[tuple[np.ndarray, float]], np.ndarray | None]:
    """The Newton step of a passing check's derivatives, projected onto the bounds.

    lme4's gradient check passes where the gradient is small, whatever the curvature: in
    a valley nearly flat along one θ (a correlated slope whose column is far from 0,
    Hessian eigenvalues 20 and 9e-5) BOBYQA's ftol stop 0.8 from the optimum on the
    bound has a gradient of 6e-5 there, and the check passes 2.4e-5 above the optimum.
    The check's gradient g and positive definite Hessian H (over the free θ) predict the
    decrease −(gᵀs + ½ sᵀHs) of the step s to the projection of θ − H⁻¹g onto the bounds;
    where it exceeds ``gain`` (relative; :data:`NEWTON_GAIN`) the step is evaluated (one
    evaluation). After a failed gradient check the step is taken whatever the gain
    (``gain`` and ``descent`` 0): the check at the point it reaches decides.

    Returns
    -------
    list of (theta, criterion)
        The probe, for the optimisation log (empty where none was made).
    numpy.ndarray or None
        The probe where it lowers the criterion by more than ``descent`` (relative;
        :data:`PROBE_GAIN`): the start of a continuation; else None.
    """
    g, H, free = check.gradient, check.hessian, check.free
    if g is None or H is None or free is None or not free.any():
        return [], None
    point = np.empty(len(theta))  # (the step and its predicted decrease: one compiled call)
    predicted = _core.newton_probe(np.ascontiguousarray(g, dtype=float),
                                   np.ascontiguousarray(H, dtype=float), free.nonzero()[0],
                                   np.ascontiguousarray(theta, dtype=float),
                                   np.ascontiguousarray(lower, dtype=float), point)
    if not (predicted > gain * max(1.0, abs(fmin)) and np.isfinite(point).all()):
        return [], None
    value = float(crit(point))
    tried = [(point, value)]
    if np.isfinite(value) and value < fmin - descent * max(1.0, abs(fmin)):
        return tried, point
    return tried, None


NEWTON_STEP = "Newton step"
"""The optimiser name of a continuation that is the check's Newton step alone."""


def _step_summary(opt: OptSummary, point: tuple[np.ndarray, float]) -> OptSummary:
    """A continuation of one evaluation, at ``point`` (θ, criterion): the Newton step of
    a failed gradient check's derivatives (:func:`_probe_newton`), which the check at it
    then judges as any continuation's stop. NLopt's code and message stay ``opt``'s."""
    theta, value = point
    return replace(opt, optimizer=NEWTON_STEP, theta_start=opt.theta_final.copy(),
                   theta_final=theta, fmin=value, feval=1, log=(point,), geval=0,
                   restarts=())


def _probe_edges(crit: Callable[[np.ndarray], float], theta: np.ndarray, fmin: float,
                 lower: np.ndarray, control: LmerControl,
                 ) -> tuple[list[tuple[np.ndarray, float]], np.ndarray | None]:
    """The second-order test at an L-BFGS-B stop on the boundary.

    At a diagonal θ of 0 whose column of Λ's template is otherwise 0 (every scalar block)
    the criterion is even in that θ, so its derivative in it and its cross-derivatives
    with every other θ vanish there: L-BFGS-B's projected gradient is zero whether 0 is a
    minimum or a saddle. The Hessian is then block-diagonal, and the stop is a local
    minimum when the criterion rises as that θ alone leaves the bound. Each θ below
    ``control.edge_tol`` is moved alone to the values of :data:`EDGE_PROBES` (one
    evaluation each).

    Returns
    -------
    list of (theta, criterion)
        The probes, for the optimisation log.
    numpy.ndarray or None
        None when no probe lowers the criterion by more than :data:`PROBE_GAIN`
        (relative): the stop passed the test. Otherwise the start of a continuation:
        each θ whose probes descended moved to its best probe.
    """
    near = _near_bound(theta, lower, control)
    tried: list[tuple[np.ndarray, float]] = []
    start = theta.copy()
    gain = PROBE_GAIN * max(1.0, abs(fmin))
    found = False
    for i in near.tolist():
        best, at = fmin - gain, None
        for h in EDGE_PROBES:
            point = theta.copy()
            point[i] = max(h, theta[i])
            value = float(crit(point))
            tried.append((point, value))
            if np.isfinite(value) and value < best:
                best, at = value, point[i]
        if at is not None:
            start[i], found = at, True
    return tried, start if found else None


def optimize_theta(crit: Callable[[np.ndarray], float], theta0: np.ndarray,
                   lower: np.ndarray, control: LmerControl,
                   crit_many: Callable[[np.ndarray], np.ndarray] | None = None,
                   check_crit: Callable[[np.ndarray], float] | None = None,
                   crit_grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None,
                   check_grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None,
                   blocks: Sequence[ReBlock] = (),
                   costly_evaluations: bool = False,
                   step: float | np.ndarray | None = None,
                   compiled_check: _core.LoggedObjective | None = None,
                   ) -> tuple[OptSummary, ConvergenceCheck]:
    """BOBYQA from ``theta0`` with lme4's settings (or L-BFGS-B on the analytic gradient,
    ``control.optimizer == "lbfgsb"``, or NLopt's Nelder–Mead with lme4's ``nloptwrap``
    settings, ``"nelder_mead"``), then continuations (module docstring) by BOBYQA.

    Parameters
    ----------
    crit : callable
        The criterion the optimiser minimises (may keep its best factorisation).
    theta0, lower : numpy.ndarray
        Start and lower bounds (``-inf`` for unbounded).
    control : LmerControl
    crit_many : callable, optional
        The criterion at many points at once (for the derivative check).
    check_crit : callable, optional
        The criterion for the derivative check (default ``crit``).
    crit_grad : callable, optional
        The criterion and its gradient at a theta (needed by ``"lbfgsb"``).
    check_grad : callable, optional
        The criterion and its exact gradient for the derivative check (the native engine
        passes it from ``CHECK_GRADIENT_THETA`` θ on); without it, lme4's finite
        differences of ``check_crit``.
    blocks : sequence of ReBlock, optional
        The design's blocks: where a correlated one ends singular, :func:`face_probes`
        tries its covariance written with another factor (none: no such probes).
    costly_evaluations : bool
        Each evaluation factors a dense matrix of order ``AUTO_LBFGSB_DENSE`` or more, and
        a gradient costs a few of them: ``"auto"`` runs L-BFGS-B whatever the number of θ
        (see ``LmerControl``).
    step : float or numpy.ndarray, optional
        The first BOBYQA run's initial step (NLopt's default when None): a refit that
        starts from its fit's θ passes smaller ones (``engine.refit_step``).
    compiled_check : LoggedObjective, optional
        ``check_crit`` as a compiled criterion (equal to it to rounding): lme4's
        finite-difference check evaluates its points in one compiled call
        (``LoggedObjective.deriv12``) instead of through ``crit_many``.

    Returns
    -------
    OptSummary
        The whole run: ``theta_final``/``fmin`` the best point, ``feval`` and ``log`` over
        all continuations, ``restarts`` their records, and the final check's derivatives.
    ConvergenceCheck
        lme4's checks at ``theta_final``.
    """
    check_crit = crit if check_crit is None else check_crit
    if control.optimizer == "lbfgsb" and crit_grad is None:
        raise ValueError("optimizer 'lbfgsb' needs the criterion's gradient (crit_grad)")
    use_lbfgsb = control.optimizer == "lbfgsb" or (
        control.optimizer == "auto" and crit_grad is not None
        and (len(theta0) >= AUTO_LBFGSB_THETA or costly_evaluations))

    def lbfgsb_from(start: np.ndarray) -> OptSummary:
        assert crit_grad is not None  # checked above
        return lbfgsb(crit_grad, start, lower, control)

    def check_at(o: OptSummary) -> ConvergenceCheck:
        return assess(o.theta_final, o.fmin, lower, control, check_crit, crit_many,
                      o.return_code, check_grad, compiled_check)

    if use_lbfgsb:
        opt = lbfgsb_from(theta0)
    elif control.optimizer == "nelder_mead":
        opt = nelder_mead(crit, theta0, lower, control)
    else:
        opt = bobyqa(crit, theta0, lower, control, step=step)
    check = check_at(opt)
    restarts: list[Restart] = []
    log = list(opt.log)
    geval = opt.geval
    probes = 0
    # a kind of continuation that no longer lowers the criterion is not repeated, and the
    # next kind is tried: the check's or edge's (_restart), the faces', the far θ's (which
    # runs once in any case)
    spent: set[str] = set()
    while len(restarts) < control.restarts:
        # the edge restart: once after BOBYQA; at every stop of L-BFGS-B, as its test
        plan = None if "plan" in spent else _restart(
            opt.theta_final, check, lower, control, use_lbfgsb or not restarts)
        more: OptSummary | None = None
        kind = "plan"
        if plan is not None:
            reason, start, edge = plan
            if use_lbfgsb and edge:
                # the second-order test replaces the blind edge restart: L-BFGS-B
                # continues from a probe that descended, BOBYQA only as the last
                # continuation (it does not come back to a saddle: L-BFGS-B had, ner_like
                # with five crossed intercepts)
                tried, probe_start = _probe_edges(crit, opt.theta_final, opt.fmin, lower,
                                                  control)
                log.extend(tried)
                probes += len(tried)
                if probe_start is not None:
                    reason += (f"; moving it off the bound lowers the criterion "
                               f"({len(tried)} probes)")
                    last = len(restarts) == control.restarts - 1
                    more = (bobyqa(crit, probe_start, lower, control, restart=True) if last
                            else lbfgsb_from(probe_start))
            else:  # a failed check (after either optimiser), or BOBYQA's edge restart
                if not edge and "step" not in spent:
                    # first the Newton step of the check's own derivatives (once a fit)
                    spent.add("step")
                    tried, step_start = _probe_newton(crit, opt.theta_final, opt.fmin,
                                                      lower, check, gain=0.0, descent=0.0)
                    if step_start is not None:
                        more = _step_summary(opt, tried[0])
                    else:
                        log.extend(tried)
                        probes += len(tried)
                if more is None:
                    more = bobyqa(crit, start, lower, control, restart=True)
        if more is None and blocks and "faces" not in spent:
            # a singular correlated term: the same covariance with another factor (faces.py)
            tried, face_start = face_probes(crit, opt.theta_final, opt.fmin, blocks, control)
            log.extend(tried)
            probes += len(tried)
            if face_start is not None:
                reason = ("a singular correlated term's covariance, written with another "
                          f"factor, lowers the criterion off its face ({len(tried)} probes)")
                more, kind = bobyqa(crit, face_start, lower, control, restart=True), "faces"
        if more is None and check.converged and not check.singular and (
                "newton" not in spent):
            # a passing check whose derivatives predict a lower point (a flat valley)
            tried, newton_start = _probe_newton(crit, opt.theta_final, opt.fmin, lower,
                                                check)
            log.extend(tried)
            probes += len(tried)
            if newton_start is not None:
                reason = ("the derivative check passed, but its Newton step lowers the "
                          "criterion (a nearly flat direction)")
                more, kind = bobyqa(crit, newton_start, lower, control, restart=True), "newton"
            else:
                spent.add("newton")
        # the last resort: a θ far from lme4's scale (after the specific continuations)
        far = far_from_start(opt.theta_final) if (
            more is None and not use_lbfgsb and crit_grad is not None and "far" not in spent
        ) else None
        if far is not None:  # a θ far from lme4's scale: L-BFGS-B from BOBYQA's stop
            spent.add("far")
            reason = (f"theta[{far}] = {opt.theta_final[far]:.4g} is over {FAR_THETA:g}, "
                      "two decades from lme4's start")
            assert crit_grad is not None  # (far_from_start is asked only then)
            more = lbfgsb(crit_grad, opt.theta_final, lower, replace(
                control, lbfgsb_ftol=FAR_FTOL, lbfgsb_gtol=FAR_GTOL))
            kind = "far"
        if more is None:
            break
        log.extend(more.log)
        geval += more.geval
        improved = more.fmin < opt.fmin
        restarts.append(Restart(reason, opt.fmin, min(more.fmin, opt.fmin), more.feval,
                                more.return_code, more.geval, more.optimizer))
        if improved:
            code, message = more.return_code, more.message
            if code == ROUNDOFF_LIMITED:
                # the continuation's tolerances are below what rounding allows: not a
                # failure of the fit; lme4's check at the new point decides
                code, message = opt.return_code, opt.message
            opt = replace(opt, theta_final=more.theta_final, fmin=more.fmin,
                          return_code=code, message=message)
            check = check_at(opt)
        else:  # no progress from the best point by this kind: the next kind, if any
            spent.add(kind)
    opt = replace(opt, feval=len(log), geval=geval, probes=probes, log=tuple(log),
                  restarts=tuple(restarts),
                  gradient=check.gradient, hessian=check.hessian, free=check.free,
                  status=check.status)
    return opt, check


_SHORT_NAMES = {"NLOPT_LN_BOBYQA": "BOBYQA", "NLOPT_LN_NELDERMEAD": "Nelder-Mead",
                NEWTON_STEP: "Newton"}


def restart_message(restarts: tuple[Restart, ...]) -> str | None:
    """One line for the fit's messages describing the continuations, or None."""
    if not restarts:
        return None
    gain = restarts[0].fmin_before - restarts[-1].fmin_after
    n = sum(r.feval for r in restarts)
    names = dict.fromkeys(_SHORT_NAMES.get(r.optimizer, r.optimizer) for r in restarts)
    return (f"optimizer continued after lme4's stopping rule ({restarts[0].reason}): "
            f"{len(restarts)} {' then '.join(names)} restart(s) from the best point, "
            f"{n} evaluations, "
            f"criterion lowered by {gain:.3g}")
