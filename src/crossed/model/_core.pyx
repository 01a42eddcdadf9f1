# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The model core's compiled kernels: the inner loops of one criterion evaluation.

Each function here is one step of :meth:`crossed.model.pls.PLS.factor` on its own arrays
(the orchestration, the checks and the messages stay in Python):

- :func:`first_block_1x1` and :func:`first_block_2x2`: the first random-effects block's
  per-level matrices B_s = TᵀA_sT + I and G_s = T B_s⁻¹ Tᵀ in closed form, with Σ log|B_s|
  (``closed_forms.py`` states the formulas; ``batched.py`` applies them to many θ);
- :func:`map_update`: the Schur complement's entries through the sparse map W
  (``sparse_map.py``): one pass over W's rows forms W g, scales it and writes it into C;
- :func:`potrf_lower`: LAPACK's dpotrf on a Fortran-ordered matrix, and
  :func:`log_diagonal_sums`, the factor's log determinants and last pivot.

BLAS and LAPACK are SciPy's (``scipy.linalg.cython_lapack``): the OpenBLAS that NumPy and
SciPy already load, so the results depend on the BLAS kernel exactly as the rest of the
package does. Every loop releases the GIL: ``sparse_map.SparseMap.each_part`` runs the
two halves of a large W on two threads.
"""

from libc.math cimport INFINITY, fabs, log, sqrt
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_blas cimport dgemv
from scipy.linalg.cython_lapack cimport dpotrf


def first_block_1x1(const double[::1] a, double t, const double[::1] count,
                     double[::1] b, double[::1] G, double[::1] root, double[::1] H):
    """q₁ = 1: per level (or class) s, b_s = t² a_s + 1, G_s = t² / b_s, √b_s and
    H_s = t / √b_s, written into ``b``, ``G``, ``root`` and ``H``; returns Σ_s log b_s,
    each class's term times its ``count`` (empty ``count``: once per entry)."""
    cdef Py_ssize_t s, n = a.shape[0]
    cdef double tt = t * t, bs, rs, logdet = 0.0
    cdef bint weighted = count.shape[0] > 0
    with nogil:
        for s in range(n):
            bs = tt * a[s] + 1.0
            rs = sqrt(bs)
            b[s] = bs
            G[s] = tt / bs
            root[s] = rs
            H[s] = t / rs
            if weighted:
                logdet += log(bs) * count[s]
            else:
                logdet += log(bs)
    return logdet


def first_block_2x2(const double[:, ::1] a, double t0, double t1, double t2,
                    double[:, ::1] b, double[:, ::1] G):
    """q₁ = 2, T = [[t0, 0], [t1, t2]]: B_s's entries (b00, b10, b11) into ``b`` (3, ℓ) and
    G_s's (g00, g01, g10, g11) into ``G`` (4, ℓ), from ``a`` = (a00, a10, a11) per level;
    returns Σ_s log det B_s (+inf when a determinant is not positive: not positive
    definite). Finite t only (``closed_forms.first_block_2x2`` handles the others)."""
    cdef Py_ssize_t s, n = a.shape[1]
    cdef double t00 = t0 * t0, t01 = t0 * t1, t11 = t1 * t1
    cdef double t02 = t0 * t2, t12 = t1 * t2, t22 = t2 * t2
    cdef double a00, a10, a11, b00, b10, b11, det, i00, i10, i11, g01
    cdef double logdet = 0.0
    cdef bint failed = False
    with nogil:
        for s in range(n):
            a00 = a[0, s]
            a10 = a[1, s]
            a11 = a[2, s]
            b00 = t00 * a00 + 2.0 * t01 * a10 + t11 * a11 + 1.0
            b10 = t02 * a10 + t12 * a11
            b11 = t22 * a11 + 1.0
            det = b00 * b11 - b10 * b10
            if not det > 0.0:
                failed = True
                break
            logdet += log(det)
            b[0, s] = b00
            b[1, s] = b10
            b[2, s] = b11
            i00 = b11 / det
            i10 = -b10 / det
            i11 = b00 / det
            g01 = t01 * i00 + t02 * i10
            G[0, s] = t00 * i00
            G[1, s] = g01
            G[2, s] = g01
            G[3, s] = t11 * i00 + 2.0 * t12 * i10 + t22 * i11
    if failed or not fabs(logdet) < INFINITY:
        return INFINITY
    return logdet


