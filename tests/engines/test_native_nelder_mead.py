"""LmerControl(optimizer="nelder_mead"): NLopt's Nelder-Mead, as lme4's ``nloptwrap`` with
``algorithm = "NLOPT_LN_NELDERMEAD"`` (allFit's ``"nloptwrap.NLOPT_LN_NELDERMEAD"``).

References: tests/data/reference/selection/nelder_mead.R (R 4.2.2, lme4 1.1-31, nloptr
2.0.3) writes nelder_mead.json: each case refitted with
``lmerControl(optimizer = "nloptwrap", optCtrl = list(algorithm = "NLOPT_LN_NELDERMEAD"))``
(cbpp: ``glmerControl(...)`` with the same arguments, both stages), and selection.json
(selection.R) holds every allFit refit's logLik, whose best among the refits without a
convergence message is R's best criterion.

Tolerances: R's Nelder-Mead reaches R's best criterion within 1e-6 relative on every case
here, so crossed's must too (with its continuations, and without: ``restarts=0``, for an
LMM the same algorithm, settings and start as R's). For the GLMM, lme4's ``deviance()`` is
not what the optimisers minimise (−2 logLik is); it moves at first order with the
estimates, and R's own five refits spread over 8.5e-4 in it (R's Nelder-Mead stops 1.2e-7
above R's best −2 logLik, with the lowest ``deviance()`` of the five): crossed's must lie
within that spread, no closer. Nothing is asserted on where an optimiser stopped beyond
these.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.engines.native.optimize import (
    nelder_mead,
    nlopt_algorithm,
    run_bobyqa,
    run_nlopt,
)

HERE = Path(__file__).resolve().parents[1]
REF_DIR = HERE / "data/reference/selection"
NM = json.loads((REF_DIR / "nelder_mead.json").read_text())
SELECTION = json.loads((REF_DIR / "selection.json").read_text())
CBPP = "cbind(incidence, size - incidence) ~ period + (1 | herd)"


def _carrots() -> pd.DataFrame:
    d = pd.read_csv(HERE / "data/carrots.csv")
    for c in ("Consumer", "Product", "Homesize"):
        d[c] = d[c].astype(str)
    return d


LMMS = {
    "sleepstudy": lambda: ("Reaction ~ Days + (Days | Subject)",
                           cx.load_dataset("sleepstudy")),
    "face_slope": lambda: ("y ~ x + (1 + x | g)", pd.read_csv(HERE / "data/face_slope_lmm.csv")),
    "carrots_two": lambda: (
        "Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product)", _carrots()),
}


def _r_best(name: str) -> float:
    """−2 × the highest logLik of R's allFit refits without a convergence message (all
    ran here; carrots_two's nlminbwrap has one)."""
    ref = SELECTION[name]["allfit"]
    assert all(ref["ok"])
    return -2.0 * max(ll for opt, ll in zip(ref["optimizer"], ref["llik"], strict=True)
                      if "converge" not in ref["msgs"][opt])


@pytest.mark.parametrize("restarts", [3, 0])
@pytest.mark.parametrize("name", list(LMMS))
def test_lmm_nelder_mead_reaches_rs_best_criterion(name: str, restarts: int) -> None:
    formula, data = LMMS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer(formula, data, control=cx.LmerControl(optimizer="nelder_mead",
                                                            restarts=restarts))
    assert fit.opt.optimizer == "NLOPT_LN_NELDERMEAD"
    best = _r_best(name)
    r_nm = NM[name]["m2ll"]
    assert NM[name]["algorithm"] == "NLOPT_LN_NELDERMEAD"
    # R's Nelder-Mead reaches R's best (the precondition), and so does crossed's
    assert abs(r_nm - best) <= 1e-6 * best
    assert abs(-2 * fit.loglik - best) <= 1e-6 * best, (-2 * fit.loglik, best)
    assert fit.converged
    # singular where R's fits are (face_slope: a correlation of -1)
    assert fit.is_singular == (name == "face_slope")
    if restarts == 0:  # lme4's path: no continuation ran
        assert fit.opt.restarts == ()
    # the continuations after it are BOBYQA's, as after BOBYQA
    assert all(r.optimizer in ("NLOPT_LN_BOBYQA", "L-BFGS-B") for r in fit.opt.restarts)


def test_glmm_nelder_mead_in_both_stages_against_glmer() -> None:
    d = cx.load_dataset("cbpp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(CBPP, d, family="binomial",
                       control=cx.LmerControl(optimizer="nelder_mead"))
        bob = cx.glmer(CBPP, d, family="binomial")
    assert fit.opt.optimizer == "NLOPT_LN_NELDERMEAD"
    assert bob.opt.optimizer == "NLOPT_LN_BOBYQA"
    ref = NM["cbpp"]
    assert ref["algorithm"] == "NLOPT_LN_NELDERMEAD"
    # −2 logLik (the Laplace deviance both minimise) within 1e-6 of R's Nelder-Mead and of
    # R's best refit
    best = _r_best("cbpp")
    assert abs(ref["m2ll"] - best) <= 1e-6 * best
    assert abs(-2 * fit.loglik - ref["m2ll"]) <= 1e-6 * ref["m2ll"]
    assert abs(-2 * fit.loglik - best) <= 1e-6 * best
    # lme4's deviance(): within the spread of R's own refits (module docstring)
    r_dev = list(ref["allfit_deviance"].values())
    spread = max(r_dev) - min(r_dev)
    assert spread < 1e-3
    assert abs(fit.deviance - ref["criterion"]) <= spread
    assert min(r_dev) - spread <= fit.deviance <= max(r_dev) + spread
    # the estimates: R's refits differ by up to 1e-4 in θ and β, crossed's within that
    np.testing.assert_allclose(fit.theta, ref["theta"], atol=2e-4)
    np.testing.assert_allclose(fit.fixef.to_numpy(), ref["fixef"], atol=2e-4)
    assert fit.converged and not fit.is_singular
    # both stages ran Nelder-Mead: the first stage's evaluations are counted separately
    assert fit.engine_info["feval_stage1"] > 0


