"""The sparse map W of the Schur update (model/sparse_map.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from crossed.model import sparse_map
from crossed.model.sparse_map import _self_pairs, _upper_products, key_positions


@pytest.mark.parametrize("seed", range(4))
def test_self_products_are_the_sparse_products(seed):
    """The NumPy pairs of each row (q₁ = 1, every level its class) give the sparse
    products' (target, class, value) exactly: same entries, same order, same bits."""
    rng = np.random.default_rng(seed)
    levels, r = int(rng.integers(1, 60)), int(rng.integers(1, 40))
    A = sp.random(levels, r, density=float(rng.uniform(0.05, 0.6)), format="csr",
                  random_state=seed, data_rvs=rng.standard_normal)
    A.sort_indices()

    def _self_products(A, class_of=None):  # (the pairs' products: the map's values)
        target, k, pairs = _self_pairs(A, class_of)
        return target, k, pairs.values(A)

    ours = _self_products(A)
    theirs = _upper_products(A, A, np.arange(levels), levels)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    # each level its own class in another order (levels sorted by their A_s): the
    # columns are the classes, as the sparse products' (the order W's argument reads)
    class_of = rng.permutation(levels)
    ours = _self_products(A, class_of)
    theirs = _upper_products(A, A, class_of, levels)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("space", [50, 70_000, 3_000_000])
def test_key_positions_by_table_are_those_by_sorting(space: int, monkeypatch) -> None:
    """The distinct keys and each entry's position: the table and the sort give the same
    arrays, NumPy's unique and searchsorted."""
    key = np.random.default_rng(space).integers(0, space, size=20_000)
    uniq = np.unique(key)
    expected = uniq, np.searchsorted(uniq, key)
    for factor in (10**9, 0):  # (the table whatever the space; the sort from 2^16 on)
        monkeypatch.setattr(sparse_map, "KEY_TABLE_FACTOR", factor)
        for a, b in zip(key_positions(key, space), expected, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == np.int64


def _weighted_problems(case: str = "grouseticks"):
    """A PIRLS problem without X, a scalar first block and a correlated slope after it,
    unweighted, a working response and two weights: grouseticks' (W dense) or 400 items
    crossed with 8 systems (W sparse)."""
    import pandas as pd

    from crossed.design import build_design
    from crossed.formula.spec import parse
    from crossed.model.pls import PLS

    if case == "grouseticks":
        data = pd.read_csv("tests/data/glmm/grouseticks.csv")
        for c in ("BROOD", "YEAR", "LOCATION"):
            data[c] = data[c].astype(str)
        formula = "TICKS ~ YEAR + cHEIGHT + (1 + cHEIGHT | LOCATION) + (1 | BROOD)"
    else:
        gen = np.random.default_rng(1)
        item, system = np.repeat(np.arange(400), 8), np.tile(np.arange(8), 400)
        data = pd.DataFrame({"item": item.astype(str), "system": system.astype(str),
                             "x": gen.normal(size=400)[item],
                             "TICKS": gen.integers(0, 2, item.size)})
        formula = "TICKS ~ x + (1 | item) + (1 + x | system)"
    design = build_design(parse(formula), data)
    update = None if case == "grouseticks" else "sparse"  # (items: the map, not groups)
    base = PLS(design.random.blocks, design.X[:, :0], design.y, update=update)
    assert base.sparse_map is not None and not base.scalar_later_blocks
    rng = np.random.default_rng(0)
    y = np.log1p(design.y) + 0.1  # (a working response: no zero sums per level)
    w1, w2 = (rng.uniform(0.2, 3.0, design.n) for _ in range(2))
    return design, base, y, np.sqrt(w1), np.sqrt(w2)


@pytest.mark.parametrize("case", ["grouseticks", "items"])
def test_a_reweighted_map_is_a_fresh_build(case):
    """PIRLS's second weighted problem shares the first one's patterns (A_1r's index
    arrays, W's pairs) and its W, factor and solution are those built afresh, bit for
    bit; the unweighted y's zeros (levels without ticks) do not stop the sharing."""
    from crossed.model.pls import PLS

    design, base, y, s1, s2 = _weighted_problems(case)
    first = base.reweighted(s1, y)
    second = base.reweighted(s2, y)
    assert sp.issparse(second.sparse_map.W) == (case == "items")
    assert second.A1r.indices is first.A1r.indices  # (the shared pattern)
    assert second.sparse_map.pairs is first.sparse_map.pairs  # (W from the kept pairs)
    # (but not the entries kept for a new response: they hold the first one's A_1r values)
    assert second.sparse_map.response_entries is not first.sparse_map.response_entries
    fresh = PLS(design.random.blocks, design.X[:, :0], design.y,
                update=base.update).reweighted(s2, y)
    assert fresh.A1r.indices is not first.A1r.indices
    W1, W2 = second.sparse_map.W, fresh.sparse_map.W
    if sp.issparse(W1):
        for attr in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(W1, attr), getattr(W2, attr))
    else:
        np.testing.assert_array_equal(W1, W2)
    np.testing.assert_array_equal(second.sparse_map.rows, fresh.sparse_map.rows)
    theta = np.array([0.8, 0.4, -0.1, 0.05])
    f, g = second.factor(theta), fresh.factor(theta)
    assert (f.ldL2, f.pwrss) == (g.ldL2, g.pwrss)
    (b1, u1), (b2, u2) = second.solve(f), fresh.solve(g)
    np.testing.assert_array_equal(b1, b2)
    for a, b in zip(u1, u2, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_reweighted_map_is_built_again_where_the_pattern_differs():
    """Weights of zero on a level's rows remove its entries of A_1r: no pattern to share,
    W built afresh."""
    design, base, y, s1, s2 = _weighted_problems()
    first = base.reweighted(s1, y)
    codes = design.random.blocks[0].codes
    s2 = np.where(codes == codes[0], 0.0, s2)
    m = first.sparse_map
    second = base.reweighted(s2, y)
    assert second.A1r.indices is not first.A1r.indices
    assert m.reweighted(second.A1r, second.A11) is None
    fresh = sparse_map.build_sparse_map(second.A1r, second.A11, second.Arr, support=False)
    np.testing.assert_array_equal(second.sparse_map.W, fresh.W)
