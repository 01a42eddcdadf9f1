"""Missing-data robustness of a test on a data table (:func:`ablation`): fit the formula,
then remove random parts of the data, refit and test again
(:func:`crossed.simulate.ablation.run_ablation`, which holds the method).

A workflow from data and a formula, so it sits above :mod:`crossed.api`, which it fits
with.
"""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd

from crossed._conventions import check_count, check_fraction
from crossed.api import glmer, lmer
from crossed.simulate.ablation import DEFAULT_FRACTIONS, AblationResult, run_ablation
from crossed.simulate.rmanova import RMAnova

__all__ = ["ablation"]


def ablation(data: pd.DataFrame, formula: str, test: Any, fractions=DEFAULT_FRACTIONS,
             reps: int = 100, seed: Any = None, unit: str | list[str] | None = None,
             alpha: float = 0.05, rm_anova: RMAnova | dict | None = None,
             reml: bool = True, reference: dict[str, str] | None = None,
             level: float = 0.95, check_conv: bool = False, n_jobs: int | None = 1,
             backend: str = "joblib", scheduler: Any = None,
             progress: bool | None = None, family: Any = None,
             weights: str | None = None) -> AblationResult:
    """Missing-data robustness of a test: remove data at random, refit, test.

    Parameters
    ----------
    data : pandas.DataFrame
    formula : str
        lme4 formula of the mixed model (fitted once on the full data; refits reuse its
        design).
    test : test factory, str or callable
        E.g. ``crossed.simulate.emm_contrast("language")`` (EMM contrast, Satterthwaite
        df), ``crossed.simulate.fixed(...)``, ``crossed.simulate.lrt(...)``.
    fractions : sequence of float
        Fractions of rows (or of groups) removed; default 0.05, 0.10, ..., 0.50.
    reps : int
        Random removals per fraction.
    seed : int or numpy.random.Generator
        Identical seeds give identical removals and results for any ``n_jobs``/backend.
    unit : str or list of str, optional
        Remove whole groups (combinations of these columns, e.g. ``["model", "task"]``)
        instead of single rows; the fraction is then of groups.
    alpha : float
        Significance level of a detection.
    rm_anova : RMAnova or dict, optional
        Also run the repeated-measures ANOVA on every subset, e.g.
        ``{"subject": "model", "within": ["language", "task", "mode"],
        "effect": "language"}`` (response: the formula's); it keeps complete subjects only.
    reml, reference
        As :func:`crossed.lmer`.
    level : float
        Confidence level of the Clopper–Pearson intervals.
    check_conv : bool
        lme4's convergence derivative check on each refit (estimates unchanged).
    n_jobs, backend, scheduler, progress
        Execution (:func:`crossed.simulate.execution.run_tasks`).
    family : str or Family, optional
        Fit a GLMM instead (:func:`crossed.glmer`, e.g. ``"binomial"`` for item-level
        correctness); ``reml`` is then not used and tests are Wald z / likelihood-ratio
        tests.
    weights : str, optional
        With ``family``: the column of prior weights (binomial trials).

    Returns
    -------
    AblationResult
        ``summary()`` (rate per fraction with intervals), ``replicates``, ``full``,
        ``plot()``.
    """
    def fit_model(frame: pd.DataFrame):
        if family is None:
            if weights is not None:
                raise ValueError("weights= is for GLMMs (give family=)")
            return lmer(formula, frame, reml=reml, reference=reference)
        return glmer(formula, frame, family=family, weights=weights, reference=reference)

    reps = check_count("reps", reps)
    alpha, level = check_fraction("alpha", alpha), check_fraction("level", level)
    unit_l = [unit] if isinstance(unit, str) else (list(unit) if unit is not None else None)
    rm = None
    if rm_anova is not None:
        rm = rm_anova if isinstance(rm_anova, RMAnova) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_model(data)
    if rm_anova is not None and rm is None:
        rm = RMAnova(response=fit.design.spec.response, **rm_anova)
    extra = list(unit_l or []) + ([rm.subject, *rm.within] if rm else [])
    needed = list(dict.fromkeys([*fit.design.columns, *extra,
                                 *([weights] if weights is not None else [])]))
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the data")
    complete = data[needed].notna().all(axis=1).to_numpy()
    if not complete.all() or fit.n_dropped:
        data = data.loc[complete]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_model(data)
    return run_ablation(fit, data, test, fractions=fractions, reps=reps, seed=seed,
                        unit=unit_l, alpha=alpha, rm=rm, level=level, check_conv=check_conv,
                        n_jobs=n_jobs, backend=backend, scheduler=scheduler,
                        progress=progress)
