"""Dense Cholesky factorisation of the PLS system's dense part, blocked and two-threaded.

The native engine factors one dense r x r matrix per criterion evaluation. LAPACK's dpotrf
(OpenBLAS, one thread) runs at about half of dgemm's rate on matrices of a few hundred to a
few thousand rows, mostly because its panel solves (dtrsm) are slow. :func:`cholesky_lower`
is a right-looking blocked Cholesky with panels of ``PANEL`` columns:

1. the diagonal block is factored by dpotrf, inverted by dtrtri, and the panel below it is
   multiplied by that inverse (dtrmm, three times dtrsm's rate here);
2. the trailing matrix is updated by the panel (dsyrk and dgemm). Its lower-right part goes to
   a helper thread while the calling thread updates the left part and factors the next panel
   (one panel of look-ahead), so that each step has one synchronisation.

The BLAS and LAPACK routines are scipy's (``scipy.linalg.cython_blas`` and
``cython_lapack`` function pointers, called through ctypes, which releases the GIL), on
views into the one array: nothing is copied. Where the work is split is fixed by the size
alone, so the factor is bitwise the same with or without the helper thread
(:func:`crossed._threads.helper_thread` decides whether to use it).

The panel multiplication by an explicit inverse is accurate here: the blocks inverted are
Cholesky factors of Schur complements of ΛᵀZᵀZΛ + I, whose eigenvalues are at least 1.
Panels that hold fixed-effect or response columns (``solve_from`` on) are solved by dtrsm.
"""

from __future__ import annotations

import ctypes
from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import cython_blas, cython_lapack

from crossed._threads import helper_thread
from crossed.model import _core

if TYPE_CHECKING:
    from _ctypes import CFuncPtr, _CArgObject
    from types import ModuleType

    from crossed.model.update_plan import LeadBlocks

__all__ = ["MIN_BLOCKED", "MIN_DIAGONAL", "MIN_SPLIT", "PANEL", "Pointers", "blas", "lead_split",
           "cholesky_lower", "split_point"]

PANEL = 96
"""Panel width (columns): measured best among 64, 96, 128, 192 for r ≈ 1,100."""
MIN_BLOCKED = 400
"""Smaller matrices are factored by one dpotrf call (as fast, fewer calls)."""
MIN_DIAGONAL = 200
"""A diagonal leading block (``diagonal=``) is used from this size on; below, one dpotrf
call costs less than the few calls that skip its zeros (ner_like, r = 68: 13 µs)."""
MIN_SPLIT = 64
"""The helper thread takes a part of the trailing update only from this many rows on."""


def _routine(module: ModuleType, name: str, nargs: int) -> CFuncPtr:
    """A scipy BLAS/LAPACK routine as a ctypes function of ``nargs`` pointer arguments.

    The capsule's name is the routine's C signature; it must take ``nargs`` pointers with
    32-bit integers (``int *``), which is what the calls below pass."""
    capsule = module.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    signature = get_name(capsule).decode()
    args = signature[signature.index("(") + 1: signature.rindex(")")].split(",")
    if len(args) != nargs or not all(a.strip().endswith("*") for a in args) or (
            "int *" not in signature or "int64" in signature or "long" in signature):
        raise ValueError(f"unexpected signature for {name}: {signature}")
    address = get_pointer(capsule, signature.encode())
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(address)


try:
    _POTRF = _routine(cython_lapack, "dpotrf", 5)
    _TRTRI = _routine(cython_lapack, "dtrtri", 6)
    _TRSM = _routine(cython_blas, "dtrsm", 11)
    _TRMM = _routine(cython_blas, "dtrmm", 11)
    _SYRK = _routine(cython_blas, "dsyrk", 10)
    _GEMM = _routine(cython_blas, "dgemm", 13)
    AVAILABLE = True
except (AttributeError, KeyError, TypeError, ValueError):  # pragma: no cover - scipy layout
    AVAILABLE = False

_CH = {c: ctypes.c_char_p(c.encode()) for c in "LNRT"}


