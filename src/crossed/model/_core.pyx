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
- :func:`potrf_lower`: LAPACK's dpotrf on a Fortran-ordered matrix;
- :func:`lead_blocks_lower`: the same factor where the later random effects fall into small
  independent components (ham's consumers): each component on its own rows, then the
  fixed-effect and response columns; :func:`later_components` finds the components
  (``update_plan.lead_blocks``);
- :func:`banded_first` and :func:`banded_half`: a first block of three or more columns per
  level: B_s = TᵀA_sT + I, its Cholesky factor in band storage, H_s = L_s⁻¹Tᵀ and G_s =
  H_sᵀH_s per level (``banded.py``; :class:`SmallDense` forms them with the same loops);
- :func:`scale_both_sides`: the Schur complement scaled by the later blocks' T_k on both
  sides where one has several columns per level;
- :func:`block_cholesky`: dpotrf and dpotrs on the independent diagonal blocks of the
  sparse Schur complement (``schur_blocks.py``);
- :func:`upper_products`: the set-up's products of the sparse map, per class of levels
  (``sparse_map._upper_products``), in one pass without SciPy's product and conversions;
- :func:`row_products`: a small design's cross-products of Z with Z_r and with [X y] in
  one pass over the rows (``crossprod.CrossProducts.from_rows``);
- :func:`map_entries` and :func:`map_products`: a small design's sparse map from the dense
  A_1r (``sparse_map._dense_products``, and y's rows of it for a new response);
- :class:`SmallDense`: every step of an evaluation at once for a small design on the
  dense path (a Schur complement of order below ``cholesky.MIN_DIAGONAL``: sleepstudy,
  blurb's and ner's crossed intercepts, a correlated slope on a later factor or on a
  3-level factor, and every refit of them; of any order where the later random effects
  fall into small components: ham), where the per-call overheads of the steps above were
  most of the time;
- :class:`SmallCriterion`: that evaluation and lme4's criterion as a C function of θ,
  which ``engines/native/_nlopt.pyx`` hands to NLopt's C interface (no Python call per
  evaluation of the optimiser's loop); its log and the optimiser's stop are
  :class:`LoggedObjective`'s (``_objective.pxi``, shared with the GLMM's compiled
  criterion);
- :func:`dense_solve`: β and u from a factorisation on the dense path whose first block
  has one or two columns per level and every later block one (``PLS.solve``'s steps in
  one call);
- :func:`derivative_check` and :func:`newton_probe`: lme4's derivative check on a few
  parameters (the scaled gradient by dpotrf and dtrsv, the Hessian's eigenvalues by
  dsyev) and the Newton step of its derivatives (dpotrf, dpotrs) with the decrease it
  predicts, where NumPy's per-call costs were most of a small fit's check (the
  derivatives themselves: ``LoggedObjective.deriv12``, ``_objective.pxi``).

Each of the kernels of one step computes what the NumPy/SciPy code it replaced computed,
in the same order of operations (W g by BLAS's dgemv for a dense W, by rows in index
order for a CSR one, as scipy's product): criteria are bitwise those of before, so
optimisers take the same path. Logarithms and their sums stay NumPy's (its own vectorised
log and pairwise sums). :class:`SmallDense` is the exception: its logarithms are libm's and
its sums sequential, so its criterion is the general path's to rounding (as
``batched.py``'s; ``tests/model/test_pls.py``).

BLAS and LAPACK are SciPy's (``scipy.linalg.cython_lapack``): the OpenBLAS that NumPy and
SciPy already load, so the results depend on the BLAS kernel exactly as the rest of the
package does. The loops of an evaluation release the GIL: ``sparse_map.SparseMap.each_part``
runs the two halves of a large W on two threads.
"""

import numpy as np

from libc.math cimport INFINITY, NAN, fabs, log, sqrt
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport dgemm, dgemv, dsyrk, dtrsv
from scipy.linalg.cython_lapack cimport dgesv, dpotrf, dpotrs, dsyev, dtrtri, dtrtrs


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


_NO_DENSE = np.zeros((0, 0))
_NO_VALUES = np.zeros(0)
_NO_INDEX32 = np.zeros(0, dtype=np.int32)
_NO_BLOCKS = np.zeros((0, 4), dtype=np.int64)  # (SmallDense: every later block scalar)
_NO_INDEX64 = np.zeros(0, dtype=np.int64)
cdef double[::1] _NO_WEIGHTS = np.zeros(0)  # (a typed empty array: no weights per level)


def _csr_arrays(W):
    """A CSR W's (data, indices, indptr) as the kernels read them (scipy's index arrays
    are int32 unless the matrix needs int64)."""
    return (W.data, W.indices.astype("int32", copy=False),
            W.indptr.astype("int32", copy=False))


cdef void _map_product(bint csr, const double[:, ::1] dense, const double[::1] data,
                       const int32_t[::1] indices, const int32_t[::1] indptr,
                       Py_ssize_t nrows, const double *g, double *wg) noexcept nogil:
    """wg = W g over W's ``nrows`` rows: by BLAS's dgemv for a dense W, row by row in
    index order for a CSR one (as scipy's product)."""
    cdef Py_ssize_t i, k
    cdef int m = <int>dense.shape[1], n = <int>nrows, one = 1
    cdef double alpha = 1.0, beta = 0.0, v
    cdef char trans = b"T"
    if csr:
        for i in range(nrows):
            v = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                v += data[k] * g[indices[k]]
            wg[i] = v
    elif nrows > 0 and m > 0:
        dgemv(&trans, &m, &n, &alpha, <double *> &dense[0, 0], &m, g, &one, &beta, wg,
              &one)
    else:
        for i in range(nrows):
            wg[i] = 0.0


def map_update(W, const double[::1] g, const int64_t[::1] rows, Py_ssize_t lo, Py_ssize_t hi,
               const double[::1] arr, const double[::1] table, const int64_t[::1] pair,
               double[::1] out):
    """The Schur complement's entries ``lo:hi`` through the sparse map: for each of W's
    rows i (``W``: a C-ordered array, its product with g by BLAS's dgemv, or a CSR matrix
    whose rows are W[lo:hi], summed in index order),
    u_i = (W g)_i times ``table[pair[i]]`` (the entry's scale s_a s_b; ``pair`` empty:
    1); then with ``arr`` (A_rr on the support, C assembled there alone)
    ``out[rows[i]] = (arr[i] - (W g)_i) * scale``, else ``out[rows[i]] -= u_i``
    (``rows`` empty: ``out[i]``, W's rows in ``out``'s order)."""
    cdef const double[:, ::1] dense = _NO_DENSE
    cdef const double[::1] data = _NO_VALUES
    cdef const int32_t[::1] indices = _NO_INDEX32, indptr = _NO_INDEX32
    cdef bint csr = hasattr(W, "indptr")
    cdef bint support = arr.shape[0] > 0, scaled = pair.shape[0] > 0
    cdef bint direct = rows.shape[0] == 0
    cdef Py_ssize_t i, at
    cdef double scale
    cdef double *wg = NULL
    if csr:
        data, indices, indptr = _csr_arrays(W)
    else:
        dense = W
    wg = <double *> malloc((hi - lo + 1) * sizeof(double))
    if wg == NULL:
        raise MemoryError()
    try:
        with nogil:
            _map_product(csr, dense, data, indices, indptr, hi - lo,
                         &g[0] if g.shape[0] else NULL, wg)
            for i in range(lo, hi):
                scale = table[pair[i]] if scaled else 1.0
                at = i if direct else rows[i]
                if support:
                    out[at] = (arr[i] - wg[i - lo]) * scale
                else:
                    out[at] -= wg[i - lo] * scale
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



cdef int _lead_blocks(double *A, Py_ssize_t r, Py_ssize_t rr, const int64_t[::1] rows,
                      const int64_t[::1] start) noexcept nogil:
    """The lower Cholesky factor of the r x r matrix A (Fortran order, its lower triangle
    read and written) in place, where the leading ``rr`` rows fall into independent
    components: ``rows[start[c]:start[c + 1]]`` (ascending) are component c's, and A is 0
    between the rows of two components. Each component's columns are factored left-looking
    over the component's earlier columns alone, on its own rows and the trailing rows
    [rr, r) (the other entries of those columns are 0 in the factor too: the products
    that would form them have a 0 factor); then the trailing block is updated by one
    rank-rr product (dsyrk) and factored (dpotrf). Returns LAPACK's info: 0, or j + 1
    where the pivot of row j is not positive (or NaN)."""
    cdef Py_ssize_t nc = start.shape[0] - 1, c, a, b, k, i, j, c0, c1
    cdef double s, d
    cdef int n = <int>rr, ld = <int>r, rest = <int>(r - rr), info = 0
    cdef char uplo = b"L", no = b"N"
    cdef double minus = -1.0, one = 1.0
    for c in range(nc):
        c0, c1 = start[c], start[c + 1]
        for b in range(c0, c1):
            j = rows[b]
            s = A[j + j * r]
            for k in range(c0, b):
                s -= A[j + rows[k] * r] * A[j + rows[k] * r]
            if not s > 0.0:
                return <int>j + 1
            d = sqrt(s)
            A[j + j * r] = d
            for a in range(b + 1, c1):  # (the component's later rows, then the trailing)
                i = rows[a]
                s = A[i + j * r]
                for k in range(c0, b):
                    s -= A[i + rows[k] * r] * A[j + rows[k] * r]
                A[i + j * r] = s / d
            for i in range(rr, r):
                s = A[i + j * r]
                for k in range(c0, b):
                    s -= A[i + rows[k] * r] * A[j + rows[k] * r]
                A[i + j * r] = s / d
    if rest == 0:
        return 0
    if n > 0:
        dsyrk(&uplo, &no, &rest, &n, &minus, A + rr, &ld, &one, A + rr + rr * r, &ld)
    dpotrf(&uplo, &rest, A + rr + rr * r, &ld, &info)
    return info + n if info != 0 else 0


cdef bint _lead_fits(Py_ssize_t rr, const int64_t[::1] rows,
                     const int64_t[::1] start) noexcept nogil:
    """Whether ``rows`` and ``start`` describe components of [0, rr) as
    :func:`_lead_blocks` reads them (bounds and order; every row once is the caller's)."""
    cdef Py_ssize_t c, b
    if rows.shape[0] != rr or start.shape[0] < 2 or start[0] != 0 or (
            start[start.shape[0] - 1] != rr):
        return False
    for c in range(start.shape[0] - 1):
        if start[c + 1] <= start[c]:
            return False
        for b in range(start[c], start[c + 1]):
            if rows[b] < 0 or rows[b] >= rr or b > start[c] and rows[b] <= rows[b - 1]:
                return False
    return True


def lead_blocks_lower(double[::1, :] A, const int64_t[::1] rows,
                      const int64_t[::1] start):
    """A ← its lower Cholesky factor in place (Fortran order, the lower triangle), where
    its leading ``len(rows)`` rows fall into independent components,
    ``rows[start[c]:start[c + 1]]`` ascending (:func:`_lead_blocks`); returns LAPACK's
    info (0: success, j + 1: row j's pivot is not positive)."""
    cdef Py_ssize_t r = A.shape[0], rr = rows.shape[0]
    cdef int info
    if A.shape[1] != r or rr > r or not _lead_fits(rr, rows, start):
        raise ValueError("A is square and rows/start are components of its leading rows")
    if r == 0:
        return 0
    with nogil:
        info = _lead_blocks(&A[0, 0], r, rr, rows, start)
    return info


cdef Py_ssize_t _root(int64_t *parent, Py_ssize_t k) noexcept nogil:
    """The root of k's tree in a union-find forest, halving the path on the way."""
    while parent[k] != k:
        parent[k] = parent[parent[k]]
        k = parent[k]
    return k


cdef inline void _join(int64_t *parent, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Join a's and b's trees, the larger root under the smaller."""
    a, b = _root(parent, a), _root(parent, b)
    if a < b:
        parent[b] = a
    elif b < a:
        parent[a] = b


def later_components(Py_ssize_t n, const int32_t[::1] level_ptr, const int32_t[::1] level_cols,
                     const int32_t[::1] zr_ptr, const int32_t[::1] zr_rows,
                     const int64_t[:, ::1] blocks):
    """The connected components of the later random effects (``update_plan.lead_blocks``),
    n of them: two meet where a level of the first factor meets both (its columns
    ``level_cols[level_ptr[s]:level_ptr[s + 1]]``), where A_rr couples them (Z_rᵀZ_r in
    CSC: ``zr_ptr``, ``zr_rows``) and where they are columns of one later level (``blocks``:
    each later block's levels and columns per level, in order). By union-find, each
    node's component numbered in the order of their smallest nodes; returns (labels
    (int64), the number of components, the largest one's size)."""
    cdef Py_ssize_t s, k, b, lev, c, off = 0, count = 0, biggest = 0
    if zr_ptr.shape[0] != n + 1 or blocks.shape[1] != 2 or level_ptr.shape[0] < 1 or (
            level_ptr[level_ptr.shape[0] - 1] > level_cols.shape[0]
            or zr_ptr[n] > zr_rows.shape[0]):
        raise ValueError("level_ptr/cols, zr_ptr/rows are CSR/CSC arrays, blocks (nb, 2)")
    for b in range(blocks.shape[0]):
        off += blocks[b, 0] * blocks[b, 1]
    if off != n:
        raise ValueError(f"the later blocks have {off} columns, not {n}")
    for k in range(level_ptr.shape[0] - 1):
        if not 0 <= level_ptr[k] <= level_ptr[k + 1]:
            raise ValueError("level_ptr is not a CSR index pointer")
    for k in range(n):
        if not 0 <= zr_ptr[k] <= zr_ptr[k + 1]:
            raise ValueError("zr_ptr is not a CSC index pointer")
    for k in range(level_ptr[level_ptr.shape[0] - 1]):
        if not 0 <= level_cols[k] < n:
            raise ValueError(f"a level's column is not one of the {n}")
    for k in range(zr_ptr[n]):
        if not 0 <= zr_rows[k] < n:
            raise ValueError(f"a row of Z_rᵀZ_r is not one of the {n}")
    forest = np.arange(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    sizes = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] parent = forest, out = labels, size = sizes
    with nogil:
        for s in range(level_ptr.shape[0] - 1):  # (each tree's root its smallest node)
            for k in range(level_ptr[s] + 1, level_ptr[s + 1]):
                _join(&parent[0], level_cols[k - 1], level_cols[k])
        for c in range(n):
            for k in range(zr_ptr[c], zr_ptr[c + 1]):
                _join(&parent[0], zr_rows[k], c)
        off = 0
        for b in range(blocks.shape[0]):
            for lev in range(blocks[b, 0]):
                for k in range(1, blocks[b, 1]):
                    _join(&parent[0], off + k - 1, off + k)
                off += blocks[b, 1]
        for k in range(n):  # (a root comes before the rest of its tree)
            c = _root(&parent[0], k)
            if c == k:
                out[k] = count
                count += 1
            else:
                out[k] = out[c]
            size[out[k]] += 1
            if size[out[k]] > biggest:
                biggest = size[out[k]]
    return labels, count, biggest

def scale_both_sides(const double[:, :] C, const int64_t[:, ::1] blocks,
                     const double[::1] tt, double[::1, :] out):
    """out <- S M Sᵀ, M the symmetric matrix of C's lower triangle (C in any order; its
    strict upper triangle is not read), S = blockdiag(I ⊗ T_kᵀ over the later blocks, I
    on X and y): the Schur complement's scaling when a later block has several columns.

    ``blocks``: per later block, in order from row 0, (its first row, its number of
    levels, q, where its T_kᵀ starts in ``tt``, q x q in C order); the rows after the last
    block's are the identity's. As SciPy's sparse products S M and then S (S M)ᵀ summed
    them (the NumPy code this replaced): each entry from zero over S's nonzeros in column
    order, the identity rows copied; ``out`` (Fortran order) is that second product."""
    cdef Py_ssize_t r = C.shape[0]
    if C.shape[1] != r or out.shape[0] != r or out.shape[1] != r:
        raise ValueError("C and out are r x r")
    work = np.empty(2 * r * r)
    cdef double[::1] w = work
    if r == 0:
        return
    with nogil:
        _scale_both_sides(&C[0, 0], C.strides[0] // sizeof(double),
                          C.strides[1] // sizeof(double), r, blocks, &tt[0] if tt.shape[0]
                          else NULL, &w[0], &w[r * r], &out[0, 0])


cdef void _scale_both_sides(const double *C, Py_ssize_t si, Py_ssize_t sj, Py_ssize_t r,
                            const int64_t[:, ::1] blocks, const double *tt, double *M,
                            double *P, double *out) noexcept nogil:
    """:func:`scale_both_sides` on C's entries C[i si + j sj] with work arrays M and P
    (r x r each); ``out`` r x r in Fortran order."""
    cdef Py_ssize_t nb = blocks.shape[0], rr = 0
    cdef Py_ssize_t b, i, j, k, ii, l, q, a0, nl, toff, row
    cdef double t, v
    cdef double *Prow
    cdef double *o
    cdef const double *Mrow
    if nb:
        rr = blocks[nb - 1, 0] + blocks[nb - 1, 1] * blocks[nb - 1, 2]
    for i in range(r):  # M: the lower triangle mirrored (row-major)
        for j in range(i + 1):
            v = C[i * si + j * sj]
            M[i * r + j] = v
            M[j * r + i] = v
    for b in range(nb):  # P = S M, row by row
        a0, nl, q, toff = blocks[b, 0], blocks[b, 1], blocks[b, 2], blocks[b, 3]
        for l in range(nl):
            for ii in range(q):
                row = a0 + l * q + ii
                Prow = &P[row * r]
                memset(Prow, 0, r * sizeof(double))
                for k in range(q):
                    t = tt[toff + ii * q + k]
                    if t != 0.0:
                        Mrow = &M[(a0 + l * q + k) * r]
                        for j in range(r):
                            Prow[j] = Prow[j] + t * Mrow[j]
    for i in range(rr, r):
        memcpy(&P[i * r], &M[i * r], r * sizeof(double))
    for j in range(r):  # out = S Pᵀ, column by column: out[:, j] from P's row j
        Prow = &P[j * r]
        o = &out[j * r]
        memset(o, 0, rr * sizeof(double))
        for b in range(nb):
            a0, nl, q, toff = blocks[b, 0], blocks[b, 1], blocks[b, 2], blocks[b, 3]
            for k in range(q):  # (each entry's terms in column order)
                for ii in range(q):
                    t = tt[toff + ii * q + k]
                    if t != 0.0:
                        for l in range(nl):
                            o[a0 + l * q + ii] = o[a0 + l * q + ii] + t * Prow[a0 + l * q + k]
        for i in range(rr, r):
            o[i] = Prow[i]


def banded_first(const double[:, ::1] a, const double[::1] T, double[:, ::1] first):
    """q₁ ≥ 3: per level s, B_s = TᵀA_sT + I and its lower Cholesky factor L_s, written
    into ``first`` as LAPACK's band storage of blockdiag(L_s) transposed (``first[s q + c,
    k]`` = L_s[c + k, c], 0 past the level: what dpbtrf leaves, ``banded.BandedBlocks``).
    ``a``: A_s's entries, row-major, as the rows of a (q², ℓ) array; ``T``: the template
    T, row-major. Returns (whether every B_s is positive definite, Σ_s log det B_s);
    ``first`` is unset past the first level that is not."""
    cdef Py_ssize_t q = _order_of(T.shape[0]), n = a.shape[1]
    cdef double logdet = 0.0
    cdef int info
    if q < 0 or a.shape[0] != T.shape[0] or first.shape[0] != n * q or first.shape[1] != q:
        raise ValueError("a is (q², ℓ), T has q² entries and first is (ℓ q, q)")
    work = np.empty(q)
    cdef double[::1] w = work
    if n == 0:
        return True, 0.0
    with nogil:
        info = _levels_factor(q, a, &T[0], _NO_WEIGHTS, &first[0, 0], &w[0], &logdet)
    return info == 0, logdet


def banded_half(const double[:, ::1] first, const double[::1] T, double[:, ::1] H,
                double[:, ::1] G):
    """q₁ ≥ 3: per level s, H_s = L_s⁻¹Tᵀ (forward substitution on :func:`banded_first`'s
    factors ``first``) into the row s of ``H`` (q x q, row-major) and, where ``G`` has
    rows, G_s = H_sᵀH_s = T B_s⁻¹ Tᵀ into the row s of ``G`` (the sums over k in order,
    as :class:`SmallDense` forms G)."""
    cdef Py_ssize_t q = _order_of(T.shape[0]), n, s
    if q < 0 or first.shape[1] != q or first.shape[0] % q or H.shape[1] != q * q or (
            H.shape[0] != first.shape[0] // q) or (G.shape[0] and (
                G.shape[0] != H.shape[0] or G.shape[1] != q * q)):
        raise ValueError("first is (ℓ q, q), T q², H and G (ℓ, q²)")
    n = H.shape[0]
    with nogil:
        for s in range(n):
            _level_half(q, &first[s * q, 0], &T[0], &H[s, 0])
            if G.shape[0]:
                _level_g(q, &H[s, 0], &G[s, 0], 1)
    return None


cdef Py_ssize_t _order_of(Py_ssize_t qq) noexcept nogil:
    """q for a q x q matrix of ``qq`` entries (q ≥ 3), else -1."""
    cdef Py_ssize_t q = 3
    while q * q < qq:
        q += 1
    return q if q * q == qq else -1


cdef enum:
    _MAX_SPANS = 64  # (the kernels below skip zeros of matrices up to this order)


cdef int _levels_factor(Py_ssize_t q, const double[:, ::1] a, const double *T,
                        const double[::1] count, double *band, double *work,
                        double *logdet) noexcept nogil:
    """:func:`banded_first`'s steps (``work``: q): per level, M = A_s T by rows, B_s =
    TᵀM + I on and below the diagonal (each sum over k in order, from the first to the
    last nonzero of T's column: a template's structural zeros add nothing), its Cholesky
    factor by the column-by-column algorithm (the inner sums in order, libm's sqrt and
    log) into ``band``; ``logdet``: Σ_s 2 Σ_j log L_s[j, j], each level's weighted by
    ``count`` where given. Returns -1 where a B_s is not positive definite."""
    cdef Py_ssize_t n = a.shape[1], s, i, j, k
    cdef Py_ssize_t lo[_MAX_SPANS]  # (T's column j: rows lo[j] ≤ i < hi[j] may be nonzero)
    cdef Py_ssize_t hi[_MAX_SPANS]
    cdef bint weighted = count.shape[0] > 0, spans = q <= _MAX_SPANS
    cdef double acc, d, ld, total = 0.0
    cdef double *L
    cdef double *m = work
    for j in range(q if spans else 0):
        lo[j], hi[j] = q, 0
        for i in range(q):
            if T[i * q + j] != 0.0:
                lo[j], hi[j] = min(lo[j], i), i + 1
    for s in range(n):
        L = band + s * q * q  # (level s's q columns of the band: L[c q + k] = L_s[c + k, c])
        for j in range(q):  # column j of B_s: B_s[i, j] = Σ_k T[k, i] (A_s T)[k, j], i ≥ j
            for k in range(q):  # (A_s T)[k, j]
                acc = 0.0
                for i in range(lo[j] if spans else 0, hi[j] if spans else q):
                    acc = acc + a[k * q + i, s] * T[i * q + j]
                m[k] = acc
            for i in range(j, q):
                acc = 0.0
                for k in range(lo[i] if spans else 0, hi[i] if spans else q):
                    acc = acc + T[k * q + i] * m[k]
                L[j * q + (i - j)] = acc + 1.0 if i == j else acc
            for i in range(q - j, q):  # (past the level: the band's zeros)
                L[j * q + i] = 0.0
        ld = 0.0
        for j in range(q):  # Cholesky, column by column, in place
            d = L[j * q]
            for k in range(j):
                d = d - L[k * q + (j - k)] * L[k * q + (j - k)]
            if not d > 0.0:
                return -1
            d = sqrt(d)
            L[j * q] = d
            for i in range(j + 1, q):
                acc = L[j * q + (i - j)]
                for k in range(j):
                    acc = acc - L[k * q + (i - k)] * L[k * q + (j - k)]
                L[j * q + (i - j)] = acc / d
            ld = ld + log(d)
        total = total + (2.0 * ld * count[s] if weighted else 2.0 * ld)
    logdet[0] = total
    return 0 if total < INFINITY else -1


cdef void _level_half(Py_ssize_t q, const double *L, const double *T,
                      double *H) noexcept nogil:
    """H = L⁻¹Tᵀ (q x q, row-major) for one level's band columns ``L`` (L[c q + k] =
    L_s[c + k, c]): forward substitution on each column of Tᵀ (row j of T), the sums over
    k in order, from the row's first nonzero (H is 0 above it)."""
    cdef Py_ssize_t i, j, k, lo
    cdef double v
    for j in range(q):
        lo = 0
        while lo < q and T[j * q + lo] == 0.0:
            lo += 1
        for i in range(lo):
            H[i * q + j] = 0.0
        for i in range(lo, q):
            v = T[j * q + i]
            for k in range(lo, i):
                v = v - L[k * q + (i - k)] * H[k * q + j]
            H[i * q + j] = v / L[i * q]


cdef void _level_g(Py_ssize_t q, const double *H, double *g, Py_ssize_t stride
                   ) noexcept nogil:
    """G = HᵀH (q x q) for one level's H (row-major), entry (a, b) at g[(a q + b) stride]
    (the sums over k in order, from the first row where both columns are nonzero; G[b, a]
    the same products, so it is G[a, b] mirrored)."""
    cdef Py_ssize_t a, b, k
    cdef Py_ssize_t lead[_MAX_SPANS]  # (column a of H is 0 above row lead[a])
    cdef double acc
    for a in range(min(q, _MAX_SPANS)):
        k = 0
        while k < q and H[k * q + a] == 0.0:
            k += 1
        lead[a] = k
    for a in range(q):
        for b in range(a, q):
            acc = 0.0
            for k in range(max(lead[a], lead[b]) if q <= _MAX_SPANS else 0, q):
                acc = acc + H[k * q + a] * H[k * q + b]
            g[(a * q + b) * stride] = acc
            g[(b * q + a) * stride] = acc


cdef int _lower_factor(Py_ssize_t m, const double[:, ::1] H, double *A) noexcept nogil:
    """A (m x m, Fortran order) <- H's lower Cholesky factor by dpotrf, read from H's lower
    triangle as NumPy's ``cholesky`` reads it; returns LAPACK's info."""
    cdef Py_ssize_t i, j
    cdef int n = <int>m, info = 0
    cdef char uplo = b"L"
    for j in range(m):
        for i in range(m):
            A[i + j * m] = H[i, j]
    dpotrf(&uplo, &n, A, &n, &info)
    return info


def derivative_check(const double[::1] g, const double[:, ::1] H, double[::1] ev):
    """The numbers of lme4's derivative check (``convergence.classify_convergence``) for a
    gradient ``g`` and Hessian ``H`` of a few parameters, without NumPy's per-call costs
    (which were most of a small fit's check).

    Returns ``(scaled, maxmin, comp)``: ``scaled`` False where H is not positive definite
    (dpotrf fails: lme4's "unable to evaluate scaled gradient"); else ``maxmin`` =
    max_i min(|s_i|, |g_i|) for the scaled gradient s = L⁻ᵀg (H = LLᵀ, lme4's
    ``solve(chol(H), g)``) and ``comp`` the first index where it is reached. ``ev``
    receives the eigenvalues of (H + Hᵀ)/2 in decreasing order (dsyev), NaN where LAPACK
    fails."""
    cdef Py_ssize_t i, j, m = g.shape[0]
    cdef int n = <int>m, info = 0, lwork = 3 * <int>m
    cdef char uplo = b"L", trans = b"T", diag = b"N", jobz = b"N"
    cdef int one = 1
    cdef double maxmin = 0.0, v
    cdef Py_ssize_t comp = 0
    cdef bint scaled = False
    if m == 0:
        return True, 0.0, 0
    cdef double *A = <double *> malloc((m * m + 5 * m) * sizeof(double))  # (A, x, w, work)
    if A == NULL:
        raise MemoryError()
    cdef double *x = A + m * m
    cdef double *w = x + m
    cdef double *work = w + m
    try:
        with nogil:
            if _lower_factor(m, H, A) == 0:
                scaled = True
                for i in range(m):
                    x[i] = g[i]
                dtrsv(&uplo, &trans, &diag, &n, A, &n, x, &one)
                for i in range(m):
                    v = fabs(x[i]) if fabs(x[i]) < fabs(g[i]) else fabs(g[i])
                    if i == 0 or v > maxmin:
                        maxmin, comp = v, i
            for j in range(m):
                for i in range(m):
                    A[i + j * m] = 0.5 * (H[i, j] + H[j, i])
            dsyev(&jobz, &uplo, &n, A, &n, w, work, &lwork, &info)
            for i in range(m):
                ev[i] = NAN if info != 0 else w[m - 1 - i]
    finally:
        free(A)
    return scaled, maxmin, comp


def newton_probe(const double[::1] g, const double[:, ::1] H, const int64_t[::1] coords,
                 const double[::1] theta, const double[::1] lower, double[::1] point):
    """The Newton step of a gradient ``g`` and Hessian ``H`` over the coordinates
    ``coords`` of θ = ``theta``, projected onto the bounds: ``point`` <- max(θ − s₀,
    ``lower``), s₀ = H⁻¹g on the free coordinates (0 elsewhere; H's Cholesky factor by
    dpotrf and dpotrs, its lower triangle read as NumPy's ``cholesky`` reads it; NaN
    propagates as in ``numpy.maximum``).

    Returns the decrease −(gᵀs + ½ sᵀHs) that the quadratic model predicts for the step
    s = point − θ on the free coordinates (sᵀH summed first, then its product with s),
    or NaN, with ``point`` unset, where H is not positive definite."""
    cdef Py_ssize_t i, j, m = coords.shape[0], k = theta.shape[0]
    cdef int n = <int>m, info = 0, nrhs = 1
    cdef char uplo = b"L"
    cdef double p, lin = 0.0, quad = 0.0, acc
    if (g.shape[0] != m or H.shape[0] != m or H.shape[1] != m or lower.shape[0] != k
            or point.shape[0] != k):
        raise ValueError("newton_probe: the shapes of g, H, coords, theta, lower and point "
                         "do not fit")
    for i in range(m):
        if coords[i] < 0 or coords[i] >= k:
            raise ValueError("newton_probe: a coordinate outside theta")
    cdef double *A = <double *> malloc((m * m + 2 * m + 1) * sizeof(double))
    if A == NULL:
        raise MemoryError()
    cdef double *step = A + m * m
    cdef double *s = step + m
    try:
        with nogil:
            if m:
                info = _lower_factor(m, H, A)
            if info == 0:
                for i in range(m):
                    step[i] = g[i]
                if m:
                    dpotrs(&uplo, &n, &nrhs, A, &n, step, &n, &info)
        if info != 0:
            return NAN
        for j in range(k):
            point[j] = theta[j]
        for i in range(m):
            point[coords[i]] = theta[coords[i]] - step[i]
        for j in range(k):
            p = point[j]
            point[j] = p if (p != p or p >= lower[j]) else lower[j]
        for i in range(m):
            s[i] = point[coords[i]] - theta[coords[i]]
            lin += g[i] * s[i]
        for j in range(m):
            acc = 0.0
            for i in range(m):
                acc += s[i] * H[i, j]
            quad += acc * s[j]
        return -(lin + 0.5 * quad)
    finally:
        free(A)


def block_cholesky(const double[::1] vals, const int32_t[::1] entries,
                   const int64_t[::1] entry_start, const int32_t[::1] dest,
                   const int64_t[::1] block_start, const int64_t[::1] start,
                   const int64_t[::1] order, Py_ssize_t c0, Py_ssize_t c1,
                   const double[:, ::1] rhs, double[::1] blocks, double[::1] work,
                   double[:, ::1] out, double[::1] logdet):
    """Blocks ``c0 .. c1 - 1`` of a block-diagonal symmetric matrix given by its pattern's
    values: each block's lower Cholesky factor (LAPACK's dpotrf) and the solution of its
    rows of ``M x = rhs`` (dpotrs), for ``schur_blocks.DiagonalBlocks``.

    Block c holds the rows ``order[start[c]:start[c + 1]]`` of the matrix (n_c of them), in
    ``blocks[block_start[c]:]`` as an n_c x n_c Fortran-order array whose lower triangle is
    filled from the pattern's values: ``blocks[dest[e]] = vals[e]`` for the entries
    ``e = entries[entry_start[c]:entry_start[c + 1]]``. The right-hand sides' rows go
    through ``work`` (the block's rows, Fortran order) into the same rows of ``out``.
    ``logdet[c]`` receives block c's log determinant (2 Σ log of its factor's diagonal).
    Returns LAPACK's info: 0, or dpotrf's k > 0 for the first block not positive definite
    (then the rest is not computed)."""
    cdef Py_ssize_t c, e, r, k, n, base, w0, m = rhs.shape[1]
    cdef int nn, nrhs = <int>m, info = 0
    cdef char uplo = b"L"
    cdef double acc
    with nogil:
        for c in range(c0, c1):
            n = start[c + 1] - start[c]
            if n == 0:
                continue
            base = block_start[c]
            memset(&blocks[base], 0, n * n * sizeof(double))
            for e in range(entry_start[c], entry_start[c + 1]):
                blocks[dest[entries[e]]] = vals[entries[e]]
            nn = <int>n
            dpotrf(&uplo, &nn, &blocks[base], &nn, &info)
            if info != 0:
                break
            acc = 0.0
            for r in range(n):
                acc += log(blocks[base + r + r * n])
            logdet[c] = 2.0 * acc
            if m == 0:
                continue
            w0 = start[c] * m
            for k in range(m):
                for r in range(n):
                    work[w0 + k * n + r] = rhs[order[start[c] + r], k]
            dpotrs(&uplo, &nn, &nrhs, &blocks[base], &nn, &work[w0], &nn, &info)
            if info != 0:
                break
            for k in range(m):
                for r in range(n):
                    out[order[start[c] + r], k] = work[w0 + k * n + r]
    return info


cdef void _counting_starts(const int64_t *bucket, Py_ssize_t n, int64_t *starts,
                           Py_ssize_t nb) noexcept nogil:
    """``starts[b]`` (``nb + 1`` entries): the number of the ``n`` entries whose bucket is
    below b, where a stable counting sort puts bucket b's first entry."""
    cdef Py_ssize_t b, e
    for b in range(nb + 1):
        starts[b] = 0
    for e in range(n):
        starts[bucket[e] + 1] += 1
    for b in range(nb):
        starts[b + 1] += starts[b]


cdef int _grow(int64_t **j_out, int64_t **key_out, double **v_out, Py_ssize_t *cap,
               Py_ssize_t need) noexcept nogil:
    """Enlarge the three output buffers to at least ``need`` entries; 0, or -1 when out of
    memory (the old buffers stay valid and are freed by the caller)."""
    cdef Py_ssize_t size = cap[0]
    cdef void *p
    if need <= size:
        return 0
    while size < need:
        size = 2 * size + 1024
    p = realloc(j_out[0], size * sizeof(int64_t))
    if p == NULL:
        return -1
    j_out[0] = <int64_t *> p
    p = realloc(key_out[0], size * sizeof(int64_t))
    if p == NULL:
        return -1
    key_out[0] = <int64_t *> p
    p = realloc(v_out[0], size * sizeof(double))
    if p == NULL:
        return -1
    v_out[0] = <double *> p
    cap[0] = size
    return 0


def upper_products(const int64_t[::1] a_ptr, const int64_t[::1] a_idx,
                   const double[::1] a_val, const int64_t[::1] pos,
                   const int64_t[::1] b_ptr, const int64_t[::1] b_idx,
                   const double[::1] b_val, const int64_t[::1] keys, Py_ssize_t ncls,
                   Py_ssize_t r):
    """Σ_{s in k} Aa[s, i] Ab[s, j] for j <= i, per class k, as (target, k, value) sorted by
    target = j·r + i, then k, with exact zeros left out.

    Aa, Ab: CSR (one row per level, r columns; int64 indices, Ab's sorted within each
    row: a row's entries past column i are not visited); ``keys``: the sorted
    distinct i·ncls + k of Aa's entries and ``pos`` each entry's position in it. This is
    SciPy's product of Aa's entries spread over one row per key, transposed, with Ab, its
    upper part and the conversion to columns (``sparse_map._upper_products`` before this
    kernel), done in one pass: each sum runs over the levels s in ascending order, as
    SciPy's product runs (v·b added to a sum that starts at 0), and sums that are exactly
    0 are dropped as SciPy drops them, so the values are bitwise those of before."""
    cdef Py_ssize_t nk = keys.shape[0], nA = a_idx.shape[0], ls = a_ptr.shape[0] - 1
    cdef Py_ssize_t s, e, kk, t, jj, j, i, n_out = 0, cap = 0, head, nxt
    cdef double v
    cdef int failed = 0
    cdef int64_t *t_ptr = NULL
    cdef int64_t *t_row = NULL
    cdef double *t_val = NULL
    cdef double *sums = NULL
    cdef int64_t *chain = NULL
    cdef int64_t *j_out = NULL
    cdef int64_t *key_out = NULL
    cdef double *v_out = NULL
    cdef int64_t *j_ptr = NULL
    target = np.empty(0, dtype=np.int64)
    klass = np.empty(0, dtype=np.int64)
    value = np.empty(0)
    cdef int64_t[::1] target_v, klass_v
    cdef double[::1] value_v
    try:
        t_ptr = <int64_t *> malloc((nk + 1) * sizeof(int64_t))
        t_row = <int64_t *> malloc((nA + 1) * sizeof(int64_t))
        t_val = <double *> malloc((nA + 1) * sizeof(double))
        sums = <double *> malloc((r + 1) * sizeof(double))
        chain = <int64_t *> malloc((r + 1) * sizeof(int64_t))
        j_ptr = <int64_t *> malloc((r + 1) * sizeof(int64_t))
        if (t_ptr == NULL or t_row == NULL or t_val == NULL or sums == NULL
                or chain == NULL or j_ptr == NULL):
            raise MemoryError()
        with nogil:
            # Aa's entries grouped by key, levels ascending within a key (a stable
            # counting sort: the transpose of the spread matrix)
            _counting_starts(&pos[0] if nA > 0 else NULL, nA, t_ptr, nk)
            for s in range(ls):
                for e in range(a_ptr[s], a_ptr[s + 1]):
                    t = t_ptr[pos[e]]
                    t_row[t] = s
                    t_val[t] = a_val[e]
                    t_ptr[pos[e]] = t + 1
            for kk in range(nk - 1, -1, -1):  # (the fill moved each start to the next)
                t_ptr[kk + 1] = t_ptr[kk]
            t_ptr[0] = 0
            for j in range(r):
                sums[j] = 0.0
                chain[j] = -1
            # per key (ascending), the sums over its levels of v·Ab[s, j], j <= i
            for kk in range(nk):
                i = keys[kk] // ncls
                head = -2
                for t in range(t_ptr[kk], t_ptr[kk + 1]):
                    s = t_row[t]
                    v = t_val[t]
                    for jj in range(b_ptr[s], b_ptr[s + 1]):
                        j = b_idx[jj]
                        if j > i:  # (Ab's columns ascend within a row: none after)
                            break
                        sums[j] += v * b_val[jj]
                        if chain[j] == -1:
                            chain[j] = head
                            head = j
                if _grow(&j_out, &key_out, &v_out, &cap, n_out + r + 1) != 0:
                    failed = 1
                    break
                while head != -2:
                    if sums[head] != 0:
                        j_out[n_out] = head
                        key_out[n_out] = kk
                        v_out[n_out] = sums[head]
                        n_out += 1
                    nxt = chain[head]
                    sums[head] = 0.0
                    chain[head] = -1
                    head = nxt
        if failed:
            raise MemoryError()
        target = np.empty(n_out, dtype=np.int64)
        klass = np.empty(n_out, dtype=np.int64)
        value = np.empty(n_out)
        target_v, klass_v, value_v = target, klass, value
        with nogil:
            # by column j, keys ascending within j (a stable counting sort)
            _counting_starts(j_out, n_out, j_ptr, r)
            for e in range(n_out):
                j = j_out[e]
                t = j_ptr[j]
                j_ptr[j] = t + 1
                kk = key_out[e]
                target_v[t] = j * r + keys[kk] // ncls
                klass_v[t] = keys[kk] % ncls
                value_v[t] = v_out[e]
    finally:
        free(t_ptr)
        free(t_row)
        free(t_val)
        free(sums)
        free(chain)
        free(j_ptr)
        free(j_out)
        free(key_out)
        free(v_out)
    return target, klass, value


def row_products(const int64_t[:, ::1] cols, const double[:, ::1] vals, Py_ssize_t k1,
                 Py_ssize_t c1, const double[:, ::1] D, double[:, ::1] z1r,
                 double[:, ::1] zrr, double[:, ::1] z1d, double[:, ::1] zrd,
                 bint with_z=True):
    """The cross-products of the rows of Z = [Z₁ Z_r] with Z_r and with the dense D, added
    row by row into the zeroed dense ``z1r`` (Z₁ᵀZ_r), ``zrr`` (Z_rᵀZ_r, both triangles),
    ``z1d`` (Z₁ᵀD) and ``zrd`` (Z_rᵀD); without ``with_z`` only Z₁ᵀD and Z_rᵀD (a new
    response's column: ``z1r`` and ``zrr`` are not read).

    Row i of Z holds ``vals[i, e]`` at column ``cols[i, e]``: its first ``k1`` entries in
    Z₁'s columns [0, c1), the others in Z_r's (at c1 + Z_r's column); no column twice in a
    row. Each sum runs over the rows in ascending order, products a·b added to a sum that
    starts at 0, as SciPy's sparse products of Z₁ᵀ (CSR) and Z_rᵀ (CSC) with Z_r and with
    D run (``crossprod.CrossProducts.from_rows`` before this kernel): the values are
    bitwise those (``tests/model/test_crossprod.py``)."""
    cdef Py_ssize_t n = cols.shape[0], k = cols.shape[1], m = D.shape[1]
    cdef Py_ssize_t i, a, b, t, ca
    cdef double va
    with nogil:
        for i in range(n):
            for a in range(k):
                ca = cols[i, a]
                va = vals[i, a]
                if a < k1:
                    for t in range(m):
                        z1d[ca, t] += va * D[i, t]
                    if with_z:
                        for b in range(k1, k):
                            z1r[ca, cols[i, b] - c1] += va * vals[i, b]
                else:
                    ca = ca - c1
                    for t in range(m):
                        zrd[ca, t] += va * D[i, t]
                    if with_z:
                        for b in range(k1, k):
                            zrr[ca, cols[i, b] - c1] += va * vals[i, b]


def map_entries(const double[:, ::1] A, Py_ssize_t q, bint last=False):
    """The entries (j, i), j <= i, of the sparse map's update that some level's nonzeros of
    the dense A_1r ``A`` (ℓ₁q x r, a level's q rows together) in columns i and j reach,
    sorted by j·r + i (``sparse_map._touched``'s arrays); ``last``: those with i = r − 1
    alone (y's column). Two int64 arrays (j, i)."""
    cdef Py_ssize_t l1 = A.shape[0] // q if q > 0 else 0, r = A.shape[1]
    cdef Py_ssize_t s, a, t, u, m, i0 = r - 1 if last else 0, count = 0, j, i
    hit_arr = np.zeros((r, r), dtype=np.uint8)  # [j, i]
    cols_arr = np.empty(max(r, 1), dtype=np.int64)
    cdef unsigned char[:, ::1] hit = hit_arr
    cdef int64_t[::1] cols = cols_arr
    cdef bint any_a
    with nogil:
        for s in range(l1):
            m = 0  # the level's columns with a nonzero in any of its q rows, ascending
            for t in range(r):
                any_a = False
                for a in range(q):
                    if A[s * q + a, t] != 0:
                        any_a = True
                        break
                if any_a:
                    cols[m] = t
                    m += 1
            for u in range(m):  # i = cols[u] >= i0, j = cols[t] <= i
                i = cols[u]
                if i < i0:
                    continue
                for t in range(u + 1):
                    j = cols[t]
                    if hit[j, i] == 0:
                        hit[j, i] = 1
                        count += 1
    j_arr = np.empty(count, dtype=np.int64)
    i_arr = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] jo = j_arr, io = i_arr
    cdef Py_ssize_t e = 0
    with nogil:
        for j in range(r):
            for i in range(max(j, i0), r):
                if hit[j, i]:
                    jo[e] = j
                    io[e] = i
                    e += 1
    return j_arr, i_arr


def map_products(const double[:, ::1] A, Py_ssize_t q, const int64_t[::1] class_of,
                 Py_ssize_t ncls, bint per_level, const int64_t[::1] j,
                 const int64_t[::1] i):
    """The sparse map's rows at the entries (j, i) from the dense A_1r ``A`` (ℓ₁q x r):
    column (a·q + b)·ncls + k of row e is Σ_{s in class k} A[(s, a), i_e] A[(s, b), j_e],
    added in level order to 0 (``per_level``: each level its own class, k = s, the
    product itself): ``sparse_map._products_at``'s array, bit for bit (np.add.at adds in
    index order to zeros)."""
    cdef Py_ssize_t l1 = A.shape[0] // q if q > 0 else 0, ne = j.shape[0]
    cdef Py_ssize_t e, s, a, b, col, ie, je
    out_arr = np.zeros((ne, q * q * ncls))
    cdef double[:, ::1] out = out_arr
    cdef double v
    with nogil:
        for e in range(ne):
            ie = i[e]
            je = j[e]
            for s in range(l1):
                for a in range(q):
                    for b in range(q):
                        v = A[s * q + a, ie] * A[s * q + b, je]
                        if per_level:
                            out[e, (a * q + b) * ncls + s] = v
                        else:
                            col = (a * q + b) * ncls + class_of[s]
                            out[e, col] = out[e, col] + v
    return out_arr


def searchsorted_in_buckets(const int64_t[::1] keys, const int64_t[::1] starts,
                            const int64_t[::1] columns, const int64_t[::1] rows,
                            Py_ssize_t width):
    """``np.searchsorted(keys, columns * width + rows)`` (side "left") for keys of the form
    j·width + i, 0 ≤ i < width: ``starts[j]`` is the first position of bucket j in the sorted
    ``keys`` (``np.searchsorted(keys, arange(nbuckets + 1) * width)``), and each query
    (``columns[e]``, ``rows[e]``) is found by bisection inside its own bucket, a short stretch
    of ``keys`` where NumPy's bisects the whole array (the Schur complement's pattern:
    millions of queries into a pattern of millions). The same positions, absent keys
    included; the queries' keys are never formed (nor divided by ``width``)."""
    cdef Py_ssize_t n = columns.shape[0], e, lo, count, half, j, nb = starts.shape[0] - 1
    cdef Py_ssize_t bad = -1
    cdef int64_t key
    if rows.shape[0] != n:
        raise ValueError("columns and rows have one entry per query")
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    with nogil:
        for e in range(n):
            j = columns[e]
            if j < 0 or j >= nb or rows[e] < 0 or rows[e] >= width:
                bad = e
                break
            key = j * width + rows[e]
            lo = starts[j]
            count = starts[j + 1] - lo
            # the first position in [lo, lo + count) with keys[pos] >= key (lo + count if
            # none), by halving without a branch on the comparison (a conditional move)
            while count > 1:
                half = count >> 1
                lo = lo + half if keys[lo + half - 1] < key else lo
                count -= half
            if count == 1 and keys[lo] < key:
                lo += 1
            o[e] = lo
    if bad >= 0:
        raise ValueError(f"query ({columns[bad]}, {rows[bad]}) lies outside the buckets")
    return out


cdef inline int64_t _row_in(const int64_t[::1] indptr, Py_ssize_t e, Py_ssize_t r0,
                            Py_ssize_t q) noexcept nogil:
    """The row (0..q-1 from ``r0``) of entry ``e``."""
    cdef Py_ssize_t a = 0
    while a + 1 < q and indptr[r0 + a + 1] <= e:
        a += 1
    return a


def class_sums(const int64_t[::1] position, const int64_t[::1] entry,
               const double[::1] value, const int64_t[::1] class_of, Py_ssize_t qq,
               Py_ssize_t width, Py_ssize_t size):
    """The sums of ``value`` by key = position·width + class_of[entry // qq]·qq +
    entry % qq, over keys below ``size``, each summed in the order of the inputs from 0.0
    (``np.bincount(key, weights=value, minlength=size)``'s numbers), in one pass without
    forming the keys. Returns (the keys that occur, ascending; their sums)."""
    cdef Py_ssize_t n = position.shape[0], e, k, s, bad = -1
    cdef Py_ssize_t nlevels = class_of.shape[0]
    if entry.shape[0] != n or value.shape[0] != n:
        raise ValueError("position, entry and value have one entry per pair")
    if qq < 1 or width < 1:
        raise ValueError("qq and width are positive")
    sums = np.zeros(size)
    seen = np.zeros(size, dtype=np.uint8)
    cdef double[::1] sv = sums
    cdef uint8_t[::1] hit = seen
    with nogil:
        for e in range(n):
            s = entry[e] // qq if qq > 1 else entry[e]
            if s < 0 or s >= nlevels:
                bad = e
                break
            k = (position[e] * width + class_of[s] * qq
                 + (entry[e] - s * qq if qq > 1 else 0))
            if k < 0 or k >= size:
                bad = e
                break
            sv[k] += value[e]
            hit[k] = 1
    if bad >= 0:
        raise ValueError(f"pair {bad} (position {position[bad]}, entry {entry[bad]}) has no "
                         "key below size")
    present = np.flatnonzero(seen)
    return present, sums[present]


def level_pairs(const int64_t[::1] indptr, const int64_t[::1] indices,
                const double[::1] data, Py_ssize_t q, Py_ssize_t nlevels, bint upper,
                Py_ssize_t total):
    """Every pair of nonzeros (e₁, e₂) of a CSR matrix A in the q rows of one level
    (``sparse_schur.SparseSchur._pairs``), e₁ in entry order and e₂ in entry order within
    it, kept where col(e₁) ≤ col(e₂) when ``upper``: (col(e₁), col(e₂), the flat entry
    s·q² + a₁·q + a₂ of the level's q x q block, A[e₁]·A[e₂]) as four arrays; ``total``:
    Σ over levels of their entries squared (the caller's count, an upper bound)."""
    cdef Py_ssize_t s, e1, e2, lo, hi, k = 0
    cdef int64_t base, row1
    out_i = np.empty(total, dtype=np.int64)
    out_j = np.empty(total, dtype=np.int64)
    out_g = np.empty(total, dtype=np.int64)
    out_v = np.empty(total, dtype=np.float64)
    cdef int64_t[::1] oi = out_i, oj = out_j, og = out_g
    cdef double[::1] ov = out_v
    with nogil:
        for s in range(nlevels):
            lo = indptr[s * q]
            hi = indptr[(s + 1) * q]
            base = s * q * q
            for e1 in range(lo, hi):
                row1 = base + _row_in(indptr, e1, s * q, q) * q
                for e2 in range(lo, hi):
                    if upper and indices[e1] > indices[e2]:
                        continue
                    oi[k] = indices[e1]
                    oj[k] = indices[e2]
                    og[k] = row1 + _row_in(indptr, e2, s * q, q)
                    ov[k] = data[e1] * data[e2]
                    k += 1
    return out_i[:k], out_j[:k], out_g[:k], out_v[:k]


cdef class SmallDense:
    """A whole evaluation of a small design on the dense path in one call (:meth:`factor`;
    the arrays held here, W unpacked once, the work arrays allocated once): a first
    grouping factor of any number of columns per level, the Schur
    update by the sparse map W (a C-ordered array or a CSR matrix, one part) and a
    Schur complement factored by one dpotrf (``PLS.factor``'s steps, for the designs
    where NumPy's per-call overheads were most of an evaluation).

    ``a``: the first block's levels' (or classes') A_s, one row (q₁ = 1: a_s; T = [[t0]])
    or three (q₁ = 2: a₀₀, a₁₀, a₁₁; T = [[t0, 0], [t1, t2]]), with t0, t1, t2 θ at the
    positions ``t_index`` (-1: an entry fixed at 0; θ has ``ntheta`` entries), or for
    q₁ ≥ 3 q₁² rows (A_s row-major) and T's q₁² positions, row-major. Per entry s, B_s =
    TᵀA_sT + I in closed form (``closed_forms.py``), written into ``first`` (q₁ = 1: √b_s;
    q₁ = 2: b₀₀, b₁₀, b₁₁; q₁ ≥ 3: its Cholesky factor in band storage, transposed,
    :func:`banded_first`'s steps, ``first`` of shape :attr:`first_shape`); G_s = T B_s⁻¹ Tᵀ
    of the entries ``src`` (one per class of W's columns, entry-major as
    ``SparseMap.g_vector``; q₁ ≥ 3: :func:`banded_half`'s). The scale of C's row or column
    i is s_i = θ[``scale_index[i]``] (1 where it is -1: X and y); C is formed row-major in
    the memory of ``L`` (its upper triangle is L's lower one, as
    ``PLS._sparse_schur`` leaves it; its strict lower triangle is 0 here): with ``arr``
    (A_rr on the support ``rows``) C = 0 but C[rows] = (arr − W g) s_i s_j, else C =
    A_rr s_i s_j and C[rows] −= (W g) s_i s_j; then 1 is added on the first ``rr`` diagonal
    entries (the later random effects) and L ← the Cholesky factor (dpotrf; where the later
    random effects fall into independent components, ``lead_rows`` and ``lead_start`` as
    :func:`lead_blocks_lower` reads them, by :func:`_lead_blocks`). Where a later block has
    several columns per level (``blocks`` not empty: :func:`scale_both_sides`'s, with the θ
    positions ``tt_index`` of its T_kᵀ entries, -1 a 0), C is A_rr with C[rows] −= W g,
    scaled by S on both sides from its upper triangle (``PLS._finish_schur``'s steps) into
    L, and ``scale_index`` is not read.

    :meth:`factor` returns (info, the random part's log determinant (Σ_s log det B_s,
    weighted by ``count`` when given, + 2 Σ log L_ii over the first ``rr``), 2 Σ log L_ii
    over the rest but the last, the last pivot squared (the pwrss), the largest Hadamard
    ratio b₀₀b₁₁ / det B_s (1 for q₁ = 1 and q₁ ≥ 3, as ``pwrss.pivot_cancels`` reads
    them)). ``info`` is dpotrf's, -1 where a B_s is not positive definite (L then unset),
    or -2 where θ is not finite (nothing computed: the closed forms' general form is
    ``PLS.factor``'s).

    Each entry of C is the product :meth:`PLS.factor` forms, in its order (W g by BLAS's
    dgemv for a dense W, by rows in index order for a CSR one, as ``map_update``), and so
    is the factor; the logarithms are libm's and their sums sequential (NumPy's own
    vectorised log and pairwise sums there), and for q₁ = 2 the closed forms' products are
    written out (a matrix product there): the criterion is ``PLS.factor``'s to rounding,
    as ``batched.py``'s is.
    """
    cdef const double[:, ::1] a
    cdef const int64_t[::1] scale_index, rows, src, row_of, col_of
    cdef const double[::1] count, arr
    cdef const double[:, ::1] Arr
    cdef const double[:, ::1] dense
    cdef const double[::1] data
    cdef const int32_t[::1] indices, indptr
    cdef const int64_t[:, ::1] blocks
    cdef const int64_t[::1] tt_index
    cdef const int64_t[::1] tq_index
    cdef const int64_t[::1] lead_rows, lead_start
    cdef const int64_t[::1] grp_ptr, grp_levels, col_ptr, grp_cols
    cdef const double[:, ::1] grp_vals
    cdef double *mv
    cdef double[::1] theta
    cdef Py_ssize_t rr, i0, i1, i2
    cdef readonly Py_ssize_t ntheta, nentries, q
    cdef bint csr
    cdef double *g
    cdef double *wg
    cdef double *sc
    cdef double *tt
    cdef double *tq
    cdef double *work
    cdef tuple args

    def __cinit__(self):
        self.g = self.wg = self.sc = self.tt = self.tq = self.work = self.mv = NULL

    def __init__(self, a, W, rows, src, count, arr, Arr, scale_index, Py_ssize_t rr,
                 t_index, Py_ssize_t ntheta, blocks=_NO_BLOCKS, tt_index=_NO_INDEX64,
                 lead_rows=_NO_INDEX64, lead_start=_NO_INDEX64, groups=(), cells=None):
        # (cells: the rows' (row, column) pairs of C from an evaluation of the same rows and
        # order, :meth:`with_response`'s; not among the pickled arguments)
        self.args = (a, W, rows, src, count, arr, Arr, scale_index, rr, tuple(t_index),
                     ntheta, blocks, tt_index, lead_rows, lead_start, tuple(groups))
        self.blocks, self.tt_index = blocks, tt_index
        self.lead_rows, self.lead_start = lead_rows, lead_start
        (self.grp_ptr, self.grp_levels, self.col_ptr, self.grp_cols, self.grp_vals) = (
            groups or (_NO_INDEX64, _NO_INDEX64, _NO_INDEX64, _NO_INDEX64, _NO_DENSE))
        if self.lead_start.shape[0] and not _lead_fits(rr, self.lead_rows, self.lead_start):
            raise ValueError("lead_rows/lead_start are components of the first rr rows")
        self.a, self.rows, self.src, self.count, self.arr = a, rows, src, count, arr
        self.Arr, self.scale_index, self.rr = Arr, scale_index, rr
        # each updated entry's row and column of C (rows[i] = row·r + column), found once
        # per rows: an integer division per entry and evaluation cost 10-15 % of blurb's
        # CCMEM
        if cells is None:
            entries = np.asarray(self.rows, dtype=np.int64)
            width = max(1, self.Arr.shape[0])
            cells = (entries // width, entries % width)
        self.row_of, self.col_of = cells
        self.csr = hasattr(W, "indptr")
        self.dense, self.data, self.indices, self.indptr = (
            _NO_DENSE, _NO_VALUES, _NO_INDEX32, _NO_INDEX32)
        if self.csr:
            self.data, self.indices, self.indptr = _csr_arrays(W)
        else:
            self.dense = W
        self.ntheta, self.nentries = ntheta, self.a.shape[1]
        rows = self.a.shape[0]
        self.q = 1 if rows == 1 else 2 if rows == 3 else _order_of(rows)
        if self.q < 0 or len(t_index) != (3 if self.q < 3 else rows):
            raise ValueError("a has 1, 3 or q² rows (q ≥ 3), t_index 3 or q² positions")
        cdef Py_ssize_t widest = 0, deepest = 0
        if not _groups_fit(self.grp_ptr, self.grp_levels, self.col_ptr, self.grp_cols,
                           self.grp_vals, self.nentries, self.q, self.Arr.shape[0], &widest,
                           &deepest):
            raise ValueError("groups are (levels' and columns' pointers, levels, ascending "
                             "columns of C, the levels' rows of A_1r there) for a first "
                             "block of q ≥ 3 columns")
        if self.grp_ptr.shape[0] and (self.rows.shape[0] or self.src.shape[0]):
            raise ValueError("the groups' update takes no sparse map")
        # T's θ positions, -1 (an entry fixed at 0) reading the 0 after θ: t0, t1, t2 for
        # q₁ ≤ 2, T row-major for q₁ ≥ 3
        positions = [i if i >= 0 else ntheta for i in t_index]
        self.tq_index = _NO_INDEX64 if self.q < 3 else np.array(positions, dtype=np.int64)
        self.i0, self.i1, self.i2 = positions if self.q < 3 else (ntheta, ntheta, ntheta)
        self.theta = np.zeros(ntheta + 1)
        ng = self.src.shape[0] * self.q * self.q
        self.g = <double *> malloc((ng + 1) * sizeof(double))
        # (q₁ ≥ 3: T, then one level's H or the work column of its factorisation)
        self.tq = <double *> malloc((2 * rows + 1) * sizeof(double))
        self.wg = <double *> malloc((self.rows.shape[0] + 1) * sizeof(double))
        self.sc = <double *> malloc((self.Arr.shape[0] + 1) * sizeof(double))
        self.tt = <double *> malloc((self.tt_index.shape[0] + 1) * sizeof(double))
        if self.blocks.shape[0]:  # (C, and scale_both_sides' two work arrays)
            self.work = <double *> malloc((3 * self.Arr.shape[0] * self.Arr.shape[0] + 1)
                                          * sizeof(double))
        self.mv = <double *> malloc((self.q * self.q + widest * (deepest + widest) + 1)
                                    * sizeof(double))
        if self.g == NULL or self.wg == NULL or self.sc == NULL or self.tt == NULL or (
                self.tq == NULL or self.mv == NULL
                or self.blocks.shape[0] and self.work == NULL):
            raise MemoryError()

    def __dealloc__(self):
        free(self.g)
        free(self.wg)
        free(self.sc)
        free(self.tt)
        free(self.tq)
        free(self.work)
        free(self.mv)

    def __reduce__(self):
        # (pickled as its arrays: a fit's PLS problem travels to Dask's and joblib's workers)
        return SmallDense, self.args

    def with_response(self, W, arr, Arr):
        """This evaluation with the arrays that change with the response (a new response on
        the same rows and sparse map: ``PLS.with_response``): W, A_rr on the support and
        A_rr; the first block's arrays, positions and classes are this one's. Not for a
        groups' update (its rows of A_1r hold y's column: it is built again)."""
        if self.grp_ptr.shape[0]:
            raise ValueError("a groups' update is built again for another response")
        a, _, rows, src, count, _, _, scale_index, rr, t_index, ntheta, *later = self.args
        return SmallDense(a, W, rows, src, count, arr, Arr, scale_index, rr, t_index,
                          ntheta, *later, cells=(self.row_of, self.col_of))

    @property
    def first_shape(self):
        """The shape of :meth:`factor`'s ``first``: (q₁ or 3, entries) for q₁ ≤ 2,
        (entries·q₁, q₁) for q₁ ≥ 3."""
        if self.q < 3:
            return (self.a.shape[0], self.nentries)
        return (self.nentries * self.q, self.q)

    def factor(self, const double[::1] theta, double[:, ::1] first, double[::1, :] L):
        """The evaluation at ``theta`` into ``first`` and ``L`` (class docstring)."""
        cdef double out[4]
        if theta.shape[0] != self.ntheta:
            raise ValueError(f"theta has {theta.shape[0]} entries, the design {self.ntheta}")
        if (first.shape[0], first.shape[1]) != self.first_shape or (
                L.shape[0] != self.Arr.shape[0] or L.shape[1] != self.Arr.shape[0]):
            raise ValueError(f"first is {self.first_shape} and L is r x r")
        info = self.evaluate(&theta[0], first, L, out)
        return info, out[0], out[1], out[2], out[3]

    def evaluations(self, const double[:, ::1] thetas, double[:, ::1] values):
        """:meth:`factor` at each row of ``thetas`` (its work arrays allocated once): its
        four numbers into the row of ``values`` (the criterion at many θ: the derivative
        check's points). Returns the infos."""
        cdef Py_ssize_t m = thetas.shape[0], r = self.Arr.shape[0], k
        cdef double out[4]
        if thetas.shape[1] != self.ntheta:
            raise ValueError(f"theta has {thetas.shape[1]} entries, the design {self.ntheta}")
        if values.shape[0] != m or values.shape[1] != 4:
            raise ValueError("values is (m, 4)")
        first = np.empty(self.first_shape)
        L = np.empty((r, r), order="F")
        cdef double[:, ::1] first_v = first
        cdef double[::1, :] L_v = L
        infos = np.empty(m, dtype=np.int32)
        cdef int32_t[::1] infos_v = infos
        for k in range(m):
            infos_v[k] = self.evaluate(&thetas[k, 0], first_v, L_v, out)
            values[k, 0], values[k, 1], values[k, 2], values[k, 3] = (
                out[0], out[1], out[2], out[3])
        return infos

    def deviances(self, const double[:, ::1] thetas, double ldW, double s2, double lg,
                  Py_ssize_t nobs, Py_ssize_t p, bint reml, int residual, double yc_ss,
                  double lo, double hi, double[:, ::1] out, uint8_t[::1] own,
                  back=None):
        """The unprofiled deviance at a fixed σ² = ``s2`` at each row of ``thetas``
        (``factor.unprofiled_deviance``'s formula and order, ``lg`` = log(2π s2) as NumPy
        gives it, ldW subtracted as ``PLS.factor_batch`` does) into ``out[k, 0]``; where
        ``out`` has 2 + p² columns, the pwrss and (R_XᵀR_X)⁻¹ = R_X⁻ᵀR_X⁻¹ (row-major; in
        the basis ``back`` maps to, (R_X⁻¹backᵀ)ᵀ(R_X⁻¹backᵀ), where given) after it: R_X⁻¹
        by dtrtri (``factor.tri_inverse``), the products by dgemm and dsyrk as NumPy's
        matmul calls them (the same numbers as ``PLS.factor``, ``PLS.rx_inverse`` and
        those products, row by row).

        ``own[k]`` is 0 where the row is the caller's: θ not finite, R_X singular, or a
        pwrss to be taken from the residuals (``residual`` 2 "always", 1 "auto": ρ = yc_ss
        / pwrss times the Hadamard ratio in [lo, hi), ``pwrss.pivots_cancel``); ``out`` is
        not written there. Where the factorisation fails otherwise the row is NaN."""
        cdef Py_ssize_t m = thetas.shape[0], r = self.Arr.shape[0], width = out.shape[1]
        cdef Py_ssize_t k, a, b, pp = p * p
        cdef bint full = width > 1, rotate = back is not None
        cdef double dev
        cdef double v[4]
        cdef int n = <int>p, info
        cdef char uplo = b"L", diag = b"N", no = b"N", tr = b"T"
        cdef double one = 1.0, zero = 0.0
        cdef const double[:, ::1] K
        if thetas.shape[1] != self.ntheta:
            raise ValueError(f"theta has {thetas.shape[1]} entries, the design {self.ntheta}")
        if out.shape[0] != m or own.shape[0] != m or (full and (
                width != 2 + pp or self.rr + p + 1 != r)):
            raise ValueError("out is (m, 1) or (m, 2 + p²), own (m,), p = r - rr - 1")
        if rotate:
            K = back
            if K.shape[0] != p or K.shape[1] != p:
                raise ValueError("back is p x p")
        first = np.empty(self.first_shape)
        L = np.empty((r, r), order="F")
        work = np.empty(3 * pp + 1)
        cdef double[:, ::1] first_v = first
        cdef double[::1, :] L_v = L
        cdef double[::1] work_v = work
        cdef double *R = &work_v[0]  # (R_X⁻¹ row-major: its transpose column-major)
        cdef double *W = R + pp  # (R_X⁻¹ backᵀ, row-major)
        cdef double *G = W + pp  # (the product, column-major lower)
        cdef double *use
        for k in range(m):
            info = self.evaluate(&thetas[k, 0], first_v, L_v, v)
            own[k] = info != -2
            if info == 0 and (residual == 2 or residual == 1 and v[2] > 0.0
                              and _pivot_cancels(yc_ss, v[2], v[3], lo, hi)):
                own[k] = 0
            if not own[k]:
                continue
            if info != 0:
                for a in range(width):
                    out[k, a] = NAN
                continue
            if full and p > 0:
                for b in range(p):  # (L's block of X, lower; dtrtri in place)
                    for a in range(p):
                        G[a + p * b] = L_v[self.rr + a, self.rr + b] if a >= b else 0.0
                dtrtri(&uplo, &diag, &n, G, &n, &info)
                if info != 0:  # (R_X singular: the caller's)
                    own[k] = 0
                    continue
                for a in range(p):  # R_X⁻¹ row-major (its strict upper triangle 0)
                    for b in range(p):
                        R[a * p + b] = G[a + p * b] if a >= b else 0.0
                use = R
                if rotate:  # R_X⁻¹ backᵀ: NumPy's call, dgemm on the buffers transposed
                    dgemm(&tr, &no, &n, &n, &n, &one, <double *>&K[0, 0], &n, R, &n, &zero,
                          W, &n)
                    use = W
                # (use)ᵀ(use): NumPy's syrk of the buffer, the lower triangle mirrored
                dsyrk(&uplo, &no, &n, &n, &one, use, &n, &zero, G, &n)
                for a in range(p):
                    for b in range(p):
                        out[k, 2 + a * p + b] = G[a + p * b] if a >= b else G[b + p * a]
            dev = v[0] - ldW + v[2] / s2 + <double>nobs * lg
            if reml:
                dev = dev + (v[1] - <double>p * lg)
            out[k, 0] = dev
            if full:
                out[k, 1] = v[2]
        return None

    cdef int evaluate(self, const double *x, double[:, ::1] first, double[::1, :] L,
                      double *out) noexcept:
        """:meth:`factor` at θ = x (``ntheta`` entries), ``out`` as there."""
        cdef Py_ssize_t j
        cdef double total = 0.0
        for j in range(self.ntheta):
            self.theta[j] = x[j]
            total += x[j]
        self.theta[self.ntheta] = 0.0
        if total - total != 0.0:  # (θ not finite, or a sum that overflows)
            out[0], out[1], out[2], out[3] = INFINITY, INFINITY, INFINITY, 1.0
            return -2
        for j in range(self.tt_index.shape[0]):  # (the later blocks' T_kᵀ; -1: the 0)
            self.tt[j] = self.theta[self.tt_index[j] if self.tt_index[j] >= 0
                                    else self.ntheta]
        for j in range(self.tq_index.shape[0]):  # (q₁ ≥ 3: T, row-major)
            self.tq[j] = self.theta[self.tq_index[j]]
        with nogil:
            return _small_dense(
                self.a, self.q, self.theta[self.i0], self.theta[self.i1],
                self.theta[self.i2], self.tq, self.theta, self.scale_index, self.rr,
                self.csr, self.dense, self.data, self.indices, self.indptr, self.rows,
                self.row_of, self.col_of, self.src, self.count, self.arr, self.Arr, first, L,
                self.g, self.wg, self.sc, self.blocks, self.tt, self.work, self.lead_rows, self.lead_start,
                self.grp_ptr, self.grp_levels, self.col_ptr, self.grp_cols, self.grp_vals,
                self.mv, out)


cdef int _first_closed(const double[:, ::1] a, Py_ssize_t q1, double t0, double t1,
                       double t2, const double[::1] count, double[:, ::1] first,
                       const int64_t[::1] src, double *g, double *out) noexcept nogil:
    """q₁ ≤ 2: :class:`SmallDense`'s first block in closed form: B_s per entry into
    ``first`` (√b_s; b₀₀, b₁₀, b₁₁), Σ log det B_s (weighted by ``count`` where given)
    into ``out[0]`` and the largest Hadamard ratio into ``out[3]``, G of each class's
    entry into ``g`` (entry-major). Returns -1 where a B_s is not positive definite."""
    cdef Py_ssize_t n = a.shape[1], ncls = src.shape[0], s, c
    cdef bint weighted = count.shape[0] > 0
    cdef double t00 = t0 * t0, t01 = t0 * t1, t02 = t0 * t2, t11 = t1 * t1
    cdef double t12 = t1 * t2, t22 = t2 * t2
    cdef double b00, b10, b11, det, logdet = 0.0, amp = 1.0, ratio, i00, i10, i11, v
    cdef int info = 0
    for s in range(n):  # B_s per entry, its log determinant and the ratio
        if q1 == 1:
            b00 = t00 * a[0, s] + 1.0
            first[0, s] = sqrt(b00)
            det = b00
        else:
            b00 = t00 * a[0, s] + 2.0 * t01 * a[1, s] + t11 * a[2, s] + 1.0
            b10 = t02 * a[1, s] + t12 * a[2, s]
            b11 = t22 * a[2, s] + 1.0
            first[0, s], first[1, s], first[2, s] = b00, b10, b11
            det = b00 * b11 - b10 * b10
            ratio = b00 * b11 / det
            if ratio > amp:
                amp = ratio
        if not det > 0.0:
            info = -1
            break
        logdet += log(det) * count[s] if weighted else log(det)
    out[3] = amp
    if info != 0 or not logdet < INFINITY:
        return -1
    out[0] = logdet
    for c in range(ncls):  # G of each class's entry, entry-major
        s = src[c]
        if q1 == 1:
            g[c] = t00 / (t00 * a[0, s] + 1.0)
            continue
        b00, b10, b11 = first[0, s], first[1, s], first[2, s]
        det = b00 * b11 - b10 * b10
        i00, i10, i11 = b11 / det, -b10 / det, b00 / det
        g[c] = t00 * i00
        v = t01 * i00 + t02 * i10
        g[ncls + c] = v
        g[2 * ncls + c] = v
        g[3 * ncls + c] = t11 * i00 + 2.0 * t12 * i10 + t22 * i11
    return 0


cdef int _small_dense(const double[:, ::1] a, Py_ssize_t q1, double t0, double t1,
                      double t2, double *tq, const double[::1] theta,
                      const int64_t[::1] scale_index, Py_ssize_t rr, bint csr,
                      const double[:, ::1] dense, const double[::1] data, const int32_t[::1] indices,
                      const int32_t[::1] indptr, const int64_t[::1] rows,
                      const int64_t[::1] row_of, const int64_t[::1] col_of,
                      const int64_t[::1] src, const double[::1] count,
                      const double[::1] arr, const double[:, ::1] Arr, double[:, ::1] first,
                      double[::1, :] L, double *g, double *wg, double *sc,
                      const int64_t[:, ::1] blocks, const double *tt, double *work,
                      const int64_t[::1] lead_rows, const int64_t[::1] lead_start,
                      const int64_t[::1] grp_ptr, const int64_t[::1] grp_levels,
                      const int64_t[::1] col_ptr, const int64_t[::1] grp_cols,
                      const double[:, ::1] grp_vals, double *mv,
                      double *out) noexcept nogil:
    """:class:`SmallDense`'s evaluation on its arrays and work arrays (g: ncls·q₁² entries,
    wg: W's rows, sc: r; with ``blocks``, the later blocks' T_kᵀ ``tt`` and ``work``, 3r²;
    q₁ ≥ 3: T row-major and q₁² more entries, ``tq``; with ``lead_start``, C factored by
    :func:`_lead_blocks`); ``out``: the random part's log
    determinant, the fixed part's, the pwrss and the Hadamard ratio (INFINITY where not
    computed; 1 for q₁ = 1 and q₁ ≥ 3, as ``pwrss.pivot_cancels`` reads them). Returns
    the info."""
    cdef Py_ssize_t ncls = src.shape[0], r = L.shape[0], nrows = rows.shape[0]
    cdef Py_ssize_t c, i, j, p
    cdef bint support = arr.shape[0] > 0
    cdef double *C = &L[0, 0]
    cdef double *U
    out[0], out[1], out[2], out[3] = INFINITY, INFINITY, INFINITY, 1.0
    if q1 >= 3:  # B_s's factors in band storage (banded_first), G per class (banded_half)
        if _levels_factor(q1, a, tq, count, &first[0, 0], tq + q1 * q1, &out[0]) != 0:
            out[0] = INFINITY
            return -1
        for c in range(ncls):
            _level_half(q1, &first[src[c] * q1, 0], tq, tq + q1 * q1)
            _level_g(q1, tq + q1 * q1, g + c, ncls)
    elif _first_closed(a, q1, t0, t1, t2, count, first, src, g, out) != 0:
        return -1
    if not blocks.shape[0]:  # (each row's and column's scale)
        for i in range(r):
            sc[i] = 1.0 if scale_index[i] < 0 else theta[scale_index[i]]
    if grp_ptr.shape[0]:  # the groups' updates on C unscaled, then C scaled
        U = work if blocks.shape[0] else C
        _copy_upper(&Arr[0, 0], r, U)
        _groups_update(q1, first, tq, grp_ptr, grp_levels, col_ptr, grp_cols, grp_vals, mv,
                       r, U)
        if not blocks.shape[0]:
            for i in range(r):
                for j in range(i, r):
                    C[i * r + j] = C[i * r + j] * (sc[i] * sc[j])
    else:
        _map_product(csr, dense, data, indices, indptr, nrows, g, wg)  # (as map_update)
        if blocks.shape[0]:  # (C unscaled in work)
            memcpy(work, &Arr[0, 0], r * r * sizeof(double))
            for i in range(nrows):
                work[rows[i]] -= wg[i]
        else:
            memset(C, 0, r * r * sizeof(double))  # (the lower triangle stays 0)
            if not support:  # A_rr s_i s_j on the upper triangle: all that is read
                for i in range(r):
                    for j in range(i, r):
                        C[i * r + j] = Arr[i, j] * (sc[i] * sc[j])
            for i in range(nrows):
                p = rows[i]
                if support:
                    C[p] = (arr[i] - wg[i]) * (sc[row_of[i]] * sc[col_of[i]])
                else:
                    C[p] -= wg[i] * (sc[row_of[i]] * sc[col_of[i]])
    if blocks.shape[0]:  # a later block of several columns: S C Sᵀ from C unscaled
        # (C's upper triangle read as Cᵀ's lower one: Cᵀ[i, j] = work[j r + i])
        _scale_both_sides(work, 1, r, r, blocks, tt, &work[r * r], &work[2 * r * r], C)
    return _small_factor(C, L, r, rr, lead_rows, lead_start, out)


cdef int _small_factor(double *C, double[::1, :] L, Py_ssize_t r, Py_ssize_t rr,
                       const int64_t[::1] lead_rows, const int64_t[::1] lead_start,
                       double *out) noexcept nogil:
    """:func:`_small_dense`'s last steps on C (in L's memory): 1 added on the later random
    effects' diagonal, the Cholesky factor (dpotrf, or :func:`_lead_blocks` on the
    components ``lead_rows``/``lead_start``), the log determinants and the pwrss into
    ``out`` (``out[0]`` adds to the first block's). Returns the info."""
    cdef Py_ssize_t i
    cdef double ldrand = 0.0, ldrx = 0.0
    cdef int info = 0, nr = <int>r
    cdef char uplo = b"L"
    for i in range(rr):
        C[i * r + i] += 1.0
    if lead_start.shape[0]:  # (the random part in independent components)
        info = _lead_blocks(C, r, rr, lead_rows, lead_start)
    else:
        dpotrf(&uplo, &nr, C, &nr, &info)
    if info != 0:
        return info
    for i in range(r - 1):
        if i < rr:
            ldrand += log(L[i, i])
        else:
            ldrx += log(L[i, i])
    out[0] = out[0] + 2.0 * ldrand
    out[1] = 2.0 * ldrx
    out[2] = L[r - 1, r - 1] * L[r - 1, r - 1]
    return 0


cdef void _copy_upper(const double *A, Py_ssize_t r, double *C) noexcept nogil:
    """C ← A's upper triangle (row-major, r x r), its strict lower triangle 0."""
    cdef Py_ssize_t i, j
    for i in range(r):
        for j in range(i):
            C[i * r + j] = 0.0
        for j in range(i, r):
            C[i * r + j] = A[i * r + j]


cdef void _groups_update(Py_ssize_t q, const double[:, ::1] first, const double *T,
                         const int64_t[::1] grp_ptr, const int64_t[::1] levels,
                         const int64_t[::1] col_ptr, const int64_t[::1] cols,
                         const double[:, ::1] vals, double *work, Py_ssize_t r,
                         double *C) noexcept nogil:
    """C's upper triangle (row-major) −= Σ_s M_sᵀM_s over the levels s of a first block of
    q ≥ 3 columns, by groups of levels (``PLS.schur``'s rank-k updates): group g's levels
    ``levels[grp_ptr[g]:grp_ptr[g + 1]]`` and its ascending columns of C
    ``cols[col_ptr[g]:col_ptr[g + 1]]`` (n_g of them); M_s = H_s V_s with H_s = L_s⁻¹Tᵀ
    (:func:`_level_half`, from the level's band columns in ``first``) and V_s the level's
    rows of A_1r on the group's columns (``vals``' next n_g rows, one column of V_s each);
    the group's [M_s; ...]ᵀ[M_s; ...] by one dsyrk, subtracted entry by entry. ``work``:
    H (q²), the group's Mᵀ (n_g x q·levels, Fortran order) and its product (n_g x n_g)."""
    cdef Py_ssize_t g, i, s, a, b, k, j, n, nl, c0, voff = 0
    cdef double acc
    cdef double *H = work
    cdef double *M = work + q * q
    cdef double *U
    cdef int nn, kk
    cdef char lower = b"L", no = b"N"
    cdef double one = 1.0, zero = 0.0
    for g in range(grp_ptr.shape[0] - 1):
        c0, n = col_ptr[g], col_ptr[g + 1] - col_ptr[g]
        nl = grp_ptr[g + 1] - grp_ptr[g]
        U = M + n * q * nl
        for i in range(nl):
            s = levels[grp_ptr[g] + i]
            _level_half(q, &first[s * q, 0], T, H)
            for k in range(q):  # (Mᵀ's column i q + k: row k of M_s)
                for a in range(n):
                    acc = 0.0
                    for j in range(q):
                        acc = acc + H[k * q + j] * vals[voff + i * n + a, j]
                    M[a + (i * q + k) * n] = acc
        voff += nl * n
        nn, kk = <int>n, <int>(q * nl)
        dsyrk(&lower, &no, &nn, &kk, &one, M, &nn, &zero, U, &nn)
        for b in range(n):
            for a in range(b, n):
                C[cols[c0 + b] * r + cols[c0 + a]] -= U[a + b * n]


cdef bint _groups_fit(const int64_t[::1] grp_ptr, const int64_t[::1] levels,
                      const int64_t[::1] col_ptr, const int64_t[::1] cols,
                      const double[:, ::1] vals, Py_ssize_t nlevels, Py_ssize_t q,
                      Py_ssize_t r, Py_ssize_t *widest, Py_ssize_t *deepest) noexcept:
    """Whether the groups' arrays describe an update :func:`_groups_update` can read (none
    given: True), with the most columns of a group (``widest``) and q times its most levels
    (``deepest``)."""
    cdef Py_ssize_t g, k, ng = grp_ptr.shape[0] - 1, rows = 0
    if grp_ptr.shape[0] == 0:
        return levels.shape[0] == 0 and col_ptr.shape[0] == 0 and cols.shape[0] == 0 and (
            vals.shape[0] == 0)
    if q < 3 or ng < 1 or col_ptr.shape[0] != ng + 1 or grp_ptr[0] != 0 or col_ptr[0] != 0 or (
            grp_ptr[ng] != levels.shape[0] or col_ptr[ng] != cols.shape[0]
            or vals.shape[1] != q):
        return False
    for g in range(ng):
        if grp_ptr[g + 1] < grp_ptr[g] or col_ptr[g + 1] < col_ptr[g]:
            return False
        widest[0] = max(widest[0], col_ptr[g + 1] - col_ptr[g])
        deepest[0] = max(deepest[0], q * (grp_ptr[g + 1] - grp_ptr[g]))
        rows += (grp_ptr[g + 1] - grp_ptr[g]) * (col_ptr[g + 1] - col_ptr[g])
        for k in range(grp_ptr[g], grp_ptr[g + 1]):
            if levels[k] < 0 or levels[k] >= nlevels:
                return False
        for k in range(col_ptr[g], col_ptr[g + 1]):
            if cols[k] < 0 or cols[k] >= r or k > col_ptr[g] and cols[k] <= cols[k - 1]:
                return False
    return rows == vals.shape[0]


include "_objective.pxi"


cdef double _TWO_PI = 6.283185307179586  # (2.0 * numpy.pi, as the Python criterion forms it)


cdef inline bint _pivot_cancels(double yc_ss, double pwrss, double ratio, double lo,
                                double hi) noexcept nogil:
    """``pwrss.pivot_cancels``'s test (pwrss > 0 given): ρ = yc_ss / pwrss times the
    Hadamard ratio in [lo, hi), in its order of operations."""
    cdef double rho = yc_ss / pwrss * ratio
    return lo <= rho and rho < hi


cdef class SmallCriterion(LoggedObjective):
    """The profiled criterion of a small design as a C function of θ for a compiled
    optimiser loop (:class:`LoggedObjective`: logged, the optimiser stopped after an
    error): one :class:`SmallDense` evaluation into work arrays held here, lme4's
    criterion from it (``closed_forms.criterion``'s formula with libm's log, where the
    Python path takes NumPy's: the two may differ in the last bit). Where the factor's
    pwrss is to be recomputed from the residuals (``pwrss.pivot_cancels``: ρ times the
    ratio in [``limits``)) or θ is not finite, the value is ``fallback(θ)``'s, the Python
    path's; an exception in ``fallback`` stops the optimiser and is kept in
    :attr:`error`."""
    cdef SmallDense small
    cdef double[:, ::1] first
    cdef double[::1, :] L
    cdef bint reml, auto
    cdef double nobs, p, ldW, shift, yc_ss, lo, hi
    cdef object fallback

    def __init__(self, SmallDense small, Py_ssize_t nobs, Py_ssize_t p, bint reml,
                 double ldW, double shift, double yc_ss, bint auto, limits, fallback):
        self.small, self.ntheta = small, small.ntheta
        r = small.Arr.shape[0]
        self.first = np.empty(small.first_shape)
        self.L = np.empty((r, r), order="F")
        self.nobs, self.p, self.reml = <double>nobs, <double>p, reml
        self.ldW, self.shift, self.yc_ss, self.auto = ldW, shift, yc_ss, auto
        self.lo, self.hi = limits
        self.fallback = fallback

    cdef bint compute(self, const double *x, double *value) noexcept:
        """The criterion at θ = x; False after an error of the fallback."""
        cdef double nmp
        cdef double out[4]
        cdef int info = self.small.evaluate(x, self.first, self.L, out)
        cdef bint residual = info == -2  # (θ not finite: the fallback's value)
        if not residual:
            if info != 0 or not out[2] > 0.0:
                value[0] = INFINITY
            elif self.auto and _pivot_cancels(self.yc_ss, out[2], out[3], self.lo, self.hi):
                residual = True
            elif self.reml:
                nmp = self.nobs - self.p
                value[0] = (out[0] - self.ldW + out[1]
                            + nmp * (1.0 + log(_TWO_PI * out[2] / nmp)) + self.shift)
            else:
                value[0] = (out[0] - self.ldW
                            + self.nobs * (1.0 + log(_TWO_PI * out[2] / self.nobs))
                            + self.shift)
        if residual:
            try:
                value[0] = float(self.fallback(np.array(<double[:self.ntheta]> x)))
            except BaseException as exc:  # (stop the optimiser; the caller re-raises)
                self.error = exc
                return False
        return True


def dense_solve(const double[::1, :] L, Py_ssize_t rr, const double[::1] theta,
                const int64_t[::1] scale_index, const double[::1] data,
                const int32_t[::1] indices, const int32_t[::1] indptr,
                const int64_t[:, ::1] t_index, const double[:, ::1] first,
                const int64_t[::1] class_of, double[::1] beta, double[::1] u_rest,
                double[:, ::1] u1):
    """β and u from a factorisation on the dense path (``PLS.solve``'s steps, the same
    calls in the same order, so the same numbers): x = L₁₁⁻ᵀ ℓ (L₁₁ the factor ``L``
    (r x r, Fortran order) without its last row and column, ℓ that row; LAPACK's
    dtrtrs), u_rest (the later blocks', ``rr``, every one scalar: θ[``scale_index[i]``]
    scales entry i) and β its two parts; the first block's u per level from
    B_s u_s = T₁ᵀ v_s, v = −A_1r [u_rest scaled, β, −1] (A_1r by its CSR arrays, summed
    in index order as SciPy's product), T₁ q₁ x q₁ with θ positions ``t_index`` (-1: 0;
    the product by BLAS's dgemm as NumPy's), and B_s = C_s C_sᵀ: for q₁ = 2 from B's
    entries (``first``: b₀₀, b₁₀, b₁₁ per level) by dpotrf, the two triangular systems
    each by dgesv as ``numpy.linalg.solve``; for q₁ = 1 C_s = ``first[0, class_of[s]]``
    (``class_of`` empty: s) and the two quotients (dgesv's of a 1 x 1 system).

    Returns dtrtrs's info (nothing else written where it is not 0), or -1 for shapes
    that do not fit."""
    cdef Py_ssize_t r = L.shape[0], n = r - 1, p = beta.shape[0]
    cdef Py_ssize_t l1 = u1.shape[0], q1 = u1.shape[1], i, jj, l, a
    cdef int nn = <int>n, lda = <int>r, one = 1, info = 0, q = <int>q1, nl = <int>l1
    cdef int two = 2
    cdef int ipiv[2]
    cdef char uplo = b"L", trans = b"T", diag = b"N", no = b"N"
    cdef double alpha = 1.0, zero = 0.0, acc, c
    cdef double T[4]
    cdef double M[4]
    cdef double C[4]
    cdef double *x
    cdef double *xs
    cdef double *v
    cdef double *w
    if (L.shape[1] != r or r < 1 or rr + p != n or u_rest.shape[0] != rr
            or scale_index.shape[0] < rr or q1 < 1 or q1 > 2
            or indptr.shape[0] != l1 * q1 + 1 or t_index.shape[0] != q1
            or t_index.shape[1] != q1 or (q1 == 2 and first.shape[0] != 3)
            or (q1 == 2 and first.shape[1] != l1)
            or (q1 == 1 and class_of.shape[0] not in (0, l1))):
        return -1
    x = <double *> malloc((2 * r + 2 * l1 * q1) * sizeof(double))
    if x == NULL:
        raise MemoryError()
    xs = x + r
    v = xs + r
    w = v + l1 * q1
    try:
        for i in range(n):
            x[i] = L[n, i]
        if n > 0:
            dtrtrs(&uplo, &trans, &diag, &nn, &one, <double *>&L[0, 0], &lda, x, &nn,
                   &info)
        if info != 0:
            return info
        for i in range(rr):
            u_rest[i] = x[i]
            xs[i] = x[i] * theta[scale_index[i]]
        for i in range(p):
            beta[i] = x[rr + i]
            xs[rr + i] = x[rr + i]
        xs[n] = -1.0
        for i in range(l1 * q1):  # v = −A_1r xs (SciPy's csr_matvec order)
            acc = 0.0
            for jj in range(indptr[i], indptr[i + 1]):
                acc += data[jj] * xs[indices[jj]]
            v[i] = -acc
        for a in range(q1 * q1):  # (T₁, row-major)
            T[a] = (theta[t_index[a // q1, a % q1]] if t_index[a // q1, a % q1] >= 0
                    else 0.0)
        # w = v T₁ (v row-major l₁ x q₁): as column-major, wᵀ = T₁ᵀ vᵀ (NumPy's call)
        dgemm(&no, &no, &q, &nl, &q, &alpha, T, &q, v, &q, &zero, w, &q)
        for l in range(l1):
            if q1 == 1:
                c = first[0, class_of[l] if class_of.shape[0] else l]
                u1[l, 0] = w[l] / c / c
                continue
            C[0], C[1], C[2], C[3] = first[0, l], first[1, l], first[1, l], first[2, l]
            dpotrf(&uplo, &two, C, &two, &info)  # (C = [[C0, 0], [C1, C3]])
            if info != 0:
                return -1
            M[0], M[1], M[2], M[3] = C[0], C[1], 0.0, C[3]  # (C, column-major)
            dgesv(&two, &one, M, &two, ipiv, &w[2 * l], &two, &info)
            M[0], M[1], M[2], M[3] = C[0], 0.0, C[1], C[3]  # (Cᵀ)
            dgesv(&two, &one, M, &two, ipiv, &w[2 * l], &two, &info)
            u1[l, 0], u1[l, 1] = w[2 * l], w[2 * l + 1]
        return 0
    finally:
        free(x)
