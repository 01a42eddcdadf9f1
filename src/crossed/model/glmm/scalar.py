"""The weighted penalised least-squares solve of PIRLS for every GLMM of a few thousand
later columns: the first (most levels) random-effects term, where it is scalar (``(1 | g)``
or one covariate per group, the common GLMM case), is eliminated in closed form; a term of
q columns (a correlated random slope) enters as q columns per level, each with its row's
covariate of Z Λθ (column j of a level: Σ_{l ≥ j} z_l T_lj, T the term's lower-triangular
factor), formed once per θ; its Λ_R below is then the identity. Where the first term has
several columns every term is a later one (no D, B_R or B_X; C = Λ_R Z_RᵀWZ_R Λ_R + I).

With working weights W the system in (u₁, u_rest, β) is

    [D        B_R          B_X   ] [u₁]   [r₁]
    [B_Rᵀ     Λ_R Z_RᵀWZ_R Λ_R + I   Λ_R Z_RᵀWX] [u_R] = [r_R]
    [B_Xᵀ     XᵀWZ_R Λ_R   XᵀWX  ] [β ]   [r_X]

with D diagonal (the first factor's levels, θ₁² Σ w z² + 1), B_R = θ₁ Z₁ᵀWZ_R Λ_R sparse on a
pattern fixed by the design, B_X = θ₁ Z₁ᵀWX. Each PIRLS iteration's system is formed and
solved by one call of the compiled kernel (``_scalar.pyx``): one pass over the rows for
every weighted sum, D eliminated in closed form, and the Schur complement of size (levels of
the later factors + p) factored by Cholesky, its leading columns whose factor stays sparse
(nested factors) column by column. The same blocked
elimination as the LMM's PLS (:mod:`crossed.model.pls`), without re-deriving any structure
per iteration; the structure is built here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular

from crossed.model import _core
from crossed.model.glmm import _scalar

if TYPE_CHECKING:
    from crossed.design.random import ReBlock

__all__ = ["ScalarSolver", "ScalarSolve", "csr_rows"]

#: XᵀWX goes through BLAS (dsyrk on √W X) rather than X's pairs of nonzeros per row when
#: more than this share of X's entries is nonzero ...
DENSE_X_DENSITY = 0.3
#: ... and X has at least this many columns
DENSE_X_COLUMNS = 8
#: the later factors' columns are eliminated sparsely while their factor has at most this
#: many nonzeros below the diagonal (:func:`_sparse_lead`) ...
LEAD_NNZ = 16
#: ... unless the first factor's levels meet more pairs of later columns than this
LEAD_PAIRS = 4_000_000


def csr_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X for the compiled kernels: its nonzeros by rows (pointers, columns sorted within a
    row, values), and a zero (n, p) array for √W X where XᵀWX goes through BLAS's dsyrk
    (X wide and dense: ``DENSE_X_COLUMNS``, ``DENSE_X_DENSITY``), else an empty one."""
    Xc = sp.csr_matrix(np.asarray(X, dtype=float))
    Xc.sort_indices()
    n, p = X.shape
    dense = p >= DENSE_X_COLUMNS and Xc.nnz > DENSE_X_DENSITY * n * p
    return (Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64),
            np.ascontiguousarray(Xc.data, dtype=float), np.zeros((n, p) if dense else (0, 0)))


