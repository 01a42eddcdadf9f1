"""The sparse map W of the Schur update A_r1 G A_1r, built once per design (see pls.py).

G = blockdiag_s G_s holds one q₁ x q₁ matrix per level of the first grouping factor, and
the update A_r1 G A_1r is linear in G's entries: each upper-triangle entry (i, j) of it is
Σ_s Σ_ab A_1r[(s, a), i] G_s[a, b] A_1r[(s, b), j]. W stores those products once, so that an
evaluation is one sparse matrix-vector product. G_s depends on s only through A_s = Z_sᵀZ_s,
so levels with equal A_s (InstEval's students with the same number of ratings) share one
column per entry of G.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np
import scipy.sparse as sp

from crossed._threads import helper_thread
from crossed.model import _core

__all__ = ["KEY_TABLE_FACTOR", "MAX_DENSE_PRODUCTS", "MIN_CLASSED_LEVELS", "LevelClasses",
           "Products", "SPLIT_NNZ", "SUPPORT_FRACTION", "SparseMap", "T", "build_sparse_map",
           "key_positions", "level_classes", "response_free_products"]

T = TypeVar("T")
_NONE = np.zeros(0)
Products = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Products of W as (target, k, value), sorted by target (see :func:`_upper_products`)."""

SUPPORT_FRACTION = 0.4
"""C is assembled on its support when that is at most this fraction of its upper triangle."""
MIN_CLASSED_LEVELS = 500
"""Levels are merged into classes of equal A_s from this many levels on."""
MAX_DENSE_PRODUCTS = 100_000
"""Up to this many products ℓ₁·q₁²·r², W is formed from dense products (small designs: no
sparse-product overheads), else by sparse products."""
SPLIT_NNZ = 200_000
"""From this many nonzeros on, W's product is shared with the helper thread."""
KEY_TABLE_FACTOR = 4
""":func:`key_positions` marks the keys in a table when their space is at most this many
times their number (else sorts them)."""


