"""Closed forms of the native engine's small pieces, for one θ or a stack of them.

The first random-effects block with one or two columns per level is factored in closed
form on the entries of its per-level matrices (no LAPACK call per level), and the profiled
criterion follows from two log determinants and the penalised residual sum of squares.
:class:`~crossed.model.pls.PLS` evaluates them at one θ; ``batched.py`` at many
θ at once, with a leading axis over the points: the same operations either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

if TYPE_CHECKING:
    from crossed.model.sparse_map import LevelClasses

__all__ = ["closed_form_1x1", "criterion", "entries_2x2", "first_block_1x1", "first_block_2x2",
           "g_2x2", "matrices_2x2"]

_B_OFFSET = np.array([[1.0], [0.0], [1.0]])
_INV_SIGN = np.array([[1.0], [-1.0], [1.0]])
# q = 2, T = [[t0, 0], [t1, t2]]: B_s = TᵀA_sT + I and G_s = T B_s⁻¹ Tᵀ on their entries,
# (b00, b10, b11) = M (a00, a10, a11) + (1, 0, 1) and (g00, g10, g10, g11) = N (i00, i10,
# i11) with B_s⁻¹'s entries i; M and N are linear in the products (t0², t0t1, t1², t0t2,
# t1t2, t2²): these are their coefficients, one row per product
_M_COEF = np.array([[1, 0, 0, 0, 0, 0, 0, 0, 0], [0, 2, 0, 0, 0, 0, 0, 0, 0],
                    [0, 0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0, 0],
                    [0, 0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 1]], dtype=float)
_N_COEF = np.array([[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0],
                    [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0],
                    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]],
                   dtype=float)


def closed_form_1x1(a: np.ndarray, t: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q = 1: B_s = t² a_s + 1 and G_s = t² / B_s per level (``a``: the A_s); with ``t`` of
    shape (points, 1), per point."""
    b = t * t * a + 1.0
    return b, t * t / b


def first_block_1x1(a: np.ndarray, t: float | np.ndarray, classes: LevelClasses | None = None
                    ) -> tuple[np.ndarray, np.ndarray, Any]:
    """q = 1's first block: :func:`closed_form_1x1` on the levels' A_s (``a``), or once per
    class where the sparse map merges levels of equal A_s (``classes``: then B and G are
    per class), and Σ_s log B_s over every level: a float for a float ``t``, one per point
    for ``t`` of shape (points, 1)."""
    b, G = closed_form_1x1(a if classes is None else classes.a, t)
    logs = np.log(b)
    return b, G, logs.sum(axis=-1) if classes is None else logs @ classes.count


