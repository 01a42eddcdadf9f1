"""The profiled criterion at many θ at once, for models with one grouping factor.

lme4's convergence check (``derivatives`` in optimize.py) evaluates the criterion at
2k + 2k(k - 1) points around θ̂. For a model whose only grouping factor has one or two
columns per level (``(1 | g)``, ``(1 + x | g)``, ``(1 + x || g)``) an evaluation is a few
small array operations, so Python's per-call overhead dominates; here every step of
:meth:`PLS.factor` is applied to all points together, with a leading axis over the points.
The values agree with :meth:`PLS.objective` to rounding (a matrix product replaces a
matrix-vector product; tested to 1e-12 relative), so the check's finite differences agree
with one-by-one ones to their own noise (sleepstudy: gradient 1e-7, Hessian 2e-5 relative).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from crossed.engines.native.pls import PLS

_B_OFFSET = np.array([[1.0], [0.0], [1.0]])
_INV_SIGN = np.array([[1.0], [-1.0], [1.0]])


def batchable(pls: PLS) -> bool:
    """Whether :func:`objectives` evaluates ``pls`` in one batch: a single grouping factor
    with one or two columns, its Schur update by a dense map."""
    return (pls.r_rand == 0 and pls.q1 in (1, 2) and pls._map is not None
            and isinstance(pls._map.W, np.ndarray))


def objectives(pls: PLS, thetas: list[np.ndarray], reml: bool) -> np.ndarray:
    """The profiled REML or ML criterion at each θ (``pls.objective`` one by one when the
    design is not :func:`batchable` or a point is not positive definite)."""
    T = np.asarray(thetas, dtype=float)
    if not batchable(pls) or T.ndim != 2 or len(T) == 0:
        return np.array([pls.objective(t, reml) for t in T])
    with np.errstate(all="ignore"):
        G, ld1 = _first_block(pls, T)
        if not np.all(np.isfinite(ld1)):
            return np.array([pls.objective(t, reml) for t in T])
        m = pls._map
        g = G[:, m.rep].transpose(0, 2, 3, 1).reshape(len(T), -1)
        C = np.repeat(pls.Arr.reshape(1, -1), len(T), axis=0)
        C[:, m.rows] -= g @ m.W.T
        r = pls.r
        try:  # C's upper triangle (row-major) holds the matrix: the lower one of Cᵀ
            L = np.linalg.cholesky(C.reshape(-1, r, r).transpose(0, 2, 1))
        except np.linalg.LinAlgError:
            return np.array([pls.objective(t, reml) for t in T])
        d = np.diagonal(L, axis1=1, axis2=2)
        ldRX2 = 2.0 * np.log(d[:, :-1]).sum(axis=1)
        pwrss = d[:, -1] ** 2
        n, p = pls.n, pls.p
        if reml:
            nmp = n - p
            out = ld1 + ldRX2 + nmp * (1.0 + np.log(2.0 * np.pi * pwrss / nmp))
        else:
            out = ld1 + n * (1.0 + np.log(2.0 * np.pi * pwrss / n))
    return np.where(pwrss > 0, out, np.inf)


def _first_block(pls: PLS, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """G_s = T B_s⁻¹ Tᵀ per point and level, (points, ℓ, q, q), and log det of the block."""
    if pls.q1 == 1:
        t = T[:, pls._t1]
        b = (t * t)[:, None] * pls.A11[None, :, 0, 0] + 1.0
        G = (t * t)[:, None] / b
        return G[:, :, None, None], np.log(b).sum(axis=1)
    th = np.concatenate([T, np.zeros((len(T), 1))], axis=1)  # (index -1: a zero of T)
    t0, t1, t2 = (th[:, i] for i in pls._t_2x2)
    zero = np.zeros(len(T))
    M = np.stack([t0 * t0, 2.0 * t0 * t1, t1 * t1, zero, t0 * t2, t1 * t2, zero, zero, t2 * t2],
                 axis=1).reshape(-1, 3, 3)
    b = M @ pls._a_2x2 + _B_OFFSET  # (points, 3, ℓ): B's entries (b00, b10, b11)
    det = b[:, 0] * b[:, 2] - b[:, 1] * b[:, 1]
    inv = b[:, ::-1] * _INV_SIGN / det[:, None]  # B⁻¹'s entries
    N = np.stack([t0 * t0, zero, zero, t0 * t1, t0 * t2, zero, t0 * t1, t0 * t2, zero,
                  t1 * t1, 2.0 * t1 * t2, t2 * t2], axis=1).reshape(-1, 4, 3)
    G = (N @ inv).reshape(len(T), 2, 2, -1).transpose(0, 3, 1, 2)
    return G, np.log(det).sum(axis=1)