@dataclass(frozen=True)
class SparseMap:
    """W and the entries of the r x r Schur complement it updates.

    Attributes
    ----------
    W : numpy.ndarray or scipy.sparse.csr_matrix
        (len(rows), classes·q₁²): G's entries, entry-major per class -> the update.
    rows : numpy.ndarray
        Row-major positions (i·r + j, i <= j) of the entries W updates, sorted; with ``arr``
        also every other nonzero of A_rr's upper triangle (the support of C).
    i, j : numpy.ndarray
        Row and column of each position.
    arr : numpy.ndarray or None
        A_rr at ``rows`` when C is assembled on its support alone, else None.
    rep : numpy.ndarray
        One level per class (the level whose G_s stands for the class).
    class_of : numpy.ndarray
        Each level's class (an index into ``rep``).
    """

    W: np.ndarray | sp.csr_matrix
    rows: np.ndarray
    i: np.ndarray
    j: np.ndarray
    arr: np.ndarray | None
    rep: np.ndarray
    class_of: np.ndarray
    parts: tuple[tuple[int, int, np.ndarray | sp.csr_matrix], ...] = ()
    """W's rows in parts (lo, hi, W[lo:hi]): one, or two of about equal nonzeros from
    ``SPLIT_NNZ`` on, which :meth:`each_part` hands to the caller and the helper thread."""

    identity: bool = False
    """Every level is its own class, in order (``rep`` is 0, 1, ...)."""

    response_entries: dict[str, _ResponseEntries] = field(
        default_factory=dict, compare=False, repr=False)
    """y's entries of the update (W's rows there, their products' arguments and A_1r
    without y), found at the first new response (:meth:`with_response`) and shared with
    the maps of later ones."""
    pairs: _Pairs | None = field(default=None, compare=False, repr=False)
    """Where each level is its own class and W came from each level's pairs of A_1r
    entries (:func:`_self_pairs`): how W's stored values are formed from A_1r's, for
    :meth:`reweighted`; else None."""

    def reweighted(self, A1r: sp.csr_matrix, A11: np.ndarray) -> SparseMap | None:
        """This map for an A_1r of the same pattern, sharing its index arrays (PIRLS's
        weighted products, :func:`crossprod.stored_like`): W's values are the products of
        the same pairs of A_1r's entries (as :func:`build_sparse_map` forms them: the same
        W), its positions shared; None where that does not hold (W not formed from pairs,
        C assembled on the support of A_rr, or the levels' classes not this map's: the
        order of W's columns)."""
        pairs = self.pairs
        if pairs is None or A1r.indices is not pairs.indices or self.arr is not None:
            return None
        rep, class_of = level_classes(A11)
        if len(rep) != A11.shape[0] or not np.array_equal(class_of, self.class_of):
            return None
        values = pairs.values(A1r)
        if pairs.at is None:  # (a CSR W: its pattern shared)
            W: Any = copy.copy(self.W)
            W.data = values
        else:
            W = np.zeros(self.W.shape)
            W[pairs.at] = values
        # (its own response entries: those hold A_1r's values, these weights' are others)
        return replace(self, W=W, parts=row_parts(W), response_entries={})

    def with_response(self, A1r: sp.csr_matrix, A11: np.ndarray, Arr: np.ndarray,
                      y_column: np.ndarray) -> SparseMap | None:
        """This map for A_1r and A_rr with another last column (y's, ``y_column`` dense, of
        the same pattern): W's rows at y's entries formed again from dense products (as
        :func:`build_sparse_map` forms them: the same W), the others shared; None where W
        was not formed densely (a sparse W; large designs: ``response_free_products``).

        What does not change with y is found once and kept in ``response_entries`` for
        every later response: y's entries of W, the compiled products' index arrays, and
        A_1r as a dense array without its last column (y's column is then written in)."""
        if sp.issparse(self.W) or not _dense(A11, Arr.shape[0]):
            return None
        got = self.response_entries.get("y")
        if got is None:  # (the pattern is the kept one's: y's entries are found once)
            A = A1r.toarray()
            j, i = _touched(A, A11.shape[1], last=True)
            got = self.response_entries["y"] = _ResponseEntries.of(self, A, A11.shape[1], j, i)
        A = got.dense.copy()  # (A_1r densely: y's column stored where it is nonzero)
        A[:, -1] = np.where(y_column != 0, y_column, 0.0)
        W = self.W.copy()
        W[got.where] = got.products.at(A)
        arr = None if self.arr is None else Arr.reshape(-1)[self.rows]
        return SparseMap(W=W, rows=self.rows, i=self.i, j=self.j, arr=arr, rep=self.rep,
                         class_of=self.class_of, parts=row_parts(W),
                         identity=self.identity, response_entries=self.response_entries)

    def g_vector(self, G: np.ndarray, per_class: bool = False) -> np.ndarray:
        """W's argument: G's entries per class, entry-major, from the per-level G (or from
        G given per class, ``per_class``: in the order of ``rep``)."""
        if self.identity or per_class:  # (no gather: a view when G is an entry-major
            # array transposed)
            return cast(np.ndarray, G.transpose(1, 2, 0).reshape(-1))
        return cast(np.ndarray, G[self.rep].transpose(1, 2, 0).reshape(-1))

    def each_part(self, fn: Callable[[int, int, np.ndarray | sp.csr_matrix], T]) -> list[T]:
        """``fn(lo, hi, W[lo:hi])`` for each part of W's rows, the last on the helper thread
        when there are two and it is available (the rows' results do not depend on it)."""
        return on_parts(self.parts, fn)

    def apply(self, G: np.ndarray, out: np.ndarray, per_class: bool, arr: np.ndarray | None,
              table: np.ndarray, pair: np.ndarray) -> None:
        """Write the Schur complement's entries at ``rows`` into ``out`` (C flattened
        row-major) from the per-level G (or G per class, ``per_class``), each part of W's
        rows by the compiled kernel (``_core.map_update``) on its thread: with ``arr`` (A_rr
        at ``rows``) ``out[rows] = (arr - W g) * table[pair]``, else ``out[rows] -= (W g) *
        table[pair]`` (``pair`` empty: unscaled)."""
        g = np.ascontiguousarray(self.g_vector(G, per_class))
        support = _NONE if arr is None else arr
        self.each_part(lambda lo, hi, W: _core.map_update(W, g, self.rows, lo, hi, support,
                                                          table, pair, out))


