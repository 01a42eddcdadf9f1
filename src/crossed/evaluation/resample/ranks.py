"""Distribution of each system's rank across resamples of the leaderboard."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample._util import SeedLike, as_generator
from crossed.evaluation.resample.aggregates import (
    AGGREGATES,
    Resamples,
    resample_aggregates,
)
from crossed.evaluation.resample.table import as_score_table

__all__ = ["rank_distribution", "rank_table", "ranks_from_resamples"]


def ranks_from_resamples(res: Resamples) -> pd.DataFrame:
    """Share of resamples in which each system takes each rank, for every aggregate.

    Rank 1 is the best (highest score when ``higher_is_better``); ties share the lowest
    rank of their group (``method="min"``).

    Returns
    -------
    DataFrame
        One row per aggregate × system × rank (1..S). Columns: ``aggregate``, ``system``,
        ``rank``; ``share`` (share of resamples at that rank; sums to 1 per aggregate and
        system); ``observed_rank`` (rank on the observed aggregates); ``mean_rank`` (mean
        rank over resamples). attrs: ``tasks``, ``replication``, ``n_resamples``.

    Notes
    -----
    Checked on ``ner_like``: shares sum to 1 per system and per rank, observed ranks
    follow the observed aggregates (test_resample_aggregates.py).
    """
    sign = -1.0 if res.higher_is_better else 1.0
    R, S, A = res.draws.shape
    ranks = rankdata(sign * res.draws, axis=1, method="min").astype(np.int64)       # (R, S, A)
    obs = rankdata(sign * res.observed, axis=0, method="min").astype(np.int64)      # (S, A)
    # counts[s, a, k] = resamples where system s has rank k+1 under aggregate a
    flat = (np.arange(S)[None, :, None] * A + np.arange(A)[None, None, :]) * S + ranks - 1
    counts = np.bincount(flat.ravel(), minlength=S * A * S).reshape(S, A, S)
    share = counts / R
    mean_rank = ranks.mean(axis=0)
    a_idx, s_idx, k_idx = np.meshgrid(np.arange(A), np.arange(S), np.arange(S), indexing="ij")
    df = pd.DataFrame({
        "aggregate": np.asarray(res.aggregates)[a_idx.ravel()],
        "system": np.asarray(res.systems, dtype=object)[s_idx.ravel()],
        "rank": k_idx.ravel() + 1,
        "share": share[s_idx.ravel(), a_idx.ravel(), k_idx.ravel()],
        "observed_rank": obs[s_idx.ravel(), a_idx.ravel()],
        "mean_rank": mean_rank[s_idx.ravel(), a_idx.ravel()],
    })
    df.attrs.update(tasks=res.tasks, replication=res.replication, n_resamples=R)
    return df


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def rank_distribution(table, aggregates=AGGREGATES, n_resamples: int = 10_000,
                      tasks: str = "bootstrap", n_tasks: int | None = None,
                      replication: str = "parametric", higher_is_better: bool = True,
                      seed: SeedLike = None, progress: bool | None = None,
                      **columns) -> pd.DataFrame:
    """Rank distribution of each system under each aggregate (see :func:`ranks_from_resamples`).

    Resampling as in :func:`resample_aggregates`; by default tasks are drawn with
    replacement and replications parametrically.
    """
    rng = as_generator(seed)
    st = as_score_table(table, seed=rng, **columns)
    res = resample_aggregates(st, aggregates, n_resamples, tasks, n_tasks, replication,
                              higher_is_better, seed=rng, progress=progress)
    return ranks_from_resamples(res)


def rank_table(ranks: pd.DataFrame, aggregate: str = "mean",
               tasks: str | None = None) -> pd.DataFrame:
    """Systems × ranks table of shares for one aggregate (rows ordered by mean rank).

    Parameters
    ----------
    ranks : DataFrame
        Output of :func:`rank_distribution` / :func:`ranks_from_resamples`, or
        ``analyze(...).ranks`` (which holds several task modes in a ``tasks`` column).
    aggregate : str
        The aggregate to show.
    tasks : str, optional
        The task mode to show when ``ranks`` holds several (``"fixed"``, ``"bootstrap"``).
        By default every mode is shown, one block of rows per mode: the index is then
        (``tasks``, system).

    Returns
    -------
    DataFrame
        Index: system (or tasks, system); columns: rank 1..S; values: shares.
    """
    d = ranks[ranks["aggregate"] == aggregate]
    if d.empty:
        raise ValueError(f"no ranks for aggregate {aggregate!r}; the table has "
                         f"{', '.join(map(repr, pd.unique(ranks['aggregate'])))}")
    modes = list(pd.unique(d["tasks"])) if "tasks" in d.columns else [None]
    if tasks is not None:
        if tasks not in modes:
            raise ValueError(f"no ranks for tasks={tasks!r}; the table has "
                             f"{', '.join(map(repr, modes))}")
        modes = [tasks]
    blocks = []
    for mode in modes:
        sub = d if mode is None else d[d["tasks"] == mode]
        m = sub.pivot(index="system", columns="rank", values="share")
        order = sub.drop_duplicates("system").sort_values("mean_rank", kind="stable")["system"]
        blocks.append(m.reindex(index=list(order)))
    if len(blocks) == 1:
        m = blocks[0]
        m.index.name, m.columns.name = None, "rank"
        return m
    m = pd.concat(blocks, keys=modes, names=["tasks", None])
    m.columns.name = "rank"
    return m
