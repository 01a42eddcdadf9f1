"""How large must an evaluation set be for the leaderboard to stay put?

Given per-item scores of many systems (and seeds) on one evaluation set, subsets of given
sizes are drawn with three strategies:

* ``seq`` — the last items of the set (one deterministic subset per size);
* ``rand`` — items drawn at random without replacement;
* ``rand_seq`` — a contiguous run of items starting at a random position.

Sizes count items, or tokens (``unit="tokens"``, with a ``tokens`` column): a subset then
holds whole items (sentences) until their tokens reach the size. On each subset every
system's score is recomputed (mean item score, or micro-F1 from summed ``tp, fp, fn``
counts), averaged over seeds, and the systems are ranked. Reported per subset: Kendall's
τ-b and weighted τ (scipy's ``weightedtau``, hyperbolic weights favouring the top) between
the subset's and the full set's scores, and the agreement of pairwise Almost Stochastic
Order decisions (ε_min < threshold in either direction, or neither) with the full set.
ASO samples are the per-seed scores when there are at least two seeds, else the per-item
scores of the subset (``unit="items"`` only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm, weightedtau

from crossed._conventions import check_count, renamed_keywords
from crossed.evaluation.resample._util import SeedLike, as_generator, progress_iter
from crossed.evaluation.resample.aso import violation_ratio
from crossed.evaluation.resample.table import ScoreTable
from crossed.tables import ResultDisplay

__all__ = ["EvalSizeResult", "STRATEGIES", "eval_size", "kendall_tau_b"]

STRATEGIES = ("seq", "rand", "rand_seq")


@dataclass(frozen=True, repr=False)
class EvalSizeResult(ResultDisplay):
    """Result of :func:`eval_size`.

    Attributes
    ----------
    subsamples : DataFrame
        One row per subset: ``strategy``, ``size`` (requested, in ``unit``), ``subsample``
        (index), ``n_items``, ``n_tokens`` (NaN without tokens), ``kendall_tau``,
        ``weighted_tau``, ``aso_agreement`` (share of system pairs whose ASO decision
        matches the full set's; NaN when ASO is off).
    summary : DataFrame
        One row per strategy × size: ``n_subsamples``, ``tau_mean``, ``tau_sd``,
        ``tau_low`` (the ``quantile`` of τ), ``weighted_tau_mean``, ``aso_agreement_mean``.
    min_size : DataFrame
        Per strategy: ``level``, ``statistic`` ("mean" or the quantile used) and ``min_size``,
        the smallest size from which τ's statistic stays at or above ``level`` for every
        larger size (NaN if never).
    full : DataFrame
        Full-set ``system``, ``score``, ``rank`` (1 = best).
    aso_full : DataFrame or None
        Full-set ε_min per ordered pair (``system_a``, ``system_b``, ``eps_min``).
    unit : str
    """

    subsamples: pd.DataFrame
    summary: pd.DataFrame
    min_size: pd.DataFrame
    full: pd.DataFrame
    aso_full: pd.DataFrame | None
    unit: str


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's τ-b between rows of ``x`` and ``y`` (..., n), vectorised; equals scipy's."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    i, j = np.triu_indices(x.shape[-1], k=1)
    sx = np.sign(x[..., i] - x[..., j])
    sy = np.sign(y[..., i] - y[..., j])
    n0 = len(i)
    tx = (sx == 0).sum(axis=-1)
    ty = (sy == 0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx * sy).sum(axis=-1) / np.sqrt((n0 - tx) * (n0 - ty))


def _masks(strategy: str, size: float, weights: np.ndarray, n_sub: int,
           rng: np.random.Generator) -> np.ndarray:
    """Boolean (n, n_items) subsets holding whole items until ``weights`` reach ``size``."""
    n_items = len(weights)
    total = weights.sum()
    if size >= total:
        return np.ones((1, n_items), bool)
    if strategy == "seq":
        cum = np.cumsum(weights[::-1])
        k = int(np.searchsorted(cum, size)) + 1            # last k items reach the size
        mask = np.zeros((1, n_items), bool)
        mask[0, n_items - k:] = True
        return mask
    if strategy == "rand":
        perm = np.argsort(rng.random((n_sub, n_items)), axis=1)
        cum = np.cumsum(weights[perm], axis=1)
        take = (cum - weights[perm]) < size                # items before the size is reached
        mask = np.zeros((n_sub, n_items), bool)
        np.put_along_axis(mask, perm, take, axis=1)
        return mask
    if strategy == "rand_seq":
        cs = np.concatenate([[0.0], np.cumsum(weights)])
        last_start = int(np.searchsorted(cs, total - size, side="right")) - 1
        starts = rng.integers(0, max(last_start, 0) + 1, size=n_sub)
        ends = np.searchsorted(cs, cs[starts] + size, side="left")      # exclusive
        idx = np.arange(n_items)
        return (idx[None] >= starts[:, None]) & (idx[None] < ends[:, None])
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def _scores(mask: np.ndarray, values: np.ndarray, counts: bool) -> np.ndarray:
    """Per-subset scores (n, S, K) from item values (n_items, S, K[, 3])."""
    w = mask.astype(float)
    if counts:
        n_items = values.shape[0]
        tot = (w @ values.reshape(n_items, -1)).reshape(len(w), *values.shape[1:])
        tp, fp, fn = tot[..., 0], tot[..., 1], tot[..., 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    n_items = values.shape[0]
    return (w @ values.reshape(n_items, -1)).reshape(len(w), *values.shape[1:]) \
        / w.sum(axis=1)[:, None, None]


def _aso_decisions(samples: np.ndarray, threshold: float, level: float, n_boot: int,
                   dt: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """ASO decisions for all pairs i < j: +1 (i better), −1 (j better), 0; and ε_min(i, j).

    ``samples`` is (..., S, n). ε_min(j, i) uses the symmetry ε_W2(B, A) = 1 − ε_W2(A, B)
    with the same bootstrap SD (as deepsig's ``multi_aso``).
    """
    S, n = samples.shape[-2:]
    i, j = np.triu_indices(S, k=1)
    a_all, b_all = samples[..., i, :], samples[..., j, :]              # (m, P, n)
    per_row = n_boot * len(i) * n * 4
    step = max(1, 4_000_000 // max(per_row, 1))
    decs, eps_out = [], []
    const = np.sqrt(n * n / (2 * n))
    for lo in range(0, a_all.shape[0], step):
        a, b = a_all[lo:lo + step], b_all[lo:lo + step]
        eps = violation_ratio(a, b, dt)
        ia = rng.integers(0, n, size=(n_boot, *a.shape))
        ib = rng.integers(0, n, size=(n_boot, *b.shape))
        eb = violation_ratio(np.take_along_axis(np.broadcast_to(a, ia.shape), ia, -1),
                             np.take_along_axis(np.broadcast_to(b, ib.shape), ib, -1), dt)
        sigma = np.std(const * (eb - eps), axis=0)
        z = norm.ppf(level) * sigma / const
        e_ij = np.clip(eps + z, 0, 1)
        e_ji = np.clip(1 - eps + z, 0, 1)
        decs.append(np.where(e_ij < threshold, 1, np.where(e_ji < threshold, -1, 0)))
        eps_out.append(e_ij)
    return np.concatenate(decs), np.concatenate(eps_out)


def _arrays_from_long(data: pd.DataFrame, score, system, item, seed_col, tokens, counts):
    df = data
    s_codes, systems = pd.factorize(df[system].astype(str))
    i_codes, items = pd.factorize(df[item].astype(str))
    if seed_col is not None:
        k_codes = (df.groupby(system, sort=False)[seed_col].rank(method="dense")
                   .to_numpy().astype(np.int64) - 1)
    else:
        k_codes = np.zeros(len(df), np.int64)
    K = int(k_codes.max()) + 1
    if pd.DataFrame({"s": s_codes, "i": i_codes, "k": k_codes}).duplicated().any():
        raise ValueError("several rows per system × item (× seed): name the seed column "
                         "(seed_col=)")
    cols = list(counts) if counts is not None else [score]
    vals = np.full((len(items), len(systems), K, len(cols)), np.nan)
    vals[i_codes, s_codes, k_codes] = df[cols].to_numpy(float)
    if np.isnan(vals).any():
        raise ValueError("every system (and seed) needs a score on every item")
    if counts is None:
        vals = vals[..., 0]
    tok = None
    if tokens is not None:
        tok = np.zeros(len(items))
        tok[i_codes] = df[tokens].to_numpy(float)
    return vals, tuple(map(str, systems)), tok


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def eval_size(data, score: str = "score", system: str = "system", item: str = "item",
              seed_col: str | None = None, tokens: str | None = None,
              counts: tuple[str, str, str] | None = None, sizes=None, unit: str = "items",
              strategies=STRATEGIES, n_subsamples: int = 50, level: float = 0.9,
              quantile: float | None = None, aso: bool = True, aso_threshold: float = 0.5,
              aso_confidence: float = 0.95, aso_bootstrap: int = 200, dt: float = 0.005,
              higher_is_better: bool = True, seed: SeedLike = None,
              progress: bool | None = None) -> EvalSizeResult:
    """Stability of the system ranking on subsets of an evaluation set, by size and strategy.

    Parameters
    ----------
    data : DataFrame or ScoreTable
        Per-item scores: one row per system × item (× seed). A :class:`ScoreTable` is
        read with its tasks as the items (per-seed means when it holds replications).
    score, system, item, seed_col, tokens : str
        Column names; ``tokens`` gives each item's length (for ``unit="tokens"``).
    counts : (tp, fp, fn) column names, optional
        Score subsets by micro-F1 from summed counts instead of the mean item score.
    sizes : sequence of numbers, optional
        Subset sizes in ``unit``; default up to 8 sizes spaced geometrically from 5 % of
        the set (at least 2 items, or the longest item's tokens) to all of it.
    unit : {"items", "tokens"}
    strategies : sequence of {"seq", "rand", "rand_seq"}
    n_subsamples : int
        Subsets per size for the random strategies.
    level : float
        τ level for ``min_size``.
    quantile : float, optional
        Judge ``min_size`` by this quantile of τ (e.g. 0.05) instead of its mean.
    aso : bool
        Compute ASO agreement (ε_min < ``aso_threshold``, confidence ``aso_confidence``,
        ``aso_bootstrap`` bootstrap iterations).
    higher_is_better : bool
    seed : int or numpy Generator, optional
    progress : bool, optional

    Returns
    -------
    EvalSizeResult
    """
    rng = as_generator(seed)
    vals, systems, tok, is_counts = _inputs(data, score, system, item, seed_col, tokens, counts)
    if unit not in ("items", "tokens"):
        raise ValueError("unit must be 'items' or 'tokens'")
    if unit == "tokens" and tok is None:
        raise ValueError("unit='tokens' needs a tokens column")
    weights = tok if unit == "tokens" else np.ones(vals.shape[0])
    sizes = _subset_sizes(sizes, weights, unit)
    n_subsamples = check_count("n_subsamples", n_subsamples)
    if not -1.0 <= level <= 1.0:  # a Kendall tau
        raise ValueError(f"level is a Kendall tau, from -1 to 1, got {level!r}")
    if quantile is not None and not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be from 0 to 1, got {quantile!r}")
    sign = 1.0 if higher_is_better else -1.0
    S, K = vals.shape[1], vals.shape[2]
    settings = _Aso(aso_threshold, aso_confidence, aso_bootstrap, dt)
    use_aso = aso and S > 1 and (K >= 2 or unit == "items")

    full_mask = np.ones((1, vals.shape[0]), bool)
    full_k = _scores(full_mask, vals, is_counts)[0]                        # (S, K)
    full = full_k.mean(axis=-1)
    aso_full = dec_full = None
    if use_aso:
        dec_full, aso_full = _full_set_aso(full_mask, full_k, vals, sign, systems, settings,
                                           rng)
    rows = []
    jobs = [(st, sz) for st in strategies for sz in sizes]
    for strategy, size in progress_iter(jobs, total=len(jobs), desc="eval-size", enabled=progress):
        mask = _masks(strategy, size, weights, n_subsamples, rng)
        per_seed = _scores(mask, vals, is_counts)                          # (n, S, K)
        agree = _aso_agreement(mask, per_seed, vals, sign, dec_full, settings, rng)
        rows += _subset_rows(strategy, size, mask, per_seed, full, sign, tok, agree)
    subs = pd.DataFrame(rows)
    summary = _summary(subs, quantile)
    return EvalSizeResult(subsamples=subs, summary=summary,
                          min_size=_min_sizes(summary, level, quantile),
                          full=_full_ranking(systems, full, sign), aso_full=aso_full, unit=unit)


@dataclass(frozen=True)
class _Aso:
    """ASO settings: ε_min threshold, confidence, bootstrap iterations, CDF step."""

    threshold: float
    confidence: float
    n_boot: int
    dt: float


def _inputs(data, score, system, item, seed_col, tokens, counts):
    """Item values (n_items, S, K[, 3]), system names, item tokens (or None) and whether
    the values are (tp, fp, fn) counts, from a long table or a :class:`ScoreTable`."""
    if isinstance(data, ScoreTable):
        vals = (np.nanmean(data.values, axis=3) if data.values is not None
                else data.mean[..., None])                               # (S, T, K)
        return np.moveaxis(vals, 1, 0), data.systems, None, False
    vals, systems, tok = _arrays_from_long(data, score, system, item, seed_col, tokens,
                                           counts)
    return vals, systems, tok, counts is not None


def _subset_sizes(sizes, weights: np.ndarray, unit: str) -> list[float]:
    """The requested sizes, sorted; by default up to 8 geometrically spaced sizes."""
    total = float(weights.sum())
    if sizes is None:
        smallest = max(0.05 * total, 2.0 if unit == "items" else float(weights.max()))
        sizes = np.unique(np.round(np.geomspace(min(smallest, total), total, 8)))
    sizes = sorted(float(s) for s in sizes)
    if not sizes:
        raise ValueError("sizes is empty: give at least one subset size")
    if sizes[0] <= 0:
        raise ValueError("subset sizes must be positive")
    return sizes


def _aso_samples(mask: np.ndarray, per_seed: np.ndarray, vals: np.ndarray,
                 sign: float) -> np.ndarray:
    """ASO samples per subset and system: the per-seed scores (n, S, K) with two seeds or
    more, else the subset's item scores (n, S, n_in)."""
    if vals.shape[2] >= 2:
        return sign * per_seed                                          # (n, S, K)
    n_in = int(mask[0].sum())
    idx = np.argsort(~mask, axis=1, kind="stable")[:, :n_in]           # (n, n_in)
    x = vals[..., 0][idx]                                               # (n, n_in, S)
    return sign * np.moveaxis(x, 1, 2)


def _full_set_aso(full_mask: np.ndarray, full_k: np.ndarray, vals: np.ndarray, sign: float,
                  systems, settings: _Aso, rng: np.random.Generator,
                  ) -> tuple[np.ndarray, pd.DataFrame]:
    """The full set's ASO decisions per pair i < j, and the table of its ε_min."""
    dec_full, e_full = _aso_decisions(_aso_samples(full_mask, full_k[None], vals, sign),
                                      settings.threshold, settings.confidence,
                                      settings.n_boot, settings.dt, rng)
    dec_full, e_full = dec_full[0], e_full[0]
    i, j = np.triu_indices(vals.shape[1], k=1)
    aso_full = pd.DataFrame({"system_a": np.asarray(systems, dtype=object)[i],
                             "system_b": np.asarray(systems, dtype=object)[j],
                             "eps_min": e_full, "decision": dec_full})
    return dec_full, aso_full


def _aso_agreement(mask: np.ndarray, per_seed: np.ndarray, vals: np.ndarray, sign: float,
                   dec_full: np.ndarray | None, settings: _Aso,
                   rng: np.random.Generator) -> np.ndarray:
    """Per subset, the share of pairs whose ASO decision is the full set's (NaN when ASO
    is off or the subsets' samples differ in size)."""
    K = vals.shape[2]
    agree = np.full(len(mask), np.nan)
    if dec_full is None:
        return agree
    if mask.all():
        agree[:] = 1.0                                   # the full set itself
    elif (K >= 2 or len(set(mask.sum(axis=1))) == 1) and (K >= 2 or mask[0].sum() >= 2):
        dec, _ = _aso_decisions(_aso_samples(mask, per_seed, vals, sign), settings.threshold,
                                settings.confidence, settings.n_boot, settings.dt, rng)
        agree = (dec == dec_full[None]).mean(axis=1)
    return agree


def _subset_rows(strategy: str, size: float, mask: np.ndarray, per_seed: np.ndarray,
                 full: np.ndarray, sign: float, tok: np.ndarray | None,
                 agree: np.ndarray) -> list[dict]:
    """One row per subset: its size and the agreement of its ranking with the full set's."""
    sub = per_seed.mean(axis=-1)                                       # (n, S)
    tau = kendall_tau_b(np.broadcast_to(full, sub.shape), sub)
    wt = np.array([weightedtau(sign * full, sign * s)[0] for s in sub])
    n_tok = (mask * tok[None]).sum(axis=1) if tok is not None else np.full(len(sub), np.nan)
    return [{"strategy": strategy, "size": size, "subsample": r,
             "n_items": int(mask[r].sum()), "n_tokens": float(n_tok[r]),
             "kendall_tau": float(tau[r]), "weighted_tau": float(wt[r]),
             "aso_agreement": float(agree[r])} for r in range(len(sub))]


def _summary(subs: pd.DataFrame, quantile: float | None) -> pd.DataFrame:
    """One row per strategy × size: τ's mean, SD and low quantile, weighted τ, ASO."""
    q = quantile if quantile is not None else 0.05
    summary = (subs.groupby(["strategy", "size"], sort=False)
               .agg(n_subsamples=("kendall_tau", "size"), tau_mean=("kendall_tau", "mean"),
                    tau_sd=("kendall_tau", "std"),
                    tau_low=("kendall_tau", lambda x: float(np.quantile(x, q))),
                    weighted_tau_mean=("weighted_tau", "mean"),
                    aso_agreement_mean=("aso_agreement", "mean"))
               .reset_index())
    summary.attrs.update(quantile=q)
    return summary


def _min_sizes(summary: pd.DataFrame, level: float, quantile: float | None) -> pd.DataFrame:
    """Per strategy, the smallest size from which τ's statistic stays at or above
    ``level`` for every larger size (NaN if never)."""
    stat_col = "tau_mean" if quantile is None else "tau_low"
    mins = []
    for strategy, g in summary.groupby("strategy", sort=False):
        ok = (g[stat_col] >= level).to_numpy()
        sz = g["size"].to_numpy()
        bad = np.flatnonzero(~ok)
        first = 0 if len(bad) == 0 else bad[-1] + 1
        mins.append({"strategy": strategy, "level": level,
                     "statistic": "mean" if quantile is None else f"q{quantile:g}",
                     "min_size": float(sz[first]) if first < len(sz) else np.nan})
    return pd.DataFrame(mins)


def _full_ranking(systems, full: np.ndarray, sign: float) -> pd.DataFrame:
    """The full set's score and rank (1 = best) per system."""
    ranks = pd.Series(sign * full).rank(ascending=False, method="min").astype(int).to_numpy()
    return pd.DataFrame({"system": systems, "score": full, "rank": ranks})
