"""Simulation-based residual diagnostics (the approach of DHARMa, Hartig 2022).

Responses are simulated from the fitted model (new random effects by default, DHARMa's
default for lme4 fits). The scaled residual of observation i is where the observed value
falls among its simulated values: with m simulations, ``k_i`` of them below and ``e_i``
equal to the observation,

    r_i = (k_i + U_i (e_i + 1)) / (m + 1),   U_i ~ Uniform(0, 1),

the randomised probability integral transform: if the model is right the observation is
exchangeable with its simulations and r_i is exactly Uniform(0, 1) (no values at 0 or 1,
unlike DHARMa's empirical CDF; otherwise the same idea). For GLMMs (binomial, Poisson)
the response is discrete and most simulated values tie with the observation: the
randomisation over the ties (``e_i``) is what makes r_i uniform, as DHARMa's randomised
quantile residuals for integer responses. Tests:

- **uniformity**: one-sample Kolmogorov–Smirnov test of r against Uniform(0, 1);
- **dispersion**: ratio of the observed residual variance (y − mean of simulations) to
  the mean variance of simulated residuals, two-sided simulation p-value (DHARMa's
  ``testDispersion`` for simulated residuals, its default for GLMMs; binomial with
  trials on counts of successes, as DHARMa). A 0/1 response cannot be overdispersed
  row by row: there the test has no power, as DHARMa warns;
- **outliers**: observations outside the range of all their simulations; under the model
  each is so with probability 2/(m + 1), exact two-sided binomial test.

Because the model was fitted to the same data, these nominal p-values are conservative
(the Lilliefors effect of estimated parameters). ``check(..., calibrate=B)`` compares the
statistics with those of B datasets simulated from the fit and refitted, which makes the
p-values uniform under a correct model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from crossed._conventions import check_count, check_fraction
from crossed.simulate.execution import seed_sequence
from crossed.simulate.response import is_glmm, simulate_responses
from crossed.tables import ResultDisplay

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["CHUNK_ELEMENTS", "Diagnostics", "MAX_ROWS", "SimulatedResiduals", "check",
           "chunk_size", "simulate_residuals"]


#: Observations the simulated-residual tests use at most; a larger fit is tested on a random
#: subsample of this many rows (the tests are then about as powerful as on all rows, and the
#: memory stays that of the fit).
MAX_ROWS = 50_000

#: Simulated values generated at once (rows × simulations of one chunk, about 16 MB): the
#: ``nsim`` simulations are drawn in chunks so that no nobs × nsim array is ever held.
CHUNK_ELEMENTS = 2**21


@dataclass
class SimulatedResiduals:
    """Scaled residuals of a fit.

    Attributes
    ----------
    scaled : numpy.ndarray
        Scaled residuals, one per observation used, Uniform(0, 1) under the model.
    observed : numpy.ndarray
        The response of the observations used.
    simulated : numpy.ndarray
        (rows used, nsim) simulated responses.
    predicted : numpy.ndarray
        Fitted values used on the x axis of the residual plot (population level, Xβ̂,
        unless ``use_ranef``).
    rows : numpy.ndarray or None
        Indices (sorted) of the observations used when the fit has more than ``max_rows``
        of them (a random subsample); None when every observation is used.
    nobs : int
        Observations of the fit (all of them, used or not).
    trials : numpy.ndarray or None
        Binomial GLMM with prior weights: trials of the observations used (the dispersion
        test works on counts of successes, as DHARMa's); None otherwise.
    """

    scaled: np.ndarray
    observed: np.ndarray
    simulated: np.ndarray
    predicted: np.ndarray
    rows: np.ndarray | None = None
    nobs: int | None = None
    trials: np.ndarray | None = None

    @property
    def nsim(self) -> int:
        return self.simulated.shape[1]

    @property
    def subsampled(self) -> bool:
        """Whether the residuals are those of a random subsample of the observations."""
        return self.rows is not None

    def describe_rows(self) -> str:
        """Which observations were used, in words (empty when all)."""
        if self.rows is None:
            return ""
        return (f"a random subsample of {len(self.rows):,} of the {self.nobs:,} "
                f"observations")


def chunk_size(nobs: int, nsim: int, elements: int | None = None) -> int:
    """Simulations drawn at once for ``nobs`` observations (at least 1, at most ``nsim``).

    A chunk holds about ``elements`` (default :data:`CHUNK_ELEMENTS`) simulated values, so
    the memory of the simulations is bounded by a few ``max(nobs, elements)``-sized
    arrays, whatever ``nsim``.
    """
    elements = CHUNK_ELEMENTS if elements is None else elements
    return int(max(1, min(nsim, elements // max(nobs, 1))))


def simulate_residuals(fit: LmerFit, nsim: int = 250, seed: Any = None,
                       use_ranef: bool = False,
                       max_rows: int | None = MAX_ROWS) -> SimulatedResiduals:
    """Scaled (quantile) residuals from ``nsim`` simulations of the fitted model.

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    nsim : int
        Simulations per observation (DHARMa's default is 250).
    seed : int or numpy.random.Generator
        Identical seeds give identical residuals.
    use_ranef : bool
        False: new random effects per simulation (unconditional, DHARMa's default for
        lme4); True: conditional on the estimated random effects (``re.form = NULL``).
    max_rows : int or None
        A fit with more observations is tested on a random subsample of ``max_rows`` of
        them (``rows`` of the result says which); None uses every observation. The
        simulations are drawn in chunks (:func:`chunk_size`), so the memory used is about
        ``max_rows × nsim`` values plus a few vectors of the fit's length, never
        ``nobs × nsim``.
    """
    nsim = check_count("nsim", nsim)
    if max_rows is not None:
        max_rows = check_count("max_rows", max_rows)
    ss = seed_sequence(seed)
    sim_seed, u_seed, rows_seed = ss.spawn(3)
    y_all = fit.design.y
    n = len(y_all)
    rows = None
    if max_rows is not None and n > max_rows:
        rows = np.sort(np.random.default_rng(rows_seed).choice(n, size=int(max_rows),
                                                                replace=False))
    y = y_all if rows is None else y_all[rows]
    rng = np.random.default_rng(sim_seed)
    step = chunk_size(n, nsim)
    if step >= nsim:
        sims = simulate_responses(fit, nsim, rng, use_ranef=use_ranef)
        if rows is not None:
            sims = sims[rows]
    else:
        sims = np.empty((len(y), nsim))
        for start in range(0, nsim, step):
            k = min(step, nsim - start)
            block = simulate_responses(fit, k, rng, use_ranef=use_ranef)
            sims[:, start:start + k] = block if rows is None else block[rows]
            del block
    below = np.sum(sims < y[:, None], axis=1)
    equal = np.sum(sims == y[:, None], axis=1)
    u = np.random.default_rng(u_seed).random(len(y))
    scaled = (below + u * (equal + 1)) / (nsim + 1)
    trials = None
    if is_glmm(fit):  # response scale: conditional (use_ranef) or population-level mean
        eta = fit.eta if use_ranef else fit.design.X @ fit.beta + fit.offset
        predicted = fit.family.link.linkinv(eta)
        if fit.family.binary_outcome and fit.design.weights is not None:
            trials = fit.prior_weights if rows is None else fit.prior_weights[rows]
    elif use_ranef:
        predicted = fit.fitted()
    else:
        predicted = fit.predict(include_random=False)  # Xβ̂ + offset (DHARMa's re.form=~0)
    if rows is not None:
        predicted = predicted[rows]
    return SimulatedResiduals(scaled=scaled, observed=y, simulated=sims, predicted=predicted,
                              rows=rows, nobs=n, trials=trials)


def _uniformity(res: SimulatedResiduals) -> dict:
    ks = stats.kstest(res.scaled, "uniform")
    return {"test": "uniformity", "method": "Kolmogorov-Smirnov vs Uniform(0, 1)",
            "statistic": float(ks.statistic), "p_value": float(ks.pvalue)}


def _dispersion(res: SimulatedResiduals) -> dict:
    w = np.ones(len(res.observed)) if res.trials is None else res.trials
    mean = res.simulated.mean(axis=1)
    obs = float(np.var(w * (res.observed - mean)))
    m = res.nsim
    sim = np.empty(m)
    step = chunk_size(len(mean), m)          # column blocks: no second rows × nsim array
    for start in range(0, m, step):
        sim[start:start + step] = np.var(w[:, None] * (res.simulated[:, start:start + step]
                                                       - mean[:, None]), axis=0)
    ratio = obs / float(np.mean(sim))
    p_hi = (np.sum(sim >= obs) + 1) / (m + 1)
    p_lo = (np.sum(sim <= obs) + 1) / (m + 1)
    return {"test": "dispersion", "method": "observed / simulated residual variance",
            "statistic": ratio, "p_value": float(min(1.0, 2 * min(p_hi, p_lo)))}


def _outliers(res: SimulatedResiduals) -> dict:
    m = res.nsim
    lo = res.scaled < 1.0 / (m + 1)
    hi = res.scaled > m / (m + 1.0)
    k = int(np.sum(lo | hi))
    n = len(res.scaled)
    p = float(stats.binomtest(k, n, 2.0 / (m + 1)).pvalue)
    return {"test": "outliers", "method": f"outside all {m} simulations, binomial test",
            "statistic": k / n, "p_value": p}


def _tests(res: SimulatedResiduals) -> list[dict]:
    return [_uniformity(res), _dispersion(res), _outliers(res)]


def _distance(rows: list[dict]) -> np.ndarray:
    """How far each statistic is from its value under the model (larger: worse)."""
    ks, disp, out = (r["statistic"] for r in rows)
    return np.array([ks, abs(np.log(disp)) if disp > 0 else np.inf, out])


@dataclass
class _CalibrationJob:
    refitter: Any
    fit: Any
    nsim: int
    use_ranef: bool
    max_rows: int | None = MAX_ROWS


def _calibration_draw(job: _CalibrationJob, item: tuple) -> tuple[int, np.ndarray, str]:
    """One calibration dataset: (index, distances of its statistics, failure message)."""
    import warnings

    from crossed.simulate.fastrefit import FIT_ERRORS

    i, ss = item
    sim_ss, res_ss = ss.spawn(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            y = simulate_responses(job.fit, 1, np.random.default_rng(sim_ss))[:, 0]
            refit = job.refitter.refit(y=y)
            res = simulate_residuals(refit, nsim=job.nsim, seed=res_ss,
                                     use_ranef=job.use_ranef, max_rows=job.max_rows)
            return i, _distance(_tests(res)), ""
        except FIT_ERRORS as exc:  # any Exception: a failed draw, the run goes on
            return i, np.full(3, np.nan), f"{type(exc).__name__}: {exc}"


_MEANING = {
    ("uniformity", True): "the scaled residuals are compatible with the model's "
                          "distribution (no evidence of a wrong error distribution, missing "
                          "terms or heteroscedasticity in their overall spread)",
    ("uniformity", False): "the scaled residuals are not uniform: the data deviate from the "
                           "model's distribution (check the QQ plot: an S shape points at "
                           "tails, a shift at bias; the residual plot at missing terms or "
                           "unequal variance)",
    ("dispersion", True): "the spread of the residuals matches the simulated spread",
    ("dispersion", False): "the residuals are more (ratio > 1) or less (ratio < 1) spread "
                           "than the model predicts: a variance component or the residual "
                           "variance is mis-specified",
    ("outliers", True): "no more observations outside the simulated range than expected",
    ("outliers", False): "more (or fewer) observations outside the simulated range than "
                         "expected: heavy tails or gross errors in the data",
}


@dataclass(repr=False)
class Diagnostics(ResultDisplay):
    """Result of :func:`check` / ``fit.check()``.

    Attributes
    ----------
    residuals : SimulatedResiduals
    tests : pandas.DataFrame
        ``test`` (uniformity, dispersion, outliers), ``method``, ``statistic`` (KS D;
        variance ratio; share of outliers), ``p_value``, ``calibrated`` (p-value from a
        parametric bootstrap), ``flag`` (p < alpha), ``meaning`` (a sentence).
    alpha : float
    failures : pandas.DataFrame
        ``draw``, ``message`` of calibration refits that failed (not counted).
    interrupted : bool
        True when the calibration was stopped (Ctrl-C): it used the finished draws.
    """

    residuals: SimulatedResiduals
    tests: pd.DataFrame
    alpha: float
    failures: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["draw", "message"]))
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not bool(self.tests["flag"].any())

    def plot(self, axes=None):
        """QQ plot of the scaled residuals and residuals against predicted (matplotlib)."""
        from crossed.plots.simulate import plot_residual_diagnostics

        return plot_residual_diagnostics(self, axes=axes)

    def __str__(self) -> str:
        cal = " calibrated," if bool(self.tests["calibrated"].any()) else ""
        lines = [f"Simulated-residual diagnostics ({self.residuals.nsim} simulations,{cal} "
                 f"alpha = {self.alpha:g}):"]
        if self.residuals.subsampled:
            lines.append(f"  (on {self.residuals.describe_rows()})")
        for r in self.tests.itertuples():
            mark = "PROBLEM" if r.flag else "ok"
            lines.append(f"  {r.test:<11} {mark:<7} statistic = {r.statistic:.4g}, "
                         f"p = {r.p_value:.4g}: {r.meaning}.")
        lines.append("Overall: " + ("no evidence against the model." if self.ok else
                                    "the model does not describe the data well in the "
                                    "flagged respects."))
        if len(self.failures):
            lines.append(f"{len(self.failures)} calibration refit(s) failed (see .failures).")
        if self.interrupted:
            lines.append("The calibration was interrupted: it used the finished refits.")
        return "\n".join(lines)

    __repr__ = __str__


def check(fit: LmerFit, nsim: int = 250, seed: Any = None, use_ranef: bool = False,
          alpha: float = 0.05, calibrate: int = 0, n_jobs: int | None = 1,
          backend: str = "joblib", scheduler: Any = None,
          progress: bool | None = None, max_rows: int | None = MAX_ROWS) -> Diagnostics:
    """Run the simulated-residual tests and say what they mean.

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    nsim : int
        Simulations (DHARMa's default 250).
    seed : int or numpy.random.Generator
    use_ranef : bool
        Conditional simulations (given the estimated random effects) instead of new ones.
    alpha : float
        Level at which a test is flagged.
    calibrate : int
        0 (default): the tests' nominal p-values, which are conservative because the
        model was fitted to the same data (like a KS test with estimated parameters,
        Lilliefors). B > 0: parametric-bootstrap calibration, the observed statistics are
        compared with those of B datasets simulated from the fit and refitted
        (p = (1 + #{bootstrap ≥ observed}) / (B + 1)); these p-values are uniform under a
        correct model.
    n_jobs, backend, scheduler, progress
        Execution of the calibration refits (:func:`crossed.simulate.execution.run_tasks`).
    max_rows : int or None
        Fits with more observations are tested on a random subsample of this many (default
        50,000; the ``method`` column says so), which bounds the memory of the simulations
        by about ``max_rows × nsim`` values; None tests every observation (the
        simulations are still drawn in chunks, never ``nobs × nsim`` at once beyond what
        is kept).

    Returns
    -------
    Diagnostics
        ``tests`` (one row per test; ``calibrated`` says which p-value), ``str()`` in
        words, ``plot()``. Checked in ``tests/simulate/test_diagnostics.py``: calibrated
        KS p-values uniform under a correct model, small under misspecified ones.
    """
    nsim = check_count("nsim", nsim)
    alpha = check_fraction("alpha", alpha)
    calibrate = check_count("calibrate", calibrate, minimum=0)
    ss = seed_sequence(seed)
    res_ss, cal_ss = ss.spawn(2)
    res = simulate_residuals(fit, nsim=nsim, seed=res_ss, use_ranef=use_ranef,
                             max_rows=max_rows)
    rows = _tests(res)
    failures = pd.DataFrame(columns=["draw", "message"])
    interrupted = False
    if res.subsampled:
        for r in rows:
            r["method"] += f", on {res.describe_rows()}"
    if (is_glmm(fit) and fit.family.binary_outcome  # type: ignore[union-attr]
            and np.all(fit.prior_weights == 1.0)):  # type: ignore[union-attr]
        rows[1]["method"] += " (0/1 response: no power against overdispersion, as DHARMa warns)"
    if calibrate:
        from crossed.simulate.execution import run_tasks
        from crossed.simulate.fastrefit import Refitter

        job = _CalibrationJob(refitter=Refitter(fit, check_conv=False), fit=fit, nsim=nsim,
                              use_ranef=use_ranef, max_rows=max_rows)
        out = run_tasks(_calibration_draw, job, list(enumerate(cal_ss.spawn(calibrate))),
                        n_jobs=n_jobs, backend=backend, scheduler=scheduler,
                        progress=progress, desc="calibrating")
        interrupted = out.interrupted
        draws = np.array([d for _, d, _ in out]).reshape(-1, 3)
        failures = pd.DataFrame([{"draw": i, "message": m} for i, _, m in out if m],
                                columns=["draw", "message"])
        observed = _distance(rows)
        for j, r in enumerate(rows):
            d = draws[:, j]
            d = d[np.isfinite(d)]
            r["p_value"] = float((1 + np.sum(d >= observed[j])) / (len(d) + 1))
            r["method"] += f", calibrated by {len(d)} parametric-bootstrap refits"
            if len(failures):
                r["method"] += f" ({len(failures)} failed)"
    for r in rows:
        r["calibrated"] = bool(calibrate)
        r["flag"] = bool(r["p_value"] < alpha)
        r["meaning"] = _MEANING[(r["test"], not r["flag"])]
    return Diagnostics(residuals=res, tests=pd.DataFrame(rows), alpha=alpha,
                       failures=failures, interrupted=interrupted)
