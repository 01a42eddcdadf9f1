"""The Schur complement of the PLS system as a sparse matrix, factored by QDLDL.

:class:`crossed.model.pls.PLS` factors the first grouping factor level by level and the
rest, the Schur complement

    C = [C_RR  C_RD]      C_RR = S_R (A_RR − A_R1 G A_1R) S_Rᵀ + I   (later random blocks)
        [C_DR  C_DD]      C_RD = S_R (A_RD − A_R1 G A_1D),  C_DD = A_DD − A_D1 G A_1D

(D: the fixed-effect and response columns), as one dense matrix. Past ``MAX_DENSE`` random
effects in the later blocks that matrix no longer fits (30k annotators: 7.2 GB), and between
about 5k and 20k it costs r³/3 per evaluation. Here C_RR is kept sparse:

* its pattern (A_RR's, the first block's update A_R1 G A_1R's, the diagonal; for later
  blocks with several columns, closed under S_R) is fixed across θ and built once;
* the update's values come from a fixed sparse linear map of G's entries, ``W g`` (each row
  of W: one entry of the pattern, each column: one entry (a, b) of a level's G_s, or of a
  class of levels with equal A_s and so equal G_s, whose products W sums: crowd's 200k
  items with five ratings each are one class), so no r × r array is ever allocated;
* C_RR is factored by QDLDL (LDLᵀ, AMD fill-reducing ordering) once for its symbolic
  analysis, then numerically refactored at each θ (``Solver.update``, same pattern);
  log det C_RR = Σ log dᵢ; or, where its pattern splits into small connected components
  (annotators in pools), block by block (``schur_blocks.py``);
* C_RD's and C_DD's updates A_R1 G A_1D and A_D1 G A_1D are formed per level, or with
  one column per level in few classes from each class's sums A_1Rᵀ A_1D and A_1Dᵀ A_1D
  (formed once per response) times its g;
* the few dense columns D are eliminated by solves: K = C_RR⁻¹ C_RD, then the (p+1)² Schur
  complement C_DD − C_DRK is factored densely; its Cholesky factor holds R_X (lower) and
  the penalised residual sum of squares as its last squared pivot, as in the dense path.

The criterion, β and the random effects equal the dense path's to rounding (tested on the
reference cases with the sparse path forced, ``tests/model/test_sparse_schur.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from crossed.design.random import ReBlock
from crossed.model import _core
from crossed.model.factor import Factor, tri_solve
from crossed.model.schur_blocks import DiagonalBlocks
from crossed.model.sparse_map import level_classes, on_parts, row_parts

if TYPE_CHECKING:
    from crossed.model.crossprod import CrossProducts

__all__ = ["FILL_FRACTION", "MAX_SPARSE_NNZ", "SPARSE_FROM", "SparseFactor", "SparseSchur",
           "sparse_schur_for"]

SPARSE_FROM = 4000
"""From this many random effects in the later blocks, the sparse path is tried below
``MAX_DENSE`` too, and taken when its factor's fill is low (``FILL_FRACTION``)."""
FILL_FRACTION = 0.01
"""The sparse path is taken below ``MAX_DENSE`` when the factor of C_RR has at most this
fraction of a dense triangle's entries."""
MAX_SPARSE_NNZ = 100_000_000
"""Largest number of stored entries (the map W, the pattern of C_RR, its factor) accepted:
about 1.2 GB of values and indices each; the first factor's update is enumerated through at
most half as many pairs of nonzeros (about 3 GB of temporary index arrays)."""


class _NotSparse(Exception):
    """The automatic choice found C_RR too dense for the sparse path to pay."""


def _import_qdldl() -> Any:
    try:
        import qdldl
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the sparse Schur complement needs the 'qdldl' package (pip install qdldl)"
        ) from exc
    return qdldl


