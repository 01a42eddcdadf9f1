"""A factorisation of the PLS system at one theta (:class:`Factor`), the criteria it gives,
and the triangular solves used on its factors. :class:`crossed.model.pls.PLS` makes them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import cast, overload

import numpy as np
from scipy.linalg import lapack

from crossed.model.closed_forms import criterion

__all__ = ["Factor", "FactorBatch", "basis_inverse", "deviance_at", "in_basis", "lower_triangle",
           "profiled_deviance", "tri_inverse", "tri_solve", "unprofiled_deviance"]


def tri_solve(L: np.ndarray, B: np.ndarray, trans: bool = False) -> np.ndarray:
    """Solve L x = B (or Lᵀ x = B) for lower-triangular L (LAPACK dtrtrs, no checks)."""
    if L.shape[0] == 0:
        return np.zeros(np.shape(B))
    x: np.ndarray
    x, info = lapack.dtrtrs(L, B, lower=1, trans=1 if trans else 0)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular triangular factor (dtrtrs info={info})")
    return x


def in_basis(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    """X R⁻¹: nearly collinear fixed-effect columns written in the basis R of X = QR (the
    columns Q), which the native engines solve on (``engines/native/rescale.py``)."""
    return np.asarray(np.linalg.solve(R.T, X.T).T)


def basis_inverse(R: np.ndarray) -> np.ndarray:
    """R⁻¹, which maps the coefficients of :func:`in_basis`'s columns back: β = R⁻¹β′,
    cov(β) = R⁻¹ cov(β′) R⁻ᵀ."""
    return np.asarray(np.linalg.solve(R, np.eye(len(R))))


@functools.lru_cache(maxsize=32)
def _strict_upper(n: int) -> np.ndarray:
    """The strict upper triangle of an n x n matrix as a boolean mask (read-only)."""
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def lower_triangle(A: np.ndarray) -> np.ndarray:
    """A C-ordered copy of square ``A`` with its strict upper triangle zeroed (``np.tril``
    by a cached mask: the small matrices of the inference's derivatives, thousands of
    times)."""
    out = np.array(A, dtype=float, order="C")
    out[_strict_upper(out.shape[0])] = 0.0
    return out


def tri_inverse(L: np.ndarray) -> np.ndarray:
    """Inverse of a lower-triangular matrix (LAPACK dtrtri; only L's lower triangle is
    read)."""
    if L.shape[0] == 0:
        return np.zeros((0, 0))
    inv, info = lapack.dtrtri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular triangular factor (dtrtri info={info})")
    return lower_triangle(inv)


@dataclass(frozen=True)
class FactorBatch:
    """A factorisation's numbers at several θ (``PLS.factor_batch``): as ``PLS.factor``
    gives them, bitwise.

    Attributes
    ----------
    own : numpy.ndarray
        (m,) bool: the θ computed here. At the others (θ not finite, a pwrss to be taken
        from the residuals) the caller calls ``PLS.factor`` itself.
    ok : numpy.ndarray
        (m,) bool: the system is positive definite (``Factor.ok``).
    ldL2, ldRX2, pwrss : numpy.ndarray
        (m,): ``Factor``'s (meaningful where ``own`` and ``ok``).
    """

    own: np.ndarray
    ok: np.ndarray
    ldL2: np.ndarray
    ldRX2: np.ndarray
    pwrss: np.ndarray


@dataclass
class Factor:
    """The factorisation at one theta."""

    theta: np.ndarray
    ok: bool
    ldL2: float = np.inf
    """log det(ΛᵀZᵀZΛ + I)."""
    ldRX2: float = np.inf
    """log det(R_XᵀR_X)."""
    pwrss: float = np.inf
    """Penalised residual sum of squares r²."""
    L: np.ndarray | None = None
    """Dense Cholesky factor of the rest part (later random blocks, X, y), in its lower
    triangle (the upper one is not cleared; only triangular LAPACK routines read it)."""
    first: np.ndarray | None = None
    """The first block's per-level matrices as :meth:`PLS.first_block` leaves them: their
    Cholesky factors (q₁ = 1), B_s's entries (q₁ = 2) or the LAPACK band storage of the factors
    (q₁ > 2); :meth:`PLS.first_chol` gives the (ℓ₁, q₁, q₁) factors."""


def profiled_deviance(f: Factor, n: int, p: int, reml: bool) -> float:
    """lme4's profiled criterion from a factorisation (inf when not positive definite)."""
    if not f.ok or f.pwrss <= 0:
        return np.inf
    return criterion(f.ldL2, f.ldRX2, f.pwrss, n, p, reml)


def deviance_at(f: Factor, sigma: float, n: int, p: int, reml: bool) -> float:
    """Unprofiled deviance at (θ, σ) as lmerTest's ``devfun_vp`` computes it."""
    if not f.ok:
        return np.inf
    return unprofiled_deviance(f.ldL2, f.ldRX2, f.pwrss, sigma, n, p, reml)


@overload
def unprofiled_deviance(ldL2: float, ldRX2: float, pwrss: float, sigma: float, n: int,
                        p: int, reml: bool) -> float: ...
@overload
def unprofiled_deviance(ldL2: np.ndarray, ldRX2: np.ndarray, pwrss: np.ndarray,
                        sigma: float, n: int, p: int, reml: bool) -> np.ndarray: ...
def unprofiled_deviance(ldL2: float | np.ndarray, ldRX2: float | np.ndarray,
                        pwrss: float | np.ndarray, sigma: float, n: int, p: int,
                        reml: bool) -> float | np.ndarray:
    """:func:`deviance_at`'s formula from a factorisation's numbers (floats, or arrays of
    them: many θ at once)."""
    s2 = sigma * sigma
    dev = ldL2 + pwrss / s2 + n * np.log(2.0 * np.pi * s2)
    if reml:
        dev = dev + (ldRX2 - p * np.log(2.0 * np.pi * s2))
    return cast("float | np.ndarray", dev)
