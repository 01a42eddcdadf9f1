"""Parametric bootstrap of any statistic of a fit (lme4's ``bootMer``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed._conventions import check_count, check_fraction
from crossed.simulate.execution import run_tasks, seed_sequence
from crossed.simulate.fastrefit import FIT_ERRORS, Refitter
from crossed.simulate.intervals import boot_interval
from crossed.simulate.response import is_glmm, simulate_responses
from crossed.simulate.simtests import ContrastTest
from crossed.tables import ResultDisplay, result_table

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["BootResult", "CI_TYPES", "STATS", "bootstrap"]

CI_TYPES = ("percentile", "basic", "normal")


def _sdcor(fit: LmerFit) -> pd.Series:
    vc = fit.varcorr()
    names = []
    for g, t1, t2 in zip(vc["group"], vc["term1"], vc["term2"], strict=True):
        if g == "Residual":
            names.append("sigma")
        elif t2 is None:
            names.append(f"sd_{t1}|{g}")
        else:
            names.append(f"cor_{t2}.{t1}|{g}")  # lme4: the later column first
    return pd.Series(vc["sd_or_cor"].to_numpy(), index=names)


def _fixef(fit: LmerFit) -> pd.Series:
    return fit.fixef


def _theta(fit: LmerFit) -> pd.Series:
    return pd.Series(fit.theta, index=list(fit.theta_names))


def _sigma(fit: LmerFit) -> pd.Series:
    if is_glmm(fit):
        raise ValueError("a binomial or Poisson GLMM has no residual sigma; use stat='sdcor' "
                         "or 'theta'")
    return pd.Series([fit.sigma], index=["sigma"])


@dataclass(frozen=True)
class _Arrays:
    """A built-in statistic read from a fit's arrays: called, the Series users see (the
    estimate ``t0``); per replicate, its ``names`` and ``values`` without building a
    Series (``_replicate_values``)."""

    series: Callable[[Any], pd.Series]
    names: Callable[[Any], tuple[str, ...]]
    values: Callable[[Any], Any]

    def __call__(self, fit: Any) -> pd.Series:
        return self.series(fit)


STATS: dict[str, Callable[[Any], pd.Series]] = {
    "fixef": _Arrays(_fixef, lambda fit: fit.fixef_names, lambda fit: fit.beta),
    "theta": _Arrays(_theta, lambda fit: fit.theta_names, lambda fit: fit.theta),
    "sdcor": _sdcor,
    "sigma": _Arrays(_sigma, lambda fit: ("sigma",), lambda fit: [fit.sigma]),
}


def _as_series(value: Any) -> pd.Series:
    if isinstance(value, pd.Series):
        return value.astype(float)
    if isinstance(value, dict):
        return pd.Series(value, dtype=float)
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    return pd.Series(arr, index=[f"t{i + 1}" for i in range(len(arr))])


def _in_order(value: Any, names: tuple) -> np.ndarray:
    """A replicate's statistic (as :func:`_as_series` reads it) over ``names``, the
    original fit's: NaN for a name it lacks (a refit whose rank-deficient column was
    dropped), and its other names left out."""
    if isinstance(value, pd.Series) and tuple(value.index) == names:  # (the usual case,
        return value.to_numpy(dtype=float)  # without a new Series and a reindex)
    return _as_series(value).reindex(list(names)).to_numpy(dtype=float)


def _replicate_values(stat: Callable[[Any], Any], fit: Any, names: tuple) -> np.ndarray:
    """:func:`_in_order` of ``stat(fit)``; a built-in statistic (:class:`_Arrays`) with the
    names ``names`` read from the fit's arrays (the same numbers, no Series)."""
    if isinstance(stat, _Arrays) and tuple(stat.names(fit)) == names:
        return np.array(stat.values(fit), dtype=float)
    return _in_order(stat(fit), names)


