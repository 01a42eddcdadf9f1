"""The compiled kernels (``crossed/model/_core.pyx``) against the NumPy/SciPy expressions
they replace, on random inputs, including the cases each kernel branches on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import lapack

from crossed.model import _core


def test_the_core_is_compiled():
    assert _core.__file__.endswith((".so", ".pyd")), _core.__file__


def test_first_block_1x1_is_bitwise_numpys():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 30, size=40).astype(float)
    t = 0.73
    out = np.empty((4, 40))
    _core.first_block_1x1(a, t, *out)
    b = t * t * a + 1.0
    np.testing.assert_array_equal(out[0], b)
    np.testing.assert_array_equal(out[1], t * t / b)
    np.testing.assert_array_equal(out[2], np.sqrt(b))
    np.testing.assert_array_equal(out[3], t / np.sqrt(b))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("support", [True, False])
@pytest.mark.parametrize("scaled", [True, False])
def test_map_update(dense, support, scaled):
    """out[rows] = (arr - W g) * scale on the support, else out[rows] -= (W g) * scale; a
    CSR W in two row parts (as SparseMap.each_part hands them out) gives the same."""
    rng = np.random.default_rng(1)
    nrows, ncols, size = 30, 12, 100
    W = sp.random(nrows, ncols, density=0.3, random_state=2, format="csr")
    g = rng.normal(size=ncols)
    rows = np.sort(rng.choice(size, size=nrows, replace=False)).astype(np.int64)
    arr = rng.normal(size=nrows) if support else np.zeros(0)
    table = rng.normal(size=7)
    pair = rng.integers(0, 7, size=nrows).astype(np.int64) if scaled else np.zeros(
        0, dtype=np.int64)
    base = rng.normal(size=size)
    wg = W @ g
    scale = table[pair] if scaled else 1.0
    expected = base.copy()
    if support:
        expected[rows] = (arr - wg) * scale
    else:
        expected[rows] -= wg * scale
    out = base.copy()
    if dense:
        _core.map_update(W.toarray(), g, rows, 0, nrows, arr, table, pair, out)
    else:
        for lo, hi in ((0, 13), (13, nrows)):
            part = sp.csr_matrix((W.data[W.indptr[lo]:W.indptr[hi]],
                                  W.indices[W.indptr[lo]:W.indptr[hi]],
                                  W.indptr[lo:hi + 1] - W.indptr[lo]), shape=(hi - lo, ncols))
            _core.map_update(part, g, rows, lo, hi, arr, table, pair, out)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-14)


def test_potrf_lower_is_lapacks_and_reports_the_failing_minor():
    rng = np.random.default_rng(3)
    M = rng.normal(size=(9, 9))
    A = np.asfortranarray(M @ M.T + 9 * np.eye(9))
    upper = np.triu(A, 1).copy()
    expected = lapack.dpotrf(A.copy(order="F"), lower=1, clean=0)[0]
    assert _core.potrf_lower(A) == 0
    np.testing.assert_array_equal(np.tril(A), np.tril(expected))
    np.testing.assert_array_equal(np.triu(A, 1), upper)  # the upper triangle is not touched
    bad = np.asfortranarray(np.diag([1.0, 2.0, -1.0, 3.0]))
    assert _core.potrf_lower(bad) == 3
    with pytest.raises(ValueError):  # C order is refused, not silently transposed
        _core.potrf_lower(np.ascontiguousarray(M @ M.T + np.eye(9)))
