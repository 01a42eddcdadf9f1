"""The sparse map W of the Schur update (model/sparse_map.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from crossed.model import sparse_map
from crossed.model.sparse_map import _self_products, _upper_products, key_positions


@pytest.mark.parametrize("seed", range(4))
def test_self_products_are_the_sparse_products(seed):
    """The NumPy pairs of each row (q₁ = 1, every level its class) give the sparse
    products' (target, class, value) exactly: same entries, same order, same bits."""
    rng = np.random.default_rng(seed)
    levels, r = int(rng.integers(1, 60)), int(rng.integers(1, 40))
    A = sp.random(levels, r, density=float(rng.uniform(0.05, 0.6)), format="csr",
                  random_state=seed, data_rvs=rng.standard_normal)
    A.sort_indices()
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