def _stat_function(stat: Any, fit: LmerFit) -> Callable[[LmerFit], pd.Series]:
    if isinstance(stat, str):
        if stat not in STATS:
            raise ValueError(f"unknown stat {stat!r}; use one of {', '.join(STATS)} "
                             "or a function of a fit")
        return STATS[stat]
    if callable(stat) and hasattr(stat, "label"):  # an emm_contrast / fixed test factory
        bound = stat(fit)
        if not isinstance(bound, ContrastTest):
            raise ValueError("only contrast tests (fixed, emm_contrast) give a statistic")
        return _ContrastStat(bound)
    if callable(stat):
        return stat
    raise TypeError(f"stat must be a name ({', '.join(STATS)}) or a callable, not {stat!r}")


@dataclass
class _ContrastStat:
    test: ContrastTest

    def __call__(self, fit: LmerFit) -> pd.Series:
        return pd.Series([self.test.estimate(fit)], index=[self.test.name])


@dataclass
class _BootJob:
    fit: LmerFit
    stat: Callable
    refitter: Refitter
    use_ranef: bool
    names: tuple = ()


def _one_replicate(job: _BootJob, item: tuple) -> tuple[int, np.ndarray | None, str]:
    """One replicate: (index, statistic over ``job.names`` or None, failure message)."""
    i, ss = item
    rng = np.random.default_rng(ss)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            y = simulate_responses(job.fit, 1, rng, use_ranef=job.use_ranef)[:, 0]
            return i, _replicate_values(job.stat, job.refitter.refit(y=y), job.names), ""
        except FIT_ERRORS as exc:  # any Exception: a failed replicate, the run goes on
            return i, None, f"{type(exc).__name__}: {exc}"


@dataclass(repr=False)
class BootResult(ResultDisplay):
    """Result of :func:`bootstrap`.

    Attributes
    ----------
    t0 : pandas.Series
        The statistic on the original fit.
    replicates : pandas.DataFrame
        Wide: one row per bootstrap replicate (``replicate`` column, then one column per
        component of the statistic); NaN for failed refits.
    failures : pandas.DataFrame
        ``replicate``, ``message`` of refits that failed.
    ci : str
        Interval type of ``intervals()``'s default.
    level : float
    interrupted : bool
        True when the run was stopped (Ctrl-C): ``replicates`` holds the finished ones.
    """

    t0: pd.Series
    replicates: pd.DataFrame
    failures: pd.DataFrame
    ci: str
    level: float
    interrupted: bool = False

    def intervals(self, ci: str | None = None, level: float | None = None) -> pd.DataFrame:
        """Bootstrap summary and intervals, one row per component.

        Returns
        -------
        pandas.DataFrame
            ``term``, ``estimate`` (on the original fit), ``bias`` (mean of replicates
            minus estimate), ``std_error`` (SD of the replicates), ``n_boot`` (finite
            replicates), ``conf_low``, ``conf_high`` (``attrs``: ``ci``, ``conf_level``).
            Percentile/basic/normal as ``boot.ci`` (boot 1.3-28) computes them.
        """
        ci = ci or self.ci
        level = self.level if level is None else check_fraction("level", level)
        rows = []
        for term, t0 in self.t0.items():
            t = self.replicates[term].to_numpy(dtype=float)
            ok = t[np.isfinite(t)]
            lo, hi = boot_interval(float(t0), ok, ci, level)
            rows.append({"term": term, "estimate": float(t0),
                         "bias": float(np.mean(ok) - t0) if len(ok) else np.nan,
                         "std_error": float(np.std(ok, ddof=1)) if len(ok) > 1 else np.nan,
                         "n_boot": len(ok), "conf_low": lo, "conf_high": hi})
        out = pd.DataFrame(rows)
        out.attrs.update(ci=ci, conf_level=level)
        return out

    def plot(self, terms: list[str] | None = None):
        """Histograms of the replicates with the estimate and the interval (matplotlib)."""
        from crossed.plots.simulate import plot_bootstrap

        return plot_bootstrap(self, terms=terms)

    def describe(self) -> str:
        """A one-line description (replicates, failures, interval method and level)."""
        stop = " (interrupted)" if self.interrupted else ""
        return (f"<BootResult: {len(self.replicates)} replicates{stop}, "
                f"{len(self.failures)} failed; {self.ci} intervals at {self.level:.0%}>")

    def __repr__(self) -> str:  # the description and the intervals, as printed
        return str(self)

    def __str__(self) -> str:
        return self.describe() + "\n" + str(result_table(self.intervals()))

    def display_tables(self) -> dict[str, pd.DataFrame]:
        return {"intervals": self.intervals()}