def _sparse_lead(pcol: np.ndarray, pptr: np.ndarray, rr: int
                 ) -> tuple[int, np.ndarray, np.ndarray]:
    """The later factors' leading columns of the Schur complement C to eliminate sparsely,
    and their factor's pattern: (their number, pointers per column, its rows below the
    diagonal among the later factors', sorted; X's rows are dense and always included).

    C's pattern (lower) is the pairs of later columns a first level meets (``pcol`` from
    ``pptr[s]`` to ``pptr[s + 1]``: its update B D⁻¹ Bᵀ; a row's own pairs, Z_RᵀWZ_R, are
    among them; without a first factor, each distinct row's columns); the factor's column
    j adds the fill of its children in the elimination tree. Columns are taken while each
    has at most ``LEAD_NNZ`` rows below its diagonal (a factor nested in the first, or in
    the previous one, has one: grouseticks' BROOD, then LOCATION); the first denser column
    and the rest are left to the dense factorisation. Where the first factor's levels
    meet more than ``LEAD_PAIRS`` pairs of later columns in all, the later columns are
    dense (crossed factors) and none is taken."""
    none = (0, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    sizes = np.diff(pptr)
    total = int(np.sum(sizes * sizes))
    if not rr or total > LEAD_PAIRS:
        return none
    # every pair of a level's later columns (the sparse Schur complement's pairs kernel,
    # one row per level), as the key col₁·rr + col₂, col₂ > col₁
    col1, col2, _, _ = _core.level_pairs(pptr, pcol, np.ones(len(pcol)), 1, len(sizes),
                                         True, total)
    lower = col2 > col1
    keys = np.unique(col1[lower] * rr + col2[lower])
    below_cols, below_rows = keys // rr, keys % rr  # (sorted by column, then row)
    col_ptr = np.searchsorted(below_cols, np.arange(rr + 1))
    ptr, rows = [0], []
    children: dict[int, list[int]] = {}
    pattern: list[list[int]] = []
    for j in range(rr):
        own = set(below_rows[col_ptr[j]:col_ptr[j + 1]].tolist())
        for c in children.pop(j, []):
            own.update(i for i in pattern[c] if i > j)
        if len(own) > LEAD_NNZ:
            break
        col = sorted(own)
        pattern.append(col)
        if col:
            children.setdefault(col[0], []).append(j)
        rows.extend(col)
        ptr.append(len(rows))
    return len(pattern), np.asarray(ptr, dtype=np.int64), np.asarray(rows, dtype=np.int64)


class ScalarSolve:
    """One solve's pieces (for log-determinants, vcov and conditional variances): the first
    factor's diagonal ``d``, the Cholesky factor of the Schur complement ``chol`` (lower,
    later factors then X; the solver's workspace, valid until its next solve), the first x
    later block over √d as (values, rows, columns), B_X / √d (levels x p, or None) and the
    sizes."""

    def __init__(self, d: np.ndarray, chol: np.ndarray | None,
                 Bs: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                 BX: np.ndarray | None, rr: int, p: int):
        self.d, self.chol, self.Bs, self.BX, self.rr, self.p = d, chol, Bs, BX, rr, p


class ScalarSolver:
    """Weighted PLS solves for a scalar first random-effects block (most levels; none where
    the first block has several columns), the later ones of any columns (their columns'
    covariates at θ: :meth:`scales`), each by one call of the compiled kernel
    (:func:`crossed.model.glmm._scalar.scalar_solve`); the structure it reads (the pairs of
    first-factor levels and later columns, X's nonzeros, the sparse lead's pattern) is
    built here once."""

    def __init__(self, blocks: tuple[ReBlock, ...], X: np.ndarray):
        self.blocks = blocks
        X = np.ascontiguousarray(X, dtype=float)
        self.n, self.p = X.shape
        first = blocks[0]
        if first.q == 1:  # the first factor, eliminated in closed form
            self.c1 = np.ascontiguousarray(first.codes, dtype=np.int64)
            self.l1 = first.nlevels
            self.z1 = np.ascontiguousarray(first.Z[:, 0], dtype=float)
            self.t1 = int(first.theta_index[0, 0])
            rest = blocks[1:]
        else:  # none: every term is a later one (the kernels read l1 = 0)
            self.c1, self.l1 = np.zeros(0, dtype=np.int64), 0
            self.z1, self.t1 = np.zeros(0), 0
            rest = blocks
        offsets = np.cumsum([0] + [b.nlevels * b.q for b in rest]).tolist()
        self.rr = int(offsets[-1])
        # the later terms by columns: a term of q columns is q columns a, level g's j-th
        # at g q + j, each with its own row of covariates (a scalar term's: one)
        n, k = self.n, sum(b.q for b in rest)
        self.cr = np.zeros((k, n), dtype=np.int64)
        self.zr = np.zeros((k, n))
        # θ per later column: a scalar term's, or -1 (the kernels' 1) for a term of
        # several columns, whose Λθ goes into its columns' covariates instead (zr = Z T
        # at each θ: column j of a level is Σ_{l ≥ j} z_l T_lj, the entries (target
        # column a, source column, θ index) in that order of sums)
        rest_theta, target, source, tindex = [], [], [], []
        a = 0
        for b, off in zip(rest, offsets, strict=False):
            for j in range(b.q):
                self.cr[a + j] = b.codes * b.q + j + off
                self.zr[a + j] = b.Z[:, j]
            if b.q == 1:
                rest_theta.append(np.full(b.nlevels, int(b.theta_index[0, 0])))
            else:
                rest_theta.append(np.full(b.nlevels * b.q, -1))
                for j in range(b.q):
                    for ll in range(j, b.q):
                        if b.theta_index[ll, j] >= 0:
                            target.append(a + j)
                            source.append(a + ll)
                            tindex.append(int(b.theta_index[ll, j]))
            a += b.q
        self.rest_theta = (np.concatenate(rest_theta).astype(np.int64) if rest
                           else np.zeros(0, dtype=np.int64))
        self.vtarget = np.asarray(target, dtype=np.int64)
        self.vsource = np.asarray(source, dtype=np.int64)
        self.vtheta = np.asarray(tindex, dtype=np.int64)
        # the (first level, later column) pairs: B_R's entries, grouped by first level
        if self.l1:
            keys = (self.c1[None, :] * self.rr + self.cr).ravel()
            uniq, inv = np.unique(keys, return_inverse=True)
            self.pinv = np.ascontiguousarray(inv.reshape(k, n), dtype=np.int64)
            self.prow = (uniq // max(self.rr, 1)).astype(np.int64)
            self.pcol = (uniq % max(self.rr, 1)).astype(np.int64)
            self.pptr = np.searchsorted(self.prow, np.arange(self.l1 + 1)).astype(np.int64)
            meets = self.pcol, self.pptr
        else:  # (none; C's pattern is the rows' own pairs, each distinct row's columns)
            self.pinv = np.zeros((k, 0), dtype=np.int64)
            self.prow = self.pcol = np.zeros(0, dtype=np.int64)
            self.pptr = np.zeros(1, dtype=np.int64)
            cols = np.unique(self.cr.T, axis=0) if n else np.zeros((0, k), dtype=np.int64)
            meets = cols.ravel(), np.arange(0, cols.size + 1, max(k, 1), dtype=np.int64)
        # the later factors' leading columns whose factor stays sparse are eliminated
        # column by column on their nonzero rows, the rest densely (LAPACK)
        self.lead, self.lptr, self.lrow = _sparse_lead(*meets, self.rr)
        self.xptr, self.xind, self.xval, self.swX = csr_rows(X)
        # the system's matrix, one per size (with and without β), reused by every solve: a
        # new array of this size each time costs more in page faults than the solve
        self._work: dict[int, np.ndarray] = {}

    def workspace(self, m: int) -> np.ndarray:
        """The system's matrix of order ``m`` (Fortran order), one per order, shared by
        every solve of this structure (this solver's and the compiled PIRLS loops',
        ``_scalar.ScalarDeviance``): the entries a solve does not write are the zeros of
        its first use, the same for every solve of that order."""
        M = self._work.get(m)
        if M is None:
            M = self._work[m] = np.zeros((m, m), order="F")
        return M

    def scales(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The later columns' θ (1 for a term of several columns) and covariates (their
        columns of Z Λθ for such a term) at ``theta``: the kernels' ``tr`` and ``zr``."""
        theta = np.ascontiguousarray(theta, dtype=float)
        tr = np.where(self.rest_theta >= 0, theta[np.maximum(self.rest_theta, 0)], 1.0)
        if not len(self.vtarget):
            return tr, self.zr
        zr = self.zr.copy()
        _scalar.vector_columns(theta, self.vtarget, self.vsource, self.vtheta, self.zr, zr)
        return tr, zr

    def zlu(self, theta: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Z Λθ u (u: the first factor's levels, then the later ones), by the compiled
        kernel in the terms' NumPy order of operations for scalar terms (the same
        values)."""
        out = np.empty(self.n)
        tr, zr = self.scales(theta)
        _scalar.scalar_zlu(np.ascontiguousarray(u, dtype=float), self.c1, self.z1,
                           float(theta[self.t1]), self.cr, zr, tr, out)
        return out

    def solve(self, theta: np.ndarray, sw: np.ndarray, z: np.ndarray, joint: bool
              ) -> tuple[np.ndarray, np.ndarray, float, ScalarSolve]:
        """Minimise ‖√w (z − ZΛu − Xβ)‖² + ‖u‖² (β only when ``joint``; ``sw``: √w): (u,
        β, log|L|² of the random part, the solve's pieces)."""
        l1, rr = self.l1, self.rr
        p = self.p if joint else 0
        m = rr + p
        d, r1, u1 = np.empty(l1), np.empty(l1), np.empty(l1)
        vals, vs = np.empty(len(self.pcol)), np.empty(len(self.pcol))
        BXs = np.empty(l1 * p)
        M = self.workspace(m)
        x = np.empty(m)
        tr, zr = self.scales(theta)
        info = _scalar.scalar_solve(
            np.ascontiguousarray(sw, dtype=float), np.ascontiguousarray(z, dtype=float),
            self.c1, self.z1, self.cr, zr, self.pinv, self.pcol, self.pptr,
            self.xptr, self.xind, self.xval, self.swX if p else self.swX[:0],
            float(theta[self.t1]), tr, p, self.lead, self.lptr, self.lrow, d, r1, vals, vs,
            BXs, M, x, u1)
        if info:
            raise np.linalg.LinAlgError(
                f"{info}-th leading minor of the weighted PLS system not positive definite")
        ld = float(np.sum(np.log(d)) + 2.0 * np.sum(np.log(np.diag(M)[:rr])))
        return (np.concatenate([u1, x[:rr]]), x[rr:], ld,
                ScalarSolve(d, M, (vs, self.prow, self.pcol),
                            BXs.reshape(l1, p) if p else None, rr, p))

    @staticmethod
    def unscaled_vcov(s: ScalarSolve) -> np.ndarray:
        """(R_X'R_X)⁻¹ from a joint solve."""
        assert s.chol is not None
        Lx = s.chol[s.rr:, s.rr:]
        Li = solve_triangular(Lx, np.eye(s.p), lower=True)
        return np.asarray(Li.T @ Li, dtype=float)

    def cond_var(self, s: ScalarSolve) -> list[np.ndarray]:
        """Diagonal blocks of (Λ'Z'WZΛ + I)⁻¹ (spherical u) per level from a u-only solve,
        one (ℓ, q, q) array per term, the first then the later ones."""
        v1 = 1.0 / s.d
        out = [v1[:, None, None]] if self.l1 else []
        if not s.rr:
            return out
        assert s.chol is not None and s.Bs is not None
        Lr = s.chol[:s.rr, :s.rr]
        Li = solve_triangular(Lr, np.eye(s.rr), lower=True)
        Cinv = Li.T @ Li
        if self.l1:  # first block: d⁻¹ + d⁻¹ b_s' C⁻¹ b_s, b_s the level's row of B
            # (Bs = D^-1/2 B)
            vs, rows, cols = s.Bs
            Bs = sp.csr_matrix((vs, (rows, cols)), shape=(len(s.d), s.rr))
            K = np.asarray(Bs @ Li.T)
            out[0] = (v1 + np.sum(K * K, axis=1) / s.d)[:, None, None]
        off = 0
        for b in self.blocks[1 if self.l1 else 0:]:
            at = off + np.arange(b.nlevels)[:, None] * b.q + np.arange(b.q)[None, :]
            out.append(Cinv[at[:, :, None], at[:, None, :]])
            off += b.nlevels * b.q
        return out
