"""Where PIRLS stops, and what the Laplace criterion is there.

lme4 stops PIRLS when the penalised deviance changes by less than ``tolPwrss`` (1e-7,
relatively). That leaves η up to about √1e-7 from the conditional modes, and log|L|², which
moves with the working weights at first order, carries the error: lme4's criterion jumps
where the number of PIRLS iterations changes. On grouseticks' null model (the model
``performance::r2_nakagawa`` refits) the jump is 0.02 and makes a false minimum.

lme4's numbers for that model (R 4.2.2, lme4 1.1-31; tests/data/glmm/grouseticks.csv)::

    d <- read.csv("grouseticks.csv")
    for (v in c("BROOD", "INDEX", "LOCATION")) d[[v]] <- factor(d[[v]])
    m <- glmer(TICKS ~ 1 + (1|BROOD) + (1|INDEX) + (1|LOCATION), data = d,
               family = poisson)
    getME(m, "theta"); fixef(m); -2 * logLik(m)
    # INDEX 0.545056363318258, BROOD 1.224302569020930, LOCATION 0.989963593394945
    # (Intercept) 0.422023674034201;  -2 logLik 1874.24845447538
    # lme4 warns: "Model failed to converge with max|grad| = 0.0829835"
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.engines.native.glmer import fit_glmm
from crossed.model.finish import ConvergenceWarning
from crossed.model.glmm.pirls import GlmmProblem

DATA = Path(__file__).resolve().parents[2] / "data" / "glmm"
NULL = "TICKS ~ 1 + (1|BROOD) + (1|INDEX) + (1|LOCATION)"
# lme4's estimates, θ in crossed's block order (INDEX, BROOD, LOCATION: most levels first)
LME4_X = np.array([0.545056363318258, 1.224302569020930, 0.989963593394945,
                   0.422023674034201])
LME4_CRITERION = 1874.24845447538


def _grouse() -> pd.DataFrame:
    d = pd.read_csv(DATA / "grouseticks.csv")
    for v in ("BROOD", "INDEX", "LOCATION"):
        d[v] = d[v].astype(str).astype("category")
    return d


def _fit(pirls: str) -> cx.GlmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(NULL, _grouse(), family="poisson",
                        control=cx.LmerControl(pirls=pirls))


def _problem(fit: cx.GlmerFit) -> GlmmProblem:
    """The fit's criterion: lp0 from stage 1 at the fit's θ."""
    prob = GlmmProblem(fit.design, fit.family)
    prob.set_lp0(prob.pirls(fit.theta, None, joint=True), joint=False)
    return prob


def test_lme4s_rule_reproduces_lme4s_criterion_at_its_estimates() -> None:
    prob = _problem(_fit("lme4"))
    got = prob.deviance(LME4_X)
    # lp0 is not lme4's (it comes from our stage 1), so agreement is to PIRLS's own noise
    assert got == pytest.approx(LME4_CRITERION, abs=1e-4)


@pytest.mark.parametrize("theta_lp0", [[1.0, 1.0, 1.0], [0.5, 1.2, 1.0], [0.3, 0.8, 0.6]])
def test_exact_criterion_does_not_depend_on_where_pirls_starts(theta_lp0) -> None:
    """lme4's criterion depends on lp0, where every PIRLS starts (by 0.02 at lme4's
    estimates here); at the exact modes it does not (to rounding), and it is smooth."""
    fit = _fit("lme4")
    ref = GlmmProblem(fit.design, fit.family)
    ref.set_lp0(ref.pirls(LME4_X[:3], None, joint=True), joint=False)
    prob = GlmmProblem(fit.design, fit.family)
    prob.set_lp0(prob.pirls(np.array(theta_lp0), None, joint=True), joint=False)
    start = np.array([0.54426, 1.21394, 0.97748, 0.43893])
    line = [start + a * (LME4_X - start) for a in np.linspace(0.0, 1.0, 21)]
    for pr in (ref, prob):
        pr.exact = True
    a = np.array([ref.deviance(x) for x in line])
    b = np.array([prob.deviance(x) for x in line])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)
    assert np.max(np.abs(np.diff(a, 2))) < 1e-4
    # lme4's rule from the same two starts
    ref.exact = prob.exact = False
    spread = max(abs(ref.deviance(x) - prob.deviance(x)) for x in line)
    if theta_lp0 == [1.0, 1.0, 1.0]:
        assert spread > 1e-3


def test_auto_continues_at_the_exact_modes_and_says_so() -> None:
    fit = _fit("auto")
    assert any("continued with PIRLS run to the modes" in m for m in fit.messages)
    assert fit.engine_info["pirls_error"] > 1e-3
    # lower than lme4's criterion, and the criterion is the exact one at the estimates
    assert fit.criterion <= LME4_CRITERION
    prob = _problem(fit)
    prob.exact = True
    assert prob.deviance(np.concatenate([fit.theta, fit.beta])) == pytest.approx(
        fit.criterion, abs=1e-6)
    # lme4's estimates are no better, judged by the exact criterion
    assert fit.criterion <= prob.deviance(LME4_X) + 1e-6


def test_lme4_rule_by_default_reports_its_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(NULL, _grouse(), family="poisson")
    assert fit.opt.control.pirls == "lme4"
    assert fit.engine_info["pirls_error"] > 1e-3
    assert any("pirls='exact' fits the Laplace approximation" in m for m in fit.messages)
    assert not any("continued" in m for m in fit.messages)


def test_exact_mode_from_the_start() -> None:
    fit = _fit("exact")
    assert not any("tolPwrss" in m for m in fit.messages)
    assert fit.engine_info["pirls_error"] is None
    assert fit.criterion <= LME4_CRITERION


def test_no_continuation_where_lme4s_rule_is_accurate() -> None:
    """cbpp: lme4's criterion is 5.6e-4 from the exact one at its optimum, below the
    limit: even ``"auto"`` gives lme4's fit, and says nothing."""
    d = pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                       control=cx.LmerControl(pirls="auto"))
    assert not any("tolPwrss" in m for m in fit.messages)
    assert 1e-5 < fit.engine_info["pirls_error"] < 1e-3
    exact = fit_glmm(fit.design, fit.family, control=cx.LmerControl(pirls="exact"))
    # the exact Laplace optimum is near lme4's, and at least as low on its own criterion
    np.testing.assert_allclose(exact.beta, fit.beta, atol=2e-3)
    prob = _problem(fit)
    prob.exact = True
    assert exact.criterion <= prob.deviance(np.concatenate([fit.theta, fit.beta])) + 1e-9


def test_bad_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="pirls mode 'tight'"):
        cx.LmerControl(pirls="tight")


@pytest.mark.parametrize("nagq", [0, 1, 9])
def test_every_stage_measures_and_honours_the_mode(nagq: int) -> None:
    """nAGQ = 0 (its one stage), Laplace and AGQ: the error of lme4's rule is measured at
    the optimum; the exact criterion's fit ends at or below the value lme4's rule's fit
    has on the exact criterion (cbpp)."""
    d = pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})
    formula = "cbind(incidence, size - incidence) ~ period + (1 | herd)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loose = cx.glmer(formula, d, nAGQ=nagq)
        tight = cx.glmer(formula, d, nAGQ=nagq, control=cx.LmerControl(pirls="exact"))
    assert loose.engine_info["pirls_error"] is not None
    assert tight.engine_info["pirls_error"] is None
    assert abs(loose.engine_info["pirls_error"]) < 1e-3  # below the limit: no message
    assert not any("tolPwrss" in m for m in loose.messages)
    # both are lme4's criterion up to the rule's error at the optimum
    assert tight.criterion <= loose.criterion + 1e-6
    assert loose.criterion - tight.criterion <= 2e-3
