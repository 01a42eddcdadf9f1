"""Richardson-extrapolated finite differences (the scheme of R's numDeriv).

lmerTest differentiates the deviance and vcov(β) with numDeriv's defaults; using the same
scheme keeps Satterthwaite's df within rounding of lmerTest's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

__all__ = ["ZERO_TOL", "central_derivatives", "mixed_second"]

ZERO_TOL = np.sqrt(np.finfo(float).eps / 7e-7)


def _steps(x: np.ndarray, d: float, eps: float) -> np.ndarray:
    return np.abs(d * x) + eps * (np.abs(x) < ZERO_TOL)


def _richardson(approx: np.ndarray, v: float = 2.0) -> np.ndarray:
    """Extrapolate along the last axis (steps shrinking by ``v``), error O(h²) per level
    (``approx`` is not written to)."""
    a = approx
    r = a.shape[-1]
    for m in range(1, r):
        four = (v * v) ** m
        a = (a[..., 1: r - m + 1] * four - a[..., : r - m]) / (four - 1.0)
    return a[..., 0]


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.flags.writeable = False
    return arrays


@functools.lru_cache(maxsize=32)
def _diagonal_layout(n: int, r: int) -> tuple[np.ndarray, ...]:
    """The rows and coordinates of :func:`central_derivatives`' points x ± h e_i after x
    (per coordinate i and step k: x + h e_i, then x − h e_i), per (len(x), r): simulation
    loops differentiate thousands of fits of one design."""
    return _read_only(1 + np.arange(2 * n * r), np.repeat(np.arange(n), 2 * r))


@functools.lru_cache(maxsize=32)
def _pair_layout(n: int, r: int) -> tuple[np.ndarray, ...]:
    """:func:`mixed_second`'s pairs j < i (row by row), the rows of their points (per pair
    and step: x + (h_i e_i + h_j e_j), then x − (…)) and each row's i and j."""
    pi, pj = np.tril_indices(n, -1)
    rows = np.arange(len(pi) * r)
    return _read_only(pi, pj, 2 * rows, 2 * rows + 1, np.repeat(pi, r), np.repeat(pj, r))


def central_derivatives(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                        d: float = 0.1, eps: float = 1e-4, r: int = 4,
                        v: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and pure second derivatives of a vector-valued function along each coordinate.

    Uses the points x ± h e_i of numDeriv's ``genD`` diagonal (Richardson-extrapolated).
    ``fun`` is evaluated once, on all of them: it maps points (m, len(x)) to values
    (m, n_out), x itself the first.

    Returns
    -------
    f0 : numpy.ndarray
        The value at x.
    first, second : numpy.ndarray
        Shape (n_out, len(x)): ∂f/∂x_i and ∂²f/∂x_i².
    """
    x = np.asarray(x, dtype=float)
    n = len(x)
    h0 = _steps(x, d, eps)
    steps = np.empty((n, r))  # (h, h/v, h/v², ... per coordinate)
    steps[:, 0] = h0
    for k in range(1, r):
        steps[:, k] = steps[:, k - 1] / v
    # the points x, then per coordinate i and step k: x + h e_i, x − h e_i
    rows, coord = _diagonal_layout(n, r)
    points = np.empty((1 + 2 * n * r, n))
    points[:] = x
    signed = np.empty((n, r, 2))
    signed[:, :, 0] = steps
    signed[:, :, 1] = -steps
    points[rows, coord] += signed.reshape(-1)
    values = np.asarray(fun(points), dtype=float)
    f0 = values[0]
    rest = values[1:].reshape(n, r, 2, -1)  # (i, k, ±, n_out)
    fp, fm, h = rest[:, :, 0], rest[:, :, 1], steps[:, :, None]
    d12 = np.empty((2, *fp.shape))  # (1st/2nd, i, k, n_out)
    np.divide(fp - fm, 2 * h, out=d12[0])
    np.divide(fp - 2 * f0 + fm, h * h, out=d12[1])
    # (extrapolated along k, both at once: each (i, n_out) as on its own)
    first, second = _richardson(d12.transpose(0, 1, 3, 2), v).transpose(0, 2, 1)
    return f0, np.ascontiguousarray(first), np.ascontiguousarray(second)


def mixed_second(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray, diag: np.ndarray,
                 f0: float, d: float = 0.1, eps: float = 1e-4, r: int = 4,
                 v: float = 2.0) -> np.ndarray:
    """Full Hessian of a scalar function given its diagonal (numDeriv's ``genD``
    off-diagonals); ``fun`` maps points (m, len(x)) to values (m,), evaluated once on all
    of them."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    H = np.diag(np.asarray(diag, dtype=float))
    if n < 2:  # (no pairs)
        return H
    hs = _steps(x, d, eps)[None, :] / np.array([v**k for k in range(r)])[:, None]
    pi, pj, plus, minus, at_i, at_j = _pair_layout(n, r)  # (the pairs j < i, row by row)
    hi, hj = hs[:, pi].T, hs[:, pj].T  # (pair, k)
    # per pair and step: x + (h_i e_i + h_j e_j), then x − (…)
    points = np.empty((2 * hi.size, n))
    points[:] = x
    points[plus, at_i] += hi.reshape(-1)
    points[plus, at_j] += hj.reshape(-1)
    points[minus, at_i] -= hi.reshape(-1)
    points[minus, at_j] -= hj.reshape(-1)
    values = np.asarray(fun(points), dtype=float).reshape(len(pi), r, 2)
    fp, fm = values[:, :, 0], values[:, :, 1]
    approx = (fp - 2 * f0 + fm - H[pi, pi][:, None] * hi * hi
              - H[pj, pj][:, None] * hj * hj) / (2 * hi * hj)
    H[pi, pj] = H[pj, pi] = _richardson(approx, v)
    return H
