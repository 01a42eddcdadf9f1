"""The profiled criterion at many θ at once, for models with one grouping factor.

lme4's convergence check (``derivatives`` in optimize.py) evaluates the criterion at
2k + 2k(k - 1) points around θ̂. For a model whose only grouping factor has one or two
columns per level (``(1 | g)``, ``(1 + x | g)``, ``(1 + x || g)``) an evaluation is a few
small array operations, so Python's per-call overhead dominates; here every step of
:meth:`PLS.factor` is applied to all points together, with a leading axis over the points.
The closed forms are those of ``closed_forms.py``; the values agree with
:meth:`PLS.objective` to rounding (a matrix product replaces a matrix-vector product in
the Schur update; tested to 1e-12 relative), so the check's finite differences agree
with one-by-one ones to their own noise (sleepstudy: gradient 1e-7, Hessian 2e-5 relative).
Designs evaluated in one compiled call (``PLS.factor_batch``) are factored point by point
in one compiled loop instead, with ``PLS.objective``'s values exactly; the steps here
serve the single-factor designs past that call's size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed.model.closed_forms import (
    criterion,
    entries_2x2,
    first_block_1x1,
    g_2x2,
)
from crossed.model.pwrss import amplification_2x2, pivots_cancel

if TYPE_CHECKING:
    from crossed.model.pls import PLS

__all__ = ["batchable", "objectives"]


def batchable(pls: PLS) -> bool:
    """Whether :func:`objectives` evaluates ``pls`` in one batch: a single grouping factor
    with one or two columns, its Schur update by a dense map."""
    m = pls.sparse_map
    return (pls.r_rand == 0 and pls.q1 in (1, 2) and m is not None
            and isinstance(m.W, np.ndarray)
            and pls.residual_pwrss != "always")  # (pls.factor's pwrss from the residuals)


def objectives(pls: PLS, thetas: np.ndarray | list[np.ndarray], reml: bool) -> np.ndarray:
    """The profiled REML or ML criterion at each θ: a small design's factorisations in
    one compiled loop (``PLS.factor_batch``: ``pls.objective``'s values), else the
    steps below for a :func:`batchable` design, else ``pls.objective`` one by one (and
    where a point is not positive definite)."""
    T = np.asarray(thetas, dtype=float)
    batch = pls.factor_batch(T) if T.ndim == 2 and len(T) else None
    if batch is not None:
        good = batch.own & batch.ok & (batch.pwrss > 0)
        values = np.full(len(T), np.inf)
        values[good] = criterion(batch.ldL2[good], batch.ldRX2[good], batch.pwrss[good],
                                 pls.n, pls.p, reml)
        for i in np.flatnonzero(~batch.own):
            values[i] = pls.objective(T[i], reml)
        return values
    if batchable(pls) and T.ndim == 2 and len(T):
        with np.errstate(all="ignore"):
            together = _batch(pls, T, reml)
        if together is not None:
            return together
    return np.array([pls.objective(t, reml) for t in T])


def _batch(pls: PLS, T: np.ndarray, reml: bool) -> np.ndarray | None:
    """Every step of :meth:`PLS.factor` on all points together; None if one fails."""
    G, ld1, amplification = _first_block(pls, T)
    if not np.all(np.isfinite(ld1)):
        return None
    m = pls.sparse_map
    assert m is not None  # batchable
    g = (G if pls.level_classes is not None else G[:, m.rep]).transpose(0, 2, 3, 1).reshape(
        len(T), -1)
    C = np.repeat(pls.Arr.reshape(1, -1), len(T), axis=0)
    C[:, m.rows] -= g @ m.W.T
    r = pls.r
    try:  # C's upper triangle (row-major) holds the matrix: the lower one of Cᵀ
        L = np.linalg.cholesky(C.reshape(-1, r, r).transpose(0, 2, 1))
    except np.linalg.LinAlgError:
        return None
    d = np.diagonal(L, axis1=1, axis2=2)
    pwrss = d[:, -1] ** 2
    # where pls.factor takes the pwrss from the residuals (pwrss.pivot_cancels), it
    # evaluates each point
    if np.any(pivots_cancel(pls, pwrss, amplification)):
        return None
    values = criterion(ld1 - pls.ldW, 2.0 * np.log(d[:, :-1]).sum(axis=1), pwrss, pls.n,
                       pls.p, reml)
    return np.where(pwrss > 0, values, np.inf)


def _first_block(pls: PLS, T: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """G_s = T B_s⁻¹ Tᵀ per point and level, (points, ℓ, q, q), log det of the block, and
    the largest Hadamard ratio of its B_s per point (1 for q = 1;
    :func:`~crossed.model.pwrss.pivot_cancels`)."""
    if pls.q1 == 1:  # (per class where pls.factor works per class)
        _, G, ld = first_block_1x1(pls.A11[:, 0, 0], T[:, pls.first_theta][:, None],
                                   pls.level_classes)
        return G[:, :, None, None], ld, np.ones(len(T))
    th = np.concatenate([T, np.zeros((len(T), 1))], axis=1)  # (index -1: a zero of T)
    entries, positions, _ = pls.first_2x2
    b, det, prods = entries_2x2(entries, *(th[:, i] for i in positions))
    return g_2x2(b, det, prods), np.log(det).sum(axis=1), amplification_2x2(b, det)