def _int(v: int) -> _CArgObject:
    return ctypes.byref(ctypes.c_int(v))


def _float(v: float) -> _CArgObject:
    return ctypes.byref(ctypes.c_double(v))


class _Calls:
    """The routines above with Python arguments (characters, ints and floats; matrices as
    pointers with their leading dimension from :meth:`int_arg`: :class:`Pointers`)."""

    @staticmethod
    def int_arg(v: int) -> _CArgObject:
        return _int(v)

    @staticmethod
    def potrf(n: int, A: ctypes.c_void_p, lda: _CArgObject, info: ctypes.c_int) -> None:
        """A ← its lower Cholesky factor; LAPACK's info in ``info``."""
        _POTRF(_CH["L"], _int(n), A, lda, ctypes.byref(info))

    @staticmethod
    def triangular(side: str, uplo: str, trans: str, m: int, n: int, alpha: float,
                   A: ctypes.c_void_p, lda: _CArgObject, B: ctypes.c_void_p,
                   ldb: _CArgObject, solve: bool = False) -> None:
        """B ← alpha op(A) B (side "L") or alpha B op(A) ("R"), A triangular, non-unit
        (dtrmm); with ``solve``, op(A)⁻¹ in place of op(A) (dtrsm)."""
        (_TRSM if solve else _TRMM)(_CH[side], _CH[uplo], _CH[trans], _CH["N"], _int(m),
                                    _int(n), _float(alpha), A, lda, B, ldb)

    @staticmethod
    def trtri(n: int, A: ctypes.c_void_p, lda: _CArgObject, info: ctypes.c_int) -> None:
        """A ← A⁻¹ for a lower-triangular A (non-unit); LAPACK's info in ``info``."""
        _TRTRI(_CH["L"], _CH["N"], _int(n), A, lda, ctypes.byref(info))

    @staticmethod
    def syrk(uplo: str, trans: str, n: int, k: int, alpha: float, A: ctypes.c_void_p,
             lda: _CArgObject, beta: float, C: ctypes.c_void_p, ldc: _CArgObject) -> None:
        """C ← alpha op(A) op(A)ᵀ + beta C (op(A) = A for "N", Aᵀ for "T"), one triangle."""
        _SYRK(_CH[uplo], _CH[trans], _int(n), _int(k), _float(alpha), A, lda, _float(beta),
              C, ldc)

    @staticmethod
    def gemm(transa: str, transb: str, m: int, n: int, k: int, alpha: float,
             A: ctypes.c_void_p, lda: _CArgObject, B: ctypes.c_void_p, ldb: _CArgObject,
             beta: float, C: ctypes.c_void_p, ldc: _CArgObject) -> None:
        """C ← alpha op(A) op(B) + beta C."""
        _GEMM(_CH[transa], _CH[transb], _int(m), _int(n), _int(k), _float(alpha), A, lda, B,
              ldb, _float(beta), C, ldc)


blas = _Calls()
"""Scipy's BLAS/LAPACK routines called through ctypes (the GIL released), on pointers."""


class Pointers:
    """Pointers into one Fortran-ordered float64 array, or into its trailing block
    ``A[offset:, offset:]`` (indices of :meth:`at` relative to it), for :data:`blas`."""

    def __init__(self, A: np.ndarray, offset: int = 0):
        self.A = A[offset:, offset:]
        self.n = A.shape[0] - offset
        self.rows = A.shape[0]
        self.base = A.ctypes.data + 8 * offset * (1 + self.rows)
        self.ld = _int(self.rows)

    def at(self, i: int, j: int) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.base + 8 * (i + j * self.rows))