@dataclass
class SparseFactor(Factor):
    """A factorisation by the sparse path: ``L`` is None; the dense columns' part is kept."""

    K: np.ndarray | None = None
    """C_RR⁻¹ C_RD (r_rand x (p + 1))."""
    LD: np.ndarray | None = None
    """Lower Cholesky factor of C_DD − C_DR C_RR⁻¹ C_RD ((p + 1) x (p + 1)): R_X in its
    first p rows and columns, the response's row last."""
    values: np.ndarray | None = None
    """C_RR's values on the pattern (upper triangle, column-major order)."""


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """The sorted distinct values (an in-place sort; faster than ``np.unique``'s hashing on
    millions of int64 keys)."""
    keys.sort()
    keep = np.empty(len(keys), dtype=bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def _too_large(what: str, count: int, names: str) -> MemoryError:
    return MemoryError(
        f"the sparse Schur complement of the grouping factors {names} needs {count} stored "
        f"entries for {what}, more than the {MAX_SPARSE_NNZ} this path accepts (about "
        f"{count * 12 / 1e9:.1f} GB): the model is too large to fit in memory here")


_NO_TABLE = np.zeros(0)  # (map_update's arguments: no scale,
_NO_INDEX = np.zeros(0, dtype=np.int64)  # and no row index: U's own order)


class SparseSchur:
    """The sparse Schur complement of one PLS problem.

    Parameters
    ----------
    first : ReBlock
        The first (most levels) block, factored level by level by the PLS.
    rest : tuple of ReBlock
        The later random-effects blocks (at least one).
    products : CrossProducts
        The problem's cross-products (with later blocks: ``Z1tZr`` and ``ZrtZr`` set).
    max_entries : float, optional
        Give up (``_NotSparse``) as soon as the update's pairs or C_RR's pattern exceed
        this many entries (the automatic choice below the dense limit).
    """

    def __init__(self, first: ReBlock, rest: tuple[ReBlock, ...], products: CrossProducts,
                 max_entries: float | None = None):
        self.max_entries = max_entries
        self.first, self.rest = first, rest
        self.names = ", ".join(repr(b.group) for b in (first, *rest))
        self.q1, self.l1 = first.q, first.nlevels
        assert products.Z1tZr is not None and products.ZrtZr is not None  # later blocks
        self.rr = rr = int(products.ZrtZr.shape[0])
        self.p = products.p
        self.scalar = all(b.q == 1 for b in rest)
        A1R = products.Z1tZr
        if not A1R.has_canonical_format:
            A1R = A1R.copy()
            A1R.sum_duplicates()
        self.A1R = A1R
        ARR = sp.triu(products.ZrtZr.tocsr(), format="coo")
        # the pattern of U = A_RR − A_R1 G A_1R (upper triangle, keys j·rr + i, i ≤ j)
        prs = self._pairs(A1R)
        rows_u, cols_u, cols_g, w_vals = prs
        ukeys = _sorted_unique(np.concatenate([
            ARR.col.astype(np.int64) * rr + ARR.row, cols_u * rr + rows_u,
            np.arange(rr, dtype=np.int64) * (rr + 1)]))
        if max_entries is not None and len(ukeys) > max_entries:
            raise _NotSparse
        if len(ukeys) > MAX_SPARSE_NNZ:
            raise _too_large("the pattern of the Schur complement", len(ukeys), self.names)
        self.ukeys = ukeys
        self.arr = np.zeros(len(ukeys))
        # positions in the pattern, looked up column by column (keys j·rr + i)
        starts = np.searchsorted(ukeys, np.arange(rr + 1, dtype=np.int64) * rr)
        self.arr[_core.searchsorted_in_buckets(
            ukeys, starts, ARR.col.astype(np.int64), ARR.row.astype(np.int64), rr)] = ARR.data
        upos = _core.searchsorted_in_buckets(ukeys, starts, cols_u, rows_u, rr)
        del prs, rows_u, cols_u
        # W's columns: G's entries per class of levels with equal A_s (each class's
        # products summed in level order, as the dense path's sparse map), or per level
        self.rep, class_of = level_classes(products.levels[0])
        self.W = _class_map(upos, cols_g, w_vals, class_of, len(self.rep), self.q1,
                            len(ukeys))
        self._w_parts = row_parts(self.W)  # (W g on two threads when large)
        del cols_g, w_vals, upos
        # one column per level in few classes: C_RD's and C_DD's updates from each class's
        # sums A_1Rᵀ A_1D and A_1Dᵀ A_1D (set_response) times its g, as C_RR's from W
        ncls = len(self.rep)
        self._class_rows = ([np.flatnonzero(class_of == k) for k in range(ncls)]
                            if self.q1 == 1 and ncls < self.l1 and ncls * rr <= A1R.nnz
                            else None)
        if self.scalar:
            self.keys = ukeys
        else:  # C = S U Sᵀ: the pattern closed under the blocks' templates (all entries)
            ones = self._full(ukeys, np.ones(len(ukeys)), rr)
            S1 = self._scale(None)
            Cp = sp.triu((S1 @ ones @ S1.T).tocsr(), format="coo")
            self.keys = _sorted_unique(Cp.col.astype(np.int64) * rr + Cp.row)
        self.ii = (self.keys % rr).astype(np.int64)
        self.jj = (self.keys // rr).astype(np.int64)
        self.diag = np.flatnonzero(self.ii == self.jj)
        self.ii32 = self.ii.astype(np.int32)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(self.jj, minlength=rr))])
        # C_RR as independent dense blocks where its pattern splits into small ones
        self.blocks = DiagonalBlocks.of(self.ii32, self.jj, self.indptr)
        self.scale_index = np.concatenate(
            [np.full(b.nlevels, b.theta_index[0, 0]) for b in rest]).astype(np.int64) \
            if self.scalar else np.zeros(0, dtype=np.int64)
        self.solver: Any = None
        self.nnz_factor = 0
        self.max_entries = None  # (construction only)
        self.set_response(products)

    # ------------------------------------------------------------------ construction
    def _pairs(self, A1R: sp.csr_matrix, upper: bool = True
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every pair of nonzeros of A_1R in the rows of one level (col(e₁) ≤ col(e₂) when
        ``upper``): (row i = col(e₁), column j = col(e₂), G's flat entry (s, a₁, a₂), the
        product of the two values), by the compiled kernel (``_core.level_pairs``)."""
        q = self.q1
        per_level = np.diff(A1R.indptr[::q]).astype(np.int64)  # (a level's q rows together)
        npairs = int(np.sum(per_level ** 2))
        if self.max_entries is not None and npairs > min(MAX_SPARSE_NNZ // 2, 20_000_000):
            raise _NotSparse  # (the automatic choice: no GBs of pairs on a guess)
        if npairs > MAX_SPARSE_NNZ // 2:
            raise _too_large("the first factor's update", npairs // 2, self.names)
        return _core.level_pairs(A1R.indptr.astype(np.int64), A1R.indices.astype(np.int64),
                                 np.ascontiguousarray(A1R.data, dtype=float), q, self.l1,
                                 upper, npairs)

    @staticmethod
    def _full(keys: np.ndarray, vals: np.ndarray, rr: int) -> sp.csr_matrix:
        """The symmetric matrix whose upper triangle is (keys, vals)."""
        i, j = keys % rr, keys // rr
        off = i != j
        return sp.csr_matrix((np.concatenate([vals, vals[off]]),
                              (np.concatenate([i, j[off]]), np.concatenate([j, i[off]]))),
                             shape=(rr, rr))

    def _scale(self, theta: np.ndarray | None) -> sp.csr_matrix:
        """S_R = blockdiag(I ⊗ T_kᵀ); with theta None, its pattern (all ones per level)."""
        mats = [sp.kron(sp.identity(b.nlevels), np.ones((b.q, b.q)) if theta is None
                        else b.template(theta).T) for b in self.rest]
        return sp.block_diag(mats, format="csr")

    def set_response(self, products: CrossProducts) -> None:
        """The cross-products with the dense columns D = [X y_c] (``products``'), and with
        classes of levels their sums per class."""
        assert products.ZrtD is not None  # later blocks
        self.ARD = products.ZrtD
        self.A1D = products.Z1tD
        self.ADD = products.DtD
        if self._class_rows is not None:
            parts = [(self.A1R, self.A1D) if len(rows) == self.l1 else
                     (self.A1R[rows], self.A1D[rows]) for rows in self._class_rows]
            self._class_RD = [np.asarray(A.T @ D) for A, D in parts]
            self._class_DD = [D.T @ D for _, D in parts]

    def with_response(self, products: CrossProducts) -> SparseSchur:
        """A copy for the response of ``products``, cross-products of the same rows (pattern,
        W and symbolic analysis shared)."""
        import copy

        new = copy.copy(self)
        new.solver = None  # its own numeric factor
        new.set_response(products)
        return new

    # ------------------------------------------------------------------ evaluation
    def schur_values(self, theta: np.ndarray, G: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """C_RR's values on the pattern, C_RD and C_DD at θ (G: (ℓ₁, q₁, q₁))."""
        g = np.ascontiguousarray(G[self.rep] if len(self.rep) < self.l1 else G).reshape(-1)
        U = np.empty(len(self.arr))  # A_RR − W g (W g's rows summed in index order, as
        # SciPy's product: the same values)
        on_parts(self._w_parts, lambda lo, hi, W: _core.map_update(
            W, g, _NO_INDEX, lo, hi, self.arr, _NO_TABLE, _NO_INDEX, U))
        q, pd = self.q1, self.p + 1
        if self._class_rows is not None:  # (Σ_k g_k times the class's sums, in class order)
            gk = G[self.rep, 0, 0].tolist()
            CRD = self.ARD - sum(g * M for g, M in zip(gk, self._class_RD, strict=True))
            CDD = self.ADD - sum(g * M for g, M in zip(gk, self._class_DD, strict=True))
        else:
            GA = (G[:, 0, :1] * self.A1D if q == 1  # (one product per entry either way)
                  else (G @ self.A1D.reshape(self.l1, q, pd)).reshape(-1, pd))
            CRD = self.ARD - np.asarray(self.A1R.T @ GA)
            CDD = self.ADD - self.A1D.T @ GA
        if self.scalar and len(self.rest) == 1:  # (one scale t: (U t) t, as below)
            t = float(theta[self.rest[0].theta_index[0, 0]])
            vals = U
            vals *= t
            vals *= t
            CRD *= t
        elif self.scalar:
            s = np.asarray(theta, dtype=float)[self.scale_index]
            vals = U * s[self.ii] * s[self.jj]
            CRD *= s[:, None]
        else:
            S = self._scale(theta)
            C = sp.triu((S @ self._full(self.ukeys, U, self.rr) @ S.T).tocsr(), format="coo")
            vals = np.zeros(len(self.keys))
            vals[np.searchsorted(self.keys, C.col.astype(np.int64) * self.rr + C.row)] = C.data
            CRD = np.asarray(S @ CRD)
        vals[self.diag] += 1.0
        return vals, CRD, CDD

    def matrix(self, vals: np.ndarray) -> sp.csc_matrix:
        """C_RR's upper triangle (CSC) from its values on the pattern."""
        return sp.csc_matrix((vals, self.ii32, self.indptr), shape=(self.rr, self.rr))

    def factor(self, theta: np.ndarray, G: np.ndarray, ld1: float, first: np.ndarray
               ) -> SparseFactor:
        """The factorisation at θ, given the first block's G, log determinant and per-level
        matrices (kept as :attr:`Factor.first`)."""
        vals, CRD, CDD = self.schur_values(theta, G)
        bad = SparseFactor(theta=theta, ok=False)
        if not np.all(np.isfinite(vals)):
            return bad
        if self.blocks is not None:
            got = self.blocks.factor(vals, CRD)
            if got is None:
                return bad
            logdet, K = got
        else:
            upper = self.matrix(vals)
            try:
                if self.solver is None:
                    self.solver = _import_qdldl().Solver(upper, upper=True)
                else:
                    self.solver.update(upper, upper=True)
                L, d, _ = self.solver.factors()
            except (ValueError, RuntimeError):
                self.solver = None
                return bad
            self.nnz_factor = int(L.nnz)
            if not np.all(d > 0):
                return bad
            logdet = float(np.log(d).sum())
            K = np.column_stack([self.solver.solve(np.ascontiguousarray(CRD[:, k]))
                                 for k in range(CRD.shape[1])])
        SD = CDD - CRD.T @ K
        try:
            LD = np.linalg.cholesky(0.5 * (SD + SD.T))
        except np.linalg.LinAlgError:
            return bad
        dD = np.diagonal(LD)
        return SparseFactor(theta=theta, ok=True, ldL2=ld1 + logdet,
                            ldRX2=2.0 * float(np.log(dD[:-1]).sum()),
                            pwrss=float(dD[-1] ** 2), first=first, K=K, LD=LD,
                            values=vals)

    # ------------------------------------------------------------------ solutions
    @staticmethod
    def solution(f: SparseFactor) -> tuple[np.ndarray, np.ndarray]:
        """(u of the later blocks, β) from a factorisation: β = R_X⁻ᵀ c and
        u = C_RR⁻¹(C_Ry − C_RX β)."""
        assert f.K is not None and f.LD is not None  # an ok factorisation
        p = f.LD.shape[0] - 1
        beta = tri_solve(np.ascontiguousarray(f.LD[:p, :p]), f.LD[p, :p], trans=True)
        return f.K[:, p] - f.K[:, :p] @ beta, beta

    @staticmethod
    def rx(f: SparseFactor) -> np.ndarray:
        """R_X (lower, p x p)."""
        assert f.LD is not None  # an ok factorisation
        return np.ascontiguousarray(f.LD[:-1, :-1])

    def selected_inverse(self, f: SparseFactor) -> _SelectedInverse:
        """The entries of C_RR⁻¹ on the pattern of its factor (Takahashi's recurrences)."""
        assert f.values is not None  # an ok factorisation
        solver = _import_qdldl().Solver(self.matrix(f.values), upper=True)
        L, d, perm = solver.factors()
        return _SelectedInverse(sp.csc_matrix(L), np.asarray(d), np.asarray(perm))

    def conditional_inverse_blocks(self, f: SparseFactor, Binv: np.ndarray,
                                   theta: np.ndarray) -> list[np.ndarray]:
        """Diagonal blocks of (ΛᵀZᵀZΛ + I)⁻¹ per level: the first block's
        B_s⁻¹ + B_s⁻¹Ã_s C_RR⁻¹ Ã_sᵀB_s⁻¹ (Ã_s = T₁ᵀ A_1R[s] S_Rᵀ), then each later block's
        diagonal blocks of C_RR⁻¹, from the selected inverse of C_RR (no dense inverse)."""
        Z = self.selected_inverse(f)
        out: list[np.ndarray] = []
        pos = 0
        for b in self.rest:
            cols = pos + np.arange(b.nlevels * b.q).reshape(b.nlevels, b.q)
            i = np.broadcast_to(cols[:, :, None], (b.nlevels, b.q, b.q))
            j = np.broadcast_to(cols[:, None, :], (b.nlevels, b.q, b.q))
            out.append(Z.entries(i.ravel(), j.ravel()).reshape(b.nlevels, b.q, b.q))
            pos += b.nlevels * b.q
        q = self.q1
        T1 = self.first.template(theta)
        S = self._scale(theta)
        M = (Binv @ T1.T).reshape(-1)  # B_s⁻¹T₁ᵀ per level, as one block-diagonal matrix
        cols = (np.arange(self.l1)[:, None, None] * q + np.arange(q)[None, None, :])
        BT = sp.csr_matrix((M, np.broadcast_to(cols, (self.l1, q, q)).reshape(-1),
                            np.arange(0, self.l1 * q * q + 1, q)), shape=(self.l1 * q,) * 2)
        K = (BT @ (self.A1R @ S.T)).tocsr()  # B⁻¹Ã, (ℓ₁q₁ x rr)
        K.sum_duplicates()
        rows_i, cols_j, g, vals = self._pairs(K, upper=False)
        V1 = Binv.copy().reshape(-1)
        V1 += np.bincount(g, weights=vals * Z.entries(rows_i, cols_j), minlength=len(V1))
        return [V1.reshape(self.l1, q, q)] + out

    def fill_is_low(self) -> bool:
        """Factor once on the pattern (symbolic analysis, AMD ordering; with diagonal blocks
        their lower triangles) and say whether the factor holds at most ``FILL_FRACTION`` of
        a dense triangle's entries."""
        if self.blocks is not None:  # (the blocks' lower triangles)
            self.nnz_factor = self.blocks.factor_entries
        else:
            vals = np.zeros(len(self.keys))
            vals[self.diag] = 1.0
            self.solver = _import_qdldl().Solver(self.matrix(vals), upper=True)
            self.nnz_factor = int(self.solver.factors()[0].nnz) + self.rr
        return self.nnz_factor <= FILL_FRACTION * self.rr * (self.rr + 1) / 2


def _class_map(upos: np.ndarray, cols_g: np.ndarray, w_vals: np.ndarray,
               class_of: np.ndarray, ncls: int, q: int, npos: int) -> sp.csr_matrix:
    """W as a CSR matrix (one row per position of the pattern) from the update's pairs
    (position ``upos``, G's flat entry ``cols_g`` = s·q² + a·q + b, product ``w_vals``, in
    level order): one column per entry (a, b) of each class of levels (``class_of``), the
    products of a class's levels at a position summed in level order; with every level
    its own class, the pairs as they are (SciPy's COO to CSR)."""
    qq = q * q
    if ncls == len(class_of):
        return sp.csr_matrix((w_vals, (upos, cols_g)), shape=(npos, len(class_of) * qq))
    width = ncls * qq
    if npos * width <= len(cols_g):  # (the keys' range: no larger than the pairs; the
        # keys upos·width + class·q² + entry summed in one compiled pass, bincount's sums)
        present, values = _core.class_sums(upos, cols_g, w_vals, class_of, qq, width,
                                           npos * width)
    else:
        level, entry = np.divmod(cols_g, qq)
        key = upos * width + class_of[level] * qq + entry
        del level, entry
        present, inverse = np.unique(key, return_inverse=True)
        values = np.bincount(inverse.reshape(-1), weights=w_vals, minlength=len(present))
    rows, cols = np.divmod(present, width)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=npos))])
    return sp.csr_matrix((values, cols, indptr), shape=(npos, width))