@dataclass(frozen=True)
class LevelClasses:
    """A one-column first block's levels merged into the sparse map's classes, so that an
    evaluation's closed forms (``closed_forms.closed_form_1x1``) run once per class: every
    level of a class has the same A_s, so the same B_s and G_s. Leaderboard: 120k
    model x dataset cells, 5 classes (their numbers of runs).

    Attributes
    ----------
    a : numpy.ndarray
        A_s per class (the class's ``rep`` level).
    count : numpy.ndarray
        The number of levels in each class (float).
    class_of : numpy.ndarray
        Each level's class.
    """

    a: np.ndarray
    count: np.ndarray
    class_of: np.ndarray

    @classmethod
    def of(cls, m: SparseMap, A11: np.ndarray) -> LevelClasses | None:
        """The classes of ``m`` where the first block has one column and ``m`` merges its
        levels into at most a quarter as many classes; else None (per level)."""
        if A11.shape[1] != 1 or m.identity or 4 * len(m.rep) > A11.shape[0]:
            return None
        count = np.bincount(m.class_of, minlength=len(m.rep)).astype(float)
        return cls(a=A11[m.rep, 0, 0], count=count, class_of=m.class_of)


def build_sparse_map(A1r: sp.csr_matrix, A11: np.ndarray, Arr: np.ndarray,
                     support: bool, free: list[Products] | None = None) -> SparseMap:
    """Build W from A_1r (ℓ₁·q₁ x r, sorted indices), the first block's A_s (ℓ₁, q₁, q₁) and
    the dense A_rr; with ``support``, C may be assembled on the nonzeros of A_rr and the
    update alone (scalar later blocks) when they are few.

    W's column (a, b, class k) at the entry (j, i), j <= i, is Σ_{s in k} A_1r[(s, a), i]
    A_1r[(s, b), j], summed over the levels in ascending order (as the textbook sum). Small
    designs form every level's products densely; larger ones take, for each (a, b), one
    sparse product of A_1r's rows b (transposed) with its rows a spread over one column
    per (i, k). ``free``, from :func:`response_free_products` on a design with the same
    A_1r but another y (its last column), leaves only y's products to form: W is the same.
    """
    q = A11.shape[1]
    r = Arr.shape[0]
    rep, class_of = level_classes(A11)
    ncls = len(rep)
    pairs = None
    if _dense(A11, r):
        blocks = None
        updated, W_updated = _dense_products(A1r, q, class_of, ncls)
    else:
        if free is None and q == 1 and ncls == A11.shape[0]:  # (every level its class)
            target, k, pairs = _self_pairs(A1r, class_of)
            blocks = [(target, k, pairs.values(A1r))]
        elif free is None:
            by_row = _rows_by_position(A1r, q)
            blocks = [_upper_products(by_row[a], by_row[b], class_of, ncls)
                      for a in range(q) for b in range(q)]
        else:  # y's products (entries (j, r - 1)) merged into the y-free ones
            by_row = _rows_by_position(A1r, q)
            blocks = [_merge(f, _upper_products(_column_part(by_row[a], last=True),
                                                by_row[b], class_of, ncls))
                      for f, (a, b) in zip(free, np.ndindex(q, q), strict=True)]
        updated = _sorted_union([target for target, _, _ in blocks])
    # the entries (j, i) that receive an update, row-major (most of C is untouched); with
    # ``support`` also every other nonzero of A_rr's upper triangle, if together they are few
    rows, arr = updated, None
    if support:
        with_arr = _sorted_union([updated, np.flatnonzero(np.triu(Arr))])
        if len(with_arr) <= SUPPORT_FRACTION * r * (r + 1) / 2:
            rows, arr = with_arr, Arr.reshape(-1)[with_arr]
    W: Any  # numpy.ndarray or scipy.sparse.csr_matrix (and a list of parts below)
    if blocks is None:
        W = np.zeros((len(rows), W_updated.shape[1]))
        W[rows.searchsorted(updated)] = W_updated
    else:
        W = [_on_rows(rows, *block, ncls) for block in blocks]
        W = W[0] if len(W) == 1 else sp.hstack(W, format="csr")
    if sp.issparse(W) == (W.shape[0] * W.shape[1] <= 50_000):  # small: dense (no sparse-
        W = W.toarray() if sp.issparse(W) else sp.csr_matrix(W)  # product call overhead)
        if pairs is not None:  # (W's stored values at their rows and columns)
            pairs = replace(pairs, at=(np.searchsorted(rows, target), k))
    parts = row_parts(W)
    identity = bool(len(rep) == A11.shape[0] and (rep == np.arange(len(rep))).all())
    return SparseMap(W=W, rows=rows, i=rows // r, j=rows % r, arr=arr, rep=rep,
                     class_of=class_of, parts=parts, identity=identity, pairs=pairs)


