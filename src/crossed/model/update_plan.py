"""How the native engine forms the Schur update A_r1 G A_1r of a design, decided once from
the sparsity of Z₁ᵀZ_r (``pls.py``): dense rank-k updates over groups of levels of the
first factor, or the sparse map W (``sparse_map.py``); and whether the second block's part
of the Schur complement is diagonal (``cholesky_lower(..., diagonal=)``) or the later
random effects fall into small independent components (``cholesky_lower(..., lead=)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import scipy.sparse as sp

from crossed.model import _core

if TYPE_CHECKING:
    from crossed.design.random import ReBlock

__all__ = ["MAX_GROUPED_LEVELS", "MAX_LEAD_BLOCK", "MAX_LEAD_REST", "LeadBlocks", "LevelGroups",
           "LevelPattern", "diagonal_lead", "lead_blocks", "level_pattern", "map_cost",
           "plan_update"]

MAX_GROUPED_LEVELS = 50_000
"""Above this many levels of the first factor the greedy grouping (a Python loop) is not
tried."""

LevelGroups = list[tuple[np.ndarray, np.ndarray]]
"""Groups of levels of the first factor: (sorted levels, sorted columns they meet)."""


class LevelPattern(NamedTuple):
    """The columns of A_rr's random part each level of the first factor meets, as the
    arrays of a CSR matrix with one row per level (sorted, no duplicates)."""

    indptr: np.ndarray
    indices: np.ndarray


def level_pattern(Z1tZr: sp.csr_matrix | None, q: int, l1: int) -> LevelPattern:
    """The :class:`LevelPattern` of Z₁ᵀZ_r: each level's q₁ rows together (none without
    later blocks)."""
    P = Z1tZr
    if P is None:
        return LevelPattern(np.zeros(l1 + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if q == 1:  # one row per level already
        P.sum_duplicates()  # (also sorts the indices; the matrix is unchanged)
        return LevelPattern(P.indptr, P.indices)
    rows = np.arange(l1 * q)
    agg = sp.csr_matrix((np.ones(l1 * q), (rows // q, rows)), shape=(l1, l1 * q))
    pattern = (agg @ abs(P)).tocsr()
    pattern.sum_duplicates()
    pattern.sort_indices()
    return LevelPattern(pattern.indptr, pattern.indices)


def diagonal_lead(pattern: LevelPattern, rest: tuple[ReBlock, ...]) -> int:
    """The number of leading columns of the Schur complement C whose block is diagonal:
    the second block's (one column per level) when each level of the first factor meets
    at most one of its levels (the first factor an interaction such as model:dataset and
    the second one of its factors, or a factor nested in the second), else 0.

    C = A_rr - A_r1 G A_1r there: A_rr's part is Z₂ᵀZ₂, diagonal, and level s of the
    first factor adds to (i, j) only where its rows meet columns i and j, so never off the
    diagonal; the entries stay exact zeros (products with zero), and
    :func:`~crossed.model.cholesky.cholesky_lower` factors that block by square roots
    (``diagonal=``)."""
    if not rest or rest[0].q != 1:
        return 0
    n2 = rest[0].nlevels
    seen = np.concatenate(([0], np.cumsum(pattern.indices < n2)))
    if np.any(np.diff(seen[pattern.indptr]) > 1):
        return 0  # a level meets two of the second block's levels
    return n2


MAX_LEAD_BLOCK = 64
"""The largest component of the later random effects that :func:`lead_blocks` takes (each is
factored by loops over its columns, n³/3 multiply-adds)."""
MAX_LEAD_REST = 400
"""... and the most columns after them (X and y), factored by one dpotrf (``cholesky``'s
``MIN_BLOCKED``: from there its blocked, two-threaded factorisation)."""


class LeadBlocks(NamedTuple):
    """The later random effects (C's first ``rr`` rows) as independent components:
    ``lead_rows[lead_start[c]:lead_start[c + 1]]`` are component c's rows, ascending (int64
    both; named as ``_core.SmallDense`` takes them)."""

    lead_rows: np.ndarray
    lead_start: np.ndarray


def lead_blocks(pattern: LevelPattern, rest: tuple[ReBlock, ...], ZrtZr: sp.csc_matrix | None,
                r: int) -> LeadBlocks | None:
    """The components of the Schur complement's random part, where it has several and each
    has at most ``MAX_LEAD_BLOCK`` rows (and at most ``MAX_LEAD_REST`` columns follow), or
    None.

    Two later random effects i and j meet in C = A_rr − A_r1 G A_1r only where A_rr couples
    them (some row has both) or some level of the first factor meets both, and C's rows
    scaled by a later block's T_k mix that level's columns: the graph of those three
    relations splits the rows into components, between which C is exactly 0 and so is its
    Cholesky factor (each product that would form an entry there has a 0 factor).
    ``_core.lead_blocks_lower`` factors each component on its own rows and the trailing
    columns, skipping the r³/3 work on zeros a dense dpotrf does: ham's ``(1 | Consumer) +
    (1 | Product:Consumer) + (1 | Information:Consumer)``, whose 243 later random effects
    are 81 consumers' triples (a consumer's Information:Consumer pair and the consumer). A
    later factor nested in the first (``(1 | a/b)``'s ``a``) gives components of one row.
    """
    rr = sum(b.nlevels * b.q for b in rest)
    if rr < 2 or r - rr > MAX_LEAD_REST:
        return None
    i32 = np.int32
    zr_ptr, zr_rows = ((np.zeros(rr + 1, dtype=i32), np.zeros(0, dtype=i32)) if ZrtZr is None
                       else (ZrtZr.indptr.astype(i32, copy=False),
                             ZrtZr.indices.astype(i32, copy=False)))
    labels, count, biggest = _core.later_components(
        rr, pattern.indptr.astype(i32, copy=False), pattern.indices.astype(i32, copy=False),
        zr_ptr, zr_rows, np.array([(b.nlevels, b.q) for b in rest], dtype=np.int64))
    if count < 2 or biggest > MAX_LEAD_BLOCK:
        return None
    rows = np.argsort(labels, kind="stable").astype(np.int64)  # (ascending in each)
    sizes = np.bincount(labels)
    return LeadBlocks(rows, np.concatenate(([0], np.cumsum(sizes))).astype(np.int64))


def map_cost(pattern: LevelPattern, q: int, r_rand: int, r: int) -> float:
    """The sparse map W's cost in :func:`plan_update`'s units: Σ_s m_s²/2 scattered
    multiply-adds for the m_s = q (columns met + the r − r_rand dense ones) nonzeros of
    level s's rows."""
    indptr = pattern.indptr
    u = ((indptr[1:] - indptr[:-1]) + (r - r_rand)).astype(np.float64)  # (np.diff's)
    return float(((q * u) ** 2).sum()) / 2.0


def plan_update(pattern: LevelPattern, q: int, r_rand: int, r: int, groups: bool = False,
                ) -> tuple[float, float, LevelGroups | None]:
    """Choose how A_r1 G A_1r is computed, from the per-level ``pattern``
    (:func:`level_pattern`); ``groups``: the caller asked for groups.

    Levels of the first factor are grouped greedily (ordered by their columns) so that each
    group's rows touch few columns; a group costs one dense rank-k update (dsyrk) on its
    columns. The alternative is the sparse map W, costing Σ_s m_s²/2 scattered
    multiply-adds for m_s nonzeros in level s's rows. Costs are in units of one scattered
    update (~50 dense flops, ~2.5 ns; a group's fixed cost ~15 µs). The grouping is
    skipped when even its lower bound costs more than W, or when there are more than
    ``MAX_GROUPED_LEVELS`` levels, and stopped once the groups so far (the open one
    included) cost more than W.

    Returns
    -------
    w_cost, group_cost : float
        W's cost and the groups' (inf when no grouping was completed).
    level_groups : list or None
        The groups, or None when none was completed.
    """
    l1 = len(pattern.indptr) - 1
    dense_cols = np.arange(r_rand, r)
    u = (np.diff(pattern.indptr) + len(dense_cols)).astype(np.float64)
    w_cost = map_cost(pattern, q, r_rand, r)

    def cost(n: int, width: int) -> float:
        return n * q * width * width / 50.0 + width * width + 6000.0

    lower = float(np.sum(q * u * u) / 50.0 + np.max(u) ** 2 + 6000.0)
    if not groups and (lower > w_cost or l1 > MAX_GROUPED_LEVELS):
        return w_cost, np.inf, None
    indptr, indices = pattern.indptr, pattern.indices
    if not groups and w_cost < 2 * cost(0, 0):
        # two groups cost more than W: only one group of every level can win, and its
        # cost needs no greedy pass (ner_like: 366 levels, W ~29 µs per evaluation)
        cols = np.union1d(np.unique(indices), dense_cols)
        one = cost(l1, len(cols))
        if one < w_cost:
            return w_cost, one, [(np.arange(l1, dtype=np.int64), cols)]
        return w_cost, np.inf, None
    first_col = np.full(l1, r_rand)
    has = np.diff(indptr) > 0
    first_col[has] = indices[indptr[:-1][has]]
    order = np.lexsort((u, first_col))
    in_group = np.zeros(r, dtype=bool)  # the current group's columns
    in_group[dense_cols] = True
    closed_groups: list[tuple[list[int], np.ndarray]] = []
    levels: list[int] = []
    width = len(dense_cols)
    closed = 0.0  # the cost of the groups closed so far
    for lev in order.tolist():
        sup = indices[indptr[lev]:indptr[lev + 1]]
        new = sup[~in_group[sup]]
        own = len(sup) + len(dense_cols)
        if levels and cost(len(levels) + 1, width + len(new)) > (
                cost(len(levels), width) + cost(1, own)):
            closed += cost(len(levels), width)
            if not groups and closed > w_cost:
                return w_cost, np.inf, None  # already dearer than W (InstEval: a third)
            closed_groups.append((levels, np.flatnonzero(in_group)))
            in_group[:] = False
            in_group[dense_cols] = True
            levels, width, new = [], len(dense_cols), sup
        levels.append(lev)
        in_group[new] = True
        width += len(new)
        if not groups and closed + cost(len(levels), width) > w_cost:
            return w_cost, np.inf, None  # the open group alone: dearer than W (ner_like)
    closed_groups.append((levels, np.flatnonzero(in_group)))
    group_cost = sum(cost(len(levels), len(cols)) for levels, cols in closed_groups)
    return w_cost, group_cost, [(np.sort(np.array(levels, dtype=np.int64)), cols)
                                for levels, cols in closed_groups]
