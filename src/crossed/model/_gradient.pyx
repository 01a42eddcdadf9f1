# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The analytic gradient of the profiled criterion on small designs in one compiled call.

``gradient_dense.py`` states the formula and prepares the arrays that do not depend on θ;
:func:`dense_gradient` here is its arithmetic at one θ: the PLS solution from the factor
(LAPACK's dtrtrs), the first block's terms per level, S⁻¹ (dpotri), the products with
the later columns by BLAS's dgemm, the rest by loops whose sums run in index order. BLAS and
LAPACK are SciPy's (``scipy.linalg.cython_blas``/``cython_lapack``), the OpenBLAS that NumPy
and SciPy load, as in ``_core.pyx``.
"""

import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm
from scipy.linalg.cython_lapack cimport dpotri, dtrtrs


def dense_gradient(const double[::1, :] L, const double[::1] theta, double c,
                   const int64_t[::1] scale_index, Py_ssize_t rr, Py_ssize_t R,
                   const double[:, ::1] A1, const double[:, :, ::1] A1T,
                   const double[:, :, ::1] A11, const double[:, :, ::1] Dinv,
                   const double[:, ::1] T1, const double[:, ::1] Arr,
                   const int64_t[::1] t_pos, const int64_t[::1] t_index, double[::1] grad):
    """∂(criterion)/∂θ into ``grad`` at a dense factorisation (``gradient_dense.py``'s
    formula and names).

    ``L``: the factor (r x r, Fortran order, lower); ``c`` = −2 (n − p or n) / pwrss;
    ``scale_index``: the θ scaling each of the r columns after the first block (-1: 1, X
    and y); ``rr`` later random effects, all scalar, and ``R`` columns in the log
    determinant (rr, or rr + p for REML); ``A1``: A_1r (ℓ₁ q₁ x r) and ``A1T`` the same
    per level transposed (ℓ₁, r, q₁); ``A11``: A_s per level; ``Dinv``: D_s⁻¹ =
    (T₁ᵀA_sT₁ + I)⁻¹ per level; ``T1``: the first template; ``Arr``: A_rr (r x r);
    ``t_pos``, ``t_index``: the flat positions of T₁ that hold a θ and their θ.

    The products of q₁ x q₁ blocks with the later columns (G_s A_s, G_s A_1r[s],
    W_s = Y_s A_1R[s]ᵀ, W_s G_s A_s, F_sᵀK̃_s) and Y = A_1R S_R S⁻¹ are BLAS's dgemm (one
    call per level, or one in all); the rest are loops summed over the inner index in
    order, with the output's last index innermost where they are per level (no chain of
    dependent additions).

    Returns 0, dtrtrs's or dpotri's info where the factor is singular (``grad`` unset),
    or -1 for shapes that do not fit."""
    cdef Py_ssize_t r = L.shape[0], n = r - 1, l1 = A11.shape[0], q = A11.shape[1]
    cdef Py_ssize_t M = l1 * q, k = theta.shape[0], qq = q * q, w = q + rr, i, j
    cdef int info
    if (L.shape[1] != r or r < 1 or A1.shape[0] != M or A1.shape[1] != r
            or A1T.shape[0] != l1 or A1T.shape[1] != r or A1T.shape[2] != q
            or A11.shape[2] != q or Dinv.shape[0] != l1 or Dinv.shape[1] != q
            or Dinv.shape[2] != q or T1.shape[0] != q or T1.shape[1] != q
            or Arr.shape[0] != r or Arr.shape[1] != r or scale_index.shape[0] != r
            or rr < 0 or R < rr or R > n or t_pos.shape[0] != t_index.shape[0]
            or grad.shape[0] != k or l1 < 1 or q < 1):
        return -1
    for i in range(r):
        if scale_index[i] >= k:
            return -1
    for i in range(rr):
        if scale_index[i] < 0:
            return -1
    for j in range(t_pos.shape[0]):
        if t_pos[j] < 0 or t_pos[j] >= qq or t_index[j] < 0 or t_index[j] >= k:
            return -1
    cdef Py_ssize_t size = (3 * r + 4 * M + 6 * qq + 2 * l1 * qq + rr + 2 * R * R + M * R
                            + M * w)
    cdef double *buf = <double *> malloc((size + 1) * sizeof(double))
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            info = _dense_gradient(L, theta, c, scale_index, rr, R, A1, A1T, A11, Dinv, T1,
                                   Arr, t_pos, t_index, grad, buf)
        return info
    finally:
        free(buf)


cdef inline void _axpy(Py_ssize_t m, double alpha, const double *x, double *y
                       ) noexcept nogil:
    """y += alpha x (m entries)."""
    cdef Py_ssize_t i
    for i in range(m):
        y[i] = y[i] + alpha * x[i]


cdef inline void _gemm(bint at, bint bt, Py_ssize_t m, Py_ssize_t n, Py_ssize_t k,
                       const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                       double beta, double *C, Py_ssize_t ldc) noexcept nogil:
    """C = op(A) op(B) + beta C for row-major matrices (C m x n, the inner dimension k;
    op(A) = Aᵀ with ``at``, op(B) = Bᵀ with ``bt``; ld: the row strides), by BLAS's dgemm
    on the transposed problem."""
    cdef char ta = b"T" if bt else b"N", tb = b"T" if at else b"N"
    cdef int im = <int>n, jn = <int>m, kk = <int>k, la = <int>ldb, lb = <int>lda
    cdef int lc = <int>ldc
    cdef double one = 1.0
    dgemm(&ta, &tb, &im, &jn, &kk, &one, <double *>B, &la, <double *>A, &lb, &beta, C, &lc)


cdef int _dense_gradient(const double[::1, :] L, const double[::1] theta, double c,
                         const int64_t[::1] scale_index, Py_ssize_t rr, Py_ssize_t R,
                         const double[:, ::1] A1, const double[:, :, ::1] A1T,
                         const double[:, :, ::1] A11, const double[:, :, ::1] Dinv,
                         const double[:, ::1] T1, const double[:, ::1] Arr,
                         const int64_t[::1] t_pos, const int64_t[::1] t_index,
                         double[::1] grad, double *buf) noexcept nogil:
    """:func:`dense_gradient`'s steps on its checked arrays and the work array ``buf``."""
    cdef Py_ssize_t r = L.shape[0], n = r - 1, l1 = A11.shape[0], q = A11.shape[1]
    cdef Py_ssize_t M = l1 * q, k = theta.shape[0], qq = q * q, w = q + rr
    cdef Py_ssize_t i, j, a, b, s, m, e
    cdef int nn = <int>n, ir = <int>r, iR = <int>R, one = 1, info = 0
    cdef char uplo = b"L", trans = b"T", diag = b"N"
    cdef double acc
    cdef const double *row
    cdef double *sc = buf  # S's diagonal (1 on X and y)
    cdef double *x = sc + r  # the PLS solution [u_rest, β]
    cdef double *xs = x + r  # [b_rest, β, −1]
    cdef double *rhs = xs + r  # −Z₁ᵀ(y − Z_r b_r − Xβ), per level
    cdef double *u1 = rhs + M  # −u₁
    cdef double *b1 = u1 + M  # −b₁
    cdef double *z1 = b1 + M  # −Z₁ᵀ(y − Xβ − ZΛu)
    cdef double *T1t = z1 + M  # T₁ᵀ (C order)
    cdef double *Fs = T1t + qq  # one level's F_s
    cdef double *Ws = Fs + qq  # one level's W_s
    cdef double *tmp = Ws + qq  # one level's (K_s F_s)ᵀ
    cdef double *first = tmp + qq  # [a, b] of the first template
    cdef double *acc2 = first + qq  # Σ_s (K_s F_s)ᵀ
    cdef double *Kt = acc2 + qq  # K̃_s = T₁D_s⁻¹ per level
    cdef double *G = Kt + l1 * qq  # G_s = K̃_sT₁ᵀ per level
    cdef double *rest = G + l1 * qq  # the later blocks' terms
    cdef double *Sinv = rest + rr  # S⁻¹ (R x R, symmetric)
    cdef double *Q = Sinv + R * R  # S_R S⁻¹ (C order)
    cdef double *Y = Q + R * R  # A_1R S_R S⁻¹ (M x R, C order)
    cdef double *GA = Y + M * R  # [G_s A_s | G_s A_1r[s]] (M x (q + rr), C order)
    for i in range(r):
        sc[i] = 1.0 if scale_index[i] < 0 else theta[scale_index[i]]
    for i in range(n):
        x[i] = L[n, i]
    if n > 0:
        dtrtrs(&uplo, &trans, &diag, &nn, &one, <double *>&L[0, 0], &ir, x, &nn, &info)
    if info != 0:
        return info
    for i in range(n):
        xs[i] = x[i] * sc[i]
    xs[n] = -1.0 * sc[n]
    for a in range(q):
        for b in range(q):
            T1t[a * q + b] = T1[b, a]
    memset(rhs, 0, M * sizeof(double))
    memset(Kt, 0, 2 * l1 * qq * sizeof(double))
    memset(first, 0, 2 * qq * sizeof(double))
    for s in range(l1):  # the first block's terms per level
        for j in range(r):  # rhs_s = A_1r[s] xs
            _axpy(q, xs[j], &A1T[s, j, 0], &rhs[s * q])
        for a in range(q):  # K̃_s = T₁D_s⁻¹, G_s = K̃_sT₁ᵀ (row a: Σ_e over rows)
            for e in range(q):
                _axpy(q, T1[a, e], &Dinv[s, e, 0], &Kt[s * qq + a * q])
            for e in range(q):
                _axpy(q, Kt[s * qq + a * q + e], &T1t[e * q], &G[s * qq + a * q])
        for b in range(q):  # −u₁ = rhs_s K̃_s
            acc = 0.0
            for a in range(q):
                acc = acc + rhs[s * q + a] * Kt[s * qq + a * q + b]
            u1[s * q + b] = acc
        for a in range(q):  # −b₁ = −u₁ T₁ᵀ
            acc = 0.0
            for b in range(q):
                acc = acc + u1[s * q + b] * T1[a, b]
            b1[s * q + a] = acc
        for a in range(q):  # −Z₁ᵀ(y − Xβ − ZΛu) = rhs − A_s(−b₁)
            acc = 0.0
            for b in range(q):
                acc = acc + A11[s, a, b] * b1[s * q + b]
            z1[s * q + a] = rhs[s * q + a] - acc
        for a in range(q):  # the residual sum of squares' term
            _axpy(q, z1[s * q + a], &u1[s * q], &first[a * q])
    for a in range(qq):
        first[a] = c * first[a]
    for i in range(rr):  # −Z_rᵀ(y − Xβ − ZΛu), times u_rest
        acc = 0.0
        for j in range(r):
            acc = acc + Arr[i, j] * xs[j]
        for s in range(l1):
            row = &A1T[s, i, 0]
            for b in range(q):
                acc = acc - row[b] * b1[s * q + b]
        rest[i] = acc * x[i] * -c
    if R > 0:
        for j in range(R):  # S⁻¹ from the factor's first R columns
            for i in range(R):
                Sinv[i + j * R] = L[i, j] if i >= j else 0.0
        dpotri(&uplo, &iR, Sinv, &iR, &info)
        if info != 0:
            return info
        for j in range(R):
            for i in range(j + 1, R):
                Sinv[j + i * R] = Sinv[i + j * R]
        for j in range(R):
            for i in range(R):
                Q[j * R + i] = Sinv[j * R + i] * sc[j]
        _gemm(False, False, M, R, R, &A1[0, 0], r, Q, R, 0.0, Y, R)  # Y = A_1R Q
        for s in range(l1):  # GA_s = G_s [A_s | A_1r[s]'s first rr columns]
            _gemm(False, False, q, q, q, &G[s * qq], q, &A11[s, 0, 0], q, 0.0,
                  &GA[s * q * w], w)
            if rr:
                _gemm(False, False, q, rr, q, &G[s * qq], q, &A1[s * q, 0], r, 0.0,
                      &GA[s * q * w + q], w)
        for i in range(rr):  # the later blocks: Σ_j Q_ji C₀_ji
            acc = 0.0
            for j in range(R):
                acc = acc + Q[j * R + i] * Arr[j, i]
            rest[i] = rest[i] + 2.0 * acc
            acc = 0.0
            for m in range(M):
                acc = acc + Y[m * R + i] * GA[m * w + q + i]
            rest[i] = rest[i] - 2.0 * acc
        for m in range(M):
            for i in range(R):
                Y[m * R + i] = Y[m * R + i] * sc[i]
    for s in range(l1):  # F_s = A_s + W_s (G_s A_s − I), W_s = V_s S⁻¹ V_sᵀ
        if R > 0:
            _gemm(False, True, q, q, R, &Y[s * q * R], R, &A1[s * q, 0], r, 0.0, Ws, q)
            _gemm(False, False, q, q, q, Ws, q, &GA[s * q * w], w, 0.0, Fs, q)
            for a in range(q):
                for b in range(q):
                    Fs[a * q + b] = (A11[s, a, b] + Fs[a * q + b]) - Ws[a * q + b]
        else:
            for a in range(q):
                for b in range(q):
                    Fs[a * q + b] = A11[s, a, b]
        # (K_s F_s)ᵀ = F_sᵀ K̃_s: [a, b] = Σ_e F_s[e, a] K̃_s[e, b]
        _gemm(True, False, q, q, q, Fs, q, &Kt[s * qq], q, 0.0, tmp, q)
        for a in range(qq):
            acc2[a] = acc2[a] + tmp[a]
    for i in range(k):
        grad[i] = 0.0
    for i in range(rr):
        grad[scale_index[i]] = grad[scale_index[i]] + rest[i]
    for j in range(t_pos.shape[0]):
        grad[t_index[j]] = grad[t_index[j]] + (first[t_pos[j]] + 2.0 * acc2[t_pos[j]])
    return 0
