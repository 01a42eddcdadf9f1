"""Fits of the reference cases shared by the inference tests (cached per process).

The inference tests compare crossed's ANOVA, Kenward–Roger, EMMs, effect sizes, R² and
likelihood-ratio tests with R's answers. Where the native optimiser stops at a measurably
different optimum than lme4 (criterion equal to 1e-6 but θ different in the 5th digit), the
inference quantities are evaluated at R's θ instead, so that these tests check the
inference code, not the optimiser (which tests/engines checks):

- carrots_slopes: θ differs ~5e-5 relative (flat criterion); tiny F-test p values move
  by ~1e-3 relative;
- exist_mono_nested: the second variance is near the boundary (θ₂ = 3e-6 vs 5e-5), which
  moves the Kenward–Roger df of ``language`` by 2e-3;
- penicillin_crossed: θ₂ differs 3e-5 relative; Kenward–Roger SEs move by 3e-5;
- ner_crossed: θ₂ differs 1.7e-5 relative; the model EMMs' SEs move by 1.2e-5.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from crossed.engines.native import LmerControl
from crossed.model.finish import finish_fit
from crossed.model.pls import profiled_deviance
from reference import as_list, fit_case, r_answers

AT_R_THETA = ("carrots_slopes", "exist_mono_nested", "penicillin_crossed", "ner_crossed")


def at_theta(fit, theta):
    """The fit re-solved at a given θ (no optimisation, no convergence checks), of the fit's
    class (``finish_fit`` gives the model core's result)."""
    theta = np.asarray(theta, dtype=float)
    pls = fit.pls
    f = pls.factor(theta)
    n, p = fit.design.X.shape
    dev = profiled_deviance(f, n, p, fit.reml)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit.like(finish_fit(fit.design, pls, f, theta, dev, fit.reml, fit.engine,
                                   None, LmerControl(), None, fit.data_name))


@functools.cache
def fitted(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_case(name)
    if name in AT_R_THETA:
        fit = at_theta(fit, as_list(r_answers(name)["theta"]))
    return fit


def rel_err(a, b, floor: float = 0.0) -> float:
    """Largest |a/b − 1| (|a − b| where |b| <= floor)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    small = np.abs(b) <= floor
    err = np.where(small, np.abs(a - b), np.abs(a / np.where(small, 1.0, b) - 1.0))
    return float(np.max(err)) if err.size else 0.0


def cases_with(key: str) -> list[str]:
    from reference import case_names

    return [n for n in case_names() if n != "insteval_crossed" and key in r_answers(n)]
