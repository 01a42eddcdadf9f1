"""The sparse map W of the Schur update A_r1 G A_1r, built once per design (see pls.py).

G = blockdiag_s G_s holds one q₁ x q₁ matrix per level of the first grouping factor, and
the update A_r1 G A_1r is linear in G's entries: each upper-triangle entry (i, j) of it is
Σ_s Σ_ab A_1r[(s, a), i] G_s[a, b] A_1r[(s, b), j]. W stores those products once, so that an
evaluation is one sparse matrix-vector product. G_s depends on s only through A_s = Z_sᵀZ_s,
so levels with equal A_s (InstEval's students with the same number of ratings) share one
column per entry of G.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import scipy.sparse as sp

from crossed._threads import helper_thread

T = TypeVar("T")

SUPPORT_FRACTION = 0.4
"""C is assembled on its support when that is at most this fraction of its upper triangle."""
MAX_MARKED = 1 << 25
"""Distinct entries are found with a mark array up to this many positions, else by sorting."""
MIN_CLASSED_LEVELS = 500
"""Levels are merged into classes of equal A_s from this many levels on."""
MAX_BINNED = 1 << 24
"""W is summed in one dense array of bins up to this many entries (x 8 bytes), else through
scipy's COO to CSR conversion (several times slower)."""
SPLIT_NNZ = 200_000
"""From this many nonzeros on, W's product is shared with the helper thread."""


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
    """

    W: np.ndarray | sp.csr_matrix
    rows: np.ndarray
    i: np.ndarray
    j: np.ndarray
    arr: np.ndarray | None
    rep: np.ndarray
    parts: tuple[tuple[int, int, np.ndarray | sp.csr_matrix], ...] = ()
    """W's rows in parts (lo, hi, W[lo:hi]): one, or two of about equal nonzeros from
    ``SPLIT_NNZ`` on, which :meth:`each_part` hands to the caller and the helper thread."""

    def g_vector(self, G: np.ndarray) -> np.ndarray:
        """W's argument: G's entries per class, entry-major, from the per-level G."""
        return G[self.rep].transpose(1, 2, 0).reshape(-1)

    def each_part(self, fn: Callable[[int, int, np.ndarray | sp.csr_matrix], T]) -> list[T]:
        """``fn(lo, hi, W[lo:hi])`` for each part of W's rows, the last on the helper thread
        when there are two and it is available (the rows' results do not depend on it)."""
        pool = helper_thread() if len(self.parts) > 1 else None
        if pool is None:
            return [fn(*part) for part in self.parts]
        job = pool.submit(fn, *self.parts[-1])
        return [fn(*part) for part in self.parts[:-1]] + [job.result()]

    def update(self, G: np.ndarray) -> np.ndarray:
        """The update's entries at ``rows`` from the per-level G (ℓ₁, q₁, q₁)."""
        g = self.g_vector(G)
        if len(self.parts) == 1:
            return self.W @ g
        return np.concatenate(self.each_part(lambda lo, hi, W: W @ g))


def build_sparse_map(A1r: sp.csr_matrix, A11: np.ndarray, Arr: np.ndarray,
                     support: bool) -> SparseMap:
    """Build W from A_1r (ℓ₁·q₁ x r, sorted indices), the first block's A_s (ℓ₁, q₁, q₁) and
    the dense A_rr; with ``support``, C may be assembled on the nonzeros of A_rr and the
    update alone (scalar later blocks) when they are few."""
    l1, q = A11.shape[0], A11.shape[1]
    r = Arr.shape[0]
    indptr = A1r.indptr
    lev_start = indptr[np.arange(l1) * q]
    lev_end = indptr[np.arange(1, l1 + 1) * q]
    m = (lev_end - lev_start).astype(np.int64)
    row_of_entry = np.repeat(np.arange(l1 * q), np.diff(indptr))
    a_of_entry = row_of_entry % q
    level_of_entry = row_of_entry // q
    # every pair (e1, e2) of entries in the same level's rows with column c1 >= c2, e1
    # repeated once per partner e2: for q = 1 a level's entries are sorted by column, so
    # its partners are the level's entries up to e1 itself; else all m of the level's
    # entries, the pairs with c1 < c2 then dropped
    ne = len(row_of_entry)
    if q == 1:
        reps = np.arange(ne) - lev_start[level_of_entry] + 1
    else:
        reps = m[level_of_entry]
    e1 = np.repeat(np.arange(ne), reps)
    first = np.cumsum(reps) - reps
    e2 = np.arange(len(e1)) - np.repeat(first - lev_start[level_of_entry], reps)
    c1, c2 = A1r.indices[e1], A1r.indices[e2]
    if q > 1:
        keep = c1 >= c2
        e1, e2, c1, c2 = e1[keep], e2[keep], c1[keep], c2[keep]
    level = level_of_entry[e1]
    vals = A1r.data[e1] * A1r.data[e2]
    # W's columns: G's entries per class of levels with equal A_s, entry-major ((a, b) of
    # every class, then the next (a, b))
    if l1 >= MIN_CLASSED_LEVELS:
        _, rep, class_of = np.unique(A11.reshape(l1, q * q), axis=0, return_index=True,
                                     return_inverse=True)
        class_of = class_of.reshape(-1)
    else:  # few levels: one column per level, nothing to gain
        rep = class_of = np.arange(l1)
    ncls = len(rep)
    gcol = (a_of_entry[e1] * q + a_of_entry[e2]) * ncls + class_of[level]
    # row-major position of the upper-triangle entry (c2, c1) of the dense r x r matrix
    target = c2.astype(np.int64) * r + c1
    # only the entries that receive an update (most of C is untouched); with ``support``
    # also every other nonzero of A_rr's upper triangle, if together they are few
    marked = _Marker(r * r, target)
    arr = None
    if support:
        with_arr = marked.union(np.flatnonzero(np.triu(Arr)))
        if len(with_arr.rows) <= SUPPORT_FRACTION * r * (r + 1) / 2:
            marked, arr = with_arr, Arr.reshape(-1)[with_arr.rows]
    rows = marked.rows
    row_of = marked.position(target)
    shape = (len(rows), ncls * q * q)
    if shape[0] * shape[1] <= 50_000:  # small: dense (no sparse-product call overhead)
        W = np.zeros(shape)
        np.add.at(W, (row_of, gcol), vals)
    elif shape[0] * shape[1] <= MAX_BINNED:  # sum the products per (row, column) by bins
        key = row_of * shape[1] + gcol
        nbins = shape[0] * shape[1]
        nz = _Marker(nbins, key).rows  # the bins that receive a product, in order
        dense = np.bincount(key, weights=vals, minlength=nbins)
        indptr_w = np.searchsorted(nz, np.arange(shape[0] + 1) * shape[1])
        W = sp.csr_matrix((dense[nz], nz % shape[1], indptr_w), shape=shape)
    else:
        W = sp.csr_matrix((vals, (row_of, gcol)), shape=shape)
        W.sum_duplicates()
    parts: tuple = ((0, len(rows), W),)
    if sp.issparse(W) and W.nnz >= SPLIT_NNZ:
        mid = int(np.searchsorted(W.indptr, W.nnz // 2))
        parts = ((0, mid, _row_slice(W, 0, mid)), (mid, len(rows), _row_slice(W, mid, len(rows))))
    return SparseMap(W=W, rows=rows, i=rows // r, j=rows % r, arr=arr, rep=rep, parts=parts)


def _row_slice(W: sp.csr_matrix, lo: int, hi: int) -> sp.csr_matrix:
    """Rows lo:hi of a canonical CSR matrix, sharing its data and indices (no copy)."""
    a, b = W.indptr[lo], W.indptr[hi]
    return sp.csr_matrix((W.data[a:b], W.indices[a:b], W.indptr[lo:hi + 1] - a),
                         shape=(hi - lo, W.shape[1]), copy=False)


class _Marker:
    """The sorted distinct values of an index array over range(size), and their positions:
    a boolean mark per value when ``size`` is moderate (linear time), else a sort."""

    def __init__(self, size: int, values: np.ndarray):
        self.size = size
        if size <= MAX_MARKED:
            mark = np.zeros(size, dtype=bool)
            mark[values] = True
            self.rows = np.flatnonzero(mark)
        else:
            self.rows = np.unique(values)

    def union(self, values: np.ndarray) -> _Marker:
        return _Marker(self.size, np.concatenate([self.rows, values]))

    def position(self, values: np.ndarray) -> np.ndarray:
        """Index of each value in ``rows``."""
        if self.size <= MAX_MARKED:
            index = np.zeros(self.size, dtype=np.int64)
            index[self.rows] = np.arange(len(self.rows))
            return index[values]
        return np.searchsorted(self.rows, values)
