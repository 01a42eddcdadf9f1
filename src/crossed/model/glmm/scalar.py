"""The weighted penalised least-squares solve of PIRLS when every random-effects term is
scalar (``(1 | g)`` or one covariate per group): the common GLMM case.

With working weights W the system in (u₁, u_rest, β) is

    [D        B_R          B_X   ] [u₁]   [r₁]
    [B_Rᵀ     Λ_R Z_RᵀWZ_R Λ_R + I   Λ_R Z_RᵀWX] [u_R] = [r_R]
    [B_Xᵀ     XᵀWZ_R Λ_R   XᵀWX  ] [β ]   [r_X]

with D diagonal (the first factor's levels, θ₁² Σ w z² + 1), B_R = θ₁ Z₁ᵀWZ_R Λ_R sparse on a
pattern fixed by the design, B_X = θ₁ Z₁ᵀWX. Every product is a weighted sum over the
observations, recomputed at each PIRLS iteration by ``bincount`` on index arrays built once;
D is eliminated in closed form and the dense Schur complement of size (levels of the later
factors + p) is factored by one Cholesky. The same blocked elimination as the LMM's PLS
(:mod:`crossed.model.pls`), without re-deriving any structure per iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_solve, cholesky, solve_triangular

if TYPE_CHECKING:
    from crossed.design.random import ReBlock

__all__ = ["ScalarSolver", "ScalarSolve"]

#: X goes the sparse way when at most this share of its entries is nonzero
SPARSE_X_DENSITY = 0.3
#: ... and its pairs of nonzeros in a row (X'WX's terms) number at most this
SPARSE_X_PAIRS = 20_000_000


class _SparseX:
    """The nonzeros of X (row-major) and index arrays for X'WX, Z₁'WX and Z_R'WX as
    ``bincount`` sums over them."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, p: int,
                 pair_a: np.ndarray, pair_b: np.ndarray, pair_row: np.ndarray,
                 key1: np.ndarray, l1: int, keyr: np.ndarray, zr: np.ndarray, rr: int):
        self.rows, self.cols, self.vals, self.p = rows, cols, vals, p
        self.pair_key = cols[pair_a] * p + cols[pair_b]
        self.pair_val = vals[pair_a] * vals[pair_b]
        self.pair_row = pair_row
        self.key1, self.l1 = key1, l1
        self.keyr, self.zr, self.rr = keyr, zr, rr

    @classmethod
    def of(cls, X: np.ndarray, c1: np.ndarray, l1: int, cr: list[np.ndarray],
           zr: list[np.ndarray], rr: int) -> _SparseX | None:
        n, p = X.shape
        if not p or np.count_nonzero(X) > SPARSE_X_DENSITY * X.size:
            return None
        rows, cols = np.nonzero(X)  # row-major: each row's nonzeros together
        vals = X[rows, cols]
        k = np.bincount(rows, minlength=n).astype(np.int64)
        total = int(np.sum(k * k))
        if total > SPARSE_X_PAIRS:
            return None
        starts = np.concatenate([[0], np.cumsum(k)[:-1]])
        rep = np.repeat(np.arange(n), k * k)
        kk = k[rep]
        local = np.arange(total) - np.repeat(np.cumsum(k * k) - k * k, k * k)
        a = starts[rep] + local // np.maximum(kk, 1)
        b = starts[rep] + local % np.maximum(kk, 1)
        key1 = c1[rows].astype(np.int64) * p + cols
        keyr = (np.concatenate([c[rows].astype(np.int64) * p + cols for c in cr])
                if cr else np.zeros(0, dtype=np.int64))
        zrv = np.concatenate([z[rows] for z in zr]) if zr else np.zeros(0)
        return cls(rows, cols, vals, p, a, b, rep, key1, l1, keyr, zrv, rr)

    def xtwx(self, w: np.ndarray) -> np.ndarray:
        """X'WX."""
        p = self.p
        out: np.ndarray = np.bincount(self.pair_key, weights=w[self.pair_row] * self.pair_val,
                                      minlength=p * p).reshape(p, p)
        return out

    def z1twx(self, wv: np.ndarray, z1: np.ndarray) -> np.ndarray:
        """Z₁'WX (levels x p), ``wv`` the nonzeros of WX."""
        out: np.ndarray = np.bincount(self.key1, weights=wv * z1[self.rows],
                                      minlength=self.l1 * self.p).reshape(self.l1, self.p)
        return out

    def zrtwx(self, wv: np.ndarray) -> np.ndarray:
        """Z_R'WX (later levels x p)."""
        reps = len(self.zr) // max(len(wv), 1)
        out: np.ndarray = np.bincount(self.keyr, weights=np.tile(wv, reps) * self.zr,
                                      minlength=self.rr * self.p).reshape(self.rr, self.p)
        return out


class ScalarSolve:
    """One solve's pieces (for log-determinants, vcov and conditional variances)."""

    def __init__(self, d: np.ndarray, chol: np.ndarray | None,
                 Bs: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                 BX: np.ndarray | None, rr: int, p: int):
        self.d, self.chol, self.Bs, self.BX, self.rr, self.p = d, chol, Bs, BX, rr, p


