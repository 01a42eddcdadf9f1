"""All leaderboard analyses at once: variance components, aggregates, differences, ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample._util import SeedLike, as_generator
from crossed.evaluation.resample.aggregates import (
    AGGREGATES,
    resample_aggregates,
    summarize_resamples,
)
from crossed.evaluation.resample.pairwise import differences_from_resamples
from crossed.evaluation.resample.ranks import ranks_from_resamples
from crossed.evaluation.resample.table import ScoreTable, as_score_table
from crossed.evaluation.resample.variance import VarianceComponents, variance_components
from crossed.tables import ResultDisplay

__all__ = ["LeaderboardAnalysis", "analyze"]


@dataclass(frozen=True, repr=False)
class LeaderboardAnalysis(ResultDisplay):
    """Result of :func:`analyze`.

    Attributes
    ----------
    table : ScoreTable
    variance : VarianceComponents
    aggregates : DataFrame
        :func:`summarize_resamples` rows for tasks ``fixed`` and ``bootstrap`` (column
        ``tasks``).
    pairwise : DataFrame
        :func:`differences_from_resamples` rows for tasks ``fixed`` and ``subsample``.
    ranks : DataFrame
        :func:`ranks_from_resamples` rows for tasks ``fixed`` and ``bootstrap``.
    """

    table: ScoreTable
    variance: VarianceComponents
    aggregates: pd.DataFrame
    pairwise: pd.DataFrame
    ranks: pd.DataFrame


def _tag(df: pd.DataFrame, mode: str) -> pd.DataFrame:
    return df.assign(tasks=mode)[["tasks", *df.columns]]


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def analyze(table, aggregates=AGGREGATES, n_resamples: int = 10_000,
            replication: str = "parametric", n_tasks_subsample: int | None = None,
            level: float = 0.95, threshold: float = 2.0, higher_is_better: bool = True,
            n_variance_resamples: int = 1000, seed: SeedLike = None,
            progress: bool | None = None, **columns) -> LeaderboardAnalysis:
    """Run variance components, aggregates, pairwise differences and rank distributions.

    Parameters
    ----------
    table : ScoreTable or DataFrame
        As for :func:`resample_aggregates` (columns given as keywords; seed column as
        ``seed_col``).
    n_resamples : int
        Resamples for aggregates, differences and ranks.
    replication : {"parametric", "nonparametric", "none"}
    n_tasks_subsample : int, optional
        Tasks per subsample for the differences under task subsampling (default half).
    n_variance_resamples : int
        Resamples behind the variance components' SEs.
    seed : int or numpy Generator, optional
    """
    rng = as_generator(seed)
    st = as_score_table(table, seed=rng, **columns)
    vc = variance_components(st, n_resamples=n_variance_resamples, seed=rng,
                             progress=progress)
    runs = {}
    for mode in ("fixed", "bootstrap", "subsample"):
        runs[mode] = resample_aggregates(
            st, aggregates, n_resamples, mode, n_tasks_subsample if mode == "subsample" else None,
            replication, higher_is_better, seed=rng, progress=progress)
    aggs = pd.concat([_tag(summarize_resamples(runs[m], level), m)
                      for m in ("fixed", "bootstrap")], ignore_index=True)
    pairs = pd.concat([_tag(differences_from_resamples(runs[m], level, threshold), m)
                       for m in ("fixed", "subsample")], ignore_index=True)
    ranks = pd.concat([_tag(ranks_from_resamples(runs[m]), m)
                       for m in ("fixed", "bootstrap")], ignore_index=True)
    for df in (aggs, pairs, ranks):
        df.attrs.update(conf_level=level, n_resamples=n_resamples, replication=replication)
    return LeaderboardAnalysis(table=st, variance=vc, aggregates=aggs, pairwise=pairs,
                               ranks=ranks)
