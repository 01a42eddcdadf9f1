"""Power by simulation (simr's ``powerSim`` and ``powerCurve``).

Each simulation draws a response from the model (new random effects, lme4's
``simulate``), refits the same model to it (on all rows, or on the rows of a smaller
design for a power curve), applies the test and records whether p < alpha. Power is the
rate of significant results among the simulations whose fit and test succeeded, with a
Clopper–Pearson interval; failed fits are counted separately.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed._conventions import check_count, check_fraction
from crossed._threads import single_blas_thread
from crossed.simulate.execution import run_tasks, seed_sequence
from crossed.simulate.fastrefit import FIT_ERRORS, Refitter
from crossed.simulate.intervals import clopper_pearson
from crossed.simulate.response import simulate_responses
from crossed.simulate.simtests import RESULT_KEYS, bind_test, label_of
from crossed.tables import ResultDisplay

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["PowerCurve", "PowerResult", "REPLICATE_COLUMNS", "power_curve", "power_sim"]

REPLICATE_COLUMNS = ["sim", "status", *RESULT_KEYS, "significant", "message"]


@dataclass
class _PowerJob:
    """What every simulation task needs (shipped once per chunk)."""

    fit: LmerFit
    test: Any
    refitter: Refitter
    alpha: float
    rows: dict  # break -> row positions (None: all rows)


def _one_simulation(job: _PowerJob, item: tuple) -> dict:
    key, sim, ss = item
    rng = np.random.default_rng(ss)
    rows = job.rows.get(key)
    out = {"sim": sim, "key": key}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            y = simulate_responses(job.fit, 1, rng)[:, 0]
            if rows is not None:
                y = y[rows]
            # (one BLAS limit for the refit and its test: each would set and restore its own)
            with single_blas_thread():
                refit = job.refitter.refit(y=y, rows=rows)
                res = job.test(refit, rows)
            row = {k: res.get(k, np.nan) for k in ("status", *RESULT_KEYS)}
            p = float(row["p_value"])
            row["significant"] = bool(np.isfinite(p) and p < job.alpha)
            row["message"] = ""
        except FIT_ERRORS as exc:  # any Exception: a failed simulation, the run goes on
            row = {"status": "failed", **dict.fromkeys(RESULT_KEYS, np.nan),
                   "significant": False, "message": f"{type(exc).__name__}: {exc}"}
    out.update(row)
    return out


def _summarise(reps: pd.DataFrame, level: float) -> dict:
    ok = reps["status"] == "ok"
    n_ok = int(ok.sum())
    k = int((reps["significant"] & ok).sum())
    lo, hi = clopper_pearson(k, n_ok, level)
    return {"nsim": len(reps), "n_ok": n_ok, "n_failed": int((reps["status"] == "failed").sum()),
            "n_non_estimable": int((reps["status"] == "non_estimable").sum()),
            "successes": k, "power": k / n_ok if n_ok else np.nan,
            "conf_low": float(lo), "conf_high": float(hi)}


@dataclass(repr=False)
class PowerResult(ResultDisplay):
    """Result of :func:`power_sim`.

    Attributes
    ----------
    test : str
        Label of the test.
    alpha : float
        Significance level.
    level : float
        Confidence level of the Clopper–Pearson interval.
    replicates : pandas.DataFrame
        One row per simulation: ``sim``, ``status`` ("ok", "failed", "non_estimable"),
        ``estimate``, ``std_error``, ``df``, ``statistic``, ``p_value``, ``significant``
        (p < alpha), ``message`` (why a fit failed).
    interrupted : bool
        True when the run was stopped (Ctrl-C): ``replicates`` holds the finished ones.
    """

    test: str
    alpha: float
    level: float
    replicates: pd.DataFrame
    interrupted: bool = False

    def summary(self) -> pd.DataFrame:
        """One row: ``test``, ``nsim``, ``n_ok``, ``n_failed``, ``n_non_estimable``,
        ``successes``, ``power``, ``conf_low``, ``conf_high`` (Clopper–Pearson at
        ``attrs["conf_level"]``), ``alpha``."""
        out = pd.DataFrame([{"test": self.test, **_summarise(self.replicates, self.level),
                             "alpha": self.alpha}])
        out.attrs["conf_level"] = self.level
        return out

    def display_tables(self) -> dict[str, pd.DataFrame]:
        return {f"power for {self.test}": self.summary()}

    @property
    def power(self) -> float:
        return float(self.summary()["power"].iloc[0])

    def __str__(self) -> str:
        s = self.summary().iloc[0]
        fails = f", {s.n_failed} failed fits" if s.n_failed else ""
        stop = " (interrupted)" if self.interrupted else ""
        return (f"Power for {self.test} (alpha = {self.alpha:g}), "
                f"{self.level:.0%} confidence interval:\n"
                f"      {100 * s.power:.2f}% ({100 * s.conf_low:.2f}, {100 * s.conf_high:.2f})\n"
                f"based on {s.n_ok} of {s.nsim} simulations{fails}{stop}")

    __repr__ = __str__


def power_sim(fit: LmerFit, test: Any, nsim: int = 1000, seed: Any = None,
              alpha: float = 0.05, level: float = 0.95, check_conv: bool = False,
              n_jobs: int | None = 1, backend: str = "joblib", scheduler: Any = None,
              progress: bool | None = None) -> PowerResult:
    """Power of a test by simulation from a fitted or specified model (simr's ``powerSim``).

    Parameters
    ----------
    fit : LmerFit
        A fitted model, :func:`crossed.simulate.specify` (effect sizes and variance
        components given by the user) or :func:`crossed.simulate.extend` (a larger design).
        Its estimates are the true parameters of the simulations.
    test : str, test factory or callable
        :func:`~crossed.simulate.fixed` (t test of a coefficient, Satterthwaite by default),
        :func:`~crossed.simulate.emm_contrast`, :func:`~crossed.simulate.lrt`, a coefficient
        name or term label, or ``f(fit) -> p_value``.
    nsim : int
        Number of simulations.
    seed : int or numpy.random.Generator
        Identical seeds give identical results for any ``n_jobs`` and backend.
    alpha : float
        Significance level.
    level : float
        Confidence level of the Clopper–Pearson interval.
    check_conv : bool
        Run lme4's convergence derivative check on every refit (off: same estimates, faster).
    n_jobs, backend, scheduler, progress
        Execution (see :func:`crossed.simulate.execution.run_tasks`).

    Returns
    -------
    PowerResult
        ``summary()`` gives power with its interval; ``replicates`` every simulation. A
        simulation whose refit or test raises is a failed one (``status="failed"``, with
        the message). On Ctrl-C the finished simulations are returned, with
        ``interrupted=True`` and a warning.
    """
    nsim = check_count("nsim", nsim)
    alpha, level = check_fraction("alpha", alpha), check_fraction("level", level)
    bound = bind_test(test, fit)
    job = _PowerJob(fit=fit, test=bound, refitter=Refitter(fit, check_conv=check_conv),
                    alpha=alpha, rows={0: None})
    seeds = seed_sequence(seed).spawn(nsim)
    items = [(0, i, ss) for i, ss in enumerate(seeds)]
    res = run_tasks(_one_simulation, job, items, n_jobs=n_jobs, backend=backend,
                    scheduler=scheduler, progress=progress, desc="power")
    reps = pd.DataFrame(list(res), columns=["key", *REPLICATE_COLUMNS])[REPLICATE_COLUMNS]
    return PowerResult(test=label_of(bound), alpha=alpha, level=level, replicates=reps,
                       interrupted=res.interrupted)


def _curve_rows(fit: LmerFit, along: str, within: list[str] | None,
                breaks: list[int]) -> tuple[dict, list]:
    frame = fit.design.frame
    if frame is None or along not in frame.columns and within is None:
        raise ValueError(f"{along!r} is not a column of the model's data")
    rows: dict[int, np.ndarray] = {}
    if within is None:
        col = frame[along]
        levels = (list(col.cat.categories) if isinstance(col.dtype, pd.CategoricalDtype)
                  else sorted(pd.unique(col)))
        present = [lv for lv in levels if (col == lv).any()]
        for b in breaks:
            rows[b] = np.flatnonzero(col.isin(present[:b]).to_numpy())
        return rows, present
    rank = frame.groupby(within, observed=True, sort=False).cumcount().to_numpy()
    for b in breaks:
        rows[b] = np.flatnonzero(rank < b)
    return rows, list(range(1, int(rank.max()) + 2))


def _checked_breaks(breaks: Any, n: int, what: str) -> list[int]:
    """``breaks`` as whole numbers from 1 to ``n`` (the levels of ``along``, or the rows per
    cell of ``within``); a break beyond ``n`` would silently be ``n``."""
    if isinstance(breaks, str) or not hasattr(breaks, "__iter__"):
        raise TypeError(f"breaks must be a list of whole numbers, got {breaks!r}")
    out = []
    for b in breaks:
        if isinstance(b, bool | np.bool_) or not isinstance(b, numbers.Integral):
            raise TypeError(f"breaks must be whole numbers, got {b!r}")
        if not 1 <= b <= n:
            raise ValueError(f"break {int(b)} is outside 1..{n}: the data have {n} "
                             f"{what if what.startswith('rows') else f'levels of {what!r}'}")
        out.append(int(b))
    if not out:
        raise ValueError("breaks is empty")
    return out


def _default_breaks(n: int) -> list[int]:
    """simr's default: up to 10 points from 3 to n, evenly spaced."""
    lo = min(3, n)
    return sorted({int(round(v)) for v in np.linspace(lo, n, min(10, n - lo + 1))})


@dataclass(repr=False)
class PowerCurve(ResultDisplay):
    """Result of :func:`power_curve`.

    Attributes
    ----------
    along : str
        The design dimension varied.
    table : pandas.DataFrame
        One row per break: ``break`` (levels of ``along`` used, or observations per
        ``within`` cell), ``nobs``, ``nsim``, ``n_ok``, ``n_failed``, ``n_non_estimable``,
        ``successes``, ``power``, ``conf_low``, ``conf_high``.
    replicates : pandas.DataFrame
        One row per (break, simulation), columns as :class:`PowerResult`'s plus ``break``.
    interrupted : bool
        True when the run was stopped (Ctrl-C): the table counts the finished simulations.
    """

    along: str
    test: str
    alpha: float
    level: float
    table: pd.DataFrame
    replicates: pd.DataFrame
    interrupted: bool = False

    def plot(self, ax=None, target: float | None = 0.8):
        """Power against the design dimension with Clopper–Pearson bars (matplotlib)."""
        from crossed.plots.simulate import plot_power_curve

        return plot_power_curve(self, ax=ax, target=target)

    def __str__(self) -> str:
        lines = [f"Power for {self.test} (alpha = {self.alpha:g}) by {self.along}, "
                 f"{self.level:.0%} confidence intervals:"]
        for r in self.table.to_dict("records"):
            lines.append(f"  {r['break']!s:>4} ({r['nobs']} rows): {100 * r['power']:6.2f}% "
                         f"({100 * r['conf_low']:.2f}, {100 * r['conf_high']:.2f}) - "
                         f"{r['n_ok']} sims")
        return "\n".join(lines)

    __repr__ = __str__


def power_curve(fit: LmerFit, test: Any, along: str, breaks: list[int] | None = None,
                within: str | list[str] | None = None, nsim: int = 1000, seed: Any = None,
                alpha: float = 0.05, level: float = 0.95, check_conv: bool = False,
                n_jobs: int | None = 1, backend: str = "joblib", scheduler: Any = None,
                progress: bool | None = None) -> PowerCurve:
    """Power along a design dimension (simr's ``powerCurve``).

    For each break b the model is refitted to the rows of the first b levels of ``along``
    (R's level order), or — with ``within`` — to the first b rows of each combination of
    the ``within`` columns. Responses are simulated from ``fit`` on all its rows and then
    subset, as simr does; typically ``fit`` comes from :func:`extend`.

    Parameters
    ----------
    along : str
        Column of the model's data (e.g. ``"dataset"``, ``"seed"``).
    breaks : list of int, optional
        Numbers of levels (or rows per cell) to use; default up to 10 evenly spaced values
        from 3 to all.
    within : str or list of str, optional
        Grow the number of rows per combination of these columns instead of the levels of
        ``along`` (simr's ``within``).
    Other parameters as :func:`power_sim`.

    Returns
    -------
    PowerCurve
        ``table`` (power with Clopper–Pearson intervals per break), ``plot()``.
    """
    nsim = check_count("nsim", nsim)
    alpha, level = check_fraction("alpha", alpha), check_fraction("level", level)
    within_l = [within] if isinstance(within, str) else within
    _, levels = _curve_rows(fit, along, within_l, [1])
    if breaks is None:
        breaks = _default_breaks(len(levels))
    breaks = _checked_breaks(breaks, len(levels), along if within_l is None else
                             f"rows per {' x '.join(within_l)} cell")
    rows, _ = _curve_rows(fit, along, within_l, breaks)
    bound = bind_test(test, fit)
    job = _PowerJob(fit=fit, test=bound, refitter=Refitter(fit, check_conv=check_conv),
                    alpha=alpha, rows=rows)
    children = seed_sequence(seed).spawn(len(breaks))
    items = [(b, i, ss) for b, child in zip(breaks, children, strict=True)
             for i, ss in enumerate(child.spawn(nsim))]
    res = run_tasks(_one_simulation, job, items, n_jobs=n_jobs, backend=backend,
                    scheduler=scheduler, progress=progress, desc="power curve")
    reps = pd.DataFrame(list(res), columns=["key", *REPLICATE_COLUMNS])
    reps = reps.rename(columns={"key": "break"})
    reps = reps[["break", *REPLICATE_COLUMNS]]
    table = []
    for b in breaks:
        table.append({"break": b, "nobs": len(rows[b]),
                      **_summarise(reps[reps["break"] == b], level)})
    tab = pd.DataFrame(table)
    tab.attrs.update(conf_level=level, alpha=alpha, along=along)
    return PowerCurve(along=along if within_l is None else "rows per " + ":".join(within_l),
                      test=label_of(bound), alpha=alpha, level=level, table=tab,
                      replicates=reps, interrupted=res.interrupted)