def sparse_schur_for(schur: str | None, first: ReBlock, rest: tuple[ReBlock, ...],
                     products: CrossProducts, max_dense: int) -> SparseSchur | None:
    """The sparse Schur complement a PLS problem uses, or None for the dense one.

    Parameters
    ----------
    schur : {None, "dense", "sparse"}
        Forced choice, or None: sparse past ``max_dense`` random effects in the later
        blocks, and from ``SPARSE_FROM`` on when :meth:`SparseSchur.fill_is_low`.
    first, rest : ReBlock
        The first block and the later ones.
    products : CrossProducts
        The problem's cross-products (no later block: always dense).
    max_dense : int
        The dense path's limit (``pls.MAX_DENSE``).

    Raises
    ------
    ValueError
        ``schur="dense"`` past ``max_dense``.
    MemoryError
        When even the sparse structures would not fit (names the factors and sizes).
    """
    Zr = products.ZrtZr
    rr = 0 if Zr is None else int(Zr.shape[0])
    if schur == "dense" or Zr is None or rr == 0:
        if rr > max_dense:
            raise ValueError(
                f"the grouping factors after {first.group!r} have {rr} random effects "
                f"together; the dense part of the blocked Cholesky is limited to {max_dense} "
                "(schur=None or 'sparse' factors it as a sparse matrix)")
        return None
    if schur is None and SPARSE_FROM > rr <= max_dense:
        return None
    if schur is None and rr <= max_dense:  # sparse only if it pays: stop early if not
        try:
            s = SparseSchur(first, rest, products,
                            max_entries=FILL_FRACTION * rr * (rr + 1) / 2)
        except (_NotSparse, MemoryError):
            return None
    else:
        s = SparseSchur(first, rest, products)
    low = s.fill_is_low()
    if schur is None and rr <= max_dense and not low:
        return None
    if s.nnz_factor > MAX_SPARSE_NNZ:
        raise _too_large("its Cholesky factor", s.nnz_factor, s.names)
    return s


