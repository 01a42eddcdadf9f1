# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The GLMM's compiled PIRLS solve: a scalar first random-effects term eliminated in
closed form (or none, where the first term has several columns), the later terms of any
columns (``scalar.py``).

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
2. the later factors' scales Λ_R are applied in those sums (a later term of several
   columns: its columns' covariates are Z Λθ's, by :func:`vector_columns`, and its scales
   1), and the first factor is
   eliminated level by level in closed form (its Schur complement's update B D⁻¹ Bᵀ on each
   level's support; its X part, B_XᵀD⁻¹B_X, by dsyrk);
3. the Schur complement C is factored: its leading columns whose factor stays sparse (a
   factor nested in the first or in the one before, such as grouseticks' BROOD and
   LOCATION, has one nonzero below the diagonal) column by column on their nonzero rows,
   from a pattern computed once (``scalar._sparse_lead``), the rest by LAPACK's dpotrf;
4. the system is solved (the lead's columns sparse, the rest by dtrsv) and u₁ recovered
   from its equations.

Only lower triangles are written. :class:`ScalarDeviance` runs the whole PIRLS loop
(``ScalarDeviance._pirls``) and solves each iteration by this solve (with no later
factors for a single term); it holds the loop's inputs and workspaces, and gives the
PIRLS states of ``GlmmProblem`` and the Laplace deviance as a compiled criterion for
NLopt's C loop;
:func:`residual_deviance` is the deviance sum every PIRLS adds up. BLAS and LAPACK are
SciPy's (``cython_blas``, ``cython_lapack``): the OpenBLAS NumPy and SciPy load.
"""

from libc.math cimport INFINITY, erfc, exp, expm1, fabs, fmax, isfinite, log, log1p, sqrt
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport ddot, dgemv, dsyrk, dtrsv
from scipy.linalg.cython_lapack cimport dpotrf

import numpy as np


cdef void _syrk_lower(int n, int k, double alpha, double *A, int lda, double beta,
                      double *C, int ldc) noexcept nogil:
    """C ← alpha A Aᵀ + beta C on the lower triangle (A: n x k, Fortran)."""
    cdef char uplo = b"L", trans = b"N"
    if n > 0 and k > 0:
        dsyrk(&uplo, &trans, &n, &k, &alpha, A, &lda, &beta, C, &ldc)


cpdef int scalar_solve(const double[::1] sw, const double[::1] z,
                      const int64_t[::1] c1, const double[::1] z1,
                      const int64_t[:, ::1] cr, const double[:, ::1] zr,
                      const int64_t[:, ::1] pinv, const int64_t[::1] pcol,
                      const int64_t[::1] pptr,
                      const int64_t[::1] xptr, const int64_t[::1] xind, const double[::1] xval,
                      double[:, ::1] swX,
                      double t1, const double[::1] tr, Py_ssize_t p, Py_ssize_t dl,
                      const int64_t[::1] lptr, const int64_t[::1] lrow,
                      double[::1] d, double[::1] r1, double[::1] vals, double[::1] vs,
                      double[::1] BXs, double[::1, :] M, double[::1] rhs,
                      double[::1] u1) noexcept nogil:
    """One PIRLS solve (module docstring), in the caller's arrays (:class:`ScalarDeviance`'s
    PIRLS loop calls it, with no later factors for a single term).

    Parameters
    ----------
    sw, z : √(working weights) and the working response, (n,).
    c1, z1 : the first factor's level and covariate per row (empty, with ``d`` and
        ``u1``, where there is no first factor: every term a later one).
    cr, zr : the later factors' columns (their levels, offset into the rest; a term of q
        columns: q rows, level g's j-th at g q + j) and covariates (such a term's: its
        columns of Z Λθ), (k, n).
    pinv : per later factor and row, the index of its (first level, column) pair, (k, n);
        ``pcol``: each pair's column, the pairs sorted by first level then column, level
        s's from ``pptr[s]`` to ``pptr[s + 1]``.
    xptr, xind, xval : X in CSR form (columns sorted within a row); ``swX``: √W X
        (n, p) to fill and multiply by dsyrk instead of the CSR pairs, or an empty array.
    t1, tr : θ of the first factor; θ per later column (rr,), 1 for a term of several
        columns.
    p : X's columns in the system (0: β is fixed). ``dl``: the leading columns of C
        eliminated sparsely, column j on the later factors' rows
        ``lrow[lptr[j]:lptr[j + 1]]`` (below its diagonal, sorted; with the fill of the
        columns before it) and X's rows.
    d, r1, vals, vs, BXs, M, rhs, u1 : outputs (M in Fortran order, (rr + p)²; only its
        lower triangle is written): D, r₁, B_R's entries and them over √d (per pair),
        B_X / √d (l₁ x p, row-major), the factor (lower), the solution [u_R, β] and u₁.

    Returns
    -------
    int
        0, or k > 0 when the leading minor of order k of C is not positive definite.
    """
    cdef Py_ssize_t n = sw.shape[0], l1 = d.shape[0], rr = tr.shape[0]
    cdef Py_ssize_t k = cr.shape[0], m = rr + p
    cdef Py_ssize_t i, j, a, b, s, e, e1, e2, kk, k2, ja
    cdef bint use_syrk = swX.shape[0] > 0 and p > 0, first = l1 > 0
    cdef double wi, wz1, zi, za, wza, wx, ds, rs, q, v1, bj, acc, tt = t1 * t1
    cdef int info = 0, mm = <int>m, nrhs = 1, rest, ip = <int>p
    cdef char uplo = b"L", notrans = b"N", trans = b"T", nonunit = b"N"
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
        zi = z[i]
        if first:
            s = c1[i]
            wz1 = wi * z1[i]
            d[s] += wz1 * z1[i]
            r1[s] += wz1 * zi
        for a in range(k):
            ja = cr[a, i]
            za = zr[a, i] * tr[ja]  # (the column's scale: S Z_Rᵀ W Z_R S)
            wza = wi * za
            if first:
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
            if first:
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


cdef inline double _zlu_row(Py_ssize_t i, Py_ssize_t n, Py_ssize_t k, const double *u,
                            const int64_t *c1, const double *z1, double t1,
                            const int64_t *cr, const double *zr, const double *tr,
                            Py_ssize_t l1) noexcept nogil:
    """Row i of Z Λθ u: Σ over the terms (the first, then each later column a, in order)
    of z · (u[level] · θ); ``cr`` and ``zr`` (k, n) C-ordered."""
    cdef Py_ssize_t a, j
    cdef double acc = 0.0
    if c1 != NULL:  # (NULL: no first factor)
        acc += z1[i] * (u[c1[i]] * t1)
    for a in range(k):
        j = cr[a * n + i]
        acc += zr[a * n + i] * (u[l1 + j] * tr[j])
    return acc


def scalar_zlu(const double[::1] u, const int64_t[::1] c1, const double[::1] z1, double t1,
               const int64_t[:, ::1] cr, const double[:, ::1] zr, const double[::1] tr,
               double[::1] out):
    """Z Λθ u (u: the first factor's levels, then the later columns): per row, Σ over the
    terms in order of z · (u[level] · θ), ``cr``, ``zr`` and ``tr`` as
    :func:`scalar_solve` reads them (a later term of several columns: its columns' Λ in
    ``zr``, by :func:`vector_columns`, and 1 in ``tr``); the same products and sums, in
    the same order, as the terms' NumPy loop for scalar terms."""
    cdef Py_ssize_t i, n = out.shape[0], k = cr.shape[0], l1 = u.shape[0] - tr.shape[0]
    cdef const double *trp = &tr[0] if tr.shape[0] else NULL
    cdef const int64_t *crp = &cr[0, 0] if k else NULL
    cdef const double *zrp = &zr[0, 0] if k else NULL
    cdef const int64_t *c1p = &c1[0] if l1 else NULL
    cdef const double *z1p = &z1[0] if l1 else NULL
    with nogil:
        for i in range(n):
            out[i] = _zlu_row(i, n, k, &u[0], c1p, z1p, t1, crp, zrp, trp, l1)


cdef void _vector_columns(const double *theta, const int64_t[::1] target,
                          const int64_t[::1] source, const int64_t[::1] tindex,
                          const double[:, ::1] zraw, double[:, ::1] zr) noexcept nogil:
    """:func:`vector_columns` (its docstring; the entries grouped by target row, each row
    set to zero once, at its first entry)."""
    cdef Py_ssize_t e, i, a, b, n = zr.shape[1]
    cdef double t
    for e in range(target.shape[0]):
        a, b, t = target[e], source[e], theta[tindex[e]]
        if e == 0 or target[e - 1] != a:
            for i in range(n):
                zr[a, i] = 0.0
        for i in range(n):
            zr[a, i] += zraw[b, i] * t


def vector_columns(const double[::1] theta, const int64_t[::1] target,
                   const int64_t[::1] source, const int64_t[::1] tindex,
                   const double[:, ::1] zraw, double[:, ::1] zr):
    """The columns of Z Λθ of the later terms of several columns, into ``zr``'s rows: the
    row ``target[e]`` is Σ_e ``zraw[source[e]] · θ[tindex[e]]`` (column j of a level's
    Z T: Σ_{l ≥ j} z_l T_lj, T the term's lower-triangular factor), the entries in order
    from zero, each row's entries consecutive; the other rows are left as they are."""
    with nogil:
        _vector_columns(&theta[0], target, source, tindex, zraw, zr)


# ---------------------------------------------------------------------- the PIRLS loop
# PIRLS on ScalarSolver's structure (a scalar first term, ``(1 | g)`` or ``(0 + x | g)``,
# or none; the later terms of any columns), the whole loop in one call
# (``pirls.GlmmProblem._pirls_compiled``): the family's link, variance and residual
# deviance as R computes them, element by element with the C library's exp, log, log1p,
# expm1 and erfc.

cdef double _EPS = 2.220446049250313e-16
cdef double _INVEPS = 1.0 / 2.220446049250313e-16
cdef double _SQRT1_2 = 0.7071067811865476
cdef double _INV_SQRT_2PI = 0.3989422804014327

LOGIT, PROBIT, CLOGLOG, LOG = 0, 1, 2, 3
BINOMIAL, POISSON = 0, 1

cdef int _HALVINGS = 20

cdef inline void _link(int link, double eta, double thresh, double *mu,
                       double *me) noexcept nogil:
    """R's linkinv and mu.eta, with R's clamps (``family.py``; NaN stays NaN)."""
    cdef double e, ope, x
    if link == 0:  # logit: clamped at |η| = 30
        if eta < -30.0:
            mu[0] = _EPS / (1.0 + _EPS)
            me[0] = _EPS
        elif eta > 30.0:
            mu[0] = _INVEPS / (1.0 + _INVEPS)
            me[0] = _EPS
        else:
            e = exp(eta)
            ope = 1.0 + e
            mu[0] = e / ope
            me[0] = e / (ope * ope)
    elif link == 3:  # log: μ at least eps
        e = exp(eta)
        if e < _EPS:
            e = _EPS
        mu[0] = e
        me[0] = e
    elif link == 1:  # probit: Φ on η clipped at ±thresh, φ at least eps
        x = eta
        if x < -thresh:
            x = -thresh
        elif x > thresh:
            x = thresh
        mu[0] = 0.5 * erfc(-x * _SQRT1_2)
        e = exp(-0.5 * eta * eta) * _INV_SQRT_2PI
        me[0] = _EPS if e < _EPS else e
    else:  # cloglog
        e = -expm1(-exp(eta))
        if e < _EPS:
            e = _EPS
        elif e > 1.0 - _EPS:
            e = 1.0 - _EPS
        mu[0] = e
        x = 700.0 if eta > 700.0 else eta
        e = exp(x) * exp(-exp(x))
        me[0] = _EPS if e < _EPS else e


cdef inline void _add(double *sum, double *comp, double x) noexcept nogil:
    """Neumaier's compensated sum: ``sum`` + ``comp`` is the running total."""
    cdef double t = sum[0] + x
    if fabs(sum[0]) >= fabs(x):
        comp[0] += (sum[0] - t) + x
    else:
        comp[0] += (x - t) + sum[0]
    sum[0] = t


cdef inline double _deviance_sum(Py_ssize_t n, const double *mu, const double *a,
                                 const double *b, const double *c) noexcept nogil:
    """−2 (Σ a log μ + Σ b log(1 − μ) − Σ c μ), one compensated sum in row order (the
    criterion's rounding no larger than its last digits: the finite-difference Hessian of
    lme4's checks divides it by δ²); rows with a or b zero skip their logarithm; b, c NULL:
    none."""
    cdef Py_ssize_t i
    cdef double total = 0.0, comp = 0.0
    for i in range(n):
        if a[i] > 0.0:
            _add(&total, &comp, a[i] * log(mu[i]))
        if b != NULL and b[i] > 0.0:
            _add(&total, &comp, b[i] * log1p(-mu[i]))
        if c != NULL:
            _add(&total, &comp, -(c[i] * mu[i]))
    return -2.0 * (total + comp)


def residual_deviance(const double[::1] mu, const double[::1] a, const double[::1] b,
                      const double[::1] c):
    """Σ dev.resids less its constant (``family.ResidualDeviance``, which adds it):
    −2 (Σ a log μ + Σ b log(1 − μ) − Σ c μ), ``b`` and ``c`` empty where the family has no
    such part; the same sum, in the same order, as the compiled PIRLS's."""
    cdef const double *bp = &b[0] if b.shape[0] else NULL
    cdef const double *cp = &c[0] if c.shape[0] else NULL
    cdef double out
    if mu.shape[0] == 0:
        return 0.0
    with nogil:
        out = _deviance_sum(mu.shape[0], &mu[0], &a[0], bp, cp)
    return out


cdef inline double _penalised(Py_ssize_t n, const double *mu, const double *a,
                              const double *b, const double *c, double const_,
                              const double *u, Py_ssize_t nl) noexcept nogil:
    """Σ dev.resids (:func:`residual_deviance` plus its constant) plus ‖u‖²."""
    cdef Py_ssize_t i
    cdef double uu = 0.0
    for i in range(nl):
        uu += u[i] * u[i]
    return (_deviance_sum(n, mu, a, b, c) + const_) + uu


include "../_objective.pxi"


cdef class ScalarDeviance(LoggedObjective):
    """PIRLS and the Laplace deviance of a GLMM on ``scalar.ScalarSolver``'s structure (a
    scalar first term eliminated in closed form, or none; the later terms of any columns,
    a term of several columns by its columns of Z Λθ, formed at each PIRLS's θ in this
    object's own copy of the covariates), as a C function of a stage's point for a
    compiled optimiser loop (:class:`LoggedObjective`: logged, the optimiser stopped after
    an error), with its own workspaces but the system's matrix (the structure's, shared
    by its solves of that order: ``ScalarSolver.workspace``).

    ``structure`` is the problem's ``scalar.ScalarSolver`` (the terms' codes, covariates
    and θ positions, the pairs of first levels and later columns, X by rows, the sparse
    lead's pattern: what :func:`scalar_solve` and :func:`scalar_zlu` read). Each
    evaluation is ``GlmmProblem.deviance0`` (``joint``: the point is θ, β solved with u)
    or ``GlmmProblem.deviance`` (the point is (θ, β)): :meth:`_pirls` from the stage's
    start ``lp0``, then ``laplace_of``'s ((Σ dev.resids + ``aic_const``) + ‖u‖²) +
    log|L|² in that order (‖u‖² by BLAS's ddot, as NumPy's ``u @ u``). With ``mapping`` =
    (θ₀, β₀, s, B, R) the point is the second stage's coordinates g (``glmer``'s
    ``to_x``): t = s∘g[:k], θ = θ₀ + t, β = (β₀ + Bt) + Rg[k:], each product by BLAS's
    dgemv as NumPy's ``@`` forms it (B and R C-ordered). A PIRLS that fails gives +inf,
    as the Python criterion returns; a system that is not positive definite is an
    error, ``numpy.linalg.LinAlgError``, as the Python path raises. :attr:`evaluations`
    counts the criterion's PIRLS runs; :meth:`state` runs PIRLS for ``GlmmProblem``'s
    states, from the start :meth:`start_from` sets and with :attr:`exact` as set."""
    cdef const double[::1] y, wt, offset, lp0, xval, z1, dev_a, dev_b, dev_c
    cdef const int64_t[::1] xptr, xind, c1, pcol, pptr, rest_theta, lptr, lrow
    cdef const int64_t[::1] vtarget, vsource, vtheta
    cdef const int64_t[:, ::1] cr, pinv
    cdef const double[:, ::1] zraw
    cdef double[:, ::1] zr
    cdef double[:, ::1] swX
    cdef double[::1] fixed, eta, mu, me, u, beta, d, sw, eta_new, mu_new, me_new, u_new
    cdef double[::1] u_new1, b_new, z, r1, vals, vs, BXs, rhs, tr
    cdef double[::1] theta, theta0, beta0, scale, tvec, bt, rg
    cdef double[::1, :] M
    cdef double[:, ::1] B, R
    cdef int link, variance, maxit, max_polish
    cdef double thresh, dev_const, aic_const, tol, eta_tol
    cdef bint joint, has_mapping
    cdef public bint exact
    cdef Py_ssize_t k, p, t1, l1, rr, q, dl
    cdef public Py_ssize_t evaluations

    def __init__(self, structure, y, wt, offset, lp0, Py_ssize_t k, bint joint, int link,
                 double thresh, int variance, dev_a, dev_b, dev_c, double dev_const,
                 double aic_const, double tol, int maxit, bint exact, int max_polish,
                 double eta_tol, mapping=None):
        n = len(y)
        self.y, self.wt, self.offset, self.lp0 = y, wt, offset, lp0
        self.xptr, self.xind, self.xval = structure.xptr, structure.xind, structure.xval
        self.c1, self.z1, self.t1 = structure.c1, structure.z1, structure.t1
        self.cr, self.pinv = structure.cr, structure.pinv
        self.pcol, self.pptr, self.rest_theta = structure.pcol, structure.pptr, structure.rest_theta
        self.dl, self.lptr, self.lrow = structure.lead, structure.lptr, structure.lrow
        # the later terms of several columns: their columns of Z Λθ, at each PIRLS's θ,
        # in this object's own copy of the covariates
        self.vtarget, self.vsource = structure.vtarget, structure.vsource
        self.vtheta, self.zraw = structure.vtheta, structure.zr
        self.zr = np.array(structure.zr) if len(structure.vtarget) else structure.zr
        self.l1, self.rr, self.p = structure.l1, structure.rr, structure.p
        self.q = self.l1 + self.rr
        self.k, self.joint = k, joint
        self.swX = structure.swX if joint else structure.swX[:0]
        self.link, self.thresh, self.variance = link, thresh, variance
        self.dev_a, self.dev_b, self.dev_c, self.dev_const = dev_a, dev_b, dev_c, dev_const
        self.aic_const, self.tol, self.maxit, self.exact = aic_const, tol, maxit, exact
        self.max_polish, self.eta_tol = max_polish, eta_tol
        self.ntheta = k + (0 if joint else self.p)
        self.fixed, self.eta, self.mu, self.me, self.sw = (np.empty(n) for _ in range(5))
        self.eta_new, self.mu_new, self.me_new, self.z = (np.empty(n) for _ in range(4))
        self.u, self.u_new = np.empty(self.q), np.empty(self.q)
        self.u_new1 = self.u_new[:self.l1]  # (u₁ of the solve, written in place)
        self.d, self.r1 = np.empty(self.l1), np.empty(self.l1)
        self.vals, self.vs = np.empty(len(self.pcol)), np.empty(len(self.pcol))
        self.tr = np.empty(self.rr)
        self.beta, self.b_new = np.zeros(self.p), np.empty(self.p)
        m = self.rr + (self.p if joint else 0)
        self.BXs = np.empty(max(self.l1 * (self.p if joint else 0), 1))
        self.rhs = np.empty(max(m, 1))
        # (the structure's matrix of this order, shared: one of order 4,000 is 128 MB)
        self.M = structure.workspace(m) if m else np.zeros((1, 1), order="F")
        self.theta, self.tvec = np.empty(k), np.empty(k)
        self.bt, self.rg = np.empty(self.p), np.empty(self.p)
        self.has_mapping = mapping is not None
        if self.has_mapping:
            theta0, beta0, scale, B, R = mapping
            self.theta0 = np.array(theta0, dtype=float)
            self.beta0 = np.array(beta0, dtype=float)
            self.scale = np.array(scale, dtype=float)
            self.B = np.ascontiguousarray(B, dtype=float).reshape(self.p, k)
            self.R = np.ascontiguousarray(R, dtype=float).reshape(self.p, self.p)
        self.evaluations = 0

    def values(self, const double[:, ::1] points):
        """The deviance at each row of ``points`` (not logged; the derivative check's
        points); an error is raised."""
        if points.shape[1] != self.ntheta:
            raise ValueError(f"the points have {points.shape[1]} entries, the criterion "
                             f"{self.ntheta}")
        out = np.empty(points.shape[0])
        cdef double[::1] ov = out
        cdef Py_ssize_t i
        for i in range(points.shape[0]):
            if not self.compute(&points[i, 0], &ov[i]):
                error, self.error = self.error, None
                raise error
        return out

    def mapped(self, const double[:, ::1] points):
        """(θ, β) of each row of ``points`` (a second stage's: ``mapping``'s ``to_x`` of
        each, the same numbers; the rows themselves without a mapping), as rows."""
        if self.joint or points.shape[1] != self.ntheta:
            raise ValueError("mapped: the points of a second stage's criterion")
        out = np.empty((points.shape[0], self.k + self.p))
        cdef double[:, ::1] ov = out
        cdef Py_ssize_t i, j
        for i in range(points.shape[0]):
            self._point(&points[i, 0])
            for j in range(self.k):
                ov[i, j] = self.theta[j]
            for j in range(self.p):
                ov[i, self.k + j] = self.beta[j]
        return out

    cdef void _point(self, const double *x) noexcept:
        """θ (and β where the stage fixes it) of the point ``x``."""
        cdef Py_ssize_t j
        cdef int kk = <int>self.k, pp = <int>self.p, inc = 1
        cdef double one = 1.0, zero = 0.0
        cdef char trans = b"T"
        if self.has_mapping:
            for j in range(self.k):
                self.tvec[j] = self.scale[j] * x[j]
                self.theta[j] = self.theta0[j] + self.tvec[j]
            if self.p:
                dgemv(&trans, &kk, &pp, &one, &self.B[0, 0], &kk, &self.tvec[0], &inc,
                      &zero, &self.bt[0], &inc)
                dgemv(&trans, &pp, &pp, &one, &self.R[0, 0], &pp, <double *> x + self.k,
                      &inc, &zero, &self.rg[0], &inc)
                for j in range(self.p):
                    self.beta[j] = (self.beta0[j] + self.bt[j]) + self.rg[j]
            return
        for j in range(self.k):
            self.theta[j] = x[j]
        if not self.joint:
            for j in range(self.p):
                self.beta[j] = x[self.k + j]

    def start_from(self, lp0):
        """Start every later PIRLS from η = offset + ``lp0`` (``GlmmProblem.set_lp0``)."""
        if len(lp0) != self.y.shape[0]:
            raise ValueError(f"the start has {len(lp0)} rows, the problem {self.y.shape[0]}")
        self.lp0 = lp0

    def state(self, const double[::1] x, double[::1] eta, double[::1] mu, double[::1] me,
              double[::1] u, double[::1] beta, double[::1] root, double[::1] sw):
        """PIRLS at the point ``x`` (θ; (θ, β) without ``joint``; no mapping) into a
        state's arrays: η, μ, μ', u (every term's, first factor first), β, the last
        solve's √d (the first factor's levels, ``root``) and √w (``GlmmProblem.pirls``'s
        compiled path). Returns (status, iterations, log|L|²), the status as
        :meth:`_pirls`'s."""
        cdef Py_ssize_t it = 0, j
        cdef double ld = 0.0
        cdef int status
        if self.has_mapping or x.shape[0] != self.ntheta:
            raise ValueError("state: a point of the stage's own coordinates")
        if (eta.shape[0] != self.y.shape[0] or u.shape[0] != self.q
                or root.shape[0] != self.l1 or beta.shape[0] != self.p):
            raise ValueError("state: arrays of the problem's sizes")
        self._point(&x[0])
        with nogil:
            status = self._pirls(eta, mu, me, u, root, sw, &it, &ld)
        for j in range(self.p):
            beta[j] = self.beta[j]
        return status, it, ld

    cdef int _pirls(self, double[::1] eta, double[::1] mu, double[::1] me, double[::1] u,
                    double[::1] d, double[::1] sw, Py_ssize_t *iterations,
                    double *logdet) noexcept nogil:
        """lme4's PIRLS (``pwrssUpdate``) at this object's θ (and β without ``joint``),
        from η = offset + ``lp0`` (the stage's start) with u = 0 (and β = 0 when
        ``joint``), into the given state arrays (β into this object's).

        Each iteration: the working weights w = wt μ'² / V(μ) (``sw`` = √w) and response
        z = η − fixed + (y − μ)/μ', and the weighted least squares by :func:`scalar_solve`
        (status 4 where its system is not positive definite). Then η = fixed (+ Xβ) +
        Z Λθ u (:func:`scalar_zlu`'s order), μ, μ' and the penalised deviance; lme4's
        convergence test, the η-settled polish when ``exact``, and step halving (at most
        20) with lme4's errors. ``fixed`` holds the offset (``joint``), or offset + Xβ;
        ``link``: :data:`LOGIT`, :data:`PROBIT` (clipped at ``thresh``), :data:`CLOGLOG`
        or :data:`LOG`; ``variance``: :data:`BINOMIAL` or :data:`POISSON`; ``dev_a``,
        ``dev_b``, ``dev_c``, ``dev_const``: ``ResidualDeviance``'s coefficients.

        Returns the status: 0 (converged), 1 (a non-finite penalised deviance after the
        halvings), 2 (the halvings did not reduce it), 3 (``maxit`` iterations) or 4 (the
        system not positive definite); the number of iterations and log|L|² = Σ log d +
        2 Σ log L_jj (the later factors' pivots) of the last solve go to ``iterations``
        and ``logdet``, and that solve's √d to ``d``."""
        cdef Py_ssize_t n = self.y.shape[0], l1 = self.l1, rr = self.rr, q = self.q
        cdef Py_ssize_t p = self.p if self.joint else 0, nb = self.p
        cdef Py_ssize_t i, j, kk, it = 0
        cdef int status = 3, halves, polish = 0
        cdef bint done, joint = self.joint
        cdef double wi, old = INFINITY, pdev, acc, moved, size, ld = 0.0, ldr = 0.0
        cdef double t1 = self.theta[self.t1]
        for j in range(rr):  # (each later column's θ: fixed while PIRLS runs; 1 for a
            # term of several columns, its Λ in zr)
            self.tr[j] = self.theta[self.rest_theta[j]] if self.rest_theta[j] >= 0 else 1.0
        if self.vtarget.shape[0]:
            _vector_columns(&self.theta[0], self.vtarget, self.vsource, self.vtheta,
                            self.zraw, self.zr)
        for i in range(n):  # the start, and the fixed part of η
            eta[i] = self.offset[i] + self.lp0[i]
            _link(self.link, eta[i], self.thresh, &mu[i], &me[i])
            acc = self.offset[i]
            if not joint:
                for kk in range(self.xptr[i], self.xptr[i + 1]):
                    acc += self.xval[kk] * self.beta[self.xind[kk]]
            self.fixed[i] = acc
        for j in range(q):
            u[j] = 0.0
        if joint:
            for j in range(nb):
                self.beta[j] = 0.0
        for it in range(1, self.maxit + 1):
            # the weighted least squares at the current state
            for i in range(n):
                if self.variance == 0:
                    wi = self.wt[i] * me[i] * me[i] / (mu[i] * (1.0 - mu[i]))
                else:
                    wi = self.wt[i] * me[i] * me[i] / mu[i]
                sw[i] = sqrt(wi)
                self.z[i] = eta[i] - self.fixed[i] + (self.y[i] - mu[i]) / me[i]
            if scalar_solve(sw, self.z, self.c1, self.z1, self.cr, self.zr, self.pinv,
                            self.pcol, self.pptr, self.xptr, self.xind, self.xval,
                            self.swX, t1, self.tr, p, self.dl, self.lptr, self.lrow,
                            self.d, self.r1, self.vals, self.vs, self.BXs, self.M,
                            self.rhs, self.u_new1):
                status = 4
                break
            for j in range(rr):
                self.u_new[l1 + j] = self.rhs[j]
            for j in range(nb):
                self.b_new[j] = self.rhs[rr + j] if joint else self.beta[j]
            pdev = self._evaluate()
            if isfinite(pdev) and fabs(old - pdev) < self.tol * fabs(pdev):
                done = not self.exact or polish >= self.max_polish
                if not done:  # η settled?
                    moved = 0.0
                    size = 0.0
                    for i in range(n):
                        moved = fmax(moved, fabs(self.eta_new[i] - eta[i]))
                        size = fmax(size, fabs(self.eta_new[i]))
                    done = n == 0 or moved <= self.eta_tol * (1.0 + size)
                self._accept(eta, mu, me, u)
                if done:
                    status = 0
                    break
                polish += 1
                old = pdev
                continue
            halves = 0
            while (not isfinite(pdev) or pdev > old) and halves < _HALVINGS:
                for j in range(q):
                    self.u_new[j] = 0.5 * (u[j] + self.u_new[j])
                if joint:
                    for j in range(nb):
                        self.b_new[j] = 0.5 * (self.beta[j] + self.b_new[j])
                pdev = self._evaluate()
                halves += 1
            if not isfinite(pdev):
                status = 1
                break
            if pdev - old > self.tol:
                status = 2
                break
            self._accept(eta, mu, me, u)
            old = pdev
        for j in range(l1):
            ld += log(self.d[j])
            d[j] = sqrt(self.d[j])
        if rr and status != 4:
            for j in range(rr):
                ldr += log(self.M[j, j])
            ld = ld + 2.0 * ldr
        iterations[0] = it
        logdet[0] = ld
        return status

    cdef double _evaluate(self) noexcept nogil:
        """η = fixed (+ Xβ) + Z Λθ u, μ, μ' and the penalised deviance at the step's (u,
        β) (``u_new``, ``b_new``), into the step's arrays."""
        cdef Py_ssize_t i, kk, n = self.y.shape[0]
        cdef bint xb_too = self.joint and self.p > 0
        cdef double xb
        cdef Py_ssize_t k = self.cr.shape[0]
        cdef double t1 = self.theta[self.t1]
        cdef const double *trp = &self.tr[0] if self.rr else NULL
        cdef const int64_t *crp = &self.cr[0, 0] if k else NULL
        cdef const double *zrp = &self.zr[0, 0] if k else NULL
        cdef const int64_t *c1p = &self.c1[0] if self.l1 else NULL
        cdef const double *z1p = &self.z1[0] if self.l1 else NULL
        cdef const double *bp = &self.dev_b[0] if self.dev_b.shape[0] else NULL
        cdef const double *cp = &self.dev_c[0] if self.dev_c.shape[0] else NULL
        for i in range(n):
            xb = self.fixed[i]
            if xb_too:
                for kk in range(self.xptr[i], self.xptr[i + 1]):
                    xb += self.xval[kk] * self.b_new[self.xind[kk]]
            self.eta_new[i] = xb + _zlu_row(i, n, k, &self.u_new[0], c1p, z1p, t1, crp,
                                            zrp, trp, self.l1)
            _link(self.link, self.eta_new[i], self.thresh, &self.mu_new[i], &self.me_new[i])
        return _penalised(n, &self.mu_new[0], &self.dev_a[0], bp, cp, self.dev_const,
                          &self.u_new[0], self.q)

    cdef void _accept(self, double[::1] eta, double[::1] mu, double[::1] me,
                      double[::1] u) noexcept nogil:
        """The step's state becomes the current one."""
        cdef Py_ssize_t i
        for i in range(eta.shape[0]):
            eta[i] = self.eta_new[i]
            mu[i] = self.mu_new[i]
            me[i] = self.me_new[i]
        for i in range(self.q):
            u[i] = self.u_new[i]
        for i in range(self.p):
            self.beta[i] = self.b_new[i]

    cdef bint compute(self, const double *x, double *value) noexcept:
        """The deviance at the point ``x``; False (the error kept) where the first
        stage's system is not positive definite."""
        cdef Py_ssize_t it = 0
        cdef double ld = 0.0
        cdef int status, nq = <int>self.q, inc = 1
        cdef const double *bp = &self.dev_b[0] if self.dev_b.shape[0] else NULL
        cdef const double *cp = &self.dev_c[0] if self.dev_c.shape[0] else NULL
        self._point(x)
        status = self._pirls(self.eta, self.mu, self.me, self.u, self.d, self.sw, &it, &ld)
        self.evaluations += 1
        if status == 4:
            self.error = np.linalg.LinAlgError("Singular matrix")
            return False
        if status != 0:
            value[0] = INFINITY
            return True
        value[0] = ((((_deviance_sum(self.y.shape[0], &self.mu[0], &self.dev_a[0], bp, cp)
                       + self.dev_const) + self.aic_const)
                     + ddot(&nq, &self.u[0], &inc, &self.u[0], &inc)) + ld)
        return True
