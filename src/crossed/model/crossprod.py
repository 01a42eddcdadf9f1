"""The cross-products of ``[Z X y]`` that the PLS criterion is a function of.

Every quantity here is a sum over the rows of the data: the cross-products of a design are
the sums of those of any partition of its rows into chunks (:meth:`CrossProducts.__add__`,
:meth:`CrossProducts.from_chunks`), so they can be computed chunk by chunk. Given them,
:class:`~crossed.model.pls.PLS` factors the system at any θ without the rows.

The response enters centred on X: y_c = y − X b for a fixed b (:attr:`CrossProducts.centre`),
which removes the cancellation of a response far from zero from the factor's last pivot
(:func:`centre_of`). Any b gives the same problem (β is shifted back by b); cross-products
are added only when they share b.

The products are SciPy's sparse products of Z₁ᵀ and Z_r with the rows, or, for a small
design (:data:`MAX_DENSE_ROW_PRODUCTS`), the same sums formed densely in one compiled pass
over the rows' entries (``_core.row_products``), without forming Z₁ᵀ and Z_r at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from crossed.design.random import ReBlock
from crossed.model import _core
from crossed.model.pwrss import level_products

if TYPE_CHECKING:
    from crossed.design import Design

__all__ = ["CrossProducts", "RowMatrices", "centre_of", "sparse_z", "stored", "stored_beside"]


def sparse_z(block: ReBlock, values: np.ndarray | None = None) -> sp.csr_matrix:
    """Z of one block: row i holds the q values of observation i in its level's columns
    (``values``: other values in Z's place, e.g. √w-scaled)."""
    return _side_by_side((block,), (block.Z if values is None else values,))


def _entry_columns(blocks: Sequence[ReBlock]) -> tuple[np.ndarray, int]:
    """Each row's columns of the blocks' Z side by side: (n, Σq) in C order, each row's
    level's q columns of each block in column order, and the number of columns Σℓq."""
    offsets = np.array([0] + [b.nlevels * b.q for b in blocks]).cumsum()
    cols = np.concatenate([off + b.codes[:, None] * b.q + np.arange(b.q)[None, :]
                           for off, b in zip(offsets[:-1], blocks, strict=True)], axis=1)
    return cols.astype(np.int64, copy=False), int(offsets[-1])


def _side_by_side(blocks: Sequence[ReBlock], values: Sequence[np.ndarray]) -> sp.csr_matrix:
    """The blocks' Z side by side (n x Σ ℓq) with ``values`` in their place (the rows'
    entries, :func:`_entry_columns`, as one CSR construction: the matrix ``sp.hstack`` of
    each block's :func:`sparse_z` gives, without its conversions)."""
    cols, width = _entry_columns(blocks)
    data = np.concatenate(values, axis=1)
    n, k = cols.shape
    return sp.csr_matrix((data.reshape(-1), cols.reshape(-1), np.arange(0, n * k + 1, k)),
                         shape=(n, width))


S = TypeVar("S")

_EMPTY: dict[tuple[type, tuple[int, int]], sp.csr_matrix | sp.csc_matrix] = {}
"""An empty matrix per format and shape (:func:`stored`'s copies), at most ``_EMPTY_MAX``."""
_EMPTY_MAX = 256
_INT32_MAX = int(np.iinfo(np.int32).max)


def shallow_copy(M: S) -> S:
    """A new matrix object sharing ``M``'s arrays and attributes: ``copy.copy``'s result
    without the pickling protocol's route (2.2 → 0.5 µs; every refit copies A_1r)."""
    new = M.__class__.__new__(M.__class__)
    new.__dict__.update(M.__dict__)
    return new



def _empty(fmt: type[sp.csr_matrix] | type[sp.csc_matrix], shape: tuple[int, int]
           ) -> sp.csr_matrix | sp.csc_matrix:
    """An empty matrix of ``fmt`` and ``shape``, kept (at most ``_EMPTY_MAX``): its shallow
    copies take canonical arrays without the constructor's checks."""
    key = (fmt, shape)
    empty = _EMPTY.get(key)
    if empty is None:
        if len(_EMPTY) >= _EMPTY_MAX:
            _EMPTY.clear()
        empty = _EMPTY[key] = fmt(shape)
    return empty


def stored(A: np.ndarray, fmt: type[sp.csr_matrix] | type[sp.csc_matrix] = sp.csr_matrix
           ) -> sp.csr_matrix | sp.csc_matrix:
    """The nonzeros of dense ``A`` as a CSR matrix, row by row (``sp.csr_matrix(A)``'s
    arrays, without its COO route); ``fmt=sp.csc_matrix`` for a symmetric ``A``: the same
    arrays read as columns, the CSC matrix of A.

    The arrays are canonical (sorted indices, no duplicates) and of SciPy's index dtype
    (int32 where the sizes fit), so they are set on a shallow copy of an empty matrix of
    A's shape, without the constructor's checks (35 → 15 µs on a small design's A_1r)."""
    nonzero = A != 0
    counts = nonzero.sum(axis=1)
    if max(A.shape[0], A.shape[1], int(counts.sum())) >= _INT32_MAX:
        indptr = np.concatenate(([0], np.cumsum(counts)))
        return fmt((A[nonzero], np.nonzero(nonzero)[1], indptr), shape=A.shape)
    indptr = np.zeros(A.shape[0] + 1, dtype=np.int32)
    counts.cumsum(out=indptr[1:])
    new = shallow_copy(_empty(fmt, A.shape))
    new.data, new.indptr = A[nonzero], indptr
    new.indices = nonzero.nonzero()[1].astype(np.int32)
    new.has_canonical_format = True
    return new


def stored_like(A: np.ndarray, like: sp.csr_matrix | sp.csc_matrix | None,
                fmt: type[sp.csr_matrix] | type[sp.csc_matrix] = sp.csr_matrix
                ) -> sp.csr_matrix | sp.csc_matrix:
    """:func:`stored` of dense ``A`` (``fmt`` as there), sharing the index arrays of
    ``like`` (a matrix in :func:`stored`'s form, of the same ``fmt``) where A's nonzeros
    are exactly like's: PIRLS's weighted products at every iteration, whose pattern is the
    unweighted one's (the same arrays, without SciPy's constructor and its checks)."""
    if like is None or like.shape != A.shape or type(like) is not fmt:
        return stored(A, fmt)
    rows = like.__dict__.get("_entry_rows")  # (each entry's row, kept with the pattern:
    if rows is None:  # the shallow copies below carry it)
        rows = like._entry_rows = np.repeat(np.arange(A.shape[0]), np.diff(like.indptr))
    data = A[rows, like.indices]
    if np.count_nonzero(A) != like.nnz or np.count_nonzero(data) != like.nnz:
        return stored(A, fmt)  # (a weight of zero, or a product that cancels)
    new = shallow_copy(like)  # (like's pattern, canonical, shared)
    new.data = data
    return new



def stored_beside(S: sp.csr_matrix, D: np.ndarray, like: sp.csr_matrix | None
                  ) -> sp.csr_matrix:
    """:func:`stored_like` of ``np.hstack([S.toarray(), D])`` (``S`` sparse without
    duplicates, ``D`` dense, the same rows) without forming that dense matrix: each row's
    nonzeros of S, then of D, as CSR arrays (ham's A_1r = [Z₁ᵀZ_r Z₁ᵀD]: 324 x 260 with
    6,500 nonzeros, 1.5 ms dense, 0.1 ms so); ``like``'s index arrays shared where the
    pattern is its."""
    m, k = S.shape
    if D.shape[0] != m:
        raise ValueError("stored_beside needs D with the rows of S")
    if not S.has_sorted_indices:
        S = S.sorted_indices()
    keep = S.data != 0  # (explicit zeros are not stored, as in the dense matrix's nonzeros)
    s_rows = np.repeat(np.arange(m), np.diff(S.indptr))[keep]
    d_rows, d_cols = np.nonzero(D)
    rows = np.concatenate((s_rows, d_rows))
    order = np.argsort(rows, kind="stable")  # (row by row: S's entries, then D's)
    indices = np.concatenate((S.indices[keep], d_cols + k))[order]
    data = np.concatenate((S.data[keep], D[d_rows, d_cols]))[order]
    shape, counts = (m, k + D.shape[1]), np.bincount(rows, minlength=m)
    if max(*shape, len(data)) >= _INT32_MAX:
        return sp.csr_matrix((data, indices, np.concatenate(([0], np.cumsum(counts)))),
                             shape=shape)
    indptr = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(counts, out=indptr[1:])
    indices = indices.astype(np.int32)
    if like is not None and type(like) is sp.csr_matrix and like.shape == shape and (
            np.array_equal(like.indptr, indptr) and np.array_equal(like.indices, indices)):
        new = shallow_copy(like)  # (like's pattern, canonical, shared)
    else:
        new = shallow_copy(_empty(sp.csr_matrix, shape))
        new.indptr, new.indices = indptr, indices
        new.has_canonical_format = True
    new.data = data
    return new


def centre_of(xtx: np.ndarray, xty: np.ndarray, X: np.ndarray | None = None,
              y: np.ndarray | None = None) -> np.ndarray:
    """The b that centres the response, y_c = y − X b: the least-squares coefficients of y
    on X from XᵀX and Xᵀy (with the rows ``X`` and ``y``, by least squares where XᵀX is
    singular; without them, the pseudo-inverse's); zeros when not finite.

    The factor's last pivot is the penalised residual sum of squares, the end of a Cholesky
    of cross-products: with y = 1e5 + 0.01·e, yᵀy is 2e12 where the pwrss is 0.02, and the
    rounding of yᵀy alone (4e-4) moved lme4's REML criterion by 22 and θ from 0.46 to 0.73
    (fuzzed against lme4). The system for y − Xb has the same u, the same pwrss and β − b,
    without the cancellation. Any b would do (an ill-conditioned X gives an inexact b, the
    problem stays equivalent)."""
    p = len(xty)
    # (LAPACK's dgesv, the call numpy.linalg.solve makes, without its checks: every refit)
    _, _, b, info = lapack.dgesv(xtx, xty)
    if info != 0:  # (singular)
        if X is not None and y is not None:
            b = np.linalg.lstsq(X, y, rcond=None)[0]
        else:
            b = np.linalg.lstsq(xtx, xty, rcond=None)[0]
    if not np.isfinite(b).all():
        return np.zeros(p)
    return np.asarray(b, dtype=float)


_NO_Z = np.zeros((0, 0))  # (row_products' Z products, when not formed)

MAX_DENSE_ROW_PRODUCTS = 100_000
"""Designs whose products Z₁ᵀ[Z_r D] and Z_rᵀ[Z_r D] have at most this many entries together
(dense, D = [X y]) form them in one pass over the rows (:meth:`RowMatrices.dense_products`)
instead of SciPy's sparse products: blurb's 3k rows and 69 levels 0.16 → 0.07 ms (and
Z₁ᵀ and Z_r themselves are not formed)."""


@dataclass(frozen=True, eq=False)
class RowMatrices:
    """The rows of ``[Z X]``, and the layouts the cross-products are computed from.

    Attributes
    ----------
    blocks : tuple of ReBlock
        The random-effects blocks, the first (most levels) first.
    values : tuple of numpy.ndarray
        Each block's Z values (n x q), scaled by √w when weighted.
    X : numpy.ndarray
        The fixed-effects matrix (n x p), scaled by √w when weighted.
    """

    blocks: tuple[ReBlock, ...]
    values: tuple[np.ndarray, ...]
    X: np.ndarray

    @classmethod
    def of(cls, blocks: Sequence[ReBlock], X: np.ndarray, sqrt_w: np.ndarray | None = None,
           like: RowMatrices | None = None) -> RowMatrices:
        """The rows of ``blocks`` and ``X``, scaled by ``sqrt_w`` when given; ``like``: rows
        of the same blocks (other weights: PIRLS's last iteration), whose entries' columns
        (:attr:`kernel_columns`, which the weights do not change) are shared."""
        values = tuple(b.Z if sqrt_w is None else b.Z * sqrt_w[:, None] for b in blocks)
        if sqrt_w is not None:
            X = X * sqrt_w[:, None]
        rows = cls(tuple(blocks), values, X)
        if like is not None and "kernel_columns" in like.__dict__ and len(like.blocks) == len(
                rows.blocks) and all(a is b for a, b in zip(like.blocks, rows.blocks,
                                                            strict=True)):
            # (stored where the cached property stores it)
            rows.__dict__["kernel_columns"] = like.__dict__["kernel_columns"]
        return rows

    @cached_property
    def Z1t(self) -> sp.csr_matrix:
        """Z₁ᵀ, the first block's Z transposed (ℓ₁q₁ x n), formed when first read."""
        return sparse_z(self.blocks[0], self.values[0]).T.tocsr()

    @cached_property
    def Zr(self) -> sp.csr_matrix | None:
        """The later blocks' Z side by side (n x r_rand), formed when first read; None with
        one block."""
        if len(self.blocks) == 1:
            return None
        return _side_by_side(self.blocks[1:], self.values[1:])

    @property
    def widths(self) -> tuple[int, int]:
        """(ℓ₁q₁, r_rand): the numbers of columns of Z₁ and of Z_r."""
        rest = sum(b.nlevels * b.q for b in self.blocks[1:])
        return self.blocks[0].nlevels * self.blocks[0].q, rest

    def dense_size(self, m: int) -> int:
        """The number of entries of Z₁ᵀ[Z_r D] and Z_rᵀ[Z_r D] for a D of ``m`` columns."""
        first, rest = self.widths
        return (first + rest) * (rest + m)

    def dense_products(self, D: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(Z₁ᵀZ_r, Z_rᵀZ_r, Z₁ᵀD, Z_rᵀD) as dense arrays, in one pass over the rows
        (``_core.row_products``): the values of ``Z1t @ Zr``, ``Zr.T @ Zr``, ``Z1t @ D``
        and ``Zr.T @ D`` bitwise, with zeros where those store nothing."""
        cols, vals = self.kernel_entries
        c1, rest = self.widths
        m = D.shape[1]
        z1r, zrr = np.zeros((c1, rest)), np.zeros((rest, rest))
        z1d, zrd = np.zeros((c1, m)), np.zeros((rest, m))
        _core.row_products(cols, vals, self.blocks[0].q, c1, np.ascontiguousarray(D), z1r,
                           zrr, z1d, zrd)
        return z1r, zrr, z1d, zrd

    def column_products(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Z₁ᵀv, Z_rᵀv) for one column ``v``: :meth:`dense_products`' Z₁ᵀD and Z_rᵀD for
        D = v alone (``_core.row_products`` without the products of Z), the values of
        ``Z1t @ v`` and ``Zr.T @ v`` bitwise, without forming Z₁ᵀ and Z_r."""
        cols, vals = self.kernel_entries
        c1, rest = self.widths
        z1v, zrv = np.zeros((c1, 1)), np.zeros((rest, 1))
        _core.row_products(cols, vals, self.blocks[0].q, c1,
                           np.ascontiguousarray(v, dtype=float).reshape(-1, 1), _NO_Z, _NO_Z,
                           z1v, zrv, with_z=False)
        return z1v[:, 0], zrv[:, 0]

    @cached_property
    def kernel_columns(self) -> np.ndarray:
        """Each row's columns of Z (:func:`_entry_columns`), C-contiguous, formed when
        first read."""
        return np.ascontiguousarray(_entry_columns(self.blocks)[0])

    @cached_property
    def kernel_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's columns and values of Z, side by side in the blocks' order and
        C-contiguous: what the compiled kernels read, formed when first read."""
        return self.kernel_columns, np.ascontiguousarray(np.concatenate(self.values, axis=1))


def _frozen(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class CrossProducts:
    """The sums over rows of ``[Z X y_c]ᵀ[Z X y_c]`` in the blocks the PLS factor reads.

    Z = [Z₁ Z_r]: the first random-effects block (most levels) and the later ones side by
    side; D = [X y_c], the fixed-effects columns and the centred response y_c = y − X b.
    Arrays are read-only.

    Attributes
    ----------
    n : int
        Number of rows summed over.
    p : int
        Number of fixed-effects columns.
    levels : tuple of numpy.ndarray
        Per block, each level's Z_sᵀZ_s, (ℓ_k, q_k, q_k): the first one is the first block's
        diagonal part of the system (``A11``).
    Z1tZr : scipy.sparse.csr_matrix or None
        Z₁ᵀZ_r (ℓ₁q₁ x r_rand), the first block against the later ones; None with one block.
    ZrtZr : scipy.sparse.csc_matrix or None
        Z_rᵀZ_r (r_rand x r_rand; symmetric, in the format the product gives): the later
        blocks' per-level blocks on its diagonal and the products between later blocks off
        it; None with one block.
    Z1tD : numpy.ndarray
        Z₁ᵀ[X y_c], (ℓ₁q₁, p + 1).
    ZrtD : numpy.ndarray or None
        Z_rᵀ[X y_c], (r_rand, p + 1); None with one block.
    DtD : numpy.ndarray
        [X y_c]ᵀ[X y_c], (p + 1, p + 1): XᵀX, Xᵀy_c and y_cᵀy_c.
    xtx : numpy.ndarray
        XᵀX as the centring computed it (p, p).
    centre : numpy.ndarray
        b with y_c = y − X b (p,): :func:`centre_of` of the whole data, or the one shared
        by added chunks.
    yc_ss : float
        y_cᵀy_c summed as one dot product of the rows (the cancellation checks read it).
    ldW : float
        Σ log w of the prior weights (0 without): lme4's criterion has log|L|² − ldW.
    """

    n: int
    p: int
    levels: tuple[np.ndarray, ...]
    Z1tZr: sp.csr_matrix | None
    ZrtZr: sp.csc_matrix | None
    Z1tD: np.ndarray
    ZrtD: np.ndarray | None
    DtD: np.ndarray
    xtx: np.ndarray
    centre: np.ndarray
    yc_ss: float
    ldW: float = 0.0

    def __post_init__(self) -> None:
        for a in (*self.levels, self.Z1tD, self.ZrtD, self.DtD, self.xtx, self.centre):
            if a is not None:
                _frozen(a)

    # ------------------------------------------------------------------ views
    @property
    def A11(self) -> np.ndarray:
        """The first block's per-level Z_sᵀZ_s, (ℓ₁, q₁, q₁)."""
        return self.levels[0]

    @property
    def ZtX(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(Z₁ᵀX, Z_rᵀX) (views)."""
        rest = None if self.ZrtD is None else self.ZrtD[:, :-1]
        return self.Z1tD[:, :-1], rest

    @property
    def Zty(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(Z₁ᵀy_c, Z_rᵀy_c) (views)."""
        rest = None if self.ZrtD is None else self.ZrtD[:, -1]
        return self.Z1tD[:, -1], rest

    @property
    def Xty(self) -> np.ndarray:
        """Xᵀy_c (view)."""
        return self.DtD[:-1, -1]

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_design(cls, design: Design, centre: np.ndarray | None = None) -> CrossProducts:
        """The cross-products of a design's rows, with its prior weights and offset
        (:meth:`of`)."""
        return cls.of(design.random.blocks, design.X, design.y, weights=design.weights,
                      offset=design.offset, centre=centre)

    @classmethod
    def of(cls, blocks: Sequence[ReBlock], X: np.ndarray, y: np.ndarray,
           weights: np.ndarray | None = None, offset: np.ndarray | None = None,
           centre: np.ndarray | None = None) -> CrossProducts:
        """The cross-products of a design's rows.

        Parameters
        ----------
        blocks : sequence of ReBlock
            Random-effects blocks, most levels first.
        X : numpy.ndarray
            Fixed-effects matrix (n x p).
        y : numpy.ndarray
            Response (n).
        weights : numpy.ndarray, optional
            Prior weights w: the rows are scaled by √w and ``ldW`` is Σ log w (all ones:
            the unweighted products).
        offset : numpy.ndarray, optional
            Subtracted from y.
        centre : numpy.ndarray, optional
            The b of y_c = y − X b (cross-products to be added must share it); None: the
            least-squares fit of these rows (:func:`centre_of`).
        """
        y = np.asarray(y, dtype=float)
        if offset is not None:
            y = y - offset
        ldW, sw = 0.0, None
        if weights is not None and not np.all(weights == 1.0):
            w = np.asarray(weights, dtype=float)
            sw = np.sqrt(w)
            ldW = float(np.sum(np.log(w)))
            y = y * sw
        return cls.from_rows(RowMatrices.of(blocks, X, sw), y, ldW=ldW, centre=centre)

    @classmethod
    def from_rows(cls, rows: RowMatrices, y: np.ndarray, ldW: float = 0.0,
                  centre: np.ndarray | None = None, like: CrossProducts | None = None
                  ) -> CrossProducts:
        """The cross-products of ``rows`` and the response ``y`` (scaled as the rows);
        ``like``: products of rows with the same blocks and levels (other weights), whose
        sparse Z₁ᵀZ_r and Z_rᵀZ_r patterns are shared where they hold."""
        X = rows.X
        n, p = X.shape
        xtx = X.T @ X
        centre, yc, dense = _centred(X, np.asarray(y, dtype=float), xtx, centre)
        later = len(rows.blocks) > 1
        free: tuple[sp.csr_matrix | None, sp.csc_matrix | None] = (None, None)
        ZrtD: np.ndarray | None = None
        if rows.dense_size(p + 1) <= MAX_DENSE_ROW_PRODUCTS:
            z1r, zrr, Z1tD, ZrtD = rows.dense_products(dense)
            diagonal = np.diagonal(zrr)
            if later:
                z1r_like, zrr_like = (None, None) if like is None else (like.Z1tZr, like.ZrtZr)
                free = (cast(sp.csr_matrix, stored_like(z1r, z1r_like)),
                        cast(sp.csc_matrix, stored_like(zrr, zrr_like, sp.csc_matrix)))
            else:
                ZrtD = None
        else:
            Zr = rows.Zr
            if Zr is not None:
                free = ((rows.Z1t @ Zr).tocsr(), Zr.T @ Zr)
            # the sparse products read it row by row: C order (scipy copies an F-order
            # operand per product; the sums are the same either way)
            rows_c = np.ascontiguousarray(dense)
            ZrtD = None if Zr is None else np.asarray(Zr.T @ rows_c)
            Z1tD = np.asarray(rows.Z1t @ rows_c)
            diagonal = free[1].diagonal() if free[1] is not None else np.zeros(0)
        return cls(n=n, p=p, levels=cls._levels(rows, diagonal), Z1tZr=free[0],
                   ZrtZr=free[1], Z1tD=Z1tD, ZrtD=ZrtD, DtD=dense.T @ dense, xtx=xtx,
                   centre=centre, yc_ss=float(yc @ yc), ldW=ldW)

    @staticmethod
    def _levels(rows: RowMatrices, diagonal: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each block's per-level Z_sᵀZ_s; a scalar later block's from ``diagonal``, Z_rᵀZ_r's
        diagonal."""
        blocks, values = rows.blocks, rows.values
        levels = [level_products(blocks[0], values[0])]
        start = 0
        for b, z in zip(blocks[1:], values[1:], strict=True):
            size = b.nlevels * b.q
            if b.q == 1:
                levels.append(np.ascontiguousarray(diagonal[start:start + size]).reshape(-1, 1, 1))
            else:
                levels.append(level_products(b, z))
            start += size
        return tuple(levels)

    def with_response(self, rows: RowMatrices, y: np.ndarray) -> CrossProducts:
        """The same rows (``rows``, as these products were computed from) with another
        response: the products not involving y are shared, and y_c's column of Zᵀ[X y_c]
        is formed in one pass over the rows (:meth:`RowMatrices.column_products`: each
        entry the sum SciPy's products form beside X's columns, in the same order)."""
        X = rows.X
        n, p = X.shape
        centre, yc, dense = _centred(X, np.asarray(y, dtype=float), self.xtx, None)
        z1y, zry = rows.column_products(yc)
        # (np.column_stack's arrays, without its per-argument conversions)
        Z1tD = np.concatenate((self.Z1tD[:, :p], z1y[:, None]), axis=1)
        ZrtD = (None if self.ZrtD is None
                else np.concatenate((self.ZrtD[:, :p], zry[:, None]), axis=1))
        return type(self)(n=n, p=p, levels=self.levels, Z1tZr=self.Z1tZr,
                             ZrtZr=self.ZrtZr, Z1tD=Z1tD, ZrtD=ZrtD, DtD=dense.T @ dense,
                             xtx=self.xtx, centre=centre, yc_ss=float(yc @ yc),
                             ldW=self.ldW)

    # ------------------------------------------------------------------ sums of chunks
    def __add__(self, other: CrossProducts) -> CrossProducts:
        """The cross-products of the rows of both (the same blocks' levels, the same X
        columns and the same centre b)."""
        if not isinstance(other, CrossProducts):
            return NotImplemented
        if self.p != other.p or len(self.levels) != len(other.levels) or any(
                a.shape != b.shape for a, b in zip(self.levels, other.levels, strict=True)):
            raise ValueError("cross-products of different designs cannot be added")
        if not np.array_equal(self.centre, other.centre):
            raise ValueError("cross-products with different centres b (y − Xb) cannot be "
                             "added: compute the chunks with one centre")

        def add(a: sp.spmatrix | None, b: sp.spmatrix | None) -> sp.spmatrix | None:
            if a is None or b is None:
                return None
            s = a + b
            s.sum_duplicates()  # (canonical: sorted, no duplicates)
            s.sort_indices()
            return s

        rest = None if self.ZrtD is None or other.ZrtD is None else self.ZrtD + other.ZrtD
        return CrossProducts(
            n=self.n + other.n, p=self.p,
            levels=tuple(a + b for a, b in zip(self.levels, other.levels, strict=True)),
            Z1tZr=add(self.Z1tZr, other.Z1tZr), ZrtZr=add(self.ZrtZr, other.ZrtZr),
            Z1tD=self.Z1tD + other.Z1tD, ZrtD=rest, DtD=self.DtD + other.DtD,
            xtx=self.xtx + other.xtx, centre=self.centre.copy(),
            yc_ss=self.yc_ss + other.yc_ss, ldW=self.ldW + other.ldW)

    @classmethod
    def from_chunks(cls, chunks: Sequence[tuple[Sequence[ReBlock], np.ndarray, np.ndarray]],
                    weights: Sequence[np.ndarray | None] | None = None) -> CrossProducts:
        """The cross-products of the rows of several chunks, ``(blocks, X, y)`` each (their
        blocks with all the design's levels), summed: those of the rows together, up to the
        order of the sums.

        Two passes: XᵀX and Xᵀy summed over the chunks give the common centre b
        (:func:`centre_of`), then each chunk's products with y − X b are added."""
        if not chunks:
            raise ValueError("no chunks")
        ws = list(weights) if weights is not None else [None] * len(chunks)
        xtx = sum((_scaled(X, w).T @ _scaled(X, w) for (_, X, _), w in zip(chunks, ws,
                                                                          strict=True)),
                  start=np.zeros((chunks[0][1].shape[1],) * 2))
        xty = sum((_scaled(X, w).T @ _scaled(np.asarray(y, dtype=float), w)
                   for (_, X, y), w in zip(chunks, ws, strict=True)),
                  start=np.zeros(chunks[0][1].shape[1]))
        b = centre_of(xtx, xty)
        parts: Iterable[CrossProducts] = (
            cls.of(blocks, X, y, weights=w, centre=b)
            for (blocks, X, y), w in zip(chunks, ws, strict=True))
        it = iter(parts)
        total = next(it)
        for part in it:
            total = total + part
        return total


def _scaled(a: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``a``'s rows scaled by √w (``a`` itself without weights)."""
    if w is None or np.all(w == 1.0):
        return a
    sw = np.sqrt(np.asarray(w, dtype=float))
    return np.asarray(a * sw[:, None] if a.ndim == 2 else a * sw)


def _centred(X: np.ndarray, y: np.ndarray, xtx: np.ndarray, centre: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(b, y_c = y − X b, [X y_c]): b given (``centre``) or, when None, :func:`centre_of` the
    rows (a new array: ours to freeze)."""
    n, p = X.shape
    if centre is None:
        centre = centre_of(xtx, X.T @ y, X, y) if p and n else np.zeros(p)
    else:
        centre = np.array(centre, dtype=float)
    yc = y - X @ centre if centre.any() else y
    return centre, yc, np.concatenate((X, yc[:, None]), axis=1)  # (np.column_stack's array)
