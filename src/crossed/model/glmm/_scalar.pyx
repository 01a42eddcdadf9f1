# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The GLMM's compiled PIRLS solve for scalar random-effects terms (``scalar.py``).

:func:`scalar_solve` forms and solves, in one call, the weighted penalised least-squares
system of one PIRLS iteration

    [D      B_R                       B_X            ] [u₁ ]   [r₁ ]
    [B_Rᵀ   Λ_R Z_RᵀWZ_R Λ_R + I      Λ_R Z_RᵀWX     ] [u_R] = [r_R]
    [B_Xᵀ   XᵀWZ_R Λ_R                XᵀWX           ] [β  ]   [r_X]

(D diagonal: the first factor's levels; B_R = θ₁ Z₁ᵀWZ_R Λ_R on the pattern of the levels
the first factor's levels meet, B_X = θ₁ Z₁ᵀWX):

1. one pass over the rows accumulates D, r₁, B_R's entries, B_X, r_R, r_X and the lower
   triangle of the system's rest (the later factors and X; X's nonzeros from its CSR form,
   or XᵀWX by BLAS's dsyrk on √W X where X is dense and wide);
2. the later factors' scales Λ_R are applied in those sums, and the first factor is
   eliminated level by level in closed form (its Schur complement's update B D⁻¹ Bᵀ on each
   level's support; its X part, B_XᵀD⁻¹B_X, by dsyrk);
3. the Schur complement C is factored: its leading columns whose factor stays sparse (a
   factor nested in the first or in the one before, such as grouseticks' BROOD and
   LOCATION, has one nonzero below the diagonal) column by column on their nonzero rows,
   from a pattern computed once (``scalar._sparse_lead``), the rest by LAPACK's dpotrf;
4. the system is solved (the lead's columns sparse, the rest by dtrsv) and u₁ recovered
   from its equations.

Only lower triangles are written. BLAS and LAPACK are SciPy's (``cython_blas``,
``cython_lapack``): the OpenBLAS NumPy and SciPy load.
"""

from libc.math cimport sqrt
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport dsyrk, dtrsv
from scipy.linalg.cython_lapack cimport dpotrf


cdef void _syrk_lower(int n, int k, double alpha, double *A, int lda, double beta,
                      double *C, int ldc) noexcept nogil:
    """C ← alpha A Aᵀ + beta C on the lower triangle (A: n x k, Fortran)."""
    cdef char uplo = b"L", trans = b"N"
    if n > 0 and k > 0:
        dsyrk(&uplo, &trans, &n, &k, &alpha, A, &lda, &beta, C, &ldc)


def scalar_solve(const double[::1] sw, const double[::1] z,
                 const int64_t[::1] c1, const double[::1] z1,
                 const int64_t[:, ::1] cr, const double[:, ::1] zr,
                 const int64_t[:, ::1] pinv, const int64_t[::1] pcol,
                 const int64_t[::1] pptr,
                 const int64_t[::1] xptr, const int64_t[::1] xind, const double[::1] xval,
                 double[:, ::1] swX,
                 double t1, const double[::1] tr, Py_ssize_t p, Py_ssize_t dl,
                 const int64_t[::1] lptr, const int64_t[::1] lrow,
                 double[::1] d, double[::1] r1, double[::1] vals, double[::1] vs,
                 double[::1] BXs, double[::1, :] M, double[::1] rhs, double[::1] u1):
    """One PIRLS solve (module docstring), in the caller's arrays.

    Parameters
    ----------
    sw, z : √(working weights) and the working response, (n,).
    c1, z1 : the first factor's level and covariate per row.
    cr, zr : the later factors' columns (their levels, offset into the rest) and
        covariates, (k, n).
    pinv : per later factor and row, the index of its (first level, column) pair, (k, n);
        ``pcol``: each pair's column, the pairs sorted by first level then column, level
        s's from ``pptr[s]`` to ``pptr[s + 1]``.
    xptr, xind, xval : X in CSR form (columns sorted within a row); ``swX``: √W X
        (n, p) to fill and multiply by dsyrk instead of the CSR pairs, or an empty array.
    t1, tr : θ of the first factor; θ per later column (rr,).
    p : X's columns in the system (0: β is fixed). ``dl``: the leading columns of C
        eliminated sparsely, column j on the later factors' rows
        ``lrow[lptr[j]:lptr[j + 1]]`` (below its diagonal, sorted; with the fill of the
        columns before it) and X's rows.
    d, r1, vals, vs, BXs, M, rhs, u1 : outputs (M in Fortran order,
        (rr + p)²; only its lower triangle is written): D, r₁, B_R's entries and them over √d (per pair), B_X / √d (l₁ x p,
        row-major), the factor (lower), the solution [u_R, β] and u₁.

    Returns
    -------
    int
        0, or k > 0 when the leading minor of order k of C is not positive definite.
    """
    cdef Py_ssize_t n = sw.shape[0], l1 = d.shape[0], rr = tr.shape[0]
    cdef Py_ssize_t k = cr.shape[0], m = rr + p
    cdef Py_ssize_t i, j, a, b, s, e, e1, e2, kk, k2, ja
    cdef bint use_syrk = swX.shape[0] > 0 and p > 0
    cdef double wi, wz1, zi, za, wza, wx, ds, rs, q, v1, bj, acc, tt = t1 * t1
    cdef int info = 0, mm = <int>m, nrhs = 1, rest, ip = <int>p
    cdef char uplo = b"L", notrans = b"N", trans = b"T", nonunit = b"N"
    with nogil:
        for s in range(l1):
            d[s] = 0.0
            r1[s] = 0.0
        for e in range(vals.shape[0]):
            vals[e] = 0.0
        for e in range(BXs.shape[0]):
            BXs[e] = 0.0
        # M's lower triangle where it is written: the lead's pattern and X's rows, the
        # rest densely (the lead's other entries stay the zeros of M's first use)
        for j in range(m):
            rhs[j] = 0.0
            if j < dl:
                M[j, j] = 0.0
                for e in range(lptr[j], lptr[j + 1]):
                    M[lrow[e], j] = 0.0
                for i in range(rr, m):
                    M[i, j] = 0.0
            else:
                for i in range(j, m):
                    M[i, j] = 0.0
        # 1. the rows' weighted sums
        for i in range(n):
            wi = sw[i] * sw[i]
            s = c1[i]
            zi = z[i]
            wz1 = wi * z1[i]
            d[s] += wz1 * z1[i]
            r1[s] += wz1 * zi
            for a in range(k):
                ja = cr[a, i]
                za = zr[a, i] * tr[ja]  # (the column's scale: S Z_Rᵀ W Z_R S)
                wza = wi * za
                vals[pinv[a, i]] += wz1 * za
                rhs[ja] += wza * zi
                for b in range(a + 1):  # (later factors' columns come later: lower)
                    M[ja, cr[b, i]] += wza * zr[b, i] * tr[cr[b, i]]
            if p == 0:
                continue
            for kk in range(xptr[i], xptr[i + 1]):
                j = xind[kk]
                wx = wi * xval[kk]
                rhs[rr + j] += wx * zi
                BXs[s * p + j] += wx * z1[i]
                for a in range(k):
                    M[rr + j, cr[a, i]] += wx * zr[a, i] * tr[cr[a, i]]
                if use_syrk:
                    swX[i, j] = sw[i] * xval[kk]
                else:
                    for k2 in range(xptr[i], kk + 1):
                        M[rr + j, rr + xind[k2]] += wx * xval[k2]
        if use_syrk:  # XᵀWX = (√W X)ᵀ(√W X)
            _syrk_lower(ip, <int>n, 1.0, &swX[0, 0], ip, 1.0, &M[rr, rr], mm)
        # 2. the first factor's scale: D = θ₁² Z₁ᵀWZ₁ + I, B = θ₁ Z₁ᵀW[Z_R X] S (S, the
        # later columns' scales, applied in the rows' sums), and C's random part + I
        for s in range(l1):
            d[s] = tt * d[s] + 1.0
            r1[s] *= t1
        for j in range(rr):
            M[j, j] += 1.0
        for e in range(vals.shape[0]):
            vals[e] *= t1
        for e in range(BXs.shape[0]):
            BXs[e] *= t1
        # ... and the first factor eliminated, level by level
        for s in range(l1):
            ds = d[s]
            rs = sqrt(ds)
            q = r1[s] / ds
            for e in range(pptr[s], pptr[s + 1]):
                rhs[pcol[e]] -= vals[e] * q
                vs[e] = vals[e] / rs
            for j in range(p):
                rhs[rr + j] -= BXs[s * p + j] * q
                BXs[s * p + j] /= rs
            for e1 in range(pptr[s], pptr[s + 1]):
                v1 = vs[e1]
                ja = pcol[e1]
                for e2 in range(pptr[s], e1 + 1):
                    M[ja, pcol[e2]] -= v1 * vs[e2]
            for j in range(p):
                bj = BXs[s * p + j]
                for e in range(pptr[s], pptr[s + 1]):
                    M[rr + j, pcol[e]] -= bj * vs[e]
        if p and l1:
            _syrk_lower(ip, <int>l1, -1.0, &BXs[0], ip, 1.0, &M[rr, rr], mm)
        # 3. C = L Lᵀ: the sparse lead column by column on its nonzero rows (the later
        # factors' from lrow, then X's), the rest by dpotrf
        for j in range(dl):
            if not M[j, j] > 0.0:
                info = <int>j + 1
                break
            rs = sqrt(M[j, j])
            M[j, j] = rs
            for e in range(lptr[j], lptr[j + 1]):
                M[lrow[e], j] /= rs
            for i in range(rr, m):
                M[i, j] /= rs
            for e1 in range(lptr[j], lptr[j + 1]):
                v1 = M[lrow[e1], j]
                for e2 in range(lptr[j], e1 + 1):
                    M[lrow[e1], lrow[e2]] -= v1 * M[lrow[e2], j]
            for i in range(rr, m):
                v1 = M[i, j]
                for e in range(lptr[j], lptr[j + 1]):
                    M[i, lrow[e]] -= v1 * M[lrow[e], j]
                for e in range(rr, i + 1):
                    M[i, e] -= v1 * M[e, j]
        rest = <int>(m - dl)
        if info == 0 and rest > 0:
            dpotrf(&uplo, &rest, &M[dl, dl], &mm, &info)
            if info:
                info += <int>dl
        if info == 0:
            # 4. [u_R, β] = C⁻¹ rhs (L y = rhs, the lead's columns sparse; Lᵀx = y), and
            # u₁ = (r₁ − √d (B_R/√d u_R + B_X/√d β)) / d
            for j in range(dl):
                rhs[j] /= M[j, j]
                for e in range(lptr[j], lptr[j + 1]):
                    rhs[lrow[e]] -= M[lrow[e], j] * rhs[j]
                for i in range(rr, m):
                    rhs[i] -= M[i, j] * rhs[j]
            if rest > 0:
                dtrsv(&uplo, &notrans, &nonunit, &rest, &M[dl, dl], &mm, &rhs[dl], &nrhs)
                dtrsv(&uplo, &trans, &nonunit, &rest, &M[dl, dl], &mm, &rhs[dl], &nrhs)
            for j in range(dl - 1, -1, -1):
                acc = rhs[j]
                for e in range(lptr[j], lptr[j + 1]):
                    acc -= M[lrow[e], j] * rhs[lrow[e]]
                for i in range(rr, m):
                    acc -= M[i, j] * rhs[i]
                rhs[j] = acc / M[j, j]
            for s in range(l1):
                acc = 0.0
                for e in range(pptr[s], pptr[s + 1]):
                    acc += vs[e] * rhs[pcol[e]]
                for j in range(p):
                    acc += BXs[s * p + j] * rhs[rr + j]
                u1[s] = (r1[s] - sqrt(d[s]) * acc) / d[s]
    return info


def scalar_zlu(const double[::1] theta, const int64_t[::1] tindex,
               const int64_t[:, ::1] codes, const double[:, ::1] zs,
               const double[::1] u, double[::1] out):
    """Z Λθ u for scalar terms: per row, Σ over the terms a (in order) of
    z_a · (u[level] · θ_a), ``codes``: each term's levels offset into u, (k, n); the same
    products and sums, in the same order, as the terms' NumPy loop."""
    cdef Py_ssize_t i, a, n = out.shape[0], k = codes.shape[0]
    cdef double acc
    with nogil:
        for i in range(n):
            acc = 0.0
            for a in range(k):
                acc += zs[a, i] * (u[codes[a, i]] * theta[tindex[a]])
            out[i] = acc
