"""Worker side of the benchmark: one peer fits one case in this process, timed.

``run.py --worker PEER --case NAME --result FILE`` calls :func:`run_worker`; every peer is
warmed up on sleepstudy first, the data are read untimed, and each fit goes from formula and
data to a fitted model.
"""

from __future__ import annotations

import resource
import time
import warnings

from cases import REPO, SLEEPSTUDY, Case
from environment import environment, load_average


def load_data(case: Case):
    """Read a case's table: factor columns as strings, indicator columns added.

    Parameters
    ----------
    case : Case

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    from cases import ensure_data

    data = pd.read_csv(ensure_data(case), dtype={c: str for c in case.factors})
    if case.mixedlm_formula is not None and case.weights is not None:  # prop for mixedlm
        successes = case.formula.split("cbind(", 1)[1].split(",", 1)[0].strip()
        data["prop"] = data[successes] / data[case.weights]
    for new, column, level in case.indicators:
        data[new] = (data[column] == level).astype(float)
    return data


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def prepare_crossed(case: Case, check_conv: bool):
    """Warm crossed up and return a closure fitting ``case`` and a describer.

    Parameters
    ----------
    case : Case
    check_conv : bool
        Run lme4's post-fit derivative check (crossed's default).

    Returns
    -------
    fit : callable
        ``fit(data) -> LmerFit``.
    describe : callable
        ``describe(result) -> dict`` with criterion, convergence and version.
    """
    import pandas as pd

    import crossed

    control = crossed.LmerControl(check_conv=check_conv)
    sleep = pd.read_csv(SLEEPSTUDY, dtype={"Subject": str})
    crossed.lmer("Reaction ~ Days + (Days | Subject)", sleep, control=control)
    if case.family is not None:  # the GLMM code paths too
        cbpp = pd.read_csv(REPO / "tests/data/glmm/cbpp.csv", dtype={"herd": str,
                                                                     "period": str})
        crossed.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", cbpp)

    def fit(data):
        if case.family is not None:
            return crossed.glmer(case.formula, data, family=case.family, engine="native",
                                 reference=case.reference or None, control=control)
        return crossed.lmer(case.formula, data, reml=True, engine="native",
                            reference=case.reference or None, control=control)

    def describe(result):
        return {
            "criterion": float(result.criterion if case.family is not None
                               else result.deviance),
            "converged": bool(result.converged),
            "singular": bool(result.is_singular),
            "feval": int(result.opt.feval) if result.opt is not None else None,
            "theta": [float(x) for x in result.theta],
            "version": f"crossed {crossed.__version__}",
        }

    return fit, describe


def with_reference_levels(data, reference: dict[str, str]):
    """Put each reference level first, as the first category of a pandas Categorical.

    Parameters
    ----------
    data : pandas.DataFrame
    reference : dict of str to str

    Returns
    -------
    pandas.DataFrame
        A copy, or ``data`` itself when there is nothing to relevel.
    """
    import pandas as pd

    if not reference:
        return data
    data = data.copy()
    for column, level in reference.items():
        others = sorted(set(data[column]) - {level})
        data[column] = pd.Categorical(data[column], categories=[level, *others])
    return data


def prepare_mixedlm(case: Case):
    """Warm mixedlm up and return a fitting closure and a describer.

    Parameters
    ----------
    case : Case

    Returns
    -------
    fit, describe : callable
        See :func:`prepare_crossed`.
    """
    import mixedlm

    mixedlm.lmer("Reaction ~ Days + (Days | Subject)", mixedlm.load_sleepstudy())

    def fit(data):
        if case.family is not None:
            family = {"binomial": mixedlm.families.Binomial,
                      "poisson": mixedlm.families.Poisson}[case.family]()
            weights = None if case.weights is None else data[case.weights].to_numpy(float)
            return mixedlm.glmer(case.mixedlm_formula or case.formula, data, family=family,
                                 weights=weights)
        return mixedlm.lmer(case.formula, data, REML=True)

    def describe(result):
        return {
            "criterion": float(-2.0 * float(result.logLik().value)
                               if case.family is not None else result.REMLcrit()),
            "converged": bool(result.converged),
            "singular": bool(result.is_singular()),
            "feval": int(getattr(result, "function_evals", None)
                         or getattr(result, "n_iter", 0) or 0),
            "theta": [float(x) for x in result.theta],
            "version": f"mixedlm {mixedlm.__version__}",
        }

    return fit, describe


def prepare_statsmodels(case: Case):
    """Warm statsmodels up and return a fitting closure and a describer.

    The crossed factors are variance components (``vc_formula``) of one group that holds
    every row, statsmodels' way of writing crossed random effects; sleepstudy uses
    ``groups="Subject", re_formula="~Days"``.

    Parameters
    ----------
    case : Case

    Returns
    -------
    fit, describe : callable
        See :func:`prepare_crossed`.
    """
    import pandas as pd
    import statsmodels
    from statsmodels.regression.mixed_linear_model import MixedLM

    spec = case.statsmodels
    sleep = pd.read_csv(SLEEPSTUDY, dtype={"Subject": str})
    MixedLM.from_formula("Reaction ~ Days", sleep, groups="Subject").fit(reml=True)

    def fit(data):
        model = MixedLM.from_formula(spec.fixed, data, groups=spec.groups or "_one",
                                     re_formula=spec.re_formula, vc_formula=spec.vc or None)
        return model.fit(reml=True)

    def describe(result):
        return {
            "criterion": float(-2.0 * result.llf),
            "converged": bool(result.converged),
            "singular": None,
            "feval": None,
            "theta": None,
            "version": f"statsmodels {statsmodels.__version__}",
        }

    return fit, describe


def prepare_statsmodels_data(case: Case, data):
    """Add statsmodels' single-group column and the interaction grouping columns.

    Parameters
    ----------
    case : Case
    data : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    data = data.copy()
    data["_one"] = 1
    for new, (a, b) in case.statsmodels.interactions:
        data[new] = data[a] + ":" + data[b]
    return data