class ScalarSolver:
    """Weighted PLS solves for scalar random-effects blocks (most levels first)."""

    def __init__(self, blocks: tuple[ReBlock, ...], X: np.ndarray):
        self.blocks = blocks
        self.X = np.ascontiguousarray(X, dtype=float)
        self.n, self.p = X.shape
        first = blocks[0]
        self.c1, self.l1 = first.codes, first.nlevels
        self.z1 = first.Z[:, 0]
        self.t1 = int(first.theta_index[0, 0])
        rest = blocks[1:]
        self.rest_offsets = np.cumsum([0] + [b.nlevels for b in rest]).tolist()
        self.rr = int(self.rest_offsets[-1])
        self.rest_theta = np.concatenate(
            [np.full(b.nlevels, int(b.theta_index[0, 0])) for b in rest]
        ).astype(np.int64) if rest else np.zeros(0, dtype=np.int64)
        self.cr = [b.codes + off for b, off in zip(rest, self.rest_offsets, strict=False)]
        self.zr = [b.Z[:, 0] for b in rest]
        # first x rest pattern: one entry per distinct (level₁, rest column) pair
        if rest:
            keys = np.concatenate([self.c1.astype(np.int64) * self.rr + c for c in self.cr])
            uniq, inv = np.unique(keys, return_inverse=True)
            self.pair_inv = inv
            self.pair_rows = (uniq // self.rr).astype(np.int64)
            self.pair_cols = (uniq % self.rr).astype(np.int64)
            self.z1zr = np.concatenate([self.z1 * z for z in self.zr])
            self.npairs = len(uniq)
            # rest x rest, lower triangle incl. diagonal: distinct entries
            rkeys, rz = [], []
            for a in range(len(rest)):
                for b in range(a + 1):
                    rkeys.append(self.cr[a].astype(np.int64) * self.rr + self.cr[b])
                    rz.append(self.zr[a] * self.zr[b])
            ruq, self.rr_inv = np.unique(np.concatenate(rkeys), return_inverse=True)
            self.rr_flat = ruq
            self.rr_z = np.concatenate(rz)
            self.nrest_pairs = len(rest) * (len(rest) + 1) // 2
            # pairs of first x rest entries on the same level: B'B by one bincount
            order = np.argsort(self.pair_rows, kind="stable")
            counts = np.bincount(self.pair_rows, minlength=self.l1)
            total = int(np.sum(counts.astype(np.int64) ** 2))
            self.btb = None
            if total <= 20_000_000:
                starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
                rep = np.repeat(np.arange(self.l1), counts * counts)
                k = counts[rep]
                local = np.arange(total) - np.repeat(np.cumsum(counts * counts) - counts * counts,
                                                    counts * counts)
                ea = order[starts[rep] + local // np.maximum(k, 1)]
                eb = order[starts[rep] + local % np.maximum(k, 1)]
                self.btb = (ea, eb, self.pair_cols[ea] * self.rr + self.pair_cols[eb])
        # X with mostly zeros (dummy-coded factors): its products with W, Z₁ and Z_R as
        # weighted sums over its nonzeros (O(nnz) instead of O(n p) per iteration)
        self.xs = _SparseX.of(self.X, self.c1, self.l1, self.cr, self.zr, self.rr)
        # Z₁' and Z_R' as sparse (levels x n) for the products with the columns of X
        ar = np.arange(self.n)
        self.Z1t = sp.csr_matrix((self.z1, (self.c1, ar)), shape=(self.l1, self.n))
        self.Zrt = (sp.csr_matrix((np.concatenate(self.zr), (np.concatenate(self.cr),
                                                             np.tile(ar, len(self.zr)))),
                                  shape=(self.rr, self.n)) if rest else None)

    def solve(self, theta: np.ndarray, w: np.ndarray, z: np.ndarray, joint: bool
              ) -> tuple[np.ndarray, np.ndarray, float, ScalarSolve]:
        """Minimise ‖√w (z − ZΛu − Xβ)‖² + ‖u‖² (β only when ``joint``): (u, β, log|L|²
        of the random part, the solve's pieces)."""
        t1 = float(theta[self.t1])
        l1, rr = self.l1, self.rr
        p = self.p if joint else 0
        wz1 = w * self.z1
        d = t1 * t1 * np.bincount(self.c1, weights=wz1 * self.z1, minlength=l1) + 1.0
        r1 = t1 * np.bincount(self.c1, weights=wz1 * z, minlength=l1)
        m = rr + p
        if m == 0:
            return r1 / d, np.zeros(0), float(np.sum(np.log(d))), ScalarSolve(
                d, None, None, None, 0, 0)
        M = np.zeros((m, m))
        rhs = np.zeros(m)
        Bs = None
        BX = None
        if rr:
            tr = theta[self.rest_theta]
            wn = np.tile(w, len(self.zr))
            vals: np.ndarray = np.bincount(self.pair_inv, weights=wn * self.z1zr,
                                           minlength=self.npairs).astype(float)
            vals *= t1 * tr[self.pair_cols]
            rows, cols = self.pair_rows, self.pair_cols
            flat = np.zeros(rr * rr)
            flat[self.rr_flat] = np.bincount(
                self.rr_inv, weights=np.tile(w, self.nrest_pairs) * self.rr_z,
                minlength=len(self.rr_flat))
            Arr = flat.reshape(rr, rr)
            Arr = np.tril(Arr) + np.tril(Arr, -1).T
            Arr *= tr[:, None] * tr[None, :]
            Arr[np.diag_indices(rr)] += 1.0
            M[:rr, :rr] = Arr
            rhs[:rr] = tr * np.concatenate([np.bincount(
                c - off, weights=w * zz * z, minlength=nb) for c, zz, off, nb in zip(
                self.cr, self.zr, self.rest_offsets[:-1], np.diff(self.rest_offsets),
                strict=True)])
            vs = vals / np.sqrt(d)[rows]
            if self.btb is not None:
                ea, eb, fl = self.btb
                M[:rr, :rr] -= np.bincount(fl, weights=vs[ea] * vs[eb],
                                           minlength=rr * rr).reshape(rr, rr)
            else:
                Bs0 = sp.csr_matrix((vs, (rows, cols)), shape=(l1, rr))
                M[:rr, :rr] -= (Bs0.T @ Bs0).toarray()
            rhs[:rr] -= np.bincount(cols, weights=vals * (r1 / d)[rows], minlength=rr)
            Bs = (vs, rows, cols)
        xs = self.xs if p else None
        if p:
            X = self.X
            if xs is not None:
                wv = w[xs.rows] * xs.vals
                M[rr:, rr:] = xs.xtwx(w)
                rhs[rr:] = np.bincount(xs.cols, weights=wv * z[xs.rows], minlength=p)
                BX = t1 * xs.z1twx(wv, self.z1)
            else:
                wX = X * w[:, None]
                M[rr:, rr:] = X.T @ wX
                rhs[rr:] = wX.T @ z
                BX = t1 * np.asarray(self.Z1t @ wX)
            BXs = BX / np.sqrt(d)[:, None]
            M[rr:, rr:] -= BXs.T @ BXs
            rhs[rr:] -= BX.T @ (r1 / d)
            if rr:
                tr = theta[self.rest_theta]
                if xs is not None:
                    ZrX = xs.zrtwx(wv)
                else:
                    assert self.Zrt is not None
                    ZrX = np.asarray(self.Zrt @ wX)
                BtBX = np.stack([np.bincount(cols, weights=vs * BXs[rows, j], minlength=rr)
                                 for j in range(p)], axis=1)
                cross = tr[:, None] * ZrX - BtBX
                M[:rr, rr:] = cross
                M[rr:, :rr] = cross.T
        L = cholesky(M, lower=True, check_finite=False)
        x = cho_solve((L, True), rhs, check_finite=False)
        xr, beta = x[:rr], x[rr:]
        u1 = r1.copy()
        if rr:
            u1 -= np.bincount(rows, weights=vals * xr[cols], minlength=l1)
        if p:
            assert BX is not None
            u1 -= BX @ beta
        u1 /= d
        ld = float(np.sum(np.log(d)) + 2.0 * np.sum(np.log(np.diag(L)[:rr])))
        return (np.concatenate([u1, xr]), beta, ld,
                ScalarSolve(d, L, Bs, None if BX is None else BX / np.sqrt(d)[:, None], rr, p))

    @staticmethod
    def unscaled_vcov(s: ScalarSolve) -> np.ndarray:
        """(R_X'R_X)⁻¹ from a joint solve."""
        assert s.chol is not None
        Lx = s.chol[s.rr:, s.rr:]
        Li = solve_triangular(Lx, np.eye(s.p), lower=True)
        return np.asarray(Li.T @ Li, dtype=float)

    @staticmethod
    def cond_var(s: ScalarSolve) -> np.ndarray:
        """Diagonal of (Λ'Z'WZΛ + I)⁻¹ (spherical u) from a u-only solve, first block then
        the later ones."""
        v1 = 1.0 / s.d
        if not s.rr:
            return v1
        assert s.chol is not None and s.Bs is not None
        Lr = s.chol[:s.rr, :s.rr]
        Li = solve_triangular(Lr, np.eye(s.rr), lower=True)
        Cinv = Li.T @ Li
        # first block: d⁻¹ + d⁻¹ b_s' C⁻¹ b_s, b_s the level's row of B (Bs = D^-1/2 B)
        vs, rows, cols = s.Bs
        Bs = sp.csr_matrix((vs, (rows, cols)), shape=(len(s.d), s.rr))
        K = np.asarray(Bs @ Li.T)
        v1 = v1 + np.sum(K * K, axis=1) / s.d
        return np.concatenate([v1, np.diag(Cinv)])
