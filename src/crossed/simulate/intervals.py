"""Intervals for simulation summaries: Clopper–Pearson for rates, bootstrap intervals."""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["boot_interval", "clopper_pearson", "norm_inter"]


def clopper_pearson(successes: np.ndarray | int, trials: np.ndarray | int,
                    level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact binomial (Clopper–Pearson) interval for ``successes / trials``.

    Returns
    -------
    low, high : numpy.ndarray
        NaN where ``trials`` is 0. Validated against R's ``binom.test(x, n)$conf.int``
        (``tests/simulate/test_intervals.py``).
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    a = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, stats.beta.ppf(a, k, n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - a, k + 1, n - k), 1.0)
    low = np.where(n > 0, low, np.nan)
    high = np.where(n > 0, high, np.nan)
    return low, high


def norm_inter(t: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Order-statistic quantiles of bootstrap replicates, interpolated on the normal scale.

    The ``(R + 1)·alpha``-th order statistic; between order statistics the position is
    interpolated linearly in normal quantiles (Davison & Hinkley 1997, eq. 5.8; the rule of
    R's ``boot.ci`` for percentile and basic intervals). Positions below 1 or above R take
    the extreme replicate.
    """
    t = np.sort(np.asarray(t, dtype=float))
    R = len(t)
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    rk = (R + 1) * alpha
    k = np.floor(rk).astype(int)
    out = np.empty(len(alpha))
    for i, (r, kk) in enumerate(zip(rk, k, strict=True)):
        if kk == r and 1 <= kk <= R:
            out[i] = t[kk - 1]
        elif kk < 1:
            out[i] = t[0]
        elif kk >= R:
            out[i] = t[-1]
        else:
            z = stats.norm.ppf
            w = (z(alpha[i]) - z(kk / (R + 1))) / (z((kk + 1) / (R + 1)) - z(kk / (R + 1)))
            out[i] = t[kk - 1] + w * (t[kk] - t[kk - 1])
    return out


def boot_interval(t0: float, t: np.ndarray, kind: str, level: float) -> tuple[float, float]:
    """One bootstrap interval from the estimate ``t0`` and replicates ``t`` (NaNs dropped).

    ``percentile``: the α/2 and 1−α/2 quantiles (:func:`norm_inter`); ``basic``:
    2·t0 minus those, swapped; ``normal``: (t0 − bias) ± z·sd(t), bias = mean(t) − t0.
    These are ``boot.ci``'s ``perc``, ``basic`` and ``norm`` (validated against boot 1.3-28
    in ``tests/simulate/test_intervals.py``), as used by lme4's ``confint(method="boot")``.
    """
    t = np.asarray(t, dtype=float)
    t = t[np.isfinite(t)]
    if len(t) < 2:
        return np.nan, np.nan
    a = (1.0 - level) / 2.0
    if kind == "percentile":
        lo, hi = norm_inter(t, np.array([a, 1 - a]))
        return float(lo), float(hi)
    if kind == "basic":
        lo, hi = norm_inter(t, np.array([1 - a, a]))
        return float(2 * t0 - lo), float(2 * t0 - hi)
    if kind == "normal":
        bias = float(np.mean(t) - t0)
        half = float(stats.norm.ppf(1 - a) * np.std(t, ddof=1))
        return t0 - bias - half, t0 - bias + half
    raise ValueError(f"unknown interval type {kind!r}; use 'percentile', 'basic' or 'normal'")
