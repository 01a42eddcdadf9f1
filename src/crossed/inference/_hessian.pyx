# cython: language_level=3
"""Satterthwaite's Hessian, compiled: numDeriv's Richardson-extrapolated central
differences (``genD``) and the pseudo-inverse of a positive semi-definite Hessian.

The differences: the points, the differences and the extrapolation in C around one call
of the function on every point (``numderiv.py`` documents the scheme; R's numDeriv is the
oracle). Their arithmetic is the interpreted scheme's, step by step and in its order of
operations (elementwise IEEE operations, no fused multiply-add): the same numbers to the
last bit.

The pseudo-inverse (``satterthwaite._pinv_psd`` documents the rule): LAPACK's dsyevd, the
eigendecomposition ``numpy.linalg.eigh`` calls, and the sum over positive eigenvalues.
"""

import numpy as np

from libc.math cimport fabs, isfinite, pow, sqrt
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_lapack cimport dsyevd

cdef extern from "float.h":
    double DBL_EPSILON

ZERO_TOL = sqrt(DBL_EPSILON / 7e-7)
cdef double _ZERO_TOL = ZERO_TOL


cdef inline double _step(double x, double d, double eps) noexcept nogil:
    """numDeriv's first step: |d x|, plus ``eps`` where |x| is below ``ZERO_TOL``."""
    return fabs(d * x) + (eps if fabs(x) < _ZERO_TOL else eps * 0.0)


cdef void _richardson(double *a, Py_ssize_t r, double v) noexcept nogil:
    """Extrapolate ``a`` (r approximations, steps shrinking by v) in place, a[0] the
    result: a_j ← (a_{j+1} 4^m − a_j) / (4^m − 1) for m = 1 … r − 1 (v = 2)."""
    cdef Py_ssize_t m, j
    cdef double four
    for m in range(1, r):
        four = pow(v * v, <double>m)
        for j in range(r - m):
            a[j] = (a[j + 1] * four - a[j]) / (four - 1.0)


def _values(fun, points, Py_ssize_t m):
    """``fun(points)`` as a C-contiguous float array of m rows."""
    values = np.ascontiguousarray(np.asarray(fun(points), dtype=float))
    if values.ndim == 0 or values.shape[0] != m:
        raise ValueError(f"the function gave {values.shape} for {m} points")
    return values.reshape(m, -1)


def central_derivatives(fun, const double[::1] x, double d=0.1, double eps=1e-4,
                        Py_ssize_t r=4, double v=2.0):
    """:func:`crossed.inference.numderiv.central_derivatives` (its documentation)."""
    cdef Py_ssize_t n = x.shape[0], i, k, o, row, nout
    cdef Py_ssize_t m = 1 + 2 * n * r
    if r < 1:
        raise ValueError("r must be at least 1")
    steps = np.empty((n, r))
    cdef double[:, ::1] h = steps
    for i in range(n):
        h[i, 0] = _step(x[i], d, eps)
        for k in range(1, r):
            h[i, k] = h[i, k - 1] / v
    # the points: x, then per coordinate i and step k, x + h e_i and x − h e_i
    points = np.empty((m, n))
    cdef double[:, ::1] pt = points
    for row in range(m):
        pt[row, :] = x
    for i in range(n):
        for k in range(r):
            row = 1 + 2 * (i * r + k)
            pt[row, i] = x[i] + h[i, k]
            pt[row + 1, i] = x[i] + (-h[i, k])
    values = _values(fun, points, m)
    cdef const double[:, ::1] f = values
    nout = f.shape[1]
    first = np.empty((nout, n))
    second = np.empty((nout, n))
    cdef double[:, ::1] d1 = first, d2 = second
    work = np.empty(2 * r)
    cdef double[::1] a = work
    cdef double fp, fm, f0, hk
    for o in range(nout):
        f0 = f[0, o]
        for i in range(n):
            for k in range(r):
                row = 1 + 2 * (i * r + k)
                fp, fm, hk = f[row, o], f[row + 1, o], h[i, k]
                a[k] = (fp - fm) / (2.0 * hk)
                a[r + k] = (fp - 2.0 * f0 + fm) / (hk * hk)
            _richardson(&a[0], r, v)
            _richardson(&a[r], r, v)
            d1[o, i], d2[o, i] = a[0], a[r]
    return values[0].copy(), first, second


