"""Simulation: responses from fitted models, refits, and the analyses built on them.

- :func:`simulate_responses` / ``fit.simulate`` — lme4's ``simulate()``.
- :func:`confint` / ``fit.confint`` — lme4's ``confint`` (profile, Wald, boot).
- :func:`simulate_responses` / ``fit.simulate`` — lme4's ``simulate()``, for LMMs and GLMMs
  (binomial, Poisson: ``GlmerFit`` has the same methods; tests are Wald z / LRT there).
- :func:`bootstrap` — parametric bootstrap (lme4's ``bootMer``) with percentile, basic and
  normal intervals.
- :func:`run_ablation` — missing-data robustness of a test on a fitted model (with the
  repeated-measures ANOVA alternative, :class:`RMAnova`); ``crossed.ablation`` fits the
  formula on the data first (:mod:`crossed.evaluation.ablation`).
- :func:`power_sim`, :func:`power_curve`, :func:`extend`, :func:`specify` — power
  analysis (simr's ``powerSim``, ``powerCurve``, ``extend``, ``makeLmer``).
- :func:`simulate_residuals`, :func:`check` — simulated (DHARMa) residual diagnostics.
- tests for the simulations: :func:`fixed`, :func:`emm_contrast`, :func:`lrt`.
- :class:`Refitter` — fast repeated refits (identical results to ``fit.refit``).

Every stochastic function takes ``seed`` and gives identical results for identical seeds
with ``n_jobs=1``, several local processes (joblib) or a Dask cluster (``backend="dask"``).
"""

from crossed.simulate.ablation import AblationResult, run_ablation
from crossed.simulate.bootstrap import BootResult, bootstrap
from crossed.simulate.confint import confint
from crossed.simulate.diagnostics import Diagnostics, check, simulate_residuals
from crossed.simulate.fastrefit import Refitter
from crossed.simulate.intervals import clopper_pearson
from crossed.simulate.models import extend, specify
from crossed.simulate.power import PowerCurve, PowerResult, power_curve, power_sim
from crossed.simulate.response import as_generator, simulate_responses
from crossed.simulate.rmanova import RMAnova
from crossed.simulate.simtests import emm_contrast, fixed, lrt

__all__ = [
    "AblationResult",
    "BootResult",
    "Diagnostics",
    "PowerCurve",
    "PowerResult",
    "RMAnova",
    "Refitter",
    "as_generator",
    "bootstrap",
    "check",
    "clopper_pearson",
    "confint",
    "emm_contrast",
    "extend",
    "fixed",
    "lrt",
    "power_curve",
    "power_sim",
    "run_ablation",
    "simulate_residuals",
    "simulate_responses",
    "specify",
]
