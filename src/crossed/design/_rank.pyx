# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The fixed design's rank check in compiled code (``fixed.independent_columns``).

:func:`independent` decides which columns of X are kept, as R's ``qr()`` with limited
pivoting (LINPACK dqrdc2) decides with its tolerance:

1. the shortcut: the Cholesky factor (dpotrf) of the Gram matrix (dsyrk) of X's columns
   scaled to unit norm; every pivot at least ``gram_min`` accepts X as of full rank (a
   margin far above rounding: ``fixed.GRAM_PIVOT_MIN``);
2. otherwise the verdict: X = QR by dgeqrf, then Gram-Schmidt over R's columns with one
   reorthogonalisation (X's inner products are R's), a column kept where its part
   orthogonal to the earlier kept columns exceeds ``tol`` times its norm.

BLAS and LAPACK are SciPy's (``cython_blas``, ``cython_lapack``): the OpenBLAS NumPy and
SciPy load.

A subset of an ablation's rows often leaves an interaction's cell empty: the interpreted
loop took ~170 µs on 12 columns, this takes a few µs.
"""

from libc.math cimport sqrt
from scipy.linalg.cython_blas cimport dgemv, dsyrk
from scipy.linalg.cython_lapack cimport dgeqrf, dpotrf

import numpy as np


def independent(X, double tol, double gram_min):
    """Which columns of ``X`` (n x p, float) are kept: a bool array of length p (steps 1
    and 2 of the module's docstring; a column of norm 0 is never kept). X's Gram matrix
    is formed from X where it lies (C or Fortran order); only the QR route copies it."""
    A_in = np.asarray(X, dtype=np.float64)
    if not (A_in.flags.c_contiguous or A_in.flags.f_contiguous):
        A_in = np.ascontiguousarray(A_in)
    cdef int n = <int>A_in.shape[0], p = <int>A_in.shape[1], i, j, kept = 0, m, info = 0
    keep_arr = np.zeros(p, dtype=bool)
    if p == 0:
        return keep_arr
    cdef unsigned char[::1] keep = keep_arr.view(np.uint8)
    # XᵀX's lower triangle by dsyrk: Fortran X (n x p) transposed, or C X read as the
    # Fortran p x n matrix Xᵀ
    cdef double[::1, :] G = np.zeros((p, p), order="F")
    cdef double one = 1.0, zero = 0.0
    cdef char lower = b"L", trans = b"T", notrans = b"N"
    cdef const double[::1, :] XF
    cdef const double[:, ::1] XC
    if n > 0:
        if A_in.flags.f_contiguous:
            XF = A_in
            dsyrk(&lower, &trans, &p, &n, &one, &XF[0, 0], &n, &zero, &G[0, 0], &p)
        else:
            XC = A_in
            dsyrk(&lower, &notrans, &p, &n, &one, &XC[0, 0], &p, &zero, &G[0, 0], &p)
    cdef double[::1] norms = np.empty(p)
    cdef bint positive = n > 0
    for j in range(p):
        norms[j] = sqrt(G[j, j])
        positive = positive and norms[j] > 0.0
    if positive:  # 1. the scaled Gram matrix's Cholesky factor (in place)
        for j in range(p):
            for i in range(j, p):
                G[i, j] = G[i, j] / (norms[i] * norms[j])
        dpotrf(&lower, &p, &G[0, 0], &p, &info)
        if info == 0:
            for j in range(p):
                if not G[j, j] >= gram_min:
                    break
            else:
                keep_arr[:] = True
                return keep_arr
    # 2. the QR route
    cdef double[::1, :] A = np.array(A_in, order="F", copy=True)
    cdef int lwork = -1
    cdef double[::1] tau
    cdef double[::1] work
    cdef double query = 0.0
    if n > p:  # R: the upper triangle of A's first p rows after dgeqrf
        tau = np.empty(p)
        dgeqrf(&n, &p, &A[0, 0], &n, &tau[0], &query, &lwork, &info)
        lwork = max(<int>query, 1)
        work = np.empty(lwork)
        dgeqrf(&n, &p, &A[0, 0], &n, &tau[0], &work[0], &lwork, &info)
        if info != 0:
            raise ValueError(f"LAPACK's dgeqrf failed (info {info})")
        m = p
        for j in range(p):
            for i in range(j + 1, p):
                A[i, j] = 0.0
    else:
        m = n
    if m == 0:
        return keep_arr
    cdef int ldq = m, inc = 1, rep
    cdef double[::1, :] Q = np.zeros((m, min(m, p)), order="F")
    cdef double[::1] r = np.empty(m)
    cdef double[::1] c = np.empty(m)
    cdef double minus = -1.0, s
    for j in range(p):
        if norms[j] == 0.0:
            continue
        for i in range(m):
            r[i] = A[i, j]
        if kept > 0:
            for rep in range(2):  # r - Q (Qᵀ r), twice
                dgemv(&trans, &m, &kept, &one, &Q[0, 0], &ldq, &r[0], &inc, &zero, &c[0],
                      &inc)
                dgemv(&notrans, &m, &kept, &minus, &Q[0, 0], &ldq, &c[0], &inc, &one,
                      &r[0], &inc)
        s = 0.0
        for i in range(m):
            s += r[i] * r[i]
        s = sqrt(s)
        if s > tol * norms[j] and kept < m:
            keep[j] = True
            for i in range(m):
                Q[i, kept] = r[i] / s
            kept += 1
    return keep_arr