def mixed_second(fun, const double[::1] x, const double[::1] diag, double f0,
                 double d=0.1, double eps=1e-4, Py_ssize_t r=4, double v=2.0):
    """:func:`crossed.inference.numderiv.mixed_second` (its documentation)."""
    cdef Py_ssize_t n = x.shape[0], i, j, k, pair, row, npairs = n * (n - 1) // 2
    if diag.shape[0] != n:
        raise ValueError(f"diag has {diag.shape[0]} entries, x {n}")
    if r < 1:
        raise ValueError("r must be at least 1")
    hessian = np.zeros((n, n))
    cdef double[:, ::1] H = hessian
    for i in range(n):
        H[i, i] = diag[i]
    if n < 2:  # (no pairs)
        return hessian
    steps = np.empty((n, r))  # (h / v^k per coordinate)
    cdef double[:, ::1] h = steps
    for i in range(n):
        for k in range(r):
            h[i, k] = _step(x[i], d, eps) / pow(v, <double>k)
    # per pair j < i (row by row) and step: x + (h_i e_i + h_j e_j), then x − (…)
    cdef Py_ssize_t m = 2 * npairs * r
    points = np.empty((m, n))
    cdef double[:, ::1] pt = points
    for row in range(m):
        pt[row, :] = x
    pair = 0
    for i in range(1, n):
        for j in range(i):
            for k in range(r):
                row = 2 * (pair * r + k)
                pt[row, i] = x[i] + h[i, k]
                pt[row, j] = x[j] + h[j, k]
                pt[row + 1, i] = x[i] - h[i, k]
                pt[row + 1, j] = x[j] - h[j, k]
            pair += 1
    values = _values(fun, points, m)
    if values.shape[1] != 1:
        raise ValueError(f"the function gave {values.shape[1]} values per point, not one")
    cdef const double[:, ::1] f = values
    work = np.empty(r)
    cdef double[::1] a = work
    cdef double hi, hj
    pair = 0
    for i in range(1, n):
        for j in range(i):
            for k in range(r):
                row = 2 * (pair * r + k)
                hi, hj = h[i, k], h[j, k]
                a[k] = (f[row, 0] - 2.0 * f0 + f[row + 1, 0] - H[i, i] * hi * hi
                        - H[j, j] * hj * hj) / (2.0 * hi * hj)
            _richardson(&a[0], r, v)
            H[i, j] = a[0]
            H[j, i] = a[0]
            pair += 1
    return hessian


cdef int _eigh(Py_ssize_t n, double *A, double *w, double *work, int lwork, int *iwork,
               int liwork) noexcept nogil:
    """Eigenvalues (ascending, into w) and eigenvectors (the columns of A, overwriting the
    lower triangle it is read from; n x n, column-major) by dsyevd. Returns its info."""
    cdef int nn = <int>n, info = 0
    cdef char jobz = b"V", uplo = b"L"
    dsyevd(&jobz, &uplo, &nn, A, &nn, w, work, &lwork, iwork, &liwork, &info)
    return info


def pinv_psd(const double[:, ::1] H, double scaled_tol, double tol):
    """The pseudo-inverse of the symmetric part of ``H`` over its positive eigenvalues:
    Σ v vᵀ / λ over λ > ``tol``, or, where an eigenvalue of H scaled to unit diagonal
    (D^-1/2 H D^-1/2) is under ``scaled_tol`` in absolute value, over the scaled ones
    above ``scaled_tol`` (with v ← D^-1/2 v).

    Returns
    -------
    A : numpy.ndarray
        The pseudo-inverse (n x n; NaN where H is not finite).
    finite : bool
        Whether H is finite.
    negative, zero : int
        How many eigenvalues are below −tolerance, and within ±tolerance (the tolerance
        used: ``scaled_tol`` in the scaled coordinates, else ``tol``).
    """
    cdef Py_ssize_t n = H.shape[0], i, j, k
    if H.shape[1] != n:
        raise ValueError(f"H is {H.shape[0]} x {H.shape[1]}, not square")
    out = np.zeros((n, n))
    cdef double[:, ::1] A = out
    if n == 0:
        return out, True, 0, 0
    cdef int lwork = 1 + 6 * <int>n + 2 * <int>(n * n), liwork = 3 + 5 * <int>n, info
    cdef double *S = <double *> malloc((3 * n * n + 2 * n + lwork) * sizeof(double))
    cdef int *iwork = <int *> malloc(liwork * sizeof(int))
    if S == NULL or iwork == NULL:
        free(S)
        free(iwork)
        raise MemoryError()
    cdef double *V = S + n * n  # (the eigenvectors, column-major)
    cdef double *d = V + n * n
    cdef double *w = d + n
    cdef double *vecs = w + n  # (the eigenvectors used, column-major)
    cdef double *work = vecs + n * n
    cdef bint finite = True, positive = True, use_scaled = False
    cdef int negative = 0, zero = 0
    cdef double t, acc
    try:
        for j in range(n):  # (column-major: S[i + n j])
            for i in range(n):
                S[i + n * j] = 0.5 * (H[i, j] + H[j, i])
                finite = finite and isfinite(S[i + n * j])
        if not finite:
            out[:] = np.nan
            return out, False, 0, 0
        for i in range(n):
            d[i] = sqrt(fabs(S[i + n * i]))
            positive = positive and d[i] > 0.0
        if positive:  # (D^-1/2 H D^-1/2)
            for j in range(n):
                for i in range(n):
                    V[i + n * j] = S[i + n * j] / (d[i] * d[j])
            info = _eigh(n, V, w, work, lwork, iwork, liwork)
            if info != 0:
                raise np.linalg.LinAlgError("Eigenvalues did not converge")
            for k in range(n):
                use_scaled = use_scaled or fabs(w[k]) < scaled_tol
        if use_scaled:  # (a direction the differences do not resolve)
            t = scaled_tol
            for j in range(n):
                for i in range(n):
                    vecs[i + n * j] = V[i + n * j] / d[i]
        else:
            t = tol
            for j in range(n):
                for i in range(n):
                    vecs[i + n * j] = S[i + n * j]
            info = _eigh(n, vecs, w, work, lwork, iwork, liwork)
            if info != 0:
                raise np.linalg.LinAlgError("Eigenvalues did not converge")
        for k in range(n):
            negative += w[k] < -t
            zero += fabs(w[k]) <= t
        for i in range(n):
            for j in range(n):
                acc = 0.0
                for k in range(n):
                    if w[k] > t:
                        acc = acc + vecs[i + n * k] / w[k] * vecs[j + n * k]
                A[i, j] = acc
        return out, True, negative, zero
    finally:
        free(S)
        free(iwork)
