"""Missing-data robustness: remove random parts of the data, refit, test again.

For each fraction and repetition a random subset of rows (or of whole cells/groups) is
removed, the mixed model is refitted on the rest (stored design, no formula parsing) and
the test is applied; optionally the repeated-measures ANOVA is run on the same subset,
where it must drop every subject that lost a cell. The detection rate (p < alpha) per
fraction gets a Clopper–Pearson interval; failed fits and non-estimable tests are counted
separately and excluded from the rate.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed._threads import single_blas_thread
from crossed.simulate.execution import run_tasks, seed_sequence
from crossed.simulate.fastrefit import FIT_ERRORS, Refitter
from crossed.simulate.intervals import clopper_pearson
from crossed.simulate.rmanova import PreparedRMAnova, RMAnova
from crossed.simulate.simtests import RESULT_KEYS, bind_test, label_of
from crossed.tables import ResultDisplay, result_table

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["AblationResult", "COLUMNS", "DEFAULT_FRACTIONS", "removal_masks", "run_ablation"]

DEFAULT_FRACTIONS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
COLUMNS = ["fraction", "rep", "method", "n_removed", "nobs", "status", *RESULT_KEYS,
           "detected", "n_subjects", "message"]


@dataclass
class _AblationJob:
    fit: LmerFit
    test: Any
    refitter: Refitter
    groups: np.ndarray | None  # group code per row (unit removal), None: rows
    n_groups: int
    alpha: float
    rm: PreparedRMAnova | None


def _draw_keep(nobs: int, groups: np.ndarray | None, n_groups: int, fraction: float,
               rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Rows kept after removing round(fraction · n) rows (or groups) at random."""
    if groups is None:
        k = int(round(fraction * nobs))
        drop = rng.choice(nobs, size=k, replace=False)
        keep = np.ones(nobs, dtype=bool)
        keep[drop] = False
        return keep, k
    k = int(round(fraction * n_groups))
    drop = rng.choice(n_groups, size=k, replace=False)
    return ~np.isin(groups, drop), k


def _tasks(fractions: list[float], reps: int, seed: Any) -> list[tuple]:
    children = seed_sequence(seed).spawn(len(fractions))
    return [(f, r, ss) for f, child in zip(fractions, children, strict=True)
            for r, ss in enumerate(child.spawn(reps))]


def removal_masks(nobs: int, fractions=DEFAULT_FRACTIONS, reps: int = 100, seed: Any = None,
                  groups: np.ndarray | None = None) -> pd.DataFrame:
    """The subsets :func:`ablation` uses for the same arguments (e.g. to rerun them in R).

    Returns
    -------
    pandas.DataFrame
        One row per (fraction, rep): ``fraction``, ``rep``, then ``keep_<i>`` (1 if data
        row i is kept) for every row of the (complete-case) data.
    """
    fractions = [float(f) for f in fractions]
    n_groups = int(groups.max()) + 1 if groups is not None else 0
    rows = []
    for f, r, ss in _tasks(fractions, reps, seed):
        keep, _ = _draw_keep(nobs, groups, n_groups, f, np.random.default_rng(ss))
        rows.append([f, r, *keep.astype(int)])
    return pd.DataFrame(rows, columns=["fraction", "rep", *[f"keep_{i}" for i in range(nobs)]])


def _one_ablation(job: _AblationJob, item: tuple) -> list[dict]:
    fraction, rep, ss = item
    rng = np.random.default_rng(ss)
    keep, k = _draw_keep(job.fit.nobs, job.groups, job.n_groups, fraction, rng)
    base = {"fraction": fraction, "rep": rep, "n_removed": k, "nobs": int(keep.sum())}
    msg = ""
    # (one BLAS limit for the refit and its test: each would set and restore its own)
    with warnings.catch_warnings(), single_blas_thread():
        warnings.simplefilter("ignore")
        try:
            refit = job.refitter.refit(rows=keep)
            res = job.test(refit, keep)
        except FIT_ERRORS as exc:
            res = {"status": "failed", **dict.fromkeys(RESULT_KEYS, np.nan)}
            msg = f"{type(exc).__name__}: {exc}"
    p = res.get("p_value", np.nan)
    rows = [{**base, "method": "lmm", **{c: res.get(c, np.nan) for c in ("status",
                                                                          *RESULT_KEYS)},
             "detected": bool(np.isfinite(p) and p < job.alpha), "n_subjects": np.nan,
             "message": msg}]
    if job.rm is not None:
        r = job.rm(keep)
        p = r["p_value"]
        rows.append({**base, "method": "rm_anova", "status": r["status"], "estimate": np.nan,
                     "std_error": np.nan, "df": r["den_df"], "statistic": r["statistic"],
                     "p_value": p, "detected": bool(np.isfinite(p) and p < job.alpha),
                     "n_subjects": r["n_subjects"],
                     "message": "" if r["status"] == "ok" else
                     f"{r['n_subjects']} complete subject(s) left"})
    return rows


