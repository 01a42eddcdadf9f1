"""Almost Stochastic Order (ASO): ε_min of del Barrio et al. (2018) as used by Dror et al. (2019).

For score samples A and B (higher is better) with empirical quantile functions F⁻¹ and
G⁻¹, the violation ratio is

    ε_W2(A, B) = ∫_V (F⁻¹(t) − G⁻¹(t))² dt / ∫_0^1 (F⁻¹(t) − G⁻¹(t))² dt,
    V = {t : F⁻¹(t) < G⁻¹(t)}        (where A is worse than B),

integrated on the grid t = dt, 2dt, ..., 1 − dt. Its bootstrap SD σ̂ is the SD of
sqrt(nm/(n+m)) (ε*_b − ε) over bootstrap samples (each sample drawn with replacement from
A and B), and

    ε_min = clip(ε + Φ⁻¹(1 − α) σ̂ / sqrt(nm/(n+m)), 0, 1)

with confidence 1 − α (for k comparisons raised to 1 − α + α/k, as deepsig does). ε_min < 0.5
says A is almost stochastically larger than B; small values (0.2 is a common bar) say so
firmly. The quantile function is the left-continuous empirical one,
F⁻¹(t) = x₍⌈nt⌉₎, as in deepsig; the numbers agree with deepsig's ``aso`` to within
bootstrap noise (tests/evaluation/resample/test_aso.py). Bootstrap draws are vectorised
over iterations and over any leading batch dimensions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from crossed.evaluation.resample._util import SeedLike, as_generator

__all__ = ["aso", "aso_batch", "aso_matrix", "violation_ratio"]


def _grid(dt: float) -> np.ndarray:
    return np.arange(dt, 1.0, dt)


def _grid_pairs(n: int, m: int, dt: float):
    """Order-statistic indices (i into A, j into B) met on the grid, with their counts.

    F⁻¹(t) = a₍⌈nt⌉₎ is constant between jumps, so the grid sums reduce to a weighted sum
    over the distinct (i, j) pairs — at most n + m of them instead of 1/dt grid points.
    The second weight vector leaves out the first grid point: like deepsig (and the code of
    Dror et al.), the violation integral starts at t = 2dt while the total starts at dt.
    """
    t = _grid(dt)
    ia = np.clip(np.ceil(n * t).astype(np.int64) - 1, 0, n - 1)
    ib = np.clip(np.ceil(m * t).astype(np.int64) - 1, 0, m - 1)
    pairs, inverse, counts = np.unique(np.stack([ia, ib]), axis=1, return_inverse=True,
                                       return_counts=True)
    w_viol = counts.astype(float)
    w_viol[np.ravel(inverse)[0]] -= 1.0
    return pairs[0], pairs[1], counts.astype(float), w_viol


def violation_ratio(a: np.ndarray, b: np.ndarray, dt: float = 0.005) -> np.ndarray:
    """ε_W2(A, B) over the last axis (batched over leading axes); 0.5 when F⁻¹ = G⁻¹."""
    ia, ib, w, w_viol = _grid_pairs(a.shape[-1], b.shape[-1], dt)
    f = np.sort(a, axis=-1)[..., ia]
    g = np.sort(b, axis=-1)[..., ib]
    d2 = (g - f) ** 2
    total = (w * d2).sum(axis=-1)
    viol = np.where(f < g, w_viol * d2, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, viol / np.where(total > 0, total, 1.0), 0.5)


def aso_batch(a: np.ndarray, b: np.ndarray, confidence_level: float = 0.95,
              num_comparisons: int = 1, n_bootstrap: int = 1000, dt: float = 0.005,
              seed: SeedLike = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ε_min for batches of sample pairs: ``a`` (..., n) against ``b`` (..., m).

    Returns
    -------
    eps_min, violation, sigma : ndarray (...)
        ε_min, the violation ratio ε_W2(A, B) and the bootstrap SD σ̂.
    """
    rng = as_generator(seed)
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    n, m = a.shape[-1], b.shape[-1]
    if n < 1 or m < 1:
        raise ValueError("both samples must be non-empty")
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a = np.broadcast_to(a, (*batch, n))
    b = np.broadcast_to(b, (*batch, m))
    eps = violation_ratio(a, b, dt)
    ia = rng.integers(0, n, size=(n_bootstrap, *batch, n))
    ib = rng.integers(0, m, size=(n_bootstrap, *batch, m))
    boot_a = np.take_along_axis(np.broadcast_to(a, (n_bootstrap, *batch, n)), ia, axis=-1)
    boot_b = np.take_along_axis(np.broadcast_to(b, (n_bootstrap, *batch, m)), ib, axis=-1)
    eps_b = violation_ratio(boot_a, boot_b, dt)                     # (n_bootstrap, ...)
    const = np.sqrt(n * m / (n + m))
    sigma = np.std(const * (eps_b - eps), axis=0)
    level = confidence_level + (1 - confidence_level) / num_comparisons \
        if num_comparisons > 1 else confidence_level
    eps_min = np.clip(eps - sigma / const * norm.ppf(1 - level), 0.0, 1.0)
    return eps_min, eps, sigma


