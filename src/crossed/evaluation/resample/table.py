"""``ScoreTable``: scores of systems × tasks as arrays, from long, per-item or summary tables.

Three input forms are accepted:

* **replications** — one row per system × task × seed × bootstrap replicate (either of the
  last two may be absent);
* **per-item scores** — one row per system × task (× seed) × test item; bootstrap replicates
  are made by resampling items with replacement (the same items for every system and seed
  of a task: a paired bootstrap);
* **summaries** — one row per system × task with the mean and the seed and bootstrap SDs,
  the form in which papers publish their results (resampling is then parametric).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from crossed._conventions import renamed_keywords
from crossed._warn import warn
from crossed.evaluation.resample._util import SeedLike, as_generator

__all__ = ["ScoreTable", "as_score_table", "drop_missing", "from_items", "from_replicates",
           "from_summary"]


@dataclass(frozen=True)
class ScoreTable:
    """Scores of S systems on T tasks, with their replications or published SDs.

    Attributes
    ----------
    systems, tasks : tuple of str
        Labels, in order of first appearance.
    mean : ndarray (S, T)
        Cell means: over seeds and bootstrap replicates, as published, or for per-item
        tables the mean item score of the observed sample (not of the bootstrap replicates).
    seed_sd, boot_sd : ndarray (S, T)
        Seed-to-seed SD and bootstrap SD per cell (NaN where unknown).
    n_seeds, n_boot : ndarray (S, T)
        Number of seeds / bootstrap replicates per cell (NaN where unknown).
    values : ndarray (S, T, K, B) or None
        Replications (seed k, bootstrap replicate b), NaN-padded, valid entries first.
    boot_sd_se : ndarray (S, T) or None
        Published standard errors of the bootstrap SDs, where a table carries them.
    score : str
        Name of the score (for display).
    paired : bool
        Replication b of a task is the same resample for every system (per-item tables:
        the same item draw), so nonparametric resampling picks one b for all systems.
    """

    systems: tuple[str, ...]
    tasks: tuple[str, ...]
    mean: np.ndarray
    seed_sd: np.ndarray
    boot_sd: np.ndarray
    n_seeds: np.ndarray
    n_boot: np.ndarray
    values: np.ndarray | None = None
    boot_sd_se: np.ndarray | None = None
    score: str = "score"
    paired: bool = False

    @property
    def kind(self) -> str:
        """``"replicates"`` when replications are held, else ``"summary"``."""
        return "replicates" if self.values is not None else "summary"

    @property
    def shape(self) -> tuple[int, int]:
        """(number of systems, number of tasks)."""
        return self.mean.shape

    @property
    def within_sd(self) -> np.ndarray:
        """Total within-task SD per cell, sqrt(seed_sd² + boot_sd²) (unknown parts count 0)."""
        s2 = np.where(np.isnan(self.seed_sd), 0.0, self.seed_sd**2)
        b2 = np.where(np.isnan(self.boot_sd), 0.0, self.boot_sd**2)
        both_nan = np.isnan(self.seed_sd) & np.isnan(self.boot_sd)
        return np.where(both_nan, np.nan, np.sqrt(s2 + b2))

    def replications(self) -> tuple[np.ndarray, np.ndarray]:
        """Replications flattened per cell: (S, T, K·B) array (valid first) and counts (S, T)."""
        if self.values is None:
            raise ValueError("this table holds summaries only; nonparametric replication "
                             "resampling needs replications (seeds or bootstrap replicates)")
        S, T, K, B = self.values.shape
        flat = self.values.reshape(S, T, K * B)
        order = np.argsort(np.isnan(flat), axis=-1, kind="stable")
        flat = np.take_along_axis(flat, order, axis=-1)
        return flat, (~np.isnan(flat)).sum(axis=-1)

    def to_frame(self) -> pd.DataFrame:
        """Tidy per-cell table: system, task, mean, seed_sd, boot_sd, within_sd, n_seeds, n_boot."""
        S, T = self.shape
        return pd.DataFrame({
            "system": np.repeat(self.systems, T),
            "task": np.tile(self.tasks, S),
            "mean": self.mean.ravel(),
            "seed_sd": self.seed_sd.ravel(),
            "boot_sd": self.boot_sd.ravel(),
            "within_sd": self.within_sd.ravel(),
            "n_seeds": self.n_seeds.ravel(),
            "n_boot": self.n_boot.ravel(),
        })


def _labels(col: pd.Series) -> tuple[np.ndarray, tuple[str, ...]]:
    codes, uniques = pd.factorize(col.astype(str), sort=False)
    return codes, tuple(str(u) for u in uniques)


def _complete(mean: np.ndarray, systems: tuple, tasks: tuple, missing: str):
    """Rows/columns to keep so that every kept system has every kept task."""
    have = ~np.isnan(mean)
    keep_s = np.ones(len(systems), bool)
    keep_t = np.ones(len(tasks), bool)
    if have.all():
        return keep_s, keep_t
    if missing == "error":
        s, t = np.argwhere(~have)[0]
        raise ValueError(f"no score for system {systems[s]!r} on task {tasks[t]!r}")
    if missing == "drop_systems":
        keep_s = have.all(axis=1)
        dropped = [systems[i] for i in np.flatnonzero(~keep_s)]
        kind = "systems"
    elif missing == "drop_tasks":
        keep_t = have.all(axis=0)
        dropped = [tasks[i] for i in np.flatnonzero(~keep_t)]
        kind = "tasks"
    else:
        raise ValueError("missing must be 'drop_systems', 'drop_tasks' or 'error', "
                         f"got {missing!r}")
    if keep_s.sum() < 2 or keep_t.sum() < 1:
        raise ValueError(f"dropping incomplete {kind} leaves too little data")
    warn(f"dropped {len(dropped)} {kind} without a score on every "
         f"{'task' if kind == 'systems' else 'system'}: {', '.join(dropped[:5])}"
         f"{' ...' if len(dropped) > 5 else ''}", UserWarning)
    return keep_s, keep_t


def _within_cell_index(df: pd.DataFrame, keys: list[str], col: str | None) -> np.ndarray:
    """0-based index of ``col``'s distinct values within each group of ``keys``."""
    if col is None:
        return np.zeros(len(df), dtype=np.int64)
    return (df.groupby(keys, sort=False)[col].rank(method="dense").to_numpy() - 1).astype(np.int64)


