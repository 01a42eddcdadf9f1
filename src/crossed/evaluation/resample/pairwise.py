"""Pairwise differences between systems' aggregates, with resampled SDs and effect sizes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample._util import SeedLike, z_value
from crossed.evaluation.resample.aggregates import (
    AGGREGATES,
    Resamples,
    per_task_mode,
    resample_aggregates,
)


def differences_from_resamples(res: Resamples, level: float = 0.95,
                               threshold: float = 2.0) -> pd.DataFrame:
    """Pairwise differences ``system_a − system_b`` of every aggregate in a :class:`Resamples`.

    Returns
    -------
    DataFrame
        One row per aggregate × ordered pair (a ≠ b). Columns: ``aggregate``,
        ``system_a``, ``system_b``; ``estimate`` (difference of the observed aggregates);
        ``resample_mean`` (mean resampled difference); ``std_error`` (SD of the resampled
        differences, ddof=1); ``effect_size`` (estimate / std_error); ``large``
        (|effect_size| ≥ ``threshold``, 2 by default); ``conf_low``, ``conf_high``
        (percentile interval of the resampled differences); ``share_positive`` (share of
        resamples in which a beats b, in the direction of ``higher_is_better``).

    Notes
    -----
    Differences are taken within each resample (paired), so their SD includes the
    correlation that shared tasks induce. Effect sizes follow reuben (Sälevä et al.):
    observed difference over the resampled SD. Checked against direct computations on
    ``ner_like`` (test_resample_aggregates.py).
    """
    S, A = res.observed.shape
    alpha = (1 - level) / 2
    ia, ib = np.nonzero(~np.eye(S, dtype=bool))
    diff = res.draws[:, ia, :] - res.draws[:, ib, :]                 # (R, P, A)
    est = res.observed[ia] - res.observed[ib]                          # (P, A)
    sd = diff.std(axis=0, ddof=1)
    lo, hi = np.quantile(diff, [alpha, 1 - alpha], axis=0)
    sign = 1.0 if res.higher_is_better else -1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        es = np.where(sd > 0, est / sd, np.nan)
    P = len(ia)
    df = pd.DataFrame({
        "aggregate": np.repeat(np.asarray(res.aggregates)[None], P, 0).T.ravel(),
        "system_a": np.tile(np.asarray(res.systems, dtype=object)[ia], A),
        "system_b": np.tile(np.asarray(res.systems, dtype=object)[ib], A),
        "estimate": est.T.ravel(),
        "resample_mean": diff.mean(axis=0).T.ravel(),
        "std_error": sd.T.ravel(),
        "effect_size": es.T.ravel(),
        "conf_low": lo.T.ravel(),
        "conf_high": hi.T.ravel(),
        "share_positive": (sign * diff > 0).mean(axis=0).T.ravel(),
    })
    df.insert(7, "large", np.abs(df["effect_size"].to_numpy()) >= threshold)
    df.attrs.update(conf_level=level, tasks=res.tasks, replication=res.replication,
                    n_resamples=res.n_resamples, n_tasks=res.n_tasks, threshold=threshold)
    return df


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def pairwise_differences(table, aggregates=AGGREGATES, n_resamples: int = 10_000,
                         tasks: str | tuple[str, ...] = ("fixed", "subsample"),
                         n_tasks: int | None = None, replication: str = "parametric",
                         level: float = 0.95, threshold: float = 2.0,
                         higher_is_better: bool = True, seed: SeedLike = None,
                         progress: bool | None = None, **columns) -> pd.DataFrame:
    """Mean pairwise differences between systems with resampled SDs and effect sizes.

    By default computed twice: with tasks fixed (only replications resampled) and with
    tasks subsampled without replacement (``n_tasks``, default half of them) — column
    ``tasks``. Other parameters as in :func:`resample_aggregates`.

    Returns
    -------
    DataFrame
        Column ``tasks`` then those of :func:`differences_from_resamples`.
    """
    out = per_task_mode(
        table, tasks, seed, columns,
        lambda st, mode, rng: differences_from_resamples(resample_aggregates(
            st, aggregates, n_resamples, mode, n_tasks, replication, higher_is_better,
            seed=rng, progress=progress), level, threshold))
    out.attrs.update(conf_level=level, threshold=threshold, n_resamples=n_resamples)
    return out


def difference_matrix(differences: pd.DataFrame, aggregate: str = "mean",
                      value: str = "estimate", tasks: str | None = None) -> pd.DataFrame:
    """Systems × systems matrix (row minus column) of one column of a differences table."""
    d = differences[differences["aggregate"] == aggregate]
    if tasks is not None and "tasks" in d.columns:
        d = d[d["tasks"] == tasks]
    elif "tasks" in d.columns:
        d = d[d["tasks"] == d["tasks"].iloc[0]]
    order = list(pd.unique(pd.concat([d["system_a"], d["system_b"]])))
    m = d.pivot(index="system_a", columns="system_b", values=value).reindex(
        index=order, columns=order)
    m.index.name, m.columns.name = None, None
    return m


__all__ = ["difference_matrix", "differences_from_resamples", "pairwise_differences",
           "z_value"]