def split_point(n: int, e: int, width: int) -> int:
    """First row of the trailing block [e, n) whose lower-right part [s, n)² the helper thread
    updates (n: no split).

    The calling thread updates columns [e, s) (dsyrk on [e, s)², dgemm below it: a² + 2ab
    multiply-adds per panel column for a = s - e, b = n - s) and factors the next panel
    (about ``P`` more); the helper's dsyrk costs b². Equal shares give b = √((m² + P)/2).
    """
    m = n - e
    nxt = min(width, m)
    extra = 2.0 * nxt ** 3 / 3.0 + (m - nxt) * nxt * nxt
    b = int(round(np.sqrt((m * m + extra / width) / 2.0)))
    b = min(b, m - nxt)
    return n if b < MIN_SPLIT else n - b


class _Blocked(Pointers):
    """One factorisation's state: the array's pointers and the diagonal-block scratch.

    It factors the trailing block ``A[offset:, offset:]`` (indices below are relative to
    it; the whole array when ``offset`` is 0)."""

    def __init__(self, A: np.ndarray, solve_from: int, offset: int = 0):
        super().__init__(A, offset)
        self.solve_from = solve_from
        self.inv = Pointers(np.empty((PANEL, PANEL), order="F"))
        self.info = ctypes.c_int(0)

    def panel(self, k: int, e: int) -> int:
        """Factor the diagonal block [k, e)² and solve the panel below it; LAPACK's info."""
        w, n = e - k, self.n
        blas.potrf(w, self.at(k, k), self.ld, self.info)
        if self.info.value or e >= n:
            return self.info.value
        if e <= self.solve_from:  # L21 = A21 L11⁻ᵀ by the inverse (dtrmm)
            inv = self.inv
            inv.A[:w, :w] = self.A[k:e, k:e]
            blas.trtri(w, inv.at(0, 0), inv.ld, self.info)
            if self.info.value:
                return self.info.value
            blas.triangular("R", "L", "T", n - e, w, 1.0, inv.at(0, 0), inv.ld,
                            self.at(e, k), self.ld)
        else:
            blas.triangular("R", "L", "T", n - e, w, 1.0, self.at(k, k), self.ld,
                            self.at(e, k), self.ld, solve=True)
        return 0

    def syrk(self, k: int, w: int, r0: int, r1: int) -> None:
        """A[r0:r1, r0:r1] -= P Pᵀ (lower) for the panel's rows P = A[r0:r1, k:k+w]."""
        blas.syrk("L", "N", r1 - r0, w, -1.0, self.at(r0, k), self.ld, 1.0,
                  self.at(r0, r0), self.ld)

    def gemm(self, k: int, w: int, e: int, s: int) -> None:
        """A[s:, e:s] -= A[s:, k:k+w] A[e:s, k:k+w]ᵀ."""
        blas.gemm("N", "T", self.n - s, s - e, w, -1.0, self.at(s, k), self.ld, self.at(e, k),
                  self.ld, 1.0, self.at(s, e), self.ld)

    def update(self, k: int, w: int, e: int, s: int) -> Future[None] | None:
        """A[e:, e:] -= P Pᵀ (lower) for the columns P = A[e:, k:k+w]: the lower-right part
        [s, n)² by the helper thread (its job returned, for the caller to wait on; done
        here without the helper), the rest here (dsyrk on [e, s)², dgemm below it). ``s``
        is set by the sizes alone, so the sums are the same with or without the helper."""
        n = self.n
        job: Future[None] | None = None
        if s < n:
            pool = helper_thread()
            if pool is not None:
                job = pool.submit(self.syrk, k, w, s, n)
            else:
                self.syrk(k, w, s, n)
        self.syrk(k, w, e, s)
        if s < n:
            self.gemm(k, w, e, s)
        return job


