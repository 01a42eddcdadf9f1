"""The compiled rank check (``crossed.design._rank``) against a reference written here: each
column in turn kept where its least-squares residual on the columns kept before it exceeds
the tolerance times its norm (R's ``qr()`` with limited pivoting decides so)."""

import numpy as np
import pytest

from crossed.design import _rank
from crossed.design.fixed import GRAM_PIVOT_MIN, RANK_TOL, independent_columns


def _reference(X: np.ndarray, tol: float = RANK_TOL) -> np.ndarray:
    keep = np.zeros(X.shape[1], dtype=bool)
    for j in range(X.shape[1]):
        norm = np.linalg.norm(X[:, j])
        if norm == 0:
            continue
        kept = X[:, keep]
        residual = X[:, j]
        if kept.shape[1]:
            coef = np.linalg.lstsq(kept, X[:, j], rcond=None)[0]
            residual = X[:, j] - kept @ coef
        keep[j] = np.linalg.norm(residual) > tol * norm
    return keep


def _factor_design(rng: np.random.Generator, n: int) -> np.ndarray:
    """An intercept, three factors' indicators and their pairwise interactions (cells of a
    subset are often empty), and a numeric column."""
    factors = [rng.integers(0, k, n) for k in rng.integers(2, 5, 3)]
    main = [(f == lv).astype(float) for f in factors for lv in range(1, f.max() + 1)]
    pairs = [a * b for i, a in enumerate(main) for b in main[i + 1:]]
    return np.column_stack([np.ones(n), *main, *pairs, rng.normal(size=n)])


@pytest.mark.parametrize("seed", range(40))
def test_factor_designs_and_their_subsets_keep_the_reference_columns(seed):
    rng = np.random.default_rng(seed)
    X = _factor_design(rng, int(rng.integers(6, 120)))
    for rows in (slice(None), rng.random(len(X)) > 0.5):
        sub = X[rows]
        expected = _reference(sub)
        assert independent_columns(sub).tolist() == expected.tolist()
        # with the shortcut, and the QR route alone (no pivot reaches inf): the shortcut
        # only ever accepts full rank
        for gram_min in (GRAM_PIVOT_MIN, np.inf):
            assert _rank.independent(sub, RANK_TOL, gram_min).tolist() == expected.tolist()


def test_dependent_zero_and_wide_columns():
    rng = np.random.default_rng(5)
    x, z = rng.normal(size=(2, 30))
    X = np.column_stack([np.ones(30), x, 3 * x - 2, np.zeros(30), z, x + z])
    assert independent_columns(X).tolist() == [True, True, False, False, True, False]
    wide = rng.normal(size=(4, 7))  # more columns than rows: the first four are kept
    assert independent_columns(wide).tolist() == [True] * 4 + [False] * 3
    # tall (the Gram shortcut declines, the QR route decides)
    tall = np.column_stack([np.ones(400), rng.normal(size=(400, 2))])
    tall = np.column_stack([tall, tall[:, 1] - tall[:, 2]])
    assert independent_columns(tall).tolist() == [True, True, True, False]


def test_order_and_dtype_of_the_input_do_not_matter():
    rng = np.random.default_rng(2)
    X = _factor_design(rng, 25)[rng.random(25) > 0.4]
    expected = independent_columns(X).tolist()
    assert independent_columns(np.asfortranarray(X)).tolist() == expected
    assert independent_columns(np.repeat(X, 2, axis=1)[:, ::2]).tolist() == expected  # strided
    frozen = X.copy()  # (a design's arrays are read-only)
    frozen.flags.writeable = False
    assert independent_columns(frozen).tolist() == expected
    assert independent_columns(np.asfortranarray(frozen)).tolist() == expected
    assert _rank.independent(X.astype(np.float32), RANK_TOL, GRAM_PIVOT_MIN).tolist() == (
        expected)
    assert independent_columns(np.zeros((0, 3))).tolist() == [False] * 3
    assert independent_columns(np.zeros((5, 0))).tolist() == []


def test_a_residual_just_above_and_below_the_tolerance():
    # z's part orthogonal to (1, x) is 10 and 0.1 times the tolerance of its norm
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    e = rng.normal(size=50)
    basis = np.column_stack([np.ones(50), x])
    e -= basis @ np.linalg.lstsq(basis, e, rcond=None)[0]
    e /= np.linalg.norm(e)
    for factor, kept in ((10.0, True), (0.1, False)):
        z = 2 * x + 1
        z = z + factor * RANK_TOL * np.linalg.norm(z) * e
        assert independent_columns(np.column_stack([basis, z])).tolist() == [True, True, kept]