def drop_missing(data: pd.DataFrame, cols: list[str], system: str) -> pd.DataFrame:
    """``data[cols]`` without the rows that miss a value, with a warning that counts them
    per system and names the columns (never a silent drop)."""
    missing_cols = [c for c in cols if c not in data.columns]
    if missing_cols:
        raise KeyError(f"column(s) {missing_cols} not in the table; it has {list(data.columns)}")
    df = data[cols]
    for c in cols:
        values = df[c]
        if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
                values.dtype):
            infinite = np.isinf(values.to_numpy(dtype=float, na_value=np.nan))
            if infinite.any():
                raise ValueError(f"column {c!r} has {int(infinite.sum())} infinite values "
                                 "(first in row {}); drop those rows or set them missing"
                                 .format(int(np.flatnonzero(infinite)[0])))
    bad = df.isna().any(axis=1).to_numpy()
    if bad.all():
        raise ValueError("the table has no rows" + (" with a value in every one of "
                         f"{', '.join(map(repr, cols))}" if len(df) else ""))
    if not bad.any():
        return df
    which = df.loc[bad, system].astype(object).where(df.loc[bad, system].notna(),
                                                     "<no system>")
    counts = which.astype(str).value_counts(sort=False)
    shown = ", ".join(f"{name} ({n})" for name, n in list(counts.items())[:10])
    more = f" and {len(counts) - 10} more" if len(counts) > 10 else ""
    nan_cols = [c for c in cols if df.loc[bad, c].isna().any()]
    warn(f"dropped {int(bad.sum())} of {len(df)} rows with a missing value in "
         f"{', '.join(map(repr, nan_cols))}; rows per system: {shown}{more}",
         UserWarning)
    return df.loc[~bad]


@renamed_keywords(seed="seed_col")
def from_replicates(data: pd.DataFrame, score: str, system: str = "system",
                    task: str = "task", seed_col: str | None = None, boot: str | None = None,
                    missing: str = "drop_systems") -> ScoreTable:
    """A ScoreTable from a long table of replications.

    Parameters
    ----------
    data : DataFrame
        One row per system × task × seed × bootstrap replicate.
    score, system, task : str
        Column names of the score and of the system and task labels.
    seed_col, boot : str, optional
        Columns naming the training seed and the bootstrap replicate; at least one is
        needed when a system × task cell has more than one row. (``seed=`` is not a column
        name: passing it raises a TypeError pointing here.)
    missing : {"drop_systems", "drop_tasks", "error"}
        What to do when some system lacks some task.

    Rows missing the score or a label are dropped with a warning that counts them per
    system.
    """
    df = drop_missing(data, [c for c in (system, task, seed_col, boot, score) if c is not None],
                       system)
    s_codes, systems = _labels(df[system])
    t_codes, tasks = _labels(df[task])
    df = df.assign(_s=s_codes, _t=t_codes)
    df["_k"] = _within_cell_index(df, ["_s", "_t"], seed_col)
    df["_b"] = _within_cell_index(df, ["_s", "_t", "_k"], boot)
    if df.duplicated(["_s", "_t", "_k", "_b"]).any():
        raise ValueError("several rows share one system × task × seed × boot cell; "
                         "name the seed_col= and/or boot= columns")
    S, T = len(systems), len(tasks)
    K, B = int(df["_k"].max()) + 1, int(df["_b"].max()) + 1
    values = np.full((S, T, K, B), np.nan)
    values[df["_s"], df["_t"], df["_k"], df["_b"]] = df[score].to_numpy(float)
    return _from_values(values, systems, tasks, score, missing, has_seed=seed_col is not None,
                        has_boot=boot is not None)