def entries_2x2(a: np.ndarray, t0: float | np.ndarray, t1: float | np.ndarray,
                t2: float | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q = 2: B_s's entries (b00, b10, b11), (3, ℓ), and their determinants, from ``a`` =
    (a00, a10, a11) per level; with t0, t1, t2 of shape (points,), a leading axis over the
    points. Also returns the products of the t's, for :func:`g_2x2`."""
    prods = np.array([t0 * t0, t0 * t1, t1 * t1, t0 * t2, t1 * t2, t2 * t2]).T
    b = (prods @ _M_COEF).reshape(*prods.shape[:-1], 3, 3) @ a
    b += _B_OFFSET
    det = b[..., 0, :] * b[..., 2, :] - b[..., 1, :] * b[..., 1, :]  # >= 1 for finite t
    return b, det, prods


def g_2x2(b: np.ndarray, det: np.ndarray, prods: np.ndarray) -> np.ndarray:
    """q = 2: G_s = T B_s⁻¹ Tᵀ as (ℓ, 2, 2), or (points, ℓ, 2, 2), from :func:`entries_2x2`."""
    inv = b[..., ::-1, :] * _INV_SIGN
    inv /= det[..., None, :]  # (b11, -b10, b00) / det = (i00, i10, i11)
    G = (prods @ _N_COEF).reshape(*prods.shape[:-1], 4, 3) @ inv
    G = G.reshape(*G.shape[:-2], 2, 2, -1)
    return cast(np.ndarray, G.transpose(2, 0, 1) if G.ndim == 3 else G.transpose(0, 3, 1, 2))


@overload
def criterion(ldL2: float, ldRX2: float, pwrss: float, n: int, p: int, reml: bool) -> float: ...
@overload
def criterion(ldL2: np.ndarray, ldRX2: np.ndarray, pwrss: np.ndarray, n: int, p: int,
              reml: bool) -> np.ndarray: ...
def criterion(ldL2: float | np.ndarray, ldRX2: float | np.ndarray, pwrss: float | np.ndarray,
              n: int, p: int, reml: bool) -> float | np.ndarray:
    """lme4's profiled REML or ML criterion from the log determinants and the penalised
    residual sum of squares (floats, or arrays of them)."""
    if reml:
        nmp = n - p
        return cast("float | np.ndarray",
                    ldL2 + ldRX2 + nmp * (1.0 + np.log(2.0 * np.pi * pwrss / nmp)))
    return cast("float | np.ndarray", ldL2 + n * (1.0 + np.log(2.0 * np.pi * pwrss / n)))


def matrices_2x2(entries: np.ndarray) -> np.ndarray:
    """(ℓ, 2, 2) symmetric matrices from their entries (b00, b10, b11), a (3, ℓ) array."""
    b00, b10, b11 = entries
    return np.stack([b00, b10, b10, b11], axis=1).reshape(-1, 2, 2)


def first_block_2x2(a: np.ndarray, t0: float, t1: float, t2: float
                     ) -> tuple[np.ndarray | None, np.ndarray | None, None, float, bool]:
    """``first_block`` for q = 2 in closed form on the entries, a few operations on (3, ℓ)
    arrays instead of batched LAPACK calls. Returns B's entries (3, ℓ) in place of a
    Cholesky factor (see :meth:`~crossed.model.pls.PLS.first_chol`) and G (ℓ, 2, 2).

    The same arithmetic as :func:`entries_2x2` and
    :func:`g_2x2` (and so as ``batched.py``), bit for bit: their
    coefficient matrices M and N have one product of the t's per entry, formed here in
    Python floats instead of by two small matrix products; the products with the data are
    the same matrix products."""
    if not (abs(t0) < np.inf and abs(t1) < np.inf and abs(t2) < np.inf):
        return _first_block_2x2_general(a, t0, t1, t2)
    t01, t02, t12 = t0 * t1, t0 * t2, t1 * t2
    t00, t11, t22 = t0 * t0, t1 * t1, t2 * t2
    b = np.array([[t00, 2.0 * t01, t11], [0.0, t02, t12], [0.0, 0.0, t22]]) @ a
    b += _B_OFFSET
    det = b[0] * b[2]
    det -= b[1] * b[1]
    logdet = float(np.log(det).sum())
    if not abs(logdet) < np.inf:
        return None, None, None, np.inf, False
    inv = b[::-1] * _INV_SIGN
    inv /= det
    G = np.array([[t00, 0.0, 0.0], [t01, t02, 0.0], [t01, t02, 0.0],
                  [t11, 2.0 * t12, t22]]) @ inv
    return b, G.reshape(2, 2, -1).transpose(2, 0, 1), None, logdet, True


def _first_block_2x2_general(a: np.ndarray, t0: float, t1: float, t2: float
                             ) -> tuple[np.ndarray | None, np.ndarray | None, None, float,
                                        bool]:
    """:func:`first_block_2x2` through the closed forms' coefficient matrices (non-finite
    t, where a zero coefficient times an infinite product is not zero)."""
    b, det, prods = entries_2x2(a, t0, t1, t2)
    logdet = float(np.log(det).sum())
    if not np.isfinite(logdet):
        return None, None, None, np.inf, False
    return b, g_2x2(b, det, prods), None, logdet, True
