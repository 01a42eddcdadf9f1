"""C_RR as independent dense blocks (model/schur_blocks.py) against dense linear algebra and
against the sparse LDLᵀ (QDLDL) it replaces where the pattern splits into small blocks."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from _crowd import crowd
from crossed._threads import use_helper_thread
from crossed.design import build_design
from crossed.formula import parse
from crossed.model import schur_blocks
from crossed.model.pls import PLS, profiled_deviance
from crossed.model.schur_blocks import DiagonalBlocks


def _block_diagonal(sizes: list[int], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric positive definite matrix, block diagonal up to a random permutation of
    its rows and columns (some entries inside a block exactly zero), and the permutation."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    M = np.zeros((n, n))
    at = 0
    for k in sizes:
        A = rng.normal(size=(k, k))
        B = A @ A.T  # (connected through row 0, whose entries stay)
        gone = np.triu(rng.random((k, k)) < 0.3, 1)
        gone[0] = False
        B[gone | gone.T] = 0.0
        M[at:at + k, at:at + k] = B + np.diag(np.abs(B).sum(axis=1) + 1.0)  # (dominant)
        at += k
    perm = rng.permutation(n)
    return M[np.ix_(perm, perm)], perm


def _pattern(M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The upper triangle's nonzeros (and the diagonal) as (ii, jj, values), ii <= jj,
    sorted by column then row (the sparse Schur path's keys j·n + i)."""
    n = len(M)
    jj, ii = np.nonzero(np.triu(M).T != 0)
    keep = (ii <= jj)
    ii, jj = ii[keep], jj[keep]
    diag = np.arange(n)
    keys = np.union1d(jj * n + ii, diag * (n + 1))
    ii, jj = keys % n, keys // n
    return ii, jj, M[ii, jj]


def _pointers(jj: np.ndarray, n: int) -> np.ndarray:
    """The pattern's column pointers (its entries sorted by column)."""
    return np.concatenate([[0], np.cumsum(np.bincount(jj, minlength=n))])


@pytest.mark.parametrize("sizes", [[1, 3, 7, 12, 5], [40] * 6 + [1] * 4, [2]])
def test_blocks_factor_a_permuted_block_diagonal_matrix(sizes):
    """log det and the solution of a block-diagonal matrix (its rows permuted) are those of
    dense linear algebra, to rounding."""
    M, _ = _block_diagonal(sizes)
    ii, jj, vals = _pattern(M)
    blocks = DiagonalBlocks.of(ii, jj, _pointers(jj, len(M)))
    assert blocks is not None and len(blocks.start) - 1 == len(sizes)
    rhs = np.random.default_rng(1).normal(size=(len(M), 3))
    got = blocks.factor(vals, rhs)
    assert got is not None
    logdet, x = got
    sign, expected = np.linalg.slogdet(M)
    assert sign == 1.0 and logdet == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(x, np.linalg.solve(M, rhs), rtol=1e-10, atol=1e-13)
    assert blocks.factor_entries == sum(k * (k + 1) // 2 for k in sizes)


def test_blocks_split_over_two_threads_give_the_same_numbers(monkeypatch):
    """The blocks in one range or two (the second on the helper thread, or not): the same
    numbers, bit for bit."""
    M, _ = _block_diagonal([30] * 8 + [3] * 5, seed=4)
    ii, jj, vals = _pattern(M)
    rhs = np.random.default_rng(2).normal(size=(len(M), 2))
    monkeypatch.setattr(schur_blocks, "SPLIT_FLOPS", 0)
    two = DiagonalBlocks.of(ii, jj, _pointers(jj, len(M)))
    monkeypatch.setattr(schur_blocks, "SPLIT_FLOPS", float("inf"))
    one = DiagonalBlocks.of(ii, jj, _pointers(jj, len(M)))
    assert two is not None and one is not None
    assert len(two.parts) == 2 and len(one.parts) == 1
    results = [one.factor(vals, rhs), two.factor(vals, rhs)]
    try:
        use_helper_thread(False)
        results.append(two.factor(vals, rhs))
    finally:
        use_helper_thread(None)
    for got in results[1:]:
        assert got is not None and results[0] is not None
        assert got[0] == results[0][0]
        np.testing.assert_array_equal(got[1], results[0][1])


def test_a_block_not_positive_definite_gives_none():
    M, perm = _block_diagonal([4, 6, 5], seed=5)
    inverse = np.argsort(perm)
    rows = inverse[4:10]  # (the second block's rows, permuted)
    M[np.ix_(rows, rows)] *= -1.0
    ii, jj, vals = _pattern(M)
    blocks = DiagonalBlocks.of(ii, jj, _pointers(jj, len(M)))
    assert blocks is not None
    assert blocks.factor(vals, np.ones((len(M), 1))) is None


def test_large_or_sparse_components_are_not_blocks(monkeypatch):
    """A component past ``MAX_BLOCK_ORDER`` rows, or a pattern filling less than
    ``MIN_BLOCK_DENSITY`` of its blocks (a chain: one component, three entries a row),
    keeps the sparse factorisation."""
    M, _ = _block_diagonal([10, 20], seed=6)
    ii, jj, _ = _pattern(M)
    monkeypatch.setattr(schur_blocks, "MAX_BLOCK_ORDER", 19)
    assert DiagonalBlocks.of(ii, jj, _pointers(jj, len(M))) is None
    monkeypatch.setattr(schur_blocks, "MAX_BLOCK_ORDER", 20)
    assert DiagonalBlocks.of(ii, jj, _pointers(jj, len(M))) is not None
    n = 200
    chain = np.diag(np.full(n, 3.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    ii, jj, _ = _pattern(chain)
    assert DiagonalBlocks.of(ii, jj, _pointers(jj, n)) is None


def test_pooled_design_blocks_equal_the_sparse_ldlt():
    """The crowd design's C_RR is block diagonal by pool: the blocks' factor gives QDLDL's
    criterion, K and R_X to rounding at several θ."""
    data = crowd(items=500, pools=5, pool_size=20, raters=4)
    d = build_design(parse("y ~ 1 + x + (1 | item) + (1 | annotator)"), data)
    pls = PLS(d.random.blocks, d.X, d.y, schur="sparse")
    s = pls.sparse
    assert s is not None and s.blocks is not None and len(s.blocks.start) - 1 == 5
    plain = copy.copy(s)
    plain.blocks = None
    for theta in ([0.8, 0.5], [0.1, 2.0], [1.5, 0.01]):
        theta = np.array(theta)
        _, G, _, ld1, _ = pls.first_block(theta)
        first = pls.first_block(theta)[0]
        a = s.factor(theta, G, ld1, first)
        b = plain.factor(theta, G, ld1, first)
        assert a.ok and b.ok
        for reml in (True, False):
            assert profiled_deviance(a, pls.n, pls.p, reml) == pytest.approx(
                profiled_deviance(b, pls.n, pls.p, reml), rel=1e-12)
        np.testing.assert_allclose(a.K, b.K, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(a.LD, b.LD, rtol=1e-10, atol=1e-13)