def run_worker(peer: str, case: Case, repeat: int, budget: float) -> dict:
    """Fit ``case`` with a Python peer, timing the fits, and return a JSON-able record.

    Parameters
    ----------
    peer : str
        "crossed", "crossed-nocheck", "statsmodels" or "mixedlm".
    case : Case
    repeat : int
        Number of timed fits (at least ``case.min_repeat``).
    budget : float
        Stop repeating once the timed fits have taken this many seconds in all.

    Returns
    -------
    dict
        ``times`` (wall seconds of each fit), ``cpu_times`` (CPU seconds of this process,
        all threads), ``rss_before_fit_mb``, ``warnings``, ``env`` (environment.py's
        record: BLAS kernel, versions, load before and after the fits) and what
        the describer reports (criterion, converged, singular, feval, version).
    """
    if peer == "crossed":
        fit, describe = prepare_crossed(case, check_conv=True)
    elif peer == "crossed-nocheck":
        fit, describe = prepare_crossed(case, check_conv=False)
    elif peer == "mixedlm":
        fit, describe = prepare_mixedlm(case)
    elif peer == "statsmodels":
        fit, describe = prepare_statsmodels(case)
    else:
        raise ValueError(f"unknown Python peer {peer!r}")

    data = load_data(case)
    if peer in ("statsmodels", "mixedlm"):
        data = with_reference_levels(data, case.reference)
    if peer == "statsmodels":
        data = prepare_statsmodels_data(case, data)
    rss_before = peak_rss_mb()
    env = environment()  # (after the warm-up: every BLAS library is loaded)

    times, cpu_times = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while True:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = fit(data)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - start_cpu)
            if len(times) >= max(repeat, case.min_repeat) or sum(times) >= budget:
                break
    messages = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    record = describe(result)
    env["load_after"] = load_average()
    record.update(times=times, cpu_times=cpu_times, rss_before_fit_mb=rss_before,
                  warnings=messages, env=env)
    return record

