"""S⁻¹ from the Cholesky factor S = L Lᵀ, blocked and two-threaded (the gradient's inverse).

The analytic gradient (``gradient.py``) reads the inverse of the dense part of the PLS
system, S⁻¹ = L⁻ᵀL⁻¹, on the diagonal and at the Schur update's positions. LAPACK's dpotri
(dtrtri, then dlauum) runs one thread at about 40 % of dgemm's rate on matrices of a
thousand rows here (InstEval, r = 1,145: 28 ms under the SkylakeX kernel, 36 ms under
Haswell), which made a gradient cost three evaluations. :func:`inverse_lower` computes the
same in two blocked passes over panels of ``PANEL`` columns, each made of BLAS-3 calls:

1. M = L⁻¹ in place, panel by panel from the last: the diagonal block by dtrtri, then the
   panel below it, M₂₁ = −M₂₂ L₂₁ M₁₁ (dtrmm by the inverted trailing block, then by the
   inverted diagonal block). The first product, the bulk of the work, is split by columns
   between the calling thread and the helper thread;
2. S⁻¹ = MᵀM (lower triangle) as the sum over M's panels of rows P of PᵀP (dsyrk and
   dgemm). The output is split at a row fixed by the size: the helper computes the
   lower-right part (every panel's contribution to it), the calling thread the rest, with
   one synchronisation at the end.

Each entry is formed by the same calls in the same order whether or not the helper runs,
so the result is bitwise the same either way (``tests/model/test_inverse.py``).
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.linalg import lapack

from crossed._threads import helper_thread
from crossed.model.cholesky import AVAILABLE, MIN_BLOCKED, MIN_SPLIT, PANEL, Pointers, blas

__all__ = ["inverse_lower"]


def inverse_lower(L: np.ndarray, n: int | None = None) -> np.ndarray:
    """The lower triangle of S⁻¹ from S's Cholesky factor.

    Parameters
    ----------
    L : numpy.ndarray
        Float64, Fortran order; its leading ``n`` x ``n`` lower triangle is S's lower
        Cholesky factor (nonsingular). Not modified.
    n : int, optional
        The order of S (default: all of L).

    Returns
    -------
    numpy.ndarray
        (n, n), Fortran order: S⁻¹ in the lower triangle; the strict upper triangle is
        unspecified (as dpotri's). Raises ``numpy.linalg.LinAlgError`` where a diagonal
        entry of L is zero.
    """
    n = L.shape[0] if n is None else n
    if n < MIN_BLOCKED or not AVAILABLE:
        inv, info = lapack.dpotri(L[:n, :n], lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri failed (info={info})")
        return np.asfortranarray(inv)
    M = np.array(L[:n, :n], order="F")
    _invert_factor(M)
    for k in range(0, n, PANEL):  # the diagonal blocks' strict upper triangles read as 0
        e = min(n, k + PANEL)
        block = M[k:e, k:e]
        block[np.triu_indices(e - k, 1)] = 0.0
    return _gram_lower(M)


def _invert_factor(M: np.ndarray) -> None:
    """M ← M⁻¹ for a lower-triangular M (lower triangle; the strict upper left as it was)."""
    n = M.shape[0]
    a = Pointers(M)
    pool = helper_thread()
    info = ctypes.c_int(0)
    starts = list(range(0, n, PANEL))
    for k in reversed(starts):
        e = min(n, k + PANEL)
        w, m = e - k, n - e
        if m:
            _triangular_product(a, e, k, w, pool)
        blas.trtri(w, a.at(k, k), a.ld, info)
        if info.value:
            raise np.linalg.LinAlgError(
                f"the Cholesky factor is singular at column {k + info.value}")
        if m:  # M₂₁ ← −M₂₁ M₁₁
            blas.triangular("R", "L", "N", m, w, -1.0, a.at(k, k), a.ld, a.at(e, k), a.ld)


def _triangular_product(a: Pointers, e: int, k: int, w: int,
                        pool: ThreadPoolExecutor | None) -> None:
    """B ← T B for B = M[e:, k:e] and the lower-triangular T = M[e:, e:] (already
    inverted), split by rows at h ≈ m/√2 (m = n − e; from ``MIN_SPLIT`` rows on): the
    helper forms the lower rows, T₂₂B₂ + T₂₁B₁ (dtrmm, then dgemm on a copy of B₁), the
    calling thread the upper rows, T₁₁B₁ (dtrmm). The split depends on the size alone."""
    m = a.n - e
    h = int(round(m / np.sqrt(2.0)))
    if m < MIN_SPLIT or h >= m:
        blas.triangular("L", "L", "N", m, w, 1.0, a.at(e, e), a.ld, a.at(e, k), a.ld)
        return
    top = np.array(a.A[e:e + h, k:k + w], order="F")
    t = Pointers(top)

    def lower_rows() -> None:
        r = e + h
        blas.triangular("L", "L", "N", m - h, w, 1.0, a.at(r, r), a.ld, a.at(r, k), a.ld)
        blas.gemm("N", "N", m - h, w, h, 1.0, a.at(r, e), a.ld, t.at(0, 0), t.ld, 1.0,
                  a.at(r, k), a.ld)

    job = pool.submit(lower_rows) if pool is not None else None
    blas.triangular("L", "L", "N", h, w, 1.0, a.at(e, e), a.ld, a.at(e, k), a.ld)
    if job is None:
        lower_rows()
    else:
        job.result()


def _gram_split(n: int) -> int:
    """The first row of the lower-right part [s, n)² of MᵀM (with the rows [s, n) x [0, s)
    below the calling thread's part) that the helper forms: about half the work."""
    ends = np.minimum(np.arange(PANEL, n + PANEL, PANEL), n).astype(float)
    best, where = np.inf, n
    for s in range(PANEL, n, PANEL):
        mine = np.minimum(ends, s) ** 2
        theirs = np.where(ends > s, (ends - s) ** 2 + 2.0 * (ends - s) * s, 0.0)
        gap = abs(mine.sum() - theirs.sum())
        if gap < best:
            best, where = gap, s
    return where


def _gram_lower(M: np.ndarray) -> np.ndarray:
    """MᵀM's lower triangle for a lower-triangular M whose strict upper triangle is zero
    within each diagonal panel block (entries above those blocks are not read)."""
    n = M.shape[0]
    X = np.zeros((n, n), order="F")
    a, x = Pointers(M), Pointers(X)
    pool = helper_thread()
    s = _gram_split(n)
    panels = [(k, min(n, k + PANEL)) for k in range(0, n, PANEL)]

    def leading() -> None:  # [0, s)² for every panel, in order
        for k, e in panels:
            c = min(e, s)
            blas.syrk("L", "T", c, e - k, 1.0, a.at(k, 0), a.ld, 1.0, x.at(0, 0), x.ld)

    def trailing() -> None:  # rows [s, n): [s, e)² and [s, e) x [0, s), in order
        for k, e in panels:
            if e <= s:
                continue
            blas.syrk("L", "T", e - s, e - k, 1.0, a.at(k, s), a.ld, 1.0, x.at(s, s), x.ld)
            blas.gemm("T", "N", e - s, s, e - k, 1.0, a.at(k, s), a.ld, a.at(k, 0), a.ld,
                      1.0, x.at(s, 0), x.ld)

    job = pool.submit(trailing) if pool is not None and s < n else None
    leading()
    if job is not None:
        job.result()
    elif s < n:
        trailing()
    return X