def cholesky_lower(A: np.ndarray, solve_from: int | None = None, diagonal: int = 0,
                   lead: LeadBlocks | None = None) -> int:
    """Factor a symmetric positive definite matrix in place: A = L Lᵀ in its lower triangle.

    Parameters
    ----------
    A : numpy.ndarray
        Square, float64, Fortran order; only the lower triangle is read and written (the
        strict upper triangle is left as it was).
    solve_from : int, optional
        Panels that end after this column are solved by dtrsm rather than multiplied by
        their inverse (the engine passes the first fixed-effect column); default: none.
    diagonal : int
        The leading ``diagonal`` x ``diagonal`` block is diagonal (the caller knows it from
        the structure: the engine passes the second random-effects block when each level
        of the first meets one level of it). Its factor is the square roots, the columns
        below are scaled by them, the rest is updated by one rank-``diagonal`` product
        (dsyrk) and factored as above: the factor is the dense routine's, without the
        r³/3 work on zeros (from ``MIN_DIAGONAL`` rows on). Default 0: no such block.
    lead : LeadBlocks, optional
        The leading rows fall into independent components, A being 0 between them
        (``update_plan.lead_blocks``, which the engine passes where each has a few rows):
        each component is factored on its own rows and the trailing columns, which are
        then factored by one dpotrf (``_core.lead_blocks_lower``; ``diagonal`` is not
        read). The factor is the dense routine's to rounding.

    Returns
    -------
    int
        LAPACK's convention: 0 on success, else k > 0 when the leading minor of order k is
        not positive definite (the factorisation stops there).
    """
    n = A.shape[0]
    if not (A.flags.f_contiguous and A.dtype == np.float64 and A.shape == (n, n)):
        raise ValueError("cholesky_lower needs a square float64 array in Fortran order")
    if not 0 <= diagonal <= n:
        raise ValueError(f"diagonal must be between 0 and {n}, got {diagonal}")
    if lead is not None:
        return _core.lead_blocks_lower(A, *lead)
    if diagonal and AVAILABLE and n >= MIN_DIAGONAL:
        return _diagonal_lead(A, diagonal, n if solve_from is None else solve_from)
    if n < MIN_BLOCKED or not AVAILABLE:
        return _core.potrf_lower(A)
    return _factor(A, n if solve_from is None else solve_from)


def _diagonal_lead(A: np.ndarray, d: int, solve_from: int) -> int:
    """:func:`cholesky_lower` with a diagonal leading d x d block."""
    n = A.shape[0]
    lead = np.arange(d)
    pivots = A[lead, lead]
    bad = np.flatnonzero(~(pivots > 0.0))
    if len(bad):
        return int(bad[0]) + 1
    root = np.sqrt(pivots)
    A[lead, lead] = root
    if d == n:
        return 0
    A[d:, :d] /= root  # L21 = A21 L11⁻ᵀ, column by column
    m = n - d
    state = _Blocked(A, solve_from)
    job = state.update(0, d, d, lead_split(n, d))  # (the rest by L21: one rank-d update)
    if job is not None:
        job.result()
    if m < MIN_BLOCKED:
        info = ctypes.c_int(0)
        blas.potrf(m, state.at(d, d), state.ld, info)
        return info.value + d if info.value else 0
    info_rest = _factor(A, max(solve_from - d, 0), offset=d)
    return info_rest + d if info_rest else 0


def lead_split(n: int, d: int) -> int:
    """First row of the part [s, n)² of the rank-``d`` update of [d, n)² that the helper
    thread takes (n: no split).

    The calling thread updates [d, s)² (dsyrk) and the rows [s, n) of its columns (dgemm):
    a²/2 + ab multiply-adds per lead column for a = s - d, b = n - s; the helper's dsyrk
    b²/2. Equal shares give b = m/√2 for m = n - d."""
    b = int(round((n - d) / np.sqrt(2.0)))
    return n if b < MIN_SPLIT else n - b


def _factor(A: np.ndarray, solve_from: int, offset: int = 0) -> int:
    """The blocked factorisation of ``A[offset:, offset:]`` (module docstring)."""
    state = _Blocked(A, solve_from, offset)
    n = state.n
    info = state.panel(0, PANEL)
    if info:
        return info
    for k in range(0, n - PANEL, PANEL):
        e = k + PANEL
        w = PANEL
        job = state.update(k, w, e, split_point(n, e, PANEL))
        info = state.panel(e, min(n, e + PANEL))
        if job is not None:
            job.result()
        if info:
            return info + e
    return 0
