"""The sparse Schur complement C_RR as independent dense blocks, where its pattern splits
into small connected components (``sparse_schur.py``).

Two later random effects meet in C_RR only where some level of the first factor has rows
in both (and where A_RR couples them). When the later levels fall into groups that no
level of the first factor crosses — annotators in pools, each item rated within one pool
(crowd: 30,000 annotators in 600 pools of 50) — C_RR is block diagonal up to a permutation,
and its blocks are nearly dense. Each block is then factored by LAPACK's dpotrf and its
rows of K = C_RR⁻¹ C_RD solved by dpotrs (``_core.block_cholesky``), instead of the sparse
LDLᵀ of the whole matrix: the same factorisation up to rounding, log det C_RR as the sum of
the blocks', with dense BLAS on each block and the blocks shared between the calling
thread and the helper thread.

The blocks are used when every component has at most ``MAX_BLOCK_ORDER`` rows and the
pattern fills at least ``MIN_BLOCK_DENSITY`` of the dense blocks' entries; elsewhere C_RR
keeps QDLDL's sparse factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from crossed.model import _core
from crossed.model.sparse_map import on_parts

__all__ = ["MAX_BLOCK_ORDER", "MIN_BLOCK_DENSITY", "SPLIT_FLOPS", "DiagonalBlocks"]

MAX_BLOCK_ORDER = 1000
"""The largest connected component factored as a dense block (n³/3 flops, n² doubles)."""
MIN_BLOCK_DENSITY = 0.25
"""The blocks are used when C_RR's pattern (both triangles) fills at least this fraction of
the dense blocks' entries."""
SPLIT_FLOPS = 2_000_000
"""From this many flops (Σ n_c³/3) the blocks are shared with the helper thread."""


@dataclass(frozen=True)
class DiagonalBlocks:
    """The connected components of C_RR's pattern as dense diagonal blocks.

    Attributes
    ----------
    order : numpy.ndarray
        C_RR's rows component by component (ascending within each): block c holds the rows
        ``order[start[c]:start[c + 1]]``.
    start : numpy.ndarray
        Each block's first position in ``order`` (number of blocks + 1).
    block_start : numpy.ndarray
        Each block's offset in the storage of the blocks (n_c² each, Fortran order).
    entries, entry_start : numpy.ndarray
        The pattern's entries block by block (int32): those of block c are
        ``entries[entry_start[c]:entry_start[c + 1]]``.
    dest : numpy.ndarray
        Each pattern entry's place in the storage (int32): row j's and row i's positions
        within their block as (row, column) of the lower triangle (i <= j).
    parts : tuple of (int, int, None)
        The blocks in one range, or two of about equal flops (the second on the helper
        thread, :func:`~crossed.model.sparse_map.on_parts`).
    """

    order: np.ndarray
    start: np.ndarray
    block_start: np.ndarray
    entries: np.ndarray
    entry_start: np.ndarray
    dest: np.ndarray
    parts: tuple[tuple[int, int, None], ...]

    @property
    def factor_entries(self) -> int:
        """The factor's stored entries: the blocks' lower triangles, diagonals included."""
        n = np.diff(self.start)
        return int(np.sum(n * (n + 1) // 2))

    @classmethod
    def of(cls, ii: np.ndarray, jj: np.ndarray, indptr: np.ndarray) -> DiagonalBlocks | None:
        """The blocks of the pattern with entries (``ii[e]``, ``jj[e]``), ii <= jj, sorted by
        ``jj`` (the sparse Schur path's keys), the diagonal included, of an rr x rr matrix
        whose column j holds the entries ``indptr[j]:indptr[j + 1]`` (its CSC pointers);
        None where a component has more than ``MAX_BLOCK_ORDER`` rows or the pattern fills
        less than ``MIN_BLOCK_DENSITY`` of the blocks."""
        rr = len(indptr) - 1
        if len(ii) > np.iinfo(np.int32).max:
            return None
        # (the pattern's columns as the rows of a graph: the transposed graph, whose
        # components are the same; no conversion of the entries)
        graph = sp.csr_matrix((np.ones(len(ii), dtype=np.int8), ii.astype(np.int32, copy=False),
                               indptr.astype(np.int32)), shape=(rr, rr))
        ncomp, label = connected_components(graph, directed=False)
        sizes = np.bincount(label, minlength=ncomp).astype(np.int64)
        full_pattern = 2 * len(ii) - int(np.count_nonzero(ii == jj))
        if sizes.max(initial=0) > MAX_BLOCK_ORDER or (
                full_pattern < MIN_BLOCK_DENSITY * float(np.sum(sizes * sizes))):
            return None
        order = np.argsort(label, kind="stable").astype(np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        local = np.empty(rr, dtype=np.int64)
        local[order] = np.arange(rr, dtype=np.int64) - np.repeat(start[:-1], sizes)
        block_start = np.concatenate([[0], np.cumsum(sizes * sizes)]).astype(np.int64)
        if block_start[-1] > np.iinfo(np.int32).max:
            return None  # (the blocks' storage: 16 GB and more)
        block = label[ii]
        dest = (block_start[block] + local[jj] + local[ii] * sizes[block]).astype(np.int32)
        entries = np.argsort(block, kind="stable").astype(np.int32)
        entry_start = np.concatenate(
            [[0], np.cumsum(np.bincount(block, minlength=ncomp))]).astype(np.int64)
        flops = np.cumsum(sizes.astype(float) ** 3 / 3.0)
        total = float(flops[-1]) if ncomp else 0.0
        if total >= SPLIT_FLOPS:
            h = int(np.searchsorted(flops, total / 2.0)) + 1
            parts: tuple[tuple[int, int, None], ...] = ((0, h, None), (h, ncomp, None))
        else:
            parts = ((0, ncomp, None),)
        return cls(order=order, start=start, block_start=block_start, entries=entries,
                   entry_start=entry_start, dest=dest, parts=parts)

    def factor(self, vals: np.ndarray, rhs: np.ndarray) -> tuple[float, np.ndarray] | None:
        """log det of the matrix with the pattern's values ``vals``, and its solution of
        ``rhs`` (rr x m); None where a block is not positive definite."""
        vals = np.ascontiguousarray(vals, dtype=float)
        rhs = np.ascontiguousarray(rhs, dtype=float)
        storage = np.empty(int(self.block_start[-1]))
        work = np.empty(rhs.size)
        out = np.empty_like(rhs)
        logdets = np.zeros(len(self.start) - 1)

        def part(c0: int, c1: int, _: None) -> int:
            return _core.block_cholesky(vals, self.entries, self.entry_start, self.dest,
                                        self.block_start, self.start, self.order, c0, c1,
                                        rhs, storage, work, out, logdets)

        if any(info != 0 for info in on_parts(self.parts, part)):
            return None
        return float(np.sum(logdets)), out  # (NumPy's sum: the same for any split)
