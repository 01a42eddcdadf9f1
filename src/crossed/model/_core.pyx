# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The model core's compiled kernels: the inner loops of one criterion evaluation.

Each function here is one step of :meth:`crossed.model.pls.PLS.factor` on its own arrays
(the orchestration, the checks and the messages stay in Python):

- :func:`first_block_1x1`: the first random-effects block's per-level B_s = TᵀA_sT + I,
  G_s = T B_s⁻¹ Tᵀ and their halves in closed form for one column per level
  (``closed_forms.py`` states the formulas; ``batched.py`` applies them to many θ);
- :func:`map_update`: the Schur complement's entries through the sparse map W
  (``sparse_map.py``): one pass over W's rows forms W g, scales it and writes it into C;
- :func:`potrf_lower`: LAPACK's dpotrf on a Fortran-ordered matrix.

Each computes what the NumPy/SciPy code it replaced computed, in the same order of
operations (W g by BLAS's dgemv for a dense W, by rows in index order for a CSR one, as
scipy's product): criteria are bitwise those of before, so optimisers take the same path.
Logarithms and their sums stay NumPy's (its own vectorised log and pairwise sums).

BLAS and LAPACK are SciPy's (``scipy.linalg.cython_lapack``): the OpenBLAS that NumPy and
SciPy already load, so the results depend on the BLAS kernel exactly as the rest of the
package does. Every loop releases the GIL: ``sparse_map.SparseMap.each_part`` runs the
two halves of a large W on two threads.
"""

from libc.math cimport sqrt
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_blas cimport dgemv
from scipy.linalg.cython_lapack cimport dpotrf


def first_block_1x1(const double[::1] a, double t, double[::1] b, double[::1] G,
                    double[::1] root, double[::1] H):
    """q₁ = 1: per level (or class) s, b_s = t² a_s + 1, G_s = t² / b_s, √b_s and
    H_s = t / √b_s, written into ``b``, ``G``, ``root`` and ``H`` (the caller sums
    NumPy's log of ``b``: the same criterion, bit for bit, as before the kernel and as
    ``batched.py``)."""
    cdef Py_ssize_t s, n = a.shape[0]
    cdef double tt = t * t, bs, rs
    with nogil:
        for s in range(n):
            bs = tt * a[s] + 1.0
            rs = sqrt(bs)
            b[s] = bs
            G[s] = tt / bs
            root[s] = rs
            H[s] = t / rs


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
