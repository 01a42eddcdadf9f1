"""The families' log probabilities (crossed/model/glmm/family.py): ``binom_logpmf`` and
``poisson_logpmf`` give scipy.stats' numbers bit for bit (``aic`` used scipy.stats, which a
GLMM fit no longer loads), on and off the support and for invalid parameters."""

from __future__ import annotations

import numpy as np
from scipy import stats

from crossed.model.glmm.family import binom_logpmf, binomial, poisson, poisson_logpmf


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == np.shape(b) and np.array_equal(a, b, equal_nan=True)


def test_binom_logpmf_is_scipys():
    rng = np.random.default_rng(3)
    n = np.round(rng.uniform(0, 60, 4000))
    k = np.round(rng.uniform(-2, 1.1, 4000) * n)
    p = rng.uniform(0, 1, 4000)
    p[:50], p[50:100], n[100:150] = 0.0, 1.0, 0.0
    assert _same(binom_logpmf(k, n, p), stats.binom.logpmf(k, n, p))
    # off the support, invalid parameters, NaN
    k = np.array([0, 3, 2.5, -1, 4, 1, 1, np.nan, 1, 1, 1, np.inf])
    n = np.array([0, 2, 5, 5, 4.5, -1, 3, 3, np.nan, 3, 3, np.inf])
    p = np.array([0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 1.5, 0.3, 0.3, np.nan, -0.1, 0.3])
    assert _same(binom_logpmf(k, n, p), stats.binom.logpmf(k, n, p))
    assert _same(binom_logpmf(k[:, None], n, 0.25), stats.binom.logpmf(k[:, None], n, 0.25))


def test_poisson_logpmf_is_scipys():
    rng = np.random.default_rng(4)
    k = np.round(rng.exponential(8, 4000))
    mu = rng.exponential(8, 4000)
    mu[:50], k[50:100] = 0.0, 0.0
    assert _same(poisson_logpmf(k, mu), stats.poisson.logpmf(k, mu))
    k = np.array([0, 2.5, -1, 3, np.nan, 2, 1e6, np.inf])
    mu = np.array([0.0, 2.0, 2.0, -1.0, 2.0, np.nan, 3.0, 2.0])
    assert _same(poisson_logpmf(k, mu), stats.poisson.logpmf(k, mu))


def test_aic_is_unchanged():
    rng = np.random.default_rng(5)
    m = rng.integers(1, 20, 300).astype(float)
    y = rng.binomial(m.astype(int), 0.3) / m
    mu = rng.uniform(0.01, 0.99, 300)
    ratio = np.ones_like(m)
    expected = float(-2.0 * np.sum(ratio * stats.binom.logpmf(np.round(m * y), m, mu)))
    assert binomial().aic(y, m, mu, m) == expected
    counts = rng.poisson(4.0, 300).astype(float)
    wt = rng.uniform(0.5, 2.0, 300)
    expected = float(-2.0 * np.sum(stats.poisson.logpmf(counts, mu * 8) * wt))
    assert poisson().aic(counts, wt, mu * 8, wt) == expected