def bootstrap(fit: LmerFit, stat: str | Callable = "fixef", nsim: int = 1000,
              seed: Any = None, ci: str = "percentile", level: float = 0.95,
              use_ranef: bool = False, check_conv: bool = False, n_jobs: int | None = 1,
              backend: str = "joblib", scheduler: Any = None,
              progress: bool | None = None) -> BootResult:
    """Parametric bootstrap (lme4's ``bootMer``): simulate, refit, recompute ``stat``.

    Parameters
    ----------
    fit : LmerFit or GlmerFit
        A GLMM is simulated from its family (:func:`simulate_responses`) and refitted with
        its engine, family and nAGQ (lme4's ``bootMer`` on a glmer fit).
    stat : str or callable
        ``"fixef"``, ``"theta"``, ``"sdcor"`` (random-effect SDs/correlations and sigma,
        named ``sd_<term>|<group>``, ``cor_<a>.<b>|<group>``, ``sigma``; no sigma for a
        GLMM), ``"sigma"`` (LMM only), a
        test factory giving a contrast (``crossed.simulate.emm_contrast("language")``,
        ``crossed.simulate.fixed("x")``), or any function of a fit returning a number,
        array, dict or Series.
    nsim : int
        Bootstrap replicates.
    seed : int or numpy.random.Generator
        Identical seeds give identical replicates for any ``n_jobs`` and backend.
    ci : {"percentile", "basic", "normal"}
        Default interval of ``intervals()``.
    level : float
        Confidence level.
    use_ranef : bool
        False (bootMer's default ``use.u = FALSE``): new random effects per replicate;
        True: conditional on the estimated ones.
    check_conv : bool
        lme4's convergence derivative check on each refit (does not change estimates).
    n_jobs, backend, scheduler, progress
        Execution (:func:`crossed.simulate.execution.run_tasks`).

    Returns
    -------
    BootResult
        ``replicates``, ``intervals(ci, level)``, ``plot()``. A replicate whose
        simulation, refit or statistic raises is recorded in ``failures`` with its message
        (NaN in ``replicates``). On Ctrl-C the finished replicates are returned, with
        ``interrupted=True`` and a warning.
    """
    nsim = check_count("nsim", nsim)
    level = check_fraction("level", level)
    if ci not in CI_TYPES:
        raise ValueError(f"unknown ci {ci!r}; use one of {', '.join(CI_TYPES)}")
    func = _stat_function(stat, fit)
    t0 = _as_series(func(fit))
    job = _BootJob(fit=fit, stat=func, refitter=Refitter(fit, check_conv=check_conv),
                   use_ranef=use_ranef, names=tuple(t0.index))
    items = list(enumerate(seed_sequence(seed).spawn(nsim)))
    res = run_tasks(_one_replicate, job, items, n_jobs=n_jobs, backend=backend,
                    scheduler=scheduler, progress=progress, desc="bootstrap")
    done = np.array(sorted(i for i, _, _ in res), dtype=np.int64)
    values = np.full((nsim, len(t0)), np.nan)
    fails = []
    for i, val, msg in res:
        if val is None:
            fails.append({"replicate": i, "message": msg})
        else:
            values[i] = val
    reps = pd.DataFrame(values[done], columns=list(t0.index))
    reps.insert(0, "replicate", done)
    failures = pd.DataFrame(fails, columns=["replicate", "message"])
    return BootResult(t0=t0, replicates=reps, failures=failures, ci=ci, level=level,
                      interrupted=res.interrupted)
