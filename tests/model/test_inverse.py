"""S⁻¹ from S's Cholesky factor, blocked and two-threaded (model/inverse.py).

Checked against LAPACK's dpotri and against the explicit inverse, on matrices shaped like
the PLS system's dense part (I plus a positive semi-definite part, fixed-effect-like
columns of another scale at the end), at sizes below, at and past the blocked path's
threshold and not multiples of its panel width.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from _spd import spd
from crossed import _threads
from crossed.model.cholesky import MIN_BLOCKED, PANEL
from crossed.model.inverse import _gram_split, inverse_lower


def _factor(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """S and its lower Cholesky factor, whose strict upper triangle holds garbage (the
    engine's factor keeps S's upper triangle)."""
    S = spd(n, seed)
    L = np.linalg.cholesky(S)
    L[np.triu_indices(n, 1)] = np.random.default_rng(seed).normal(size=n * (n - 1) // 2)
    return S, np.asfortranarray(L)


@pytest.fixture(params=[True, False], ids=["helper", "no-helper"])
def helper(request):
    _threads.use_helper_thread(request.param)
    yield request.param
    _threads.use_helper_thread(None)


@pytest.mark.parametrize("n", [50, MIN_BLOCKED, 401, 577, 2 * PANEL + 1, 1000])
def test_matches_dpotri_and_the_inverse(n, helper):
    S, L = _factor(n, seed=n)
    before = L.copy()
    got = np.tril(inverse_lower(L))
    np.testing.assert_array_equal(L, before)  # the factor is not modified
    expected, info = lapack.dpotri(np.tril(L), lower=1)
    assert info == 0
    scale = np.abs(np.tril(expected)).max()
    np.testing.assert_allclose(got, np.tril(expected), rtol=0, atol=1e-12 * scale)
    inverse = np.linalg.inv(S)
    np.testing.assert_allclose(got, np.tril(inverse), rtol=0, atol=1e-10 * scale)


def test_leading_part_of_a_larger_factor():
    """``n`` selects the leading n x n factor (the gradient's REML and ML systems)."""
    S, L = _factor(700, seed=3)
    got = np.tril(inverse_lower(L, 650))
    np.testing.assert_allclose(got, np.tril(np.linalg.inv(S[:650, :650])), rtol=0,
                               atol=1e-10 * np.abs(got).max())


def test_helper_thread_does_not_change_a_bit():
    _, L = _factor(900, seed=9)
    out = []
    for enabled in (True, False):
        _threads.use_helper_thread(enabled)
        try:
            out.append(np.tril(inverse_lower(L)))
        finally:
            _threads.use_helper_thread(None)
    np.testing.assert_array_equal(out[0], out[1])


def test_singular_factor_is_refused():
    _, L = _factor(500, seed=5)
    L[437, 437] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="singular at column 438"):
        inverse_lower(L)


@pytest.mark.parametrize("n", [MIN_BLOCKED, 1000, 1145, 3000])
def test_gram_split_balances_the_work(n):
    """The helper's share of MᵀM (rows past the split) is within a panel's work of half."""
    s = _gram_split(n)
    assert PANEL <= s < n
    ends = np.minimum(np.arange(PANEL, n + PANEL, PANEL), n).astype(float)
    mine = (np.minimum(ends, s) ** 2).sum()
    theirs = np.where(ends > s, (ends - s) ** 2 + 2.0 * (ends - s) * s, 0.0).sum()
    assert abs(mine - theirs) <= 2.0 * PANEL * n * n / PANEL
