"""Variance components of evaluation scores: between tasks, seed to seed, bootstrap to bootstrap.

Definitions (all SDs with ddof=1, i.e. sample SDs as pandas computes them):

* task mean ``m[s, t]`` — mean of all replications of system s on task t;
* **between-task SD** — SD over tasks of the task means of a system;
* **seed SD** of a cell — SD across seeds of the per-seed means (mean over bootstrap
  replicates within a seed);
* **boot SD** of a cell — square root of the mean over seeds of the bootstrap variance
  (variance across bootstrap replicates within one seed);
* **within-task SD** of a cell — sqrt(seed SD² + boot SD²), the SD of one replication
  around the task mean;
* pooled (per-system) seed, boot and within SDs — root mean square over tasks.

Standard errors come from resampling: tasks with replacement for the mean and the
between-task SD; seeds (and bootstrap replicates within seeds) with replacement for the
seed and boot SDs when replications are held; for a published summary the within-cell
parts are parametric — a sample variance from n seeds is drawn as σ² χ²(n−1)/(n−1).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample._util import SeedLike, as_generator, chunks, progress_iter
from crossed.evaluation.resample.table import ScoreTable, as_score_table
from crossed.tables import ResultDisplay

__all__ = ["COMPONENTS", "VarianceComponents", "variance_components"]

COMPONENTS = ("mean", "between_task_sd", "seed_sd", "boot_sd", "within_sd")


@dataclass(frozen=True, repr=False)
class VarianceComponents(ResultDisplay):
    """Result of :func:`variance_components`.

    Attributes
    ----------
    components : DataFrame
        One row per system × component. Columns: ``system``; ``component`` (``mean``: the
        mean over tasks of the task means; ``between_task_sd``; ``seed_sd``, ``boot_sd``,
        ``within_sd``: pooled over tasks as a root mean square); ``estimate``;
        ``std_error`` (resampling SD of the estimate, NaN where it cannot be resampled);
        ``task_mean``, ``task_sd``, ``task_min``, ``task_max`` — mean, SD, min and max
        across tasks of the per-task values (task means for ``mean``; per-task SDs for the
        seed/boot/within components; NaN for ``between_task_sd``).
    per_task : DataFrame
        One row per system × task: ``system, task, mean, seed_sd, boot_sd, within_sd,
        n_seeds, n_boot``.
    n_resamples : int
        Resamples behind the standard errors.
    """

    components: pd.DataFrame
    per_task: pd.DataFrame
    n_resamples: int

    def wide(self, value: str = "estimate") -> pd.DataFrame:
        """Systems × components table of ``value`` (estimate, std_error, task_mean, ...)."""
        out = self.components.pivot(index="system", columns="component", values=value)
        out = out.reindex(index=pd.unique(self.components["system"]),
                          columns=[c for c in COMPONENTS if c in out.columns])
        out.columns.name = None
        return out


def _rms(x: np.ndarray, axis: int = -1) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.sqrt(np.nanmean(x**2, axis=axis))


def _pooled(table: ScoreTable) -> dict[str, np.ndarray]:
    return {"seed_sd": _rms(table.seed_sd), "boot_sd": _rms(table.boot_sd),
            "within_sd": _rms(table.within_sd)}


def _se_tasks(mean: np.ndarray, n_resamples: int, rng, show) -> tuple[np.ndarray, np.ndarray]:
    """Resampling SEs of the mean and the SD of task means, tasks drawn with replacement."""
    S, T = mean.shape
    means, sds = [], []
    for a, b in progress_iter(chunks(n_resamples), desc="tasks", enabled=show):
        idx = rng.integers(0, T, size=(b - a, T))
        m = mean[:, idx]                                         # (S, R, T)
        means.append(m.mean(axis=-1))
        sds.append(m.std(axis=-1, ddof=1) if T > 1 else np.full(m.shape[:2], np.nan))
    return (np.concatenate(means, axis=1).std(axis=1, ddof=1),
            np.concatenate(sds, axis=1).std(axis=1, ddof=1))


def _se_within_replicates(table: ScoreTable, n_resamples: int, rng, show):
    """SEs of the pooled seed/boot/within SDs by resampling seeds and bootstrap replicates."""
    vals = table.values
    S, T, K, B = vals.shape
    n_b = (~np.isnan(vals)).sum(axis=3)                           # (S, T, K)
    n_k = (n_b > 0).sum(axis=2)                                   # (S, T)
    # pack each cell's seeds so the valid ones come first
    order = np.argsort(n_b == 0, axis=2, kind="stable")
    vals = np.take_along_axis(vals, order[..., None], axis=2)
    n_b = np.take_along_axis(n_b, order, axis=2)
    has_seed = not np.isnan(table.seed_sd).all()
    has_boot = not np.isnan(table.boot_sd).all()
    out = {"seed_sd": [], "boot_sd": [], "within_sd": []}
    step = max(1, 200_000 // max(1, S * T * K * B))
    for a, b in progress_iter(chunks(n_resamples, step), desc="replications", enabled=show):
        r = b - a
        ks = (rng.random((r, S, T, K)) * n_k[None, :, :, None]).astype(np.int64)
        v = np.take_along_axis(vals[None], ks[..., None], axis=3)           # (r,S,T,K,B)
        nb = np.take_along_axis(n_b[None], ks, axis=3)                       # (r,S,T,K)
        if has_boot and B > 1:
            bs = (rng.random((r, S, T, K, B)) * nb[..., None]).astype(np.int64)
            v = np.take_along_axis(v, bs, axis=4)
        kmask = np.arange(K)[None, None, None, :] < n_k[None, :, :, None]
        v = np.where(kmask[..., None], v, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            seed_var = np.nanvar(np.nanmean(v, axis=4), axis=3, ddof=1) if has_seed else None
            boot_var = np.nanmean(np.nanvar(v, axis=4, ddof=1), axis=3) if has_boot else None
        sv = seed_var if seed_var is not None else np.zeros((r, S, T))
        bv = boot_var if boot_var is not None else np.zeros((r, S, T))
        out["seed_sd"].append(_rms(np.sqrt(sv)) if has_seed else np.full((r, S), np.nan))
        out["boot_sd"].append(_rms(np.sqrt(bv)) if has_boot else np.full((r, S), np.nan))
        out["within_sd"].append(_rms(np.sqrt(sv + bv)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {k: np.nanstd(np.concatenate(v, axis=0), axis=0, ddof=1) for k, v in out.items()}


def _se_within_summary(table: ScoreTable, n_resamples: int, rng) -> dict[str, np.ndarray]:
    """Parametric SEs of pooled SDs: sample variances drawn as σ² χ²(n−1)/(n−1) per cell."""
    S, T = table.shape

    def draw(sd: np.ndarray, n: np.ndarray, se: np.ndarray | None) -> np.ndarray:
        var = np.full((n_resamples, S, T), np.nan)
        ok = ~np.isnan(sd) & ~np.isnan(n) & (n > 1)
        if ok.any():
            df = (n - 1)[ok]
            var[:, ok] = sd[ok] ** 2 * rng.chisquare(df, size=(n_resamples, ok.sum())) / df
        if se is not None:                               # published SE of the SD: normal draw
            ok2 = ~ok & ~np.isnan(sd) & ~np.isnan(se)
            if ok2.any():
                var[:, ok2] = np.abs(sd[ok2] + se[ok2] * rng.standard_normal(
                    (n_resamples, ok2.sum()))) ** 2
        return var

    seed_var = draw(table.seed_sd, table.n_seeds, None)
    boot_var = draw(table.boot_sd, table.n_boot, table.boot_sd_se)
    within = np.where(np.isnan(seed_var) & np.isnan(boot_var), np.nan,
                      np.nan_to_num(seed_var) + np.nan_to_num(boot_var))
    # the within SD is resampled only where every known part of it could be
    part_missing = ((~np.isnan(table.seed_sd)) & np.isnan(seed_var)) | (
        (~np.isnan(table.boot_sd)) & np.isnan(boot_var))
    within = np.where(part_missing, np.nan, within)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = {}
        for name, v in (("seed_sd", seed_var), ("boot_sd", boot_var), ("within_sd", within)):
            pooled = np.sqrt(np.mean(v, axis=-1))                 # NaN if any cell unknown
            res[name] = np.std(pooled, axis=0, ddof=1) if n_resamples > 1 else np.nan
        return res


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def variance_components(table, score: str | None = None, system: str = "system",
                        task: str = "task", seed_col: str | None = None,
                        boot: str | None = None, *, item: str | None = None,
                        mean: str | None = None, seed_sd: str | None = None,
                        boot_sd: str | None = None, n_seeds=None, n_boot=None,
                        n_resamples: int = 1000, seed: SeedLike = None,
                        progress: bool | None = None) -> VarianceComponents:
    """Between-task, seed, bootstrap and total within-task SDs per system, with SEs.

    Parameters
    ----------
    table : DataFrame or ScoreTable
        Long table of replications (``score`` per ``system`` × ``task`` × seed ×
        ``boot``), per-item scores (give ``item``; bootstrap replicates are drawn from the
        items), or a published summary (give ``mean`` and ``seed_sd``/``boot_sd``).
    score, system, task, boot, item : str, optional
        Column names.
    seed_col : str, optional
        Column naming the training seed of each row.
    mean, seed_sd, boot_sd, n_seeds, n_boot : optional
        Summary columns (``n_seeds``/``n_boot`` may be numbers).
    n_resamples : int
        Resamples behind the standard errors.
    seed : int or numpy Generator, optional
        Random seed of the resampling (same seed, same numbers). As everywhere in
        ``crossed``, ``seed=`` is a random seed and ``seed_col=`` a column of seeds.
    progress : bool, optional
        Show progress; default only in an interactive terminal or a Jupyter kernel.

    Returns
    -------
    VarianceComponents
        ``components`` (per system) and ``per_task`` tables; see the class.

    Raises
    ------
    TypeError
        For the old spellings: ``seed="<column>"`` (now ``seed_col=``),
        ``random_state=`` (now ``seed=``) and ``progress_bar=`` (now ``progress=``).

    Notes
    -----
    Validated against direct numpy/pandas computations of the same definitions on
    ``ner_like`` (tests/evaluation/resample/test_variance.py).
    """
    rng = as_generator(seed)
    st = as_score_table(table, score, system, task, seed_col, boot, item, mean, seed_sd,
                        boot_sd, n_seeds, n_boot, seed=rng)
    S, T = st.shape
    pooled = _pooled(st)
    se_mean, se_between = _se_tasks(st.mean, n_resamples, rng, progress)
    if st.kind == "replicates":
        se_within = _se_within_replicates(st, n_resamples, rng, progress)
    else:
        se_within = _se_within_summary(st, n_resamples, rng)

    per_cell = {"mean": st.mean, "seed_sd": st.seed_sd, "boot_sd": st.boot_sd,
                "within_sd": st.within_sd}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        estimates = {"mean": st.mean.mean(axis=1),
                     "between_task_sd": st.mean.std(axis=1, ddof=1) if T > 1
                     else np.full(S, np.nan), **pooled}
        ses = {"mean": se_mean, "between_task_sd": se_between, **se_within}
        summaries = {k: (np.nanmean(v, axis=1), np.nanstd(v, axis=1, ddof=1),
                         np.nanmin(v, axis=1), np.nanmax(v, axis=1))
                     for k, v in per_cell.items()}
    for i, name in enumerate(st.systems):
        for comp in COMPONENTS:
            tm, tsd, tmin, tmax = (x[i] for x in summaries[comp]) if comp in summaries \
                else (np.nan,) * 4
            rows.append({"system": name, "component": comp,
                         "estimate": float(estimates[comp][i]),
                         "std_error": float(np.asarray(ses[comp])[i]) if np.ndim(ses[comp])
                         else float(ses[comp]),
                         "task_mean": tm, "task_sd": tsd, "task_min": tmin, "task_max": tmax})
    comps = pd.DataFrame(rows)
    comps.attrs.update(score=st.score, n_resamples=n_resamples, kind=st.kind)
    return VarianceComponents(components=comps, per_task=st.to_frame(), n_resamples=n_resamples)
