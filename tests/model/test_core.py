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


@pytest.mark.parametrize("classes", [False, True])
def test_first_block_1x1(classes):
    rng = np.random.default_rng(0)
    a = rng.integers(1, 30, size=40).astype(float)
    count = rng.integers(1, 5, size=40).astype(float) if classes else np.zeros(0)
    t = 0.73
    out = np.empty((4, 40))
    logdet = _core.first_block_1x1(a, t, count, *out)
    b = t * t * a + 1.0
    np.testing.assert_allclose(out[0], b, rtol=1e-15)
    np.testing.assert_allclose(out[1], t * t / b, rtol=1e-15)
    np.testing.assert_allclose(out[2], np.sqrt(b), rtol=1e-15)
    np.testing.assert_allclose(out[3], t / np.sqrt(b), rtol=1e-15)
    expected = np.log(b) @ count if classes else np.log(b).sum()
    assert logdet == pytest.approx(expected, rel=1e-14)


def test_first_block_2x2_refuses_a_matrix_that_is_not_positive_definite():
    a = np.array([[1.0, 2.0], [0.0, 0.0], [1.0, 1.0]])  # (a00, a10, a11) per level
    b, G = np.empty((3, 2)), np.empty((4, 2))
    assert np.isfinite(_core.first_block_2x2(a, 1.0, 0.5, 2.0, b, G))
    a[0, 1] = -50.0  # B_s = TᵀA_sT + I with a00 = -50: det < 0
    assert _core.first_block_2x2(a, 1.0, 0.5, 2.0, b, G) == np.inf


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


def test_log_diagonal_sums():
    L = np.asfortranarray(np.diag([2.0, 3.0, 5.0, 7.0, 0.5]))
    rand, fixed, last = _core.log_diagonal_sums(L, 2)
    assert rand == pytest.approx(np.log(6.0))
    assert fixed == pytest.approx(np.log(35.0))
    assert last == 0.25
