"""Clopper–Pearson and bootstrap intervals against R (binom.test, boot 1.3-28)."""

import numpy as np
import pytest

from crossed.simulate.intervals import boot_interval, clopper_pearson, norm_inter

# R: t <- ((1:57)^1.3)/7 + sin(1:57); boot:::perc.ci / basic.ci / norm.ci with t0 = 12.3
T = (np.arange(1, 58) ** 1.3) / 7 + np.sin(np.arange(1, 58))
T0 = 12.3


@pytest.mark.parametrize("k, n, low, high", [
    (0, 20, 0.0, 0.16843347098308536),
    (3, 20, 0.032070937185463728, 0.378926826545313955),
    (20, 20, 0.83156652901691464, 1.0),
    (57, 100, 0.46713373832484617, 0.66860898336861685),
])
def test_clopper_pearson_matches_binom_test(k, n, low, high):
    lo, hi = clopper_pearson(k, n)
    np.testing.assert_allclose([lo, hi], [low, high], rtol=1e-10, atol=1e-14)


def test_clopper_pearson_no_trials_is_nan():
    lo, hi = clopper_pearson(0, 0)
    assert np.isnan(lo) and np.isnan(hi)


@pytest.mark.parametrize("kind, level, expected", [
    ("percentile", 0.95, [0.15598347872177304, 26.99749593126386671]),
    ("percentile", 0.90, [0.69034463001948076, 25.39162125826034710]),
    ("basic", 0.95, [-2.3974959312638653, 24.4440165212782290]),
    ("normal", 0.95, [-3.7614616455688576, 28.6540195089596565]),
])
def test_boot_intervals_match_boot_ci(kind, level, expected):
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(T)  # order of the replicates does not matter
    np.testing.assert_allclose(boot_interval(T0, shuffled, kind, level), expected, rtol=1e-12)


def test_norm_inter_on_99_replicates_hits_order_statistics():
    t2 = (np.arange(1, 100) ** 1.3) / 7 + np.cos(np.arange(1, 100))
    np.testing.assert_allclose(norm_inter(t2, np.array([0.025, 0.975])),
                               [0.085742099568635877, 54.229205929313437196], rtol=1e-12)


def test_unknown_interval_type():
    with pytest.raises(ValueError, match="percentile"):
        boot_interval(0.0, T, "bca", 0.95)
