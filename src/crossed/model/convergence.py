"""lme4's convergence checks on a theta: singular, scaled gradient, Hessian.

The checks of ``lme4:::checkConv`` (lme4 1.1-31): a bounded theta below 1e-4 marks the
fit singular (and lme4 skips the rest); otherwise the gradient and Hessian of the profiled
criterion by lme4's central differences (``deriv12``) give the scaled-gradient check and
the Hessian's eigenvalue checks. :class:`ConvergenceStatus` is the verdict as one value.
Part of the model core: every engine reports its fit's status with it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from crossed.model import _core
from crossed.model.status import ConvergenceStatus

if TYPE_CHECKING:
    from crossed.model.control import LmerControl

__all__ = ["DERIV12_DELTA", "ConvergenceCheck", "ConvergenceStatus", "assess", "check_convergence",
           "classify_convergence", "derivatives", "derivatives_from_gradient"]


DERIV12_DELTA = 1e-4
"""The step of lme4's ``deriv12`` (``checkConv``'s call)."""


@dataclass(frozen=True)
class ConvergenceCheck:
    """lme4's verdict on a theta: singular, and its derivative check (skipped if singular).

    Attributes
    ----------
    singular : bool
        A bounded theta below ``control.singular_tol`` (lme4's ``isSingular``).
    converged : bool
        False when the optimiser's return code or the derivative check says so.
    messages : tuple of str
        The check's messages (lme4's wording), empty when it passed or was skipped.
    gradient, hessian, free : numpy.ndarray or None
        Finite-difference derivatives at theta over ``free``; None when not computed.
    status : ConvergenceStatus
        The verdict as one value; ``converged == status.converged``.
    issues : tuple of (ConvergenceStatus or None)
        For each message, the problem it reports (None: a note that does not fail the
        check).
    """

    singular: bool
    converged: bool
    messages: tuple[str, ...] = ()
    gradient: np.ndarray | None = None
    hessian: np.ndarray | None = None
    free: np.ndarray | None = None
    status: ConvergenceStatus = ConvergenceStatus.OK
    issues: tuple[ConvergenceStatus | None, ...] = ()


def assess(theta: np.ndarray, fmin: float, lower: np.ndarray, control: LmerControl,
           crit: Callable[[np.ndarray], float] | None,
           crit_many: Callable[[np.ndarray], np.ndarray] | None = None,
           return_code: int = 1,
           crit_grad: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None,
           compiled: _core.LoggedObjective | None = None) -> ConvergenceCheck:
    """lme4's checks at ``theta``: singularity, then (non-singular fits, ``check_conv``)
    the scaled gradient and the Hessian of the criterion ``crit``.

    With ``crit_grad`` (the criterion and its exact gradient at a theta), the same checks
    run on the exact gradient and on the Hessian by central differences of exact gradients
    (:func:`derivatives_from_gradient`: 2k + 1 gradients instead of lme4's 2k² criterion
    evaluations); else on lme4's ``deriv12`` (:func:`derivatives`; in one compiled call
    where ``compiled``, ``crit`` as a compiled criterion, is given)."""
    tol = control.singular_tol  # (a few θ: Python's loop, not three NumPy calls)
    singular = any(t < tol for t, lo in zip(theta.tolist(), lower.tolist(), strict=True)
                   if math.isfinite(lo))
    stopped = ConvergenceStatus.from_return_code(return_code)
    if singular or not control.check_conv or crit is None:
        status = ConvergenceStatus.combine(singular, stopped)
        return ConvergenceCheck(singular, status.converged, status=status)
    free = np.ones(len(theta), dtype=bool)
    with np.errstate(all="ignore"):
        if crit_grad is not None:
            g, H = derivatives_from_gradient(crit_grad, theta, free)
        else:
            g, H = derivatives(crit, theta, free, fmin, fun_many=crit_many, compiled=compiled)
    checked = classify_convergence(g, H, control.conv_tol)
    msgs = tuple(m for m, _ in checked)
    issues = tuple(kind for _, kind in checked)
    status = ConvergenceStatus.combine(singular, *issues, stopped)
    return ConvergenceCheck(singular, status.converged, msgs, g, H, free, status, issues)


def derivatives(fun: Callable[[np.ndarray], float], x: np.ndarray, free: np.ndarray,
                fx: float, delta: float = DERIV12_DELTA,
                fun_many: Callable[[np.ndarray], np.ndarray] | None = None,
                compiled: _core.LoggedObjective | None = None,
                ) -> tuple[np.ndarray, np.ndarray]:
    """Central-difference gradient and Hessian over the ``free`` coordinates (lme4's deriv12).

    The 2m + 2m(m - 1) points are those of lme4's deriv12, combined as central differences
    (lme4 divides each term by δ² before adding them: the same gradient, Hessians about
    1e-6 apart; ``tests/model/test_convergence.py``). Where every coordinate is free and
    ``compiled`` (``fun`` as a compiled criterion, equal to it to rounding) is given, its
    ``deriv12`` evaluates and combines them in one call (the same points and differences,
    in this order; an evaluation's error is raised); else ``fun_many``, when given,
    evaluates them all in one call (a batched criterion, the points as the rows of an
    array), else ``fun`` one by one.
    """
    idx = np.asarray(free).nonzero()[0]
    m = len(idx)
    if m == 0:
        return np.zeros(0), np.zeros((0, 0))
    if compiled is not None and m == len(x):
        g, H = np.empty(m), np.empty((m, m))
        if not compiled.deriv12(np.ascontiguousarray(x, dtype=float), fx, delta, g, H):
            error, compiled.error = compiled.error, None
            assert error is not None  # (deriv12 fails only with an error kept)
            raise error
        return g, H
    rows, cols, signs, plus, corners, pa, pb = _deriv12_steps(m)
    points = np.tile(np.asarray(x, dtype=float), (2 * m * m, 1))  # (rows: the points)
    points[rows, idx[cols]] += signs * delta  # (±delta exactly; the other entries are x's)
    values = (np.asarray(fun_many(points), dtype=float) if fun_many is not None
              else np.array([fun(p.copy()) for p in points]))
    fp, fm = values[plus], values[plus + 1]
    H = np.diag((fp - 2 * fx + fm) / delta**2)
    v = values[corners]
    H[pa, pb] = H[pb, pa] = (v[:, 0] - v[:, 1] - v[:, 2] + v[:, 3]) / (4 * delta**2)
    return (fp - fm) / (2 * delta), H


_CORNERS = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
"""The signs of (a, b) at a pair's four points, in deriv12's order."""


@functools.cache
def _deriv12_steps(m: int) -> tuple[np.ndarray, ...]:
    """Where :func:`derivatives`' points step, for ``m`` free coordinates (built once
    per m; read-only): ``rows``, ``cols`` (among the free ones) and ``signs`` of each
    ±δ step, each coordinate's + point (``plus``; its − point follows), each pair's
    four points (``corners``, (pairs, 4)) and the pair's coordinates ``pa`` > ``pb``.

    Coordinate a's points start at row 2a² (x ± δe_a), then come its pairs with each
    b < a from row 2a² + 2 + 4b: the layout of the point-by-point loop."""
    a = np.arange(m)
    plus = 2 * a * a
    pa, pb = np.tril_indices(m, -1)  # (a > b, row by row: the loop's order)
    corners = (2 * pa * pa + 2 + 4 * pb)[:, None] + np.arange(4)
    pairs = len(pa)
    steps = (np.concatenate([plus, plus + 1, corners.ravel(), corners.ravel()]),
             np.concatenate([a, a, np.repeat(pa, 4), np.repeat(pb, 4)]),
             np.concatenate([np.ones(m), -np.ones(m), np.tile(_CORNERS[:, 0], pairs),
                             np.tile(_CORNERS[:, 1], pairs)]),
             plus, corners, pa, pb)
    for arr in steps:
        arr.setflags(write=False)
    return steps


def derivatives_from_gradient(fun_grad: Callable[[np.ndarray], tuple[float, np.ndarray]],
                              x: np.ndarray, free: np.ndarray, delta: float = DERIV12_DELTA,
                              ) -> tuple[np.ndarray, np.ndarray]:
    """The exact gradient at ``x`` and the Hessian by central differences of exact
    gradients (step ``delta``, lme4's), symmetrised, over the ``free`` coordinates.

    The quantities of lme4's ``deriv12`` (same step), with the derivative the criterion
    has: the gradient has no truncation error, and the Hessian's is O(delta²) as
    deriv12's. A criterion that is not finite at ``x`` or at a step gives NaN (the check
    then reports it as :func:`derivatives` does)."""
    idx = np.flatnonzero(free)
    m = len(idx)

    def grad(point: np.ndarray) -> np.ndarray:
        value, g = fun_grad(point)
        if not np.isfinite(value):
            return np.full(m, np.nan)
        return np.asarray(g, dtype=float)[idx]

    g = grad(x.copy())
    H = np.empty((m, m))
    for a, i in enumerate(idx):
        plus, minus = x.copy(), x.copy()
        plus[i] += delta
        minus[i] -= delta
        H[:, a] = (grad(plus) - grad(minus)) / (2 * delta)
    return g, 0.5 * (H + H.T)


def check_convergence(g: np.ndarray, H: np.ndarray, tol: float,
                      hess_tol: float = 1e-6) -> list[str]:
    """lme4's ``check.conv.grad`` and ``check.conv.hess`` messages (empty when fine).

    lme4 runs these only for non-singular fits, on the derivatives of the criterion
    with respect to theta.
    """
    return [m for m, _ in classify_convergence(g, H, tol, hess_tol)]


def classify_convergence(g: np.ndarray, H: np.ndarray, tol: float, hess_tol: float = 1e-6,
                         ) -> list[tuple[str, ConvergenceStatus | None]]:
    """lme4's derivative checks, each message with the problem it reports
    (``GRADIENT`` or ``HESSIAN``; None for a note that does not fail the check)."""
    out: list[tuple[str, ConvergenceStatus | None]] = []
    if len(g) == 0:
        return out
    g = np.ascontiguousarray(g, dtype=float)
    H = np.ascontiguousarray(H, dtype=float)
    if not (np.isfinite(g).all() and np.isfinite(H).all()):
        out.append(("Model failed to converge: the criterion is not finite near the optimum, "
                    "so its gradient and Hessian cannot be evaluated",
                    ConvergenceStatus.GRADIENT))
        return out
    # lme4: solve(chol(Hessian), gradient), and the eigenvalues of the symmetrised Hessian
    # (LAPACK's dpotrf, dtrsv and dsyev in one compiled call)
    values = np.empty(len(g))
    scaled, maxmin, comp = _core.derivative_check(g, H, values)
    ev = values.tolist()
    if not scaled:
        out.append(("unable to evaluate scaled gradient", ConvergenceStatus.GRADIENT))
    elif maxmin > tol:
        out.append((f"Model failed to converge with max|grad| = {maxmin:.6g} "
                    f"(tol = {tol:g}, component {comp + 1})", ConvergenceStatus.GRADIENT))
    if math.isnan(ev[0]):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")
    negative = sum(v < -hess_tol for v in ev)
    if negative:
        out.append((f"Model failed to converge: degenerate Hessian with {negative} negative "
                    "eigenvalues", ConvergenceStatus.HESSIAN))
    elif any(abs(v) < hess_tol for v in ev) or ev[-1] <= 0:
        out.append(("Hessian is numerically singular: parameters are not uniquely determined",
                    None))
    else:
        if ev[0] * hess_tol > 1:
            out.append(("Model is nearly unidentifiable: very large eigenvalue - Rescale "
                        "variables?", None))
        if ev[-1] / ev[0] < hess_tol:
            out.append(("Model is nearly unidentifiable: large eigenvalue ratio - Rescale "
                        "variables?", None))
    return out
