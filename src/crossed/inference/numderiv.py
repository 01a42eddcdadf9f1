"""Richardson-extrapolated finite differences (the scheme of R's numDeriv).

lmerTest differentiates the deviance and vcov(β) with numDeriv's defaults; using the same
scheme keeps Satterthwaite's df within rounding of lmerTest's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["ZERO_TOL", "central_derivatives", "mixed_second"]

ZERO_TOL = np.sqrt(np.finfo(float).eps / 7e-7)


def _steps(x: np.ndarray, d: float, eps: float) -> np.ndarray:
    return np.abs(d * x) + eps * (np.abs(x) < ZERO_TOL)


def _richardson(approx: np.ndarray, v: float = 2.0) -> np.ndarray:
    """Extrapolate along the last axis (steps shrinking by ``v``), error O(h²) per level."""
    a = approx.copy()
    r = a.shape[-1]
    for m in range(1, r):
        four = (v * v) ** m
        a = (a[..., 1: r - m + 1] * four - a[..., : r - m]) / (four - 1.0)
    return a[..., 0]


def central_derivatives(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                        d: float = 0.1, eps: float = 1e-4, r: int = 4,
                        v: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and pure second derivatives of a vector-valued ``fun`` along each coordinate.

    Uses the points x ± h e_i of numDeriv's ``genD`` diagonal (Richardson-extrapolated).

    Returns
    -------
    f0 : numpy.ndarray
        ``fun(x)``.
    first, second : numpy.ndarray
        Shape (len(f0), len(x)): ∂f/∂x_i and ∂²f/∂x_i².
    """
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fun(x), dtype=float)
    h0 = _steps(x, d, eps)
    first = np.zeros((f0.size, len(x)))
    second = np.zeros((f0.size, len(x)))
    for i in range(len(x)):
        d1, d2 = [], []
        h = h0[i]
        for _ in range(r):
            xp, xm = x.copy(), x.copy()
            xp[i] += h
            xm[i] -= h
            fp, fm = np.asarray(fun(xp), dtype=float), np.asarray(fun(xm), dtype=float)
            d1.append((fp - fm) / (2 * h))
            d2.append((fp - 2 * f0 + fm) / (h * h))
            h /= v
        first[:, i] = _richardson(np.stack(d1, axis=-1), v)
        second[:, i] = _richardson(np.stack(d2, axis=-1), v)
    return f0, first, second


def mixed_second(fun: Callable[[np.ndarray], float], x: np.ndarray, diag: np.ndarray,
                 f0: float, d: float = 0.1, eps: float = 1e-4, r: int = 4,
                 v: float = 2.0) -> np.ndarray:
    """Full Hessian of scalar ``fun`` given its diagonal (numDeriv's ``genD`` off-diagonals)."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    H = np.diag(np.asarray(diag, dtype=float))
    hs = np.array([_steps(x, d, eps) / v**k for k in range(r)])
    for i in range(n):
        for j in range(i):
            approx = np.zeros(r)
            for k in range(r):
                hi, hj = hs[k, i], hs[k, j]
                xp, xm = x.copy(), x.copy()
                xp[i] += hi
                xp[j] += hj
                xm[i] -= hi
                xm[j] -= hj
                approx[k] = (fun(xp) - 2 * f0 + fun(xm) - H[i, i] * hi * hi
                             - H[j, j] * hj * hj) / (2 * hi * hj)
            H[i, j] = H[j, i] = _richardson(approx, v)
    return H
