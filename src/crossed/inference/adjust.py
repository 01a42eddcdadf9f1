"""Multiplicity adjustments of p values and confidence intervals, as emmeans 1.8.4 applies them.

Within one family (one ``by`` group) of m contrasts among k means:

- ``tukey``: studentized range, p = P(Q_{k,df} > √2·|t|); intervals ± q_{k,df}(level)/√2·SE.
- ``dunnettx``: emmeans' approximation to Dunnett's test, a weighted mix of the Tukey and
  Šidák probabilities (``.pdunnx``); intervals by inverting it.
- ``sidak``: 1 − (1 − p)^m; ``bonferroni``: min(1, m·p); ``holm`` and ``fdr`` (Benjamini–
  Hochberg): R's ``p.adjust``. Intervals: Šidák and Bonferroni critical values; ``holm``
  and ``fdr`` intervals use Bonferroni, as emmeans does.
- ``none``: unadjusted.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats

METHODS = ("tukey", "dunnettx", "sidak", "bonferroni", "holm", "fdr", "none")


def _check(method: str) -> str:
    m = str(method).lower()
    if m == "bh":
        m = "fdr"
    if m not in METHODS:
        raise ValueError(f"unknown adjustment {method!r}; use one of {', '.join(METHODS)}")
    return m


def _ptukey_sf(q: float, k: int, df: float) -> float:
    if not np.isfinite(q):
        return 0.0
    if k < 2:
        return float(2.0 * stats.t.sf(q / np.sqrt(2.0), df)) if np.isfinite(df) else float(
            2.0 * stats.norm.sf(q / np.sqrt(2.0)))
    df = 1e7 if not np.isfinite(df) else df  # scipy needs a finite df; 1e7 is the limit
    return float(stats.studentized_range.sf(q, k, df))


def _pdunnx(x: float, m: int, df: float) -> float:
    """emmeans' ``.pdunnx``: P(all |t| ≤ x) for m comparisons with a control."""
    k = (1.0 + np.sqrt(1.0 + 8.0 * m)) / 2.0
    twt = (m - 1.0) / m
    tuk = 1.0 - _ptukey_sf(np.sqrt(2.0) * x, k, df) if m > 1 else 0.0
    dfx = 1e7 if not np.isfinite(df) else df
    sid = stats.f.cdf(x * x, 1, dfx) ** m
    return twt * tuk + (1.0 - twt) * sid


def adjust_p(t: np.ndarray, df: np.ndarray, p: np.ndarray, method: str,
             n_means: int) -> np.ndarray:
    """Adjusted p values of one family.

    Parameters
    ----------
    t, df, p : numpy.ndarray
        t ratios, their df and unadjusted two-sided p values (one per contrast).
    method : str
        One of :data:`METHODS`.
    n_means : int
        Number of means compared (the Tukey family size).
    """
    method = _check(method)
    t, df, p = (np.asarray(a, dtype=float) for a in (t, df, p))
    m = len(p)
    if m == 0 or method == "none":
        return p.copy()
    if method == "tukey":
        return np.array([_ptukey_sf(np.sqrt(2.0) * abs(ti), n_means, d)
                         for ti, d in zip(t, df, strict=True)])
    if method == "dunnettx":
        return np.array([1.0 - _pdunnx(abs(ti), m, d) for ti, d in zip(t, df, strict=True)])
    if method == "sidak":
        return 1.0 - (1.0 - p) ** m
    if method == "bonferroni":
        return np.minimum(1.0, m * p)
    order = np.argsort(p)
    ps = p[order]
    if method == "holm":
        adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * ps))
    else:  # fdr (Benjamini–Hochberg)
        adj = np.minimum(1.0, np.minimum.accumulate((m / np.arange(1, m + 1) * ps)[::-1])[::-1])
    out = np.empty(m)
    out[order] = adj
    return out


def critical_values(df: np.ndarray, level: float, method: str, n_means: int,
                    m: int) -> np.ndarray:
    """Multipliers of the SE for simultaneous intervals (one per contrast)."""
    method = _check(method)
    df = np.asarray(df, dtype=float)
    out = np.empty(len(df))
    for i, d in enumerate(df):
        dd = d if np.isfinite(d) else 1e7
        if method == "tukey" and n_means >= 2:
            out[i] = stats.studentized_range.ppf(level, n_means, dd) / np.sqrt(2.0)
        elif method == "dunnettx" and m > 1:
            out[i] = optimize.brentq(lambda x, d=d: _pdunnx(x, m, d) - level, 1e-6, 100.0)
        elif method == "sidak":
            out[i] = stats.t.ppf((1.0 + level ** (1.0 / m)) / 2.0, dd)
        elif method in ("bonferroni", "holm", "fdr"):
            out[i] = stats.t.ppf(1.0 - (1.0 - level) / (2.0 * m), dd)
        else:
            out[i] = stats.t.ppf(0.5 + level / 2.0, dd)
    return out