def test_glmm_nelder_mead_stage_one_is_nelder_mead() -> None:
    """nAGQ = 0 is the first stage alone: its optimiser is the one asked for."""
    d = cx.load_dataset("cbpp")
    fit = cx.glmer(CBPP, d, family="binomial", nAGQ=0,
                   control=cx.LmerControl(optimizer="nelder_mead"))
    assert fit.opt.optimizer == "NLOPT_LN_NELDERMEAD"
    bob = cx.glmer(CBPP, d, family="binomial", nAGQ=0)
    assert bob.opt.optimizer == "NLOPT_LN_BOBYQA"
    # the same nAGQ = 0 optimum (the criterion both minimise) within 1e-6, relative
    assert abs(fit.criterion - bob.criterion) <= 1e-6 * abs(bob.criterion)


def test_glmm_refuses_lbfgsb_naming_it() -> None:
    with pytest.raises(ValueError, match="optimizer='lbfgsb' is not available for GLMMs"):
        cx.glmer(CBPP, cx.load_dataset("cbpp"), family="binomial",
                 control=cx.LmerControl(optimizer="lbfgsb"))


def test_control_names_the_optimizers() -> None:
    assert cx.LmerControl(optimizer="nelder_mead").optimizer == "nelder_mead"
    with pytest.raises(ValueError, match="'nelder_mead'"):
        cx.LmerControl(optimizer="neldermead")
    assert nlopt_algorithm("auto") == nlopt_algorithm("bobyqa") == "NLOPT_LN_BOBYQA"
    assert nlopt_algorithm("nelder_mead") == "NLOPT_LN_NELDERMEAD"
    with pytest.raises(ValueError, match="'lbfgsb' is not one of NLopt's"):
        nlopt_algorithm("lbfgsb")


def _rosen(x: np.ndarray) -> float:
    return float((1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2)


def test_one_runner_for_both_algorithms() -> None:
    """run_bobyqa is run_nlopt with BOBYQA (the same run, evaluation for evaluation);
    Nelder-Mead runs under the lower bounds with lme4's nloptwrap tolerances."""
    control = cx.LmerControl()
    x0, lower = np.array([0.5, 0.5]), np.array([0.0, -np.inf])
    a = run_bobyqa(_rosen, x0, lower, control, xtol_abs=1e-8, ftol_abs=1e-8, xtol_rel=1e-4)
    b = run_nlopt(_rosen, x0, lower, control, algorithm="NLOPT_LN_BOBYQA", xtol_abs=1e-8,
                  ftol_abs=1e-8, xtol_rel=1e-4)
    assert a.optimizer == b.optimizer == "NLOPT_LN_BOBYQA"
    assert a.feval == b.feval and a.fmin == b.fmin
    for (xa, fa), (xb, fb) in zip(a.log, b.log, strict=True):
        np.testing.assert_array_equal(xa, xb)
        assert fa == fb
    nm = nelder_mead(_rosen, x0, lower, control)
    assert nm.optimizer == "NLOPT_LN_NELDERMEAD" and nm.return_code > 0
    assert nm.fmin < 1e-6 and np.all(np.array([x[0] for x, _ in nm.log]) >= 0)
    # a bound that binds: the minimum of (x + 1)² over x >= 0 is at the bound
    at = nelder_mead(lambda x: float((x[0] + 1) ** 2), np.array([1.0]), np.array([0.0]),
                     control)
    assert at.theta_final[0] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="unknown NLopt algorithm"):
        run_nlopt(_rosen, x0, lower, control, algorithm="NLOPT_LN_SBPLX", xtol_abs=1e-8,
                  ftol_abs=1e-8, xtol_rel=1e-4)


def test_glmm_nelder_mead_stopped_at_maxeval_is_reported() -> None:
    """A Nelder-Mead stage stopped by ``maxeval`` is a failed fit, said in the messages
    and in the summary's optimizer line with NLopt's status 5, as lme4's nloptwrap
    reports it (``conv = status`` where it is negative or 5)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(CBPP, cx.load_dataset("cbpp"), family="binomial",
                       control=cx.LmerControl(optimizer="nelder_mead", maxeval=10))
    assert not fit.converged
    assert "optimizer (nelder_mead) stopped at maxeval = 10" in fit.messages
    lines = [line for line in str(fit.summary()).splitlines() if "convergence code" in line]
    assert lines == ["optimizer (nelder_mead) convergence code: 5 (maxeval reached)"]
