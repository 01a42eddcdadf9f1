"""Leaderboard aggregates (mean, geometric mean, median over tasks) with resampled uncertainty.

One resample is a replication of the whole leaderboard followed by a draw of tasks:

1. **replication** — every system × task score is redrawn: ``"parametric"`` adds Gaussian
   noise with the cell's within-task SD (sqrt(seed SD² + boot SD²)); ``"nonparametric"``
   picks one of the cell's replications (a seed / bootstrap replicate) at random;
   ``"none"`` keeps the observed means;
2. **tasks** — ``"fixed"`` keeps every task; ``"bootstrap"`` draws ``n_tasks`` tasks with
   replacement; ``"subsample"`` draws ``n_tasks`` distinct tasks (without replacement);
3. each system's score is aggregated over the drawn tasks.

All resamples of a chunk are drawn as arrays (no Python loop per resample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from crossed._conventions import renamed_keywords
from crossed._warn import warn
from crossed.evaluation.resample._util import (
    SeedLike,
    as_generator,
    chunks,
    progress_iter,
    z_value,
)
from crossed.evaluation.resample.table import ScoreTable, as_score_table
from crossed.tables import ResultDisplay

__all__ = ["AGGREGATES", "REPLICATION_MODES", "Resamples", "TASK_MODES", "aggregate",
           "aggregates", "draw_task_scores", "per_task_mode", "resample_aggregates",
           "summarize_resamples"]

AGGREGATES = ("mean", "geometric_mean", "median")
TASK_MODES = ("fixed", "bootstrap", "subsample")
REPLICATION_MODES = ("parametric", "nonparametric", "none")


def aggregate(x: np.ndarray, name: str, axis: int = -1) -> np.ndarray:
    """Aggregate scores over ``axis``: ``mean``, ``geometric_mean`` or ``median``.

    The geometric mean is exp(mean(log x)) over x clipped at 0 (a zero score gives 0).
    """
    if name == "mean":
        return x.mean(axis=axis)
    if name == "median":
        return np.median(x, axis=axis)
    if name == "geometric_mean":
        with np.errstate(divide="ignore"):
            return np.exp(np.log(np.maximum(x, 0.0)).mean(axis=axis))
    raise ValueError(f"unknown aggregate {name!r}; one of {', '.join(AGGREGATES)}")


@dataclass(frozen=True, repr=False)
class Resamples(ResultDisplay):
    """Resampled aggregates of every system.

    Attributes
    ----------
    systems : tuple of str
    aggregates : tuple of str
    observed : ndarray (S, A)
        Aggregates of the observed means over all tasks.
    draws : ndarray (R, S, A)
        Aggregates in each of R resamples.
    tasks, replication : str
        How tasks and replications were resampled.
    n_tasks : int
        Tasks per resample.
    higher_is_better : bool
    """

    systems: tuple[str, ...]
    aggregates: tuple[str, ...]
    observed: np.ndarray
    draws: np.ndarray
    tasks: str
    replication: str
    n_tasks: int
    higher_is_better: bool = True
    settings: dict = field(default_factory=dict)

    @property
    def n_resamples(self) -> int:
        """Number of resamples R."""
        return self.draws.shape[0]


def _default_n_tasks(T: int, tasks: str) -> int:
    return T if tasks != "subsample" else max(2, T // 2)


def draw_task_scores(table: ScoreTable, n: int, rng: np.random.Generator,
                     tasks: str = "fixed", n_tasks: int | None = None,
                     replication: str = "parametric") -> np.ndarray:
    """``n`` resampled score matrices, shape (n, S, n_tasks) (see the module notes)."""
    if tasks not in TASK_MODES:
        raise ValueError(f"tasks must be one of {TASK_MODES}, got {tasks!r}")
    if replication not in REPLICATION_MODES:
        raise ValueError(f"replication must be one of {REPLICATION_MODES}, got {replication!r}")
    S, T = table.shape
    if replication == "parametric":
        sd = np.nan_to_num(table.within_sd)
        scores = table.mean[None] + rng.standard_normal((n, S, T)) * sd[None]
    elif replication == "nonparametric":
        flat, counts = table.replications()
        # paired tables (per-item bootstrap): one replicate index per task for all systems
        u = rng.random((n, 1, T) if table.paired else (n, S, T))
        idx = (u * counts[None]).astype(np.int64)
        scores = np.take_along_axis(flat[None], idx[..., None], axis=-1)[..., 0]
    else:
        scores = np.broadcast_to(table.mean, (n, S, T))
    if tasks == "fixed":
        return np.asarray(scores)
    k = n_tasks or _default_n_tasks(T, tasks)
    if tasks == "bootstrap":
        idx = rng.integers(0, T, size=(n, k))
    else:
        if k > T:
            if n_tasks:
                raise ValueError(f"cannot subsample n_tasks={k} of the table's {T} tasks "
                                 "without replacement")
            raise ValueError(f"subsampling tasks needs at least 2 tasks; the table has {T} "
                             f"({', '.join(map(str, table.tasks))})")
        idx = np.argsort(rng.random((n, T)), axis=1)[:, :k]
    return np.take_along_axis(scores, np.broadcast_to(idx[:, None, :], (n, S, k)), axis=2)


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def resample_aggregates(table, aggregates: tuple[str, ...] | list[str] = AGGREGATES,
                        n_resamples: int = 10_000, tasks: str = "fixed",
                        n_tasks: int | None = None, replication: str = "parametric",
                        higher_is_better: bool = True, seed: SeedLike = None,
                        progress: bool | None = None, **columns) -> Resamples:
    """Resample the leaderboard and aggregate each system's scores over tasks.

    Parameters
    ----------
    table : ScoreTable or DataFrame
        Scores; a DataFrame is read with :func:`as_score_table` using ``columns``
        (score=, system=, task=, seed_col=, boot=, mean=, seed_sd=, boot_sd=, ...);
        ``seed=`` is the random seed.
    aggregates : sequence of str
        Any of ``mean``, ``geometric_mean``, ``median``.
    n_resamples : int
    tasks : {"fixed", "bootstrap", "subsample"}
    n_tasks : int, optional
        Tasks per resample (default: all for bootstrap, half for subsample).
    replication : {"parametric", "nonparametric", "none"}
    higher_is_better : bool
        Direction of the score (for ranks).
    seed : int or numpy Generator, optional
    progress : bool, optional
        Progress over chunks of resamples; default only in an interactive terminal or a
        Jupyter kernel.

    Notes
    -----
    Validated on ``ner_like`` against closed forms: with tasks fixed and parametric
    replication the SE of the mean is sqrt(Σ within_sd²)/T; with tasks bootstrapped and
    no replication noise it is SD_ddof0(task means)/sqrt(T); with one stored seed drawn per
    cell, the variance of the mean is Σ var_ddof0(seeds)/T² (test_resample_aggregates.py).
    """
    from crossed._conventions import check_count

    n_resamples = check_count("n_resamples", n_resamples)  # 0 gave an IndexError
    if n_tasks is not None:
        n_tasks = check_count("n_tasks", n_tasks)
    rng = as_generator(seed)
    st = as_score_table(table, seed=rng, **columns)
    aggs = tuple(aggregates)
    for a in aggs:
        aggregate(np.ones((1, 1)), a)                    # validate names early
    S, T = st.shape
    observed = np.stack([aggregate(st.mean, a, axis=1) for a in aggs], axis=1)
    out = np.empty((n_resamples, S, len(aggs)))
    desc = f"resampling ({tasks} tasks, {replication})"
    for a, b in progress_iter(chunks(n_resamples), total=len(chunks(n_resamples)), desc=desc,
                              enabled=progress):
        x = draw_task_scores(st, b - a, rng, tasks, n_tasks, replication)
        for j, name in enumerate(aggs):
            out[a:b, :, j] = aggregate(x, name, axis=-1)
    if "geometric_mean" in aggs and (st.mean <= 0).any():
        warn("some scores are <= 0: their geometric mean is 0", UserWarning)
    return Resamples(systems=st.systems, aggregates=aggs, observed=observed, draws=out,
                     tasks=tasks, replication=replication,
                     n_tasks=T if tasks == "fixed" else (n_tasks or _default_n_tasks(T, tasks)),
                     higher_is_better=higher_is_better,
                     settings={"score": st.score, "n_tasks_total": T})


def summarize_resamples(res: Resamples, level: float = 0.95) -> pd.DataFrame:
    """Tidy table of aggregates with standard errors and intervals from a :class:`Resamples`.

    Returns
    -------
    DataFrame
        One row per system × aggregate. Columns: ``system``, ``aggregate``; ``estimate``
        (aggregate of the observed means over all tasks); ``resample_mean`` (mean of the
        resampled aggregates); ``std_error`` (their SD, ddof=1); ``conf_low``,
        ``conf_high`` (normal interval, estimate ± z·SE, z = 1.96 at 95 %); ``pct_low``,
        ``pct_high`` (percentile interval of the resampled aggregates); ``half_width``
        ((pct_high − pct_low) / 2). attrs: ``conf_level``, ``tasks``, ``replication``,
        ``n_resamples``, ``n_tasks``.
    """
    z = z_value(level)
    alpha = (1 - level) / 2
    se = res.draws.std(axis=0, ddof=1)
    lo, hi = np.quantile(res.draws, [alpha, 1 - alpha], axis=0)
    S, A = res.observed.shape
    df = pd.DataFrame({
        "system": np.repeat(res.systems, A),
        "aggregate": np.tile(res.aggregates, S),
        "estimate": res.observed.ravel(),
        "resample_mean": res.draws.mean(axis=0).ravel(),
        "std_error": se.ravel(),
        "conf_low": (res.observed - z * se).ravel(),
        "conf_high": (res.observed + z * se).ravel(),
        "pct_low": lo.ravel(),
        "pct_high": hi.ravel(),
        "half_width": ((hi - lo) / 2).ravel(),
    })
    df.attrs.update(conf_level=level, tasks=res.tasks, replication=res.replication,
                    n_resamples=res.n_resamples, n_tasks=res.n_tasks)
    return df


def per_task_mode(table, tasks: str | tuple[str, ...], seed: SeedLike, columns: dict,
                  analyse: Callable[[ScoreTable, str, np.random.Generator], pd.DataFrame],
                  ) -> pd.DataFrame:
    """``analyse(score_table, mode, rng)`` for each task mode, stacked with a leading
    ``tasks`` column. One score table serves every mode (a per-item table's bootstrap is
    drawn once, so the estimate is the same for every mode), and one generator is drawn
    from in mode order."""
    rng = as_generator(seed)
    st = as_score_table(table, seed=rng, **columns)
    modes = (tasks,) if isinstance(tasks, str) else tuple(tasks)
    parts = [analyse(st, mode, rng).assign(tasks=mode) for mode in modes]
    out = pd.concat(parts, ignore_index=True)
    return out[["tasks"] + [c for c in out.columns if c != "tasks"]]


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def aggregates(table, aggregates: tuple[str, ...] | list[str] = AGGREGATES,
               n_resamples: int = 10_000, tasks: str | tuple[str, ...] = ("fixed", "bootstrap"),
               replication: str = "parametric", level: float = 0.95, seed: SeedLike = None,
               n_tasks: int | None = None, progress: bool | None = None,
               **columns) -> pd.DataFrame:
    """Aggregates across tasks per system with SEs and normal and percentile intervals.

    Parameters are those of :func:`resample_aggregates`; ``tasks`` may name several task
    modes, giving one block of rows per mode (column ``tasks``).

    Returns
    -------
    DataFrame
        Columns ``tasks`` (task mode) then those of :func:`summarize_resamples`.
    """
    out = per_task_mode(
        table, tasks, seed, columns,
        lambda st, mode, rng: summarize_resamples(resample_aggregates(
            st, aggregates, n_resamples, mode, n_tasks, replication, seed=rng,
            progress=progress), level))
    out.attrs.update(conf_level=level, replication=replication, n_resamples=n_resamples)
    return out