cdef inline double _row_csr(const double[::1] data, const int32_t[::1] indices,
                            const int32_t[::1] indptr, Py_ssize_t i,
                            const double[::1] g) noexcept nogil:
    cdef double v = 0.0
    cdef Py_ssize_t k
    for k in range(indptr[i], indptr[i + 1]):
        v += data[k] * g[indices[k]]
    return v


def map_update(W, const double[::1] g, const int64_t[::1] rows, Py_ssize_t lo, Py_ssize_t hi,
               const double[::1] arr, const double[::1] table, const int64_t[::1] pair,
               double[::1] out):
    """The Schur complement's entries ``lo:hi`` through the sparse map: for each of W's
    rows i (``W``: a C-ordered array, its product with g by BLAS's dgemv, or a CSR matrix
    whose rows are W[lo:hi], summed in index order),
    u_i = (W g)_i times ``table[pair[i]]`` (the entry's scale s_a s_b; ``pair`` empty:
    1); then with ``arr`` (A_rr on the support, C assembled there alone)
    ``out[rows[i]] = (arr[i] - (W g)_i) * scale``, else ``out[rows[i]] -= u_i``."""
    cdef const double[:, ::1] dense
    cdef const double[::1] data
    cdef const int32_t[::1] indices, indptr
    cdef bint csr = hasattr(W, "indptr")
    cdef bint support = arr.shape[0] > 0, scaled = pair.shape[0] > 0
    cdef Py_ssize_t i
    cdef double v, scale
    cdef double *wg = NULL
    cdef int m, n, one = 1
    cdef double alpha = 1.0, beta = 0.0
    cdef char trans = b"T"
    if csr:  # (scipy's index arrays are int32 unless the matrix needs int64)
        data, indices, indptr = W.data, W.indices.astype("int32", copy=False), \
            W.indptr.astype("int32", copy=False)
    else:
        dense = W
        if hi > lo and dense.shape[1] > 0:  # W g by BLAS (dgemv on W's rows lo:hi)
            wg = <double *> malloc((hi - lo) * sizeof(double))
            if wg == NULL:
                raise MemoryError()
            m, n = <int>dense.shape[1], <int>(hi - lo)
            dgemv(&trans, &m, &n, &alpha, <double *> &dense[0, 0], &m, <double *> &g[0],
                  &one, &beta, wg, &one)
    try:
        with nogil:
            for i in range(lo, hi):
                if csr:
                    v = _row_csr(data, indices, indptr, i - lo, g)
                elif wg != NULL:
                    v = wg[i - lo]
                else:
                    v = 0.0
                scale = table[pair[i]] if scaled else 1.0
                if support:
                    out[rows[i]] = (arr[i] - v) * scale
                else:
                    out[rows[i]] -= v * scale
    finally:
        free(wg)


def potrf_lower(double[::1, :] A):
    """A ← its lower Cholesky factor in place (LAPACK's dpotrf, Fortran order; the strict
    upper triangle is not read or written); returns LAPACK's info (0: success, k > 0: the
    leading minor of order k is not positive definite)."""
    cdef int n = <int>A.shape[0], lda = <int>A.shape[0], info = 0
    cdef char uplo = b"L"
    if n == 0:
        return 0
    with nogil:
        dpotrf(&uplo, &n, &A[0, 0], &lda, &info)
    return info


def log_diagonal_sums(const double[::1, :] L, Py_ssize_t split):
    """(Σ_{i < split} log L_ii, Σ_{split <= i < n-1} log L_ii, L_{n-1,n-1}²): the factor's
    random part and fixed part log determinants (halved) and its last pivot squared."""
    cdef Py_ssize_t i, n = L.shape[0]
    cdef double rand = 0.0, fixed = 0.0
    with nogil:
        for i in range(n - 1):
            if i < split:
                rand += log(L[i, i])
            else:
                fixed += log(L[i, i])
    return rand, fixed, L[n - 1, n - 1] * L[n - 1, n - 1]