@dataclass(repr=False)
class AblationResult(ResultDisplay):
    """Result of :func:`ablation`.

    Attributes
    ----------
    test : str
        Label of the mixed-model test.
    alpha, level : float
        Significance level; confidence level of the Clopper–Pearson intervals.
    unit : str
        ``"rows"`` or the columns whose combinations were removed.
    full : pandas.DataFrame
        The tests on the complete data (fraction 0), same columns as ``replicates``.
    replicates : pandas.DataFrame
        Long form, one row per (fraction, rep, method): ``fraction``, ``rep``, ``method``
        (``"lmm"`` or ``"rm_anova"``), ``n_removed`` (rows or groups), ``nobs`` (rows
        left), ``status`` ("ok", "failed", "non_estimable"), ``estimate``, ``std_error``,
        ``df`` (Satterthwaite df; RM-ANOVA: denominator df), ``statistic`` (t; RM-ANOVA:
        F), ``p_value``, ``detected`` (p < alpha), ``n_subjects`` (complete subjects of
        the RM-ANOVA), ``message``.
    interrupted : bool
        True when the run was stopped (Ctrl-C): ``replicates`` holds the finished ones.
    """

    test: str
    alpha: float
    level: float
    unit: str
    full: pd.DataFrame
    replicates: pd.DataFrame
    interrupted: bool = False

    def summary(self) -> pd.DataFrame:
        """Detection rate per method and fraction.

        Returns
        -------
        pandas.DataFrame
            ``method``, ``fraction``, ``reps``, ``n_ok``, ``n_failed``,
            ``n_non_estimable``, ``detections``, ``rate`` (detections / n_ok),
            ``conf_low``, ``conf_high`` (Clopper–Pearson, ``attrs["conf_level"]``),
            ``mean_nobs`` (rows left), ``mean_subjects`` (RM-ANOVA: complete subjects
            used, failed analyses counted with their 0 or 1 subject).
        """
        rows = []
        for (method, fraction), g in self.replicates.groupby(["method", "fraction"],
                                                            sort=False):
            ok = g["status"] == "ok"
            n_ok = int(ok.sum())
            det = int((g["detected"] & ok).sum())
            lo, hi = clopper_pearson(det, n_ok, self.level)
            rows.append({"method": method, "fraction": fraction, "reps": len(g), "n_ok": n_ok,
                         "n_failed": int((g["status"] == "failed").sum()),
                         "n_non_estimable": int((g["status"] == "non_estimable").sum()),
                         "detections": det, "rate": det / n_ok if n_ok else np.nan,
                         "conf_low": float(lo), "conf_high": float(hi),
                         "mean_nobs": float(g["nobs"].mean()),
                         "mean_subjects": float(g["n_subjects"].mean())})
        out = pd.DataFrame(rows).sort_values(["method", "fraction"], ignore_index=True)
        out.attrs.update(conf_level=self.level, alpha=self.alpha, test=self.test)
        return out

    def plot(self, axes=None):
        """Detection rate and usable analyses against the fraction removed (matplotlib)."""
        from crossed.plots.simulate import plot_ablation

        return plot_ablation(self, axes=axes)

    def __repr__(self) -> str:
        return f"<AblationResult: {self.test}, unit={self.unit}, alpha={self.alpha:g}>"

    def __str__(self) -> str:
        return repr(self) + "\n" + str(result_table(self.summary()))

    def display_tables(self) -> dict[str, pd.DataFrame]:
        return {"detection rate by fraction removed": self.summary()}


def run_ablation(fit: LmerFit, data: pd.DataFrame, test: Any,
                 fractions=DEFAULT_FRACTIONS, reps: int = 100, seed: Any = None,
                 unit: list[str] | None = None, alpha: float = 0.05,
                 rm: RMAnova | None = None, level: float = 0.95, check_conv: bool = False,
                 n_jobs: int | None = 1, backend: str = "joblib", scheduler: Any = None,
                 progress: bool | None = None) -> AblationResult:
    """The ablation of a fitted model: remove data at random, refit (its design), test.

    What :func:`crossed.ablation` runs once it has fitted the formula on the complete rows
    of the data (see there for the parameters).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
        The model fitted on ``data`` (every row used: no row dropped for missing values).
    data : pandas.DataFrame
        The rows of the fit (for ``unit`` and ``rm``).
    test, fractions, reps, seed, alpha, level, check_conv, n_jobs, backend, scheduler, progress
        As :func:`crossed.ablation`.
    unit : list of str, optional
        Columns whose combinations are removed whole.
    rm : RMAnova, optional
        The repeated-measures ANOVA run on every subset too.

    Returns
    -------
    AblationResult
    """
    unit_l = unit
    data = data.reset_index(drop=True)
    groups, n_groups = None, 0
    if unit_l is not None:
        codes = data[unit_l].astype(str).agg(":".join, axis=1)
        cat = pd.Categorical(codes)
        groups, n_groups = np.asarray(cat.codes, dtype=np.int64), len(cat.categories)
    bound = bind_test(test, fit)
    job = _AblationJob(fit=fit, test=bound, refitter=Refitter(fit, check_conv=check_conv),
                       groups=groups, n_groups=n_groups, alpha=alpha,
                       rm=rm.prepare(data) if rm is not None else None)
    fractions = [float(f) for f in fractions]
    if any(not 0 <= f < 1 for f in fractions):
        raise ValueError("fractions must be in [0, 1)")
    items = _tasks(fractions, reps, seed)
    full_rows = _one_ablation(job, (0.0, 0, np.random.SeedSequence(0)))
    res = run_tasks(_one_ablation, job, items, n_jobs=n_jobs, backend=backend,
                    scheduler=scheduler, progress=progress, desc="ablation")
    reps_df = pd.DataFrame([row for rows in res for row in rows], columns=COLUMNS)
    return AblationResult(test=label_of(bound), alpha=alpha, level=level,
                          unit="rows" if unit_l is None else ":".join(unit_l),
                          full=pd.DataFrame(full_rows, columns=COLUMNS),
                          replicates=reps_df, interrupted=res.interrupted)
