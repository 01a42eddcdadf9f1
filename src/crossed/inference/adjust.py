"""Multiplicity adjustments of p values and confidence intervals, as emmeans 1.8.4 applies them.

Within one family (one ``by`` group) of m contrasts among k means:

- ``tukey``: studentized range, p = P(Q_{k,df} > √2·|t|) (R's ``ptukey`` quadrature);
  intervals ± q_{k,df}(level)/√2·SE. With k = 2 means the studentized range of the two
  is √2·|t| exactly, so the two-sided t p value and t quantile are used (no quadrature).
- ``dunnettx``: emmeans' approximation to Dunnett's test, a weighted mix of the Tukey and
  Šidák probabilities (``.pdunnx``); intervals by inverting it.
- ``sidak``: 1 − (1 − p)^m; ``bonferroni``: min(1, m·p); ``holm`` and ``fdr`` (Benjamini–
  Hochberg): R's ``p.adjust``. Intervals: Šidák and Bonferroni critical values; ``holm``
  and ``fdr`` intervals use Bonferroni, as emmeans does.
- ``mvt``: the multivariate t distribution of the family's t ratios (their correlation
  from the covariance of the contrasts): p = 1 − P(max |T_j| < |t|), intervals from its
  equicoordinate quantile, with df = ⌊df + 0.25⌋ as emmeans passes them to mvtnorm
  (df > 9999 or infinite: normal). emmeans computes these probabilities with mvtnorm's
  randomised quasi-Monte Carlo (``GenzBretz``, abseps 0.001); here the same Genz
  transformation is integrated with 2^16 scrambled Sobol points (fixed seed, so results
  are reproducible; error ~1e-5). The two agree to R's own Monte Carlo error (~1e-3).
- ``none``: unadjusted.

Rows with a NaN statistic (contrasts that are not estimable) keep a NaN p value and
interval but count in the family size, as in emmeans (``p.adjust(p, n = m)``).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import optimize, special, stats

__all__ = ["METHODS", "adjust_p", "critical_values", "mvt_box", "mvt_df", "ptukey_sf",
           "qtukey"]

METHODS = ("tukey", "dunnettx", "mvt", "sidak", "bonferroni", "holm", "fdr", "none")


def _check(method: str) -> str:
    m = str(method).lower()
    if m == "bh":
        m = "fdr"
    if m not in METHODS:
        raise ValueError(f"unknown adjustment {method!r}; use one of {', '.join(METHODS)}")
    return m


_X12, _A12 = np.polynomial.legendre.leggauss(12)
_X16, _A16 = np.polynomial.legendre.leggauss(16)


def _wprob(w: np.ndarray, rr: float, cc: float) -> np.ndarray:
    """P(range of cc standard normals < w) ^ rr by the quadrature of Copenhaver & Holland
    (1988, algorithm AS 190 as used by R's ``ptukey``), vectorised over w."""
    w = np.asarray(w, dtype=float)
    c1, c3, bb = -30.0, 60.0, 8.0
    half = 0.5 * w
    pr = 2.0 * special.ndtr(half) - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        pr = np.where(pr >= np.exp(c1 / cc), pr**cc, 0.0)
    n_panels = np.where(w > 3.0, 2, 3)
    extra = np.zeros_like(w)
    for npan in (2, 3):
        mask = n_panels == npan
        if not np.any(mask):
            continue
        wm = w[mask]
        lo = 0.5 * wm
        step = (bb - lo) / npan
        acc = np.zeros_like(wm)
        for _ in range(npan):
            hi = lo + step
            a, b = 0.5 * (hi + lo), 0.5 * (hi - lo)
            ac = a[:, None] + b[:, None] * _X12[None, :]
            sq = ac * ac
            inner = special.ndtr(ac) - special.ndtr(ac - wm[:, None])
            with np.errstate(divide="ignore", invalid="ignore"):
                term = np.where((inner >= np.exp(c1 / (cc - 1.0))) & (sq <= c3),
                                _A12[None, :] * np.exp(-0.5 * sq) * inner ** (cc - 1.0), 0.0)
            acc += np.sum(term, axis=1) * (2.0 * b) * cc / np.sqrt(2.0 * np.pi)
            lo = hi
        extra[mask] = acc
    pr = pr + extra
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(pr <= np.exp(c1 / rr), 0.0, pr**rr)
    return np.minimum(np.where(half >= bb, 1.0, out), 1.0)


def ptukey_sf(q: float, k: float, df: float) -> float:
    """Upper tail of the studentized range distribution, P(Q_{k,df} > q).

    The quadrature of algorithm AS 190 (Copenhaver & Holland 1988) that R's ``ptukey``
    uses, so that p values agree with emmeans' to ~1e-9 relative, including where that
    quadrature loses accuracy (df > 800, p < 1e-8).
    """
    if df < 2:  # R's ptukey: NaN (with a warning) below 2 df, where AS 190 fails
        return np.nan
    if not q > 0:
        return 1.0
    if not np.isfinite(df) or df > 25000:
        return float(1.0 - _wprob(np.array([q]), 1.0, k)[0])
    f2 = 0.5 * df
    lconst = f2 * np.log(df) - df * np.log(2.0) - special.gammaln(f2)
    ulen = 1.0 if df <= 100 else 0.5 if df <= 800 else 0.25 if df <= 5000 else 0.125
    lconst += np.log(ulen)
    total = 0.0
    for i in range(1, 51):
        x = (2 * i - 1) * ulen + _X16 * ulen
        lt = lconst + (f2 - 1.0) * np.log(x) - 0.25 * df * x
        ok = lt >= -30.0
        part = float(np.sum(_wprob(q * np.sqrt(0.5 * x[ok]), 1.0, k) * _A16[ok]
                            * np.exp(lt[ok])))
        if i * ulen >= 1.0 and part <= 1e-14:
            break
        total += part
    return float(1.0 - min(total, 1.0))


def qtukey(level: float, k: float, df: float) -> float:
    """Quantile of the studentized range distribution (inverse of :func:`ptukey_sf`)."""
    return _qtukey(float(level), float(k), float(np.round(df, 6)) if np.isfinite(df) else df)


@functools.lru_cache(maxsize=512)
def _qtukey(level: float, k: float, df: float) -> float:
    if df < 2:  # R's qtukey: NaN below 2 df (the interval is then NaN, as in emmeans)
        return np.nan
    return float(optimize.brentq(lambda q: ptukey_sf(q, k, df) - (1.0 - level), 1e-8, 100.0,
                                 xtol=1e-10))


def _ptukey_sf(q: float, k: int, df: float) -> float:
    """P(Q_{k,df} > q); exact (the two-sided t p value of q/√2) for k ≤ 2 means."""
    if np.isnan(q) or np.isnan(df):
        return np.nan
    if k <= 2:
        return float(2.0 * stats.t.sf(q / np.sqrt(2.0), df))
    return ptukey_sf(q, k, df)


def _pdunnx(x: float, m: int, df: float) -> float:
    """emmeans' ``.pdunnx``: P(all |t| ≤ x) for m comparisons with a control."""
    k = (1.0 + np.sqrt(1.0 + 8.0 * m)) / 2.0
    twt = (m - 1.0) / m
    tuk = 1.0 - _ptukey_sf(np.sqrt(2.0) * x, k, df) if m > 1 else 0.0
    sid = (stats.f.cdf(x * x, 1, df) if np.isfinite(df) else stats.chi2.cdf(x * x, 1)) ** m
    return twt * tuk + (1.0 - twt) * sid


def mvt_df(df: float) -> int:
    """emmeans' ``.fix.df``: the integer df given to mvtnorm (0 = normal)."""
    if np.isnan(df):
        return 0
    if df > 0:
        df = max(1.0, df)
    if not np.isfinite(df) or df > 9999:
        return 0
    return int(np.floor(df + 0.25))


@functools.lru_cache(maxsize=64)
def _points(k: int, df: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scrambled Sobol points for the k-1 conditioning variables and the t scale
    sqrt(χ²_df / df) at each point (ones for the normal)."""
    u = stats.qmc.Sobol(k + (1 if df else 0), scramble=True, seed=seed).random_base2(m)
    scale = np.sqrt(special.chdtri(df, 1.0 - u[:, k]) / df) if df else np.ones(len(u))
    return u[:, :k], scale


def mvt_box(limit: float, corr: np.ndarray, df: int, m: int = 16, seed: int = 20261126
            ) -> float:
    """P(|T_j| ≤ limit for all j), T multivariate t with correlation ``corr`` and ``df``
    degrees of freedom (0: multivariate normal).

    Genz's sequential conditioning (the transformation mvtnorm's ``GenzBretz`` integrates)
    with the t scale as one more variable, averaged over 2^m scrambled Sobol points; the
    points are fixed (``seed``), so the probability is a smooth function of ``limit``.
    """
    corr = np.asarray(corr, dtype=float)
    k = corr.shape[0]
    if k == 1:
        return float(2.0 * (stats.t.cdf(limit, df) if df else special.ndtr(limit)) - 1.0)
    L = np.linalg.cholesky(corr + 1e-12 * np.eye(k))
    diag = np.maximum(np.diag(L), 1e-8)
    u, scale = _points(k, df, m, seed)
    b = limit * scale
    y = np.zeros((len(u), k))
    prob = np.ones(len(u))
    for i in range(k):
        shift = y[:, :i] @ L[i, :i]
        lo = special.ndtr((-b - shift) / diag[i])
        hi = special.ndtr((b - shift) / diag[i])
        width = np.maximum(hi - lo, 0.0)
        prob *= width
        if i < k - 1:
            y[:, i] = special.ndtri(np.clip(lo + u[:, i] * width, 1e-300, 1 - 1e-16))
    return float(np.mean(prob))


def _mvt_p(t: np.ndarray, df: np.ndarray, corr: np.ndarray) -> np.ndarray:
    out = np.full(len(t), np.nan)
    ok = ~np.isnan(t)
    for i in np.flatnonzero(ok):
        sub = corr[np.ix_(ok, ok)]
        out[i] = min(1.0, max(0.0, 1.0 - mvt_box(abs(t[i]), sub, mvt_df(df[i]))))
    return out


def _mvt_crit(level: float, df: np.ndarray, corr: np.ndarray) -> np.ndarray:
    out = np.full(len(df), np.nan)
    ok = ~np.isnan(df)
    sub = corr[np.ix_(ok, ok)]
    cache: dict[int, float] = {}
    for i in np.flatnonzero(ok):
        d = mvt_df(df[i])
        if d not in cache:  # between the unadjusted and the Bonferroni quantiles
            dd = d if d else np.inf
            m = sub.shape[0]
            lo = float(stats.t.ppf(0.5 + level / 2.0, dd)) * 0.999
            hi = float(stats.t.ppf(1.0 - (1.0 - level) / (2.0 * m), dd)) * 1.001
            cache[d] = float(optimize.brentq(lambda x, d=d: mvt_box(x, sub, d) - level,
                                             lo, hi, xtol=1e-9))
        out[i] = cache[d]
    return out


def adjust_p(t: np.ndarray, df: np.ndarray, p: np.ndarray, method: str,
             n_means: int, corr: np.ndarray | None = None) -> np.ndarray:
    """Adjusted p values of one family.

    Parameters
    ----------
    t, df, p : numpy.ndarray
        t ratios, their df and unadjusted two-sided p values (one per contrast).
    method : str
        One of :data:`METHODS`.
    n_means : int
        Number of means compared (the Tukey family size).
    corr : numpy.ndarray, optional
        Correlation matrix of the contrasts (needed by ``mvt``).
    """
    method = _check(method)
    t, df, p = (np.asarray(a, dtype=float) for a in (t, df, p))
    m = len(p)  # family size: NaN (non-estimable) rows count, as in emmeans
    if m == 0 or method == "none":
        return p.copy()
    if method == "mvt":
        if corr is None:
            raise ValueError("the mvt adjustment needs the correlation of the contrasts")
        return _mvt_p(t, df, np.asarray(corr, dtype=float))
    if method == "tukey":
        return np.array([_ptukey_sf(np.sqrt(2.0) * abs(ti), n_means, d)
                         for ti, d in zip(t, df, strict=True)])
    if method == "dunnettx":
        return np.array([np.nan if np.isnan(ti) or np.isnan(d) else 1.0 - _pdunnx(abs(ti), m, d)
                         for ti, d in zip(t, df, strict=True)])
    if method == "sidak":
        return 1.0 - (1.0 - p) ** m
    if method == "bonferroni":
        return np.minimum(1.0, m * p)
    out = np.full(m, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    ps = p[order]
    r = len(ps)
    if method == "holm":  # R's p.adjust(p, "holm", n = m)
        adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(r)) * ps))
    else:  # fdr (Benjamini–Hochberg), R's p.adjust(p, "BH", n = m)
        adj = np.minimum(1.0, np.minimum.accumulate((m / np.arange(1, r + 1) * ps)[::-1])[::-1])
    out[order] = adj
    return out


def critical_values(df: np.ndarray, level: float, method: str, n_means: int,
                    m: int, corr: np.ndarray | None = None) -> np.ndarray:
    """Multipliers of the SE for simultaneous intervals (one per contrast); ``corr``: the
    correlation of the contrasts, for ``mvt``."""
    method = _check(method)
    df = np.asarray(df, dtype=float)
    if method == "mvt" and m > 1:
        if corr is None:
            raise ValueError("the mvt adjustment needs the correlation of the contrasts")
        return _mvt_crit(level, df, np.asarray(corr, dtype=float))
    out = np.empty(len(df))
    for i, d in enumerate(df):
        dd = d if np.isfinite(d) else 1e7
        if np.isnan(d):  # a non-estimable contrast
            out[i] = np.nan
        elif method == "tukey" and n_means > 2:
            out[i] = qtukey(level, n_means, d) / np.sqrt(2.0)
        elif method == "dunnettx" and m > 1 and d < 2:
            out[i] = np.nan  # its tukey-based quantile is NaN below 2 df (R's qtukey)
        elif method == "dunnettx" and m > 1:
            out[i] = optimize.brentq(lambda x, d=d: _pdunnx(x, m, d) - level, 1e-6, 100.0)
        elif method == "sidak":
            out[i] = stats.t.ppf((1.0 + level ** (1.0 / m)) / 2.0, dd)
        elif method in ("bonferroni", "holm", "fdr"):
            out[i] = stats.t.ppf(1.0 - (1.0 - level) / (2.0 * m), dd)
        else:
            out[i] = stats.t.ppf(0.5 + level / 2.0, dd)
    return out