def _from_values(values: np.ndarray, systems, tasks, score: str, missing: str,
                 has_seed: bool, has_boot: bool,
                 seed_means: np.ndarray | None = None) -> ScoreTable:
    """A ScoreTable from (S, T, K, B) replications. ``seed_means`` (S, T, K), when given,
    are the per-seed statistics of the observed sample (per-item tables: the item mean,
    not the mean of its bootstrap replicates); the cell mean is their mean over seeds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if seed_means is None:
            seed_means = np.nanmean(values, axis=3)                  # (S, T, K)
            mean = np.nanmean(values, axis=(2, 3))
        else:
            mean = np.nanmean(seed_means, axis=2)
        n_boot_k = (~np.isnan(values)).sum(axis=3)                   # (S, T, K)
        n_seeds = (n_boot_k > 0).sum(axis=2).astype(float)
        seed_sd = np.nanstd(seed_means, axis=2, ddof=1) if has_seed else np.full(mean.shape, np.nan)
        if has_boot:
            boot_var = np.nanvar(values, axis=3, ddof=1)             # (S, T, K)
            boot_sd = np.sqrt(np.nanmean(boot_var, axis=2))
            n_boot = np.where(n_seeds > 0, n_boot_k.sum(axis=2) / np.maximum(n_seeds, 1), np.nan)
        else:
            boot_sd = np.full(mean.shape, np.nan)
            n_boot = np.full(mean.shape, np.nan)
    if not has_seed:
        n_seeds = np.full(mean.shape, np.nan)
    keep_s, keep_t = _complete(mean, systems, tasks, missing)
    ix = np.ix_(keep_s, keep_t)
    return ScoreTable(
        systems=tuple(np.asarray(systems, dtype=object)[keep_s]),
        tasks=tuple(np.asarray(tasks, dtype=object)[keep_t]),
        mean=mean[ix], seed_sd=seed_sd[ix], boot_sd=boot_sd[ix], n_seeds=n_seeds[ix],
        n_boot=n_boot[ix], values=values[keep_s][:, keep_t], score=score,
    )


@renamed_keywords(seed_is_random=True, random_state="seed")
def from_items(data: pd.DataFrame, score: str, system: str = "system", task: str = "task",
               item: str = "item", seed_col: str | None = None, n_boot: int = 200,
               seed: SeedLike = None, missing: str = "drop_systems") -> ScoreTable:
    """A ScoreTable from per-item scores, with bootstrap replicates made by resampling items.

    Each replicate is the mean item score over ``n_i`` items drawn with replacement from the
    ``n_i`` items of the task; the same draw is used for every system and seed of a task
    (a paired bootstrap). Cells lacking an item get NaN for it and average the rest. The
    cell mean is the mean item score of the observed sample (the statistic on the original
    items), the bootstrap replicates give the SDs.

    Parameters
    ----------
    data : DataFrame
        One row per system × task (× seed) × item.
    score, system, task, item, seed_col : str
        Column names (``seed_col``: the training seed, optional).
    n_boot : int
        Bootstrap replicates per task.
    seed : int or Generator, optional
        Random seed of the item bootstrap.
    """
    rng = as_generator(seed)
    cols = [c for c in (system, task, seed_col, item, score) if c is not None]
    df = drop_missing(data, cols, system)
    s_codes, systems = _labels(df[system])
    t_codes, tasks = _labels(df[task])
    df = df.assign(_s=s_codes, _t=t_codes, _k=_within_cell_index(df.assign(_s=s_codes, _t=t_codes),
                                                                  ["_s", "_t"], seed_col))
    S, T, K = len(systems), len(tasks), int(df["_k"].max()) + 1
    values = np.full((S, T, K, n_boot), np.nan)
    sample = np.full((S, T, K), np.nan)             # mean item score of the observed sample
    for t in range(T):
        sub = df[df["_t"] == t]
        i_codes, i_labels = pd.factorize(sub[item].astype(str))
        n_items = len(i_labels)
        mat = np.full((n_items, S, K), np.nan)
        mat[i_codes, sub["_s"].to_numpy(), sub["_k"].to_numpy()] = sub[score].to_numpy(float)
        counts = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot)
        have = ~np.isnan(mat)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sample[:, t] = np.nanmean(mat, axis=0)
        filled = np.where(have, mat, 0.0).reshape(n_items, S * K)
        num = counts @ filled                                           # (B, S*K)
        den = counts @ have.reshape(n_items, S * K).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            rep = (num / den).reshape(n_boot, S, K)
        values[:, t] = np.moveaxis(rep, 0, -1)
    st = _from_values(values, systems, tasks, score, missing, has_seed=seed_col is not None,
                      has_boot=True, seed_means=sample)
    return replace(st, paired=True)


def from_summary(data: pd.DataFrame, mean: str, system: str = "system", task: str = "task",
                 seed_sd: str | None = None, boot_sd: str | None = None,
                 n_seeds: str | float | None = None, n_boot: str | float | None = None,
                 boot_sd_se: str | None = None, missing: str = "drop_systems") -> ScoreTable:
    """A ScoreTable from a published summary: per system × task mean and SDs.

    Parameters
    ----------
    data : DataFrame
        One row per system × task.
    mean, system, task : str
        Column names of the mean score and the labels.
    seed_sd, boot_sd : str, optional
        Columns with the SD across seeds and the bootstrap SD.
    n_seeds, n_boot : str or number, optional
        Number of seeds / bootstrap replicates: a column name or one number for all cells.
    boot_sd_se : str, optional
        Column with the standard error of the bootstrap SD, when published.
    """
    if data.duplicated([system, task]).any():
        raise ValueError(f"several rows per {system} × {task}: a summary table has one per cell")
    s_codes, systems = _labels(data[system])
    t_codes, tasks = _labels(data[task])
    S, T = len(systems), len(tasks)

    def grid(spec) -> np.ndarray:
        out = np.full((S, T), np.nan)
        if spec is None:
            return out
        if isinstance(spec, str):
            out[s_codes, t_codes] = pd.to_numeric(data[spec], errors="coerce").to_numpy(float)
        else:
            out[s_codes, t_codes] = float(spec)
        return out

    m = grid(mean)
    keep_s, keep_t = _complete(m, systems, tasks, missing)
    ix = np.ix_(keep_s, keep_t)
    se = grid(boot_sd_se)[ix] if boot_sd_se is not None else None
    return ScoreTable(
        systems=tuple(np.asarray(systems, dtype=object)[keep_s]),
        tasks=tuple(np.asarray(tasks, dtype=object)[keep_t]),
        mean=m[ix], seed_sd=grid(seed_sd)[ix], boot_sd=grid(boot_sd)[ix],
        n_seeds=grid(n_seeds)[ix], n_boot=grid(n_boot)[ix], boot_sd_se=se, score=mean,
    )


@renamed_keywords(seed_is_random=True, random_state="seed")
def as_score_table(table, score: str | None = None, system: str = "system", task: str = "task",
                   seed_col: str | None = None, boot: str | None = None, item: str | None = None,
                   mean: str | None = None, seed_sd: str | None = None,
                   boot_sd: str | None = None, n_seeds=None, n_boot=None,
                   seed: SeedLike = None, missing: str = "drop_systems") -> ScoreTable:
    """Dispatch to :func:`from_replicates`, :func:`from_items` or :func:`from_summary`.

    A ScoreTable is returned as is. With ``item`` the table is per-item; with ``mean`` (or
    ``seed_sd``/``boot_sd``) it is a summary; otherwise ``score`` holds replications.
    """
    if isinstance(table, ScoreTable):
        return table
    if item is not None:
        return from_items(table, score, system, task, item, seed_col,
                          n_boot=int(n_boot or 200), seed=seed, missing=missing)
    if mean is not None or seed_sd is not None or boot_sd is not None:
        return from_summary(table, mean or score, system, task, seed_sd, boot_sd, n_seeds,
                            n_boot, missing=missing)
    if score is None:
        raise ValueError("name the score column (score=) or the summary columns (mean=, ...)")
    return from_replicates(table, score, system, task, seed_col, boot, missing=missing)