class _SelectedInverse:
    """Entries of A⁻¹ on the pattern of the factor of A = P(I + L)D(I + L)ᵀPᵀ (QDLDL's).

    With M = (I + L)D(I + L)ᵀ and Y = M⁻¹, for each column j from the last, over the rows S
    of L's column j: Y[S, j] = −Y[S, S] L[S, j] and Y[j, j] = 1/d_j − L[S, j]ᵀ Y[S, j]
    (Takahashi, Fagan and Chen 1973); Y[S, S] lies on the pattern (S is a clique of the
    filled graph) and was computed before. A⁻¹[p_k, p_l] = Y[k, l].
    """

    CHUNK = 2_000_000
    """Pairs whose positions are searched at once (memory: about 40 bytes each)."""

    def __init__(self, L: sp.csc_matrix, d: np.ndarray, perm: np.ndarray):
        L.sort_indices()
        n = L.shape[0]
        self.n = n
        indptr, rows = L.indptr, L.indices.astype(np.int64)
        col = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        self.keys = col * n + rows  # sorted: column-major, rows sorted in each column
        self.inv_perm = np.empty(n, dtype=np.int64)
        self.inv_perm[perm] = np.arange(n)
        nnz = len(rows)
        Y = np.zeros(nnz + n)  # the factor's pattern, then the diagonal
        Y[nnz:] = 1.0 / d
        lvals = L.data
        counts = np.diff(indptr)
        pairs = counts.astype(np.int64) ** 2
        # columns in chunks of at most ~2M pairs, from the last: the positions in Y of
        # Y[S, S] for each column's S are found by one vectorised search per chunk
        step = self.CHUNK
        ends = np.searchsorted(np.cumsum(pairs), np.arange(0, pairs.sum() + 1, step)[1:],
                               side="right").tolist() + [n]
        bounds = sorted(set([0] + [min(e, n) for e in ends]))
        for c0, c1 in reversed(list(zip(bounds[:-1], bounds[1:], strict=True))):
            pos, offs = self._positions(indptr, rows, c0, c1)
            for j in range(c1 - 1, c0 - 1, -1):
                lo, hi = indptr[j], indptr[j + 1]
                if lo == hi:
                    continue
                m = hi - lo
                o = offs[j - c0]
                z = -(Y[pos[o:o + m * m]].reshape(m, m) @ lvals[lo:hi])
                Y[lo:hi] = z
                Y[nnz + j] -= float(lvals[lo:hi] @ z)
        Yd = Y[nnz:]
        Y = Y[:nnz]
        self.Y, self.Yd = Y, Yd

    def _positions(self, indptr: np.ndarray, rows: np.ndarray, c0: int, c1: int
                   ) -> tuple[np.ndarray, np.ndarray]:
        """For columns c0..c1-1: the positions in Y (pattern, then diagonal at nnz + i) of
        every (a, b) in S × S, row-major per column, and each column's offset."""
        n, nnz = self.n, len(rows)
        lo, hi = indptr[c0], indptr[c1]
        counts = np.diff(indptr[c0:c1 + 1]).astype(np.int64)
        offs = np.concatenate([[0], np.cumsum(counts ** 2)])
        col = np.repeat(np.arange(c1 - c0), counts)  # each entry's column (chunk-relative)
        reps = counts[col]
        e1 = np.repeat(np.arange(lo, hi), reps)
        start = indptr[c0:c1] - lo
        k = np.arange(len(e1)) - np.repeat(np.cumsum(reps) - reps, reps)
        e2 = lo + start[col[e1 - lo]] + k
        a, b = rows[e1], rows[e2]
        small, large = np.minimum(a, b), np.maximum(a, b)
        pos = np.searchsorted(self.keys, small * n + large)
        same = a == b
        pos[same] = nnz + a[same]
        return pos, offs[:-1]

    def entries(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """A⁻¹[i, j] for pairs on the pattern (original order)."""
        k, l = self.inv_perm[i], self.inv_perm[j]
        out = np.empty(len(k))
        same = k == l
        out[same] = self.Yd[k[same]]
        lo, hi = np.minimum(k, l)[~same], np.maximum(k, l)[~same]
        key = lo * self.n + hi
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        if not np.all(self.keys[at] == key):  # pragma: no cover - pattern argument
            raise AssertionError("an entry of the inverse off the factor's pattern")
        out[~same] = self.Y[at]
        return out
