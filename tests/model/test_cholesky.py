"""The blocked two-thread Cholesky of the PLS system's dense part (model/cholesky.py).

Checked against numpy's (LAPACK) Cholesky on matrices shaped like the engine's: I plus a
positive semi-definite part, with fixed-effect-like columns of another scale at the end.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from _spd import spd as _spd
from crossed import _threads
from crossed.model import cholesky
from crossed.model.cholesky import cholesky_lower, lead_split, split_point


@pytest.fixture(params=[True, False], ids=["helper", "no-helper"])
def helper(request):
    _threads.use_helper_thread(request.param)
    yield request.param
    _threads.use_helper_thread(None)


@pytest.mark.parametrize("n", [400, 401, 577, 1000])
@pytest.mark.parametrize("solve_from", [None, "p"])
def test_matches_lapack(n, solve_from, helper):
    A = _spd(n, seed=n)
    expected = np.linalg.cholesky(A)
    upper = np.triu(A, 1).copy()
    F = A.copy(order="F")
    assert cholesky_lower(F, solve_from=None if solve_from is None else n - 3) == 0
    np.testing.assert_allclose(np.tril(F), expected, rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(np.triu(F, 1), upper)  # the upper triangle is not touched


def test_helper_thread_does_not_change_a_bit():
    A = _spd(700, seed=7)
    out = []
    for enabled in (False, True):
        _threads.use_helper_thread(enabled)
        F = A.copy(order="F")
        assert cholesky_lower(F, solve_from=697) == 0
        out.append(F)
    _threads.use_helper_thread(None)
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("bad", [0, 5, 96, 97, 450, 699])
def test_not_positive_definite_reports_lapacks_order(bad, helper):
    """A leading minor that is not positive definite: the same info as LAPACK's dpotrf."""
    A = _spd(700, seed=1)
    A[bad, bad] = -1.0
    _, expected = lapack.dpotrf(A.copy(order="F"), lower=1)
    assert expected == bad + 1
    assert cholesky_lower(A.copy(order="F")) == expected


def test_small_panels_with_many_splits(monkeypatch, helper):
    """Panels of 16 columns on a 300 x 300 matrix: twenty steps, most split with the helper."""
    monkeypatch.setattr(cholesky, "MIN_BLOCKED", 0)
    monkeypatch.setattr(cholesky, "PANEL", 16)
    A = _spd(300, seed=3)
    F = A.copy(order="F")
    assert cholesky_lower(F, solve_from=297) == 0
    np.testing.assert_allclose(np.tril(F), np.linalg.cholesky(A), rtol=1e-11, atol=1e-11)


def test_split_balances_the_two_threads():
    """The helper's share (b² per panel column) is about the caller's (a² + 2ab + panel)."""
    n, e, w = 1145, 96, 96
    s = split_point(n, e, w)
    a, b = s - e, n - s
    caller = a * a + 2 * a * b + (2 * w**3 / 3 + (n - e - w) * w * w) / w
    assert b * b == pytest.approx(caller, rel=0.01)
    assert split_point(400, 400 - 100, 96) == 400  # too little left to share


def test_needs_fortran_order():
    with pytest.raises(ValueError, match="Fortran"):
        cholesky_lower(np.ascontiguousarray(_spd(500)[:, ::-1]))


def test_falls_back_to_lapack_without_scipys_pointers(monkeypatch):
    """Where scipy's BLAS pointers are not usable, one dpotrf call does the work."""
    assert cholesky.AVAILABLE  # (they are, with the scipy this project pins)
    monkeypatch.setattr(cholesky, "AVAILABLE", False)
    A = _spd(450, seed=5)
    F = A.copy(order="F")
    assert cholesky_lower(F) == 0
    np.testing.assert_allclose(np.tril(F), np.linalg.cholesky(A), rtol=1e-11, atol=1e-11)
    bad = A.copy(order="F")
    bad[100, 100] = -1.0
    assert cholesky_lower(bad) == 101


def _spd_diagonal_lead(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A = L Lᵀ whose leading d x d block is diagonal (L's is), and L."""
    rng = np.random.default_rng(seed)
    L = np.tril(rng.normal(size=(n, n)) * 0.3 / np.sqrt(n))  # (well conditioned)
    L[:d, :d] = np.diag(rng.uniform(0.5, 3.0, size=d))
    L[np.diag_indices(n)] = np.abs(L[np.diag_indices(n)]) + 0.5
    return np.asfortranarray(L @ L.T), L


@pytest.mark.parametrize(("n", "d"), [(5, 5), (40, 1), (40, 33), (450, 30), (700, 300),
                                      (1000, 400), (1000, 997)])
@pytest.mark.parametrize("solve_from", [None, "p"])
def test_diagonal_lead_matches_lapack(n, d, solve_from, helper, monkeypatch):
    """A diagonal leading block: square roots, a scaled panel and one update, then the
    dense routine on the rest; the factor is LAPACK's, the upper triangle untouched."""
    monkeypatch.setattr(cholesky, "MIN_DIAGONAL", 1)  # (the small sizes too)
    A, L = _spd_diagonal_lead(n, d, seed=n + d)
    upper = np.triu(A, 1).copy()
    F = A.copy(order="F")
    F[:d, :d] += np.tril(np.full((d, d), 1e3), -1)  # never read: the block is diagonal
    assert cholesky_lower(F, solve_from=None if solve_from is None else n - 3,
                          diagonal=d) == 0
    F[:d, :d] -= np.tril(np.full((d, d), 1e3), -1)
    np.testing.assert_allclose(np.tril(F), np.linalg.cholesky(A), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.tril(F), L, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(np.triu(F, 1), upper)


@pytest.mark.parametrize("bad", [0, 7, 299, 300, 301, 650])
def test_diagonal_lead_not_positive_definite_reports_lapacks_order(bad, helper):
    A, _ = _spd_diagonal_lead(700, 300, seed=3)
    A[bad, bad] = -1.0
    _, expected = lapack.dpotrf(A.copy(order="F"), lower=1)
    assert expected == bad + 1
    assert cholesky_lower(A.copy(order="F"), diagonal=300) == expected


def test_diagonal_lead_update_is_the_same_with_the_helper():
    """The lead's rank-d update is split by size alone: the same bits with or without the
    helper thread (leaderboard-like: 400 lead columns, 313 after them)."""
    A, _ = _spd_diagonal_lead(713, 400, seed=11)
    out = []
    for enabled in (False, True):
        _threads.use_helper_thread(enabled)
        F = A.copy(order="F")
        assert cholesky_lower(F, solve_from=700, diagonal=400) == 0
        out.append(F)
    _threads.use_helper_thread(None)
    np.testing.assert_array_equal(out[0], out[1])


def test_lead_split_balances_the_two_threads():
    """The helper's dsyrk (b²/2 per lead column) is about the caller's (a²/2 + ab)."""
    n, d = 713, 400
    s = lead_split(n, d)
    a, b = s - d, n - s
    assert b * b / 2 == pytest.approx(a * a / 2 + a * b, rel=0.02)
    assert lead_split(100, 20) == 100  # too little to share


def test_diagonal_lead_out_of_range():
    with pytest.raises(ValueError, match="diagonal"):
        cholesky_lower(np.eye(3, order="F"), diagonal=4)