def aso(scores_a, scores_b, confidence_level: float = 0.95, num_comparisons: int = 1,
        n_bootstrap: int = 1000, dt: float = 0.005, seed: SeedLike = None) -> float:
    """ε_min of Almost Stochastic Order: how far A is from being stochastically larger than B.

    Parameters
    ----------
    scores_a, scores_b : array-like
        Scores (e.g. over seeds) of the system suspected to be better (A) and of the other.
    confidence_level : float
        Confidence of the bootstrap bound (0.95).
    num_comparisons : int
        Bonferroni correction for this many comparisons.
    n_bootstrap : int
        Bootstrap iterations for σ̂.
    dt : float
        Integration step.
    seed : int or numpy Generator, optional

    Returns
    -------
    float
        ε_min in [0, 1]; below 0.5 A is almost stochastically better than B.
    """
    e, _, _ = aso_batch(np.asarray(scores_a, float), np.asarray(scores_b, float),
                        confidence_level, num_comparisons, n_bootstrap, dt, seed)
    return float(e)


def aso_matrix(samples: dict | pd.DataFrame, confidence_level: float = 0.95,
               bonferroni: bool = True, n_bootstrap: int = 1000, dt: float = 0.005,
               seed: SeedLike = None, system: str = "system",
               score: str = "score") -> pd.DataFrame:
    """ε_min for every ordered pair of systems.

    Parameters
    ----------
    samples : dict or DataFrame
        ``{system: scores}``, or a long DataFrame with ``system`` and ``score`` columns.
    bonferroni : bool
        Adjust the confidence for the S(S−1)/2 comparisons (as deepsig's ``multi_aso``).

    Returns
    -------
    DataFrame
        One row per ordered pair: ``system_a``, ``system_b``, ``eps_min`` (ε_min of "a is
        better than b"), ``violation_ratio`` (ε_W2), ``sigma`` (bootstrap SD σ̂).
        attrs: ``conf_level``, ``num_comparisons``.
    """
    if isinstance(samples, pd.DataFrame):
        samples = {k: g[score].to_numpy(float)
                   for k, g in samples.groupby(system, sort=False)}
    names = list(samples)
    k = len(names) * (len(names) - 1) // 2
    rng = as_generator(seed)
    rows = []
    for i, na in enumerate(names):
        for j, nb in enumerate(names):
            if i == j:
                continue
            e, v, s = aso_batch(np.asarray(samples[na], float), np.asarray(samples[nb], float),
                                confidence_level, k if bonferroni else 1, n_bootstrap, dt, rng)
            rows.append({"system_a": na, "system_b": nb, "eps_min": float(e),
                         "violation_ratio": float(v), "sigma": float(s)})
    out = pd.DataFrame(rows)
    out.attrs.update(conf_level=confidence_level, num_comparisons=k if bonferroni else 1)
    return out