Parts = tuple[tuple[int, int, Any], ...]
"""A matrix's rows in parts (lo, hi, its rows lo:hi)."""


def row_parts(W: np.ndarray | sp.csr_matrix) -> Parts:
    """W's rows in one part, or, for a CSR W of ``SPLIT_NNZ`` nonzeros or more, in two of
    about equal nonzeros (sharing W's arrays), for :func:`on_parts`."""
    n = W.shape[0]
    if isinstance(W, np.ndarray) or W.nnz < SPLIT_NNZ:
        return ((0, n, W),)
    mid = int(np.searchsorted(W.indptr, W.nnz // 2))
    return ((0, mid, _row_slice(W, 0, mid)), (mid, n, _row_slice(W, mid, n)))


def on_parts(parts: Parts, fn: Callable[[int, int, Any], T]) -> list[T]:
    """``fn(lo, hi, rows)`` for each of ``parts``, the last on the helper thread when there
    are two and it is available (each part's results do not depend on it)."""
    pool = helper_thread() if len(parts) > 1 else None
    if pool is None:
        return [fn(*part) for part in parts]
    job = pool.submit(fn, *parts[-1])
    return [fn(*part) for part in parts[:-1]] + [job.result()]


def response_free_products(A1r: sp.csr_matrix, A11: np.ndarray) -> list[Products] | None:
    """The products of W that do not involve y (A_1r's last column), kept for refits with
    new responses (:meth:`PLS.with_response`); None for small designs (dense products)."""
    q, r = A11.shape[1], A1r.shape[1]
    if _dense(A11, r):
        return None
    rep, class_of = level_classes(A11)
    by_row = [_column_part(rows, last=False) for rows in _rows_by_position(A1r, q)]
    return [_upper_products(by_row[a], by_row[b], class_of, len(rep))
            for a in range(q) for b in range(q)]


def level_classes(A11: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One level per class of levels with equal A_s, and each level's class (from
    ``MIN_CLASSED_LEVELS`` levels on; else every level its own class)."""
    l1, q = A11.shape[0], A11.shape[1]
    if l1 < MIN_CLASSED_LEVELS:  # few levels: nothing to gain
        return np.arange(l1), np.arange(l1)
    if q == 1:  # the same classes and representatives (first occurrences, stable sort)
        # without the row-wise unique's structured sort
        _, rep, class_of = np.unique(A11.reshape(l1), return_index=True,
                                     return_inverse=True)
        return rep, class_of.reshape(-1)
    _, rep, class_of = np.unique(A11.reshape(l1, q * q), axis=0, return_index=True,
                                 return_inverse=True)
    return rep, class_of.reshape(-1)


def _dense(A11: np.ndarray, r: int) -> bool:
    """Whether W is formed from dense products (small designs)."""
    l1, q = A11.shape[0], A11.shape[1]
    return bool(l1 * q * q * r * r <= MAX_DENSE_PRODUCTS)


def _rows_by_position(A1r: sp.csr_matrix, q: int) -> list[sp.csr_matrix]:
    """For each a < q, the rows (s, a) of A_1r, level s's row at s."""
    return [A1r[a::q] for a in range(q)] if q > 1 else [A1r]


def _column_part(A: sp.csr_matrix, last: bool) -> sp.csr_matrix:
    """A's entries in its last column alone (``last``) or in the others; same shape."""
    keep = (A.indices == A.shape[1] - 1) == last
    kept = np.concatenate([[0], np.cumsum(keep)])
    return sp.csr_matrix((A.data[keep], A.indices[keep], kept[A.indptr]), shape=A.shape)


def _merge(a: Products, b: Products) -> Products:
    """Two (target, k, value) lists sorted by target, with no target in both, as one."""
    order = np.argsort(np.concatenate([a[0], b[0]]), kind="stable")
    return cast(Products, tuple(np.concatenate([x, y])[order] for x, y in zip(a, b, strict=True)))


def _dense_products(A1r: sp.csr_matrix, q: int, class_of: np.ndarray, ncls: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The updated positions j·r + i (j <= i, sorted) and W's rows at them, from dense
    products (small designs): :func:`_products_at` the entries :func:`_touched` finds."""
    A = A1r.toarray()
    j, i = _touched(A, q)
    return j * A.shape[1] + i, _products_at(A, q, class_of, ncls, j, i)


def _touched(A: np.ndarray, q: int, last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The entries (j, i), j <= i, of the update that some level's nonzeros of A_1r (dense
    ``A``; its CSR form stores no zeros) in columns i and j reach, in row-major order of
    (j, i) (sorted positions j·r + i); ``last``: those in A_1r's last column alone
    (i = r − 1, y's). In compiled code (``_core.map_entries``)."""
    return _core.map_entries(np.ascontiguousarray(A, dtype=float), q, last)


class _EntryProducts(NamedTuple):
    """:func:`_products_at`'s entries (j, i) and classes as ``_core.map_products`` takes
    them, prepared once (a simulation forms y's entries of W at every refit)."""

    q: int
    class_of: np.ndarray
    ncls: int
    per_level: bool
    j: np.ndarray
    i: np.ndarray

    @classmethod
    def of(cls, q: int, class_of: np.ndarray, ncls: int, j: np.ndarray, i: np.ndarray
           ) -> _EntryProducts:
        classes = np.ascontiguousarray(class_of, dtype=np.int64)
        l1 = len(classes)
        return cls(q, classes, ncls, ncls == l1 and bool((classes == np.arange(l1)).all()),
                   np.ascontiguousarray(j, dtype=np.int64),
                   np.ascontiguousarray(i, dtype=np.int64))

    def at(self, A: np.ndarray) -> np.ndarray:
        """The products from the dense A_1r ``A`` (C-ordered doubles)."""
        return _core.map_products(A, self.q, self.class_of, self.ncls, self.per_level,
                                  self.j, self.i)


class _ResponseEntries(NamedTuple):
    """W's entries that involve y (:meth:`SparseMap.with_response`), found once: their
    positions among W's rows, their products and A_1r densely with a zero last
    column (y's)."""

    where: np.ndarray
    products: _EntryProducts
    dense: np.ndarray

    @classmethod
    def of(cls, m: SparseMap, A: np.ndarray, q: int, j: np.ndarray, i: np.ndarray
           ) -> _ResponseEntries:
        dense = np.array(A, dtype=float, order="C")
        dense[:, -1] = 0.0
        return cls(np.searchsorted(m.rows, j * A.shape[1] + i),
                   _EntryProducts.of(q, m.class_of, len(m.rep), j, i), dense)


def _products_at(A: np.ndarray, q: int, class_of: np.ndarray, ncls: int, j: np.ndarray,
                 i: np.ndarray) -> np.ndarray:
    """W's rows at the entries (j, i): Σ_{s in k} A_1r[(s, a), i] A_1r[(s, b), j] for each
    G entry (a, b) and class k, from the dense ``A`` (A_1r); per class, the levels'
    products are added in level order (in compiled code, ``_core.map_products``; column
    (a·q + b)·ncls + k)."""
    return _EntryProducts.of(q, class_of, ncls, j, i).at(
        np.ascontiguousarray(A, dtype=float))


def key_positions(key: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``key`` (integers in [0, ``space``)), sorted, and each
    entry's position among them: by a table of the space where it is small beside the keys
    (``KEY_TABLE_FACTOR``), else by sorting; the same arrays either way."""
    if space <= max(KEY_TABLE_FACTOR * len(key), 1 << 16):
        present = np.zeros(space, dtype=bool)
        present[key] = True
        return np.flatnonzero(present), (np.cumsum(present) - 1)[key]
    keys, pos = np.unique(key, return_inverse=True)
    return keys, pos.reshape(-1)


def _upper_products(Aa: sp.csr_matrix, Ab: sp.csr_matrix, class_of: np.ndarray, ncls: int
                    ) -> Products:
    """Σ_{s in k} Aa[s, i] Ab[s, j] for j <= i, per class k, as (target, k, value) sorted by
    target = j·r + i, then k (Aa, Ab: one row per level, r columns)."""
    r = Aa.shape[1]
    Ab.sort_indices()  # (the kernel reads each row of Ab up to column i: in order; A_1r's
    # rows are sorted, so this only checks)
    # each stored Aa[s, i] belongs to the product's row (i, k), k the class of s; the rows
    # that occur are numbered in (i, k) order (at most one per stored entry, where r x
    # classes could be far more)
    key = Aa.indices.astype(np.int64) * ncls + np.repeat(class_of, np.diff(Aa.indptr))
    keys, pos = key_positions(key, r * ncls)
    # the products of Aa's rows spread over one column per (i, k), summed over the levels
    # in ascending order, kept where j <= i and sorted by (j, i, k): compiled, the same
    # sums as SciPy's sparse product (tests/model/test_core.py)
    return _core.upper_products(
        Aa.indptr.astype(np.int64), Aa.indices.astype(np.int64), Aa.data, pos,
        Ab.indptr.astype(np.int64), Ab.indices.astype(np.int64), Ab.data, keys, ncls, r)


@dataclass(frozen=True)
class _Pairs:
    """W's stored values as products A_1r.data[first] * A_1r.data[second], for an A_1r
    with the index arrays ``indices`` (``at``: their positions in a dense W, or None for
    W's CSR storage order)."""

    indices: np.ndarray
    first: np.ndarray
    second: np.ndarray
    at: tuple[np.ndarray, np.ndarray] | None = None

    def values(self, A: sp.csr_matrix) -> np.ndarray:
        """The products of ``A``'s entries (A: these index arrays, other values)."""
        return cast(np.ndarray, A.data[self.first] * A.data[self.second])


def _self_pairs(A: sp.csr_matrix, class_of: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, _Pairs]:
    """:func:`_upper_products` of A with itself, each level its own class (q₁ = 1; level
    s in class ``class_of[s]``, default s), from A's pattern alone: the (target, k) of the
    products A[s, i] A[s, j], j <= i, of each level's own entries (one product per
    (target, class), so there is nothing to sum), sorted by target then k, and the pairs
    of A's entries that form them (their values: ``pairs.values(A)``), without the sparse
    products' call overheads."""
    ls, r = A.shape
    counts = np.diff(A.indptr)
    row = np.repeat(np.arange(ls, dtype=np.int64), counts)
    after = A.indptr[1:][row] - np.arange(A.nnz)  # entries from this one to its row's end
    first = np.repeat(np.arange(A.nnz), after)  # the pair's entry j (sorted indices: j <= i)
    start = np.repeat(np.cumsum(after) - after, after)
    second = first + (np.arange(len(first)) - start)
    j, i = A.indices[first].astype(np.int64), A.indices[second].astype(np.int64)
    target = j * r + i
    k = row[first] if class_of is None else class_of[row[first]]  # (a level's class)
    order = np.argsort(target * ls + k, kind="stable")
    return target[order], k[order], _Pairs(A.indices, first[order], second[order])


def _row_slice(W: sp.csr_matrix, lo: int, hi: int) -> sp.csr_matrix:
    """Rows lo:hi of a canonical CSR matrix, sharing its data and indices (no copy)."""
    a, b = W.indptr[lo], W.indptr[hi]
    return sp.csr_matrix((W.data[a:b], W.indices[a:b], W.indptr[lo:hi + 1] - a),
                         shape=(hi - lo, W.shape[1]), copy=False)


def _on_rows(rows: np.ndarray, target: np.ndarray, k: np.ndarray, value: np.ndarray,
             ncls: int) -> sp.csr_matrix:
    """The (target, k, value) entries, sorted by target, as a CSR matrix with one row per
    position in ``rows`` (sorted, holding every target) and one column per class."""
    indptr = np.append(np.searchsorted(target, rows), len(target))
    return sp.csr_matrix((value, k, indptr), shape=(len(rows), ncls))


def _sorted_union(arrays: list[np.ndarray]) -> np.ndarray:
    """The distinct values of sorted arrays, sorted (a merge of the sorted runs: a stable
    sort finds them)."""
    a = arrays[0] if len(arrays) == 1 else np.sort(np.concatenate(arrays), kind="stable")
    first = np.ones(len(a), dtype=bool)
    first[1:] = a[1:] != a[:-1]
    return a[first]
