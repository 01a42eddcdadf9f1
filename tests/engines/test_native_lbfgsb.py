"""L-BFGS-B on the analytic gradient (``LmerControl(optimizer="lbfgsb")``, and the default
``"auto"`` from 5 θ on), beside BOBYQA (engines/native/optimize.py, converge.py).

On every R reference case (lme4 1.1-31, tests/data/reference): the criterion is at most
lme4's + 1e-9 relative (CRIT_SLACK) and at most BOBYQA's + 1e-12 relative (rounding of
the criterion), and converged / singular agree with R's. What is asserted is never where
an optimiser stopped.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crossed.engines.native.optimize import LmerControl
from reference import CRIT_SLACK, case_names, fit_case, load_table, r_answers


def _fit(name: str, **control):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_case(name, control=LmerControl(**control))


@pytest.mark.parametrize("name", case_names())
def test_lbfgsb_reaches_lme4s_and_bobyqas_criterion(name: str) -> None:
    r = r_answers(name)
    fit = _fit(name, optimizer="lbfgsb")
    bobyqa = _fit(name, optimizer="bobyqa")
    assert fit.opt.optimizer == "L-BFGS-B"
    assert fit.deviance <= r["deviance"] + CRIT_SLACK * abs(r["deviance"])
    assert fit.deviance <= bobyqa.deviance + 1e-12 * abs(bobyqa.deviance)
    assert fit.converged, fit.messages
    assert fit.is_singular is bool(r["singular"])
    # L-BFGS-B's evaluations are one criterion and one gradient each; the probes of the
    # second-order test at the boundary and BOBYQA's continuations have no gradient
    assert fit.opt.feval == len(fit.opt.log)
    bobyqa_evals = sum(rs.feval for rs in fit.opt.restarts if rs.optimizer != "L-BFGS-B")
    assert fit.opt.geval == fit.opt.feval - bobyqa_evals - fit.opt.probes
    for rs in fit.opt.restarts:
        assert rs.geval == (rs.feval if rs.optimizer == "L-BFGS-B" else 0)


def test_auto_chooses_by_the_number_of_parameters() -> None:
    assert LmerControl().optimizer == "auto"
    assert _fit("sleepstudy_slopes").opt.optimizer == "NLOPT_LN_BOBYQA"  # 3 θ
    fit = _fit("blurb_ccmem_slopes")  # 11 θ
    assert fit.opt.optimizer == "L-BFGS-B"
    assert fit.opt.feval < 500  # BOBYQA: ~1,500 (L-BFGS-B ~60, with the probes at its stop)


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
def test_a_theta_stuck_at_zero_is_left_by_the_continuation(reml: bool) -> None:
    """Five crossed intercepts on ner_like: L-BFGS-B ends with θ[3] at exactly 0, where
    the gradient vanishes by symmetry, and restarted L-BFGS-B came back to it, 2.3 above
    BOBYQA's criterion; the BOBYQA continuation leaves it (θ[3] ≈ 0.05)."""
    import warnings

    import crossed

    df = crossed.load_dataset("ner_like")
    formula = ("f1 ~ 1 + (1 | model) + (1 | language) + (1 | seed) + (1 | model:language)"
               " + (1 | language:seed)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = crossed.lmer(formula, df, reml=reml)
        bobyqa = crossed.lmer(formula, df, reml=reml,
                              control=LmerControl(optimizer="bobyqa"))
    assert auto.opt.optimizer == "L-BFGS-B"
    assert auto.deviance <= bobyqa.deviance + 1e-9 * abs(bobyqa.deviance)
    assert auto.theta[3] > 0.01


def test_a_singular_fit_lands_on_the_bound() -> None:
    fit = _fit("dyestuff2_singular", optimizer="lbfgsb")
    assert fit.is_singular and np.all(fit.theta == 0.0)


def test_the_boundary_trap_is_left_by_the_edge_restart() -> None:
    """ham_crossed: L-BFGS-B's first run stops with a θ projected onto 0, where the
    criterion's derivative in it vanishes; the second-order probe finds that leaving the
    bound descends, and the continuation (recorded) finds the optimum."""
    fit = _fit("ham_crossed", optimizer="lbfgsb")
    r = r_answers("ham_crossed")
    assert fit.opt.restarts and "of its bound" in fit.opt.restarts[0].reason
    assert fit.opt.restarts[0].fmin_after < fit.opt.restarts[0].fmin_before
    assert fit.deviance <= r["deviance"] + CRIT_SLACK * abs(r["deviance"])
    assert "lowers the criterion" in fit.opt.restarts[0].reason
    assert fit.opt.probes >= 3
    assert any("L-BFGS-B restart" in m for m in fit.messages)


def test_unknown_optimizer_is_refused() -> None:
    with pytest.raises(ValueError, match="'auto', 'bobyqa', 'lbfgsb'"):
        LmerControl(optimizer="nelder")


def test_maxcor_is_a_setting() -> None:
    """L-BFGS-B keeps 20 past steps by default (fewer evaluations on many θ); other
    values are accepted, invalid ones refused."""
    assert LmerControl().lbfgsb_maxcor == 20
    fit = _fit("blurb_ccmem_slopes", lbfgsb_maxcor=10)
    r = r_answers("blurb_ccmem_slopes")
    assert fit.deviance <= r["deviance"] + CRIT_SLACK * abs(r["deviance"])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="lbfgsb_maxcor"):
            LmerControl(lbfgsb_maxcor=bad)


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
def test_a_correlation_at_the_boundary_gets_bobyqas_fit_as_well(reml: bool) -> None:
    """exist_multi with two correlated slopes: the criterion has two local optima, one
    per sign of a ±1 correlation; L-BFGS-B reached the higher under REML (0.93 above
    BOBYQA's and lme4's) and the lower under ML. With a diagonal θ at its bound beside a
    nonzero θ, ``auto`` also runs BOBYQA from lme4's start and keeps the lower: never
    above BOBYQA's criterion, and recorded."""
    import warnings

    import crossed
    from crossed.engines.native.engine import correlation_at_the_boundary

    df = crossed.load_dataset("exist_multi")
    formula = "delta ~ mode + (1 + mode | model) + (1 + mode | language) + (1 | task)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = crossed.lmer(formula, df, reml=reml)
        bobyqa = crossed.lmer(formula, df, reml=reml,
                              control=LmerControl(optimizer="bobyqa"))
        lbfgsb = crossed.lmer(formula, df, reml=reml,
                              control=LmerControl(optimizer="lbfgsb"))
    assert correlation_at_the_boundary(lbfgsb.pls, lbfgsb.theta, 1e-4)
    assert auto.deviance <= bobyqa.deviance + 1e-9 * abs(bobyqa.deviance)
    assert auto.deviance <= lbfgsb.deviance + 1e-9 * abs(lbfgsb.deviance)
    assert any("BOBYQA from lme4's start" in r.reason for r in auto.opt.restarts)


def test_uncorrelated_slopes_are_not_a_correlation_at_the_boundary() -> None:
    from crossed.engines.native.engine import correlation_at_the_boundary

    fit = _fit("blurb_ccmem_slopes")  # singular, || slopes: no second run
    assert fit.is_singular
    assert not correlation_at_the_boundary(fit.pls, fit.theta, 1e-4)
    assert not any("lme4's start" in r.reason for r in fit.opt.restarts)


# models of 5 to 7 θ beyond the reference cases (crossed intercepts, uncorrelated and
# correlated slopes), each fitted by "auto" (L-BFGS-B and its tests at the boundary) and
# by BOBYQA from lme4's start
BATTERY = [
    ("exist_multi.csv", ("model", "language", "task", "architecture", "mode"),
     "delta ~ mode + (1|architecture) + (1|model) + (1|language) + (1|task)"
     " + (1|model:language)"),
    ("exist_multi.csv", ("model", "language", "task", "mode"),
     "delta ~ 1 + (mode||model) + (mode||language) + (1|task)"),
    ("blurb_like.csv", ("model", "dataset", "seed"),
     "score ~ seed + (1|model) + (1|dataset) + (1|model:dataset) + (1|model:seed)"
     " + (1|dataset:seed)"),
    ("carrots.csv", ("Consumer", "Product", "Homesize"),
     "Preference ~ sens2 + (1 + sens2|Consumer) + (1|Product) + (1|Product:Homesize)"),
    ("carrots.csv", ("Consumer", "Product", "Homesize"),
     "Preference ~ sens1 + sens2 + (sens1 + sens2||Consumer) + (1|Product)"
     " + (1|Product:Homesize)"),
]


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
@pytest.mark.parametrize("file,factors,formula", BATTERY,
                         ids=[f"{b[0].split('.')[0]}-{i}" for i, b in enumerate(BATTERY)])
def test_auto_is_never_above_bobyqa_beyond_lme4s_case_list(file, factors, formula, reml):
    import crossed

    df = load_table(file, factors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = crossed.lmer(formula, df, reml=reml)
        bobyqa = crossed.lmer(formula, df, reml=reml, control=LmerControl(optimizer="bobyqa"))
    assert auto.opt.optimizer == "L-BFGS-B"
    # (two optimisers' stops: 1e-10, a tenth of the tolerance against lme4's criterion)
    assert auto.deviance <= bobyqa.deviance + 1e-10 * abs(bobyqa.deviance)
    assert auto.opt.feval == len(auto.opt.log)


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
def test_lbfgsb_ends_where_its_convergence_test_holds(reml: bool) -> None:
    """A random crossed table (603 rows, five crossed intercepts, generated in
    ``benchmarks``' style with numpy's PCG64 seed 7): under Haswell's kernel, L-BFGS-B's
    line search tried a point 6.4 below where it then stopped (a saddle with a θ at 0), and
    the fit returned that trial point: not stationary, singular (so lme4's check was
    skipped), 7.6 above BOBYQA's criterion under ML. L-BFGS-B now resumes from such a
    point; its result is a stop of L-BFGS-B (projected gradient ~0)."""
    import crossed
    from crossed.model.gradient import value_and_gradient
    from crossed.model.pls import PLS

    df = load_table("crossed_five_intercepts.csv", ("a", "b", "c"))
    formula = "y ~ x + (1|a) + (1|b) + (1|c) + (1|a:b) + (1|b:c)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(formula, df, reml=reml, control=LmerControl(optimizer="lbfgsb"))
        bobyqa = crossed.lmer(formula, df, reml=reml, control=LmerControl(optimizer="bobyqa"))
    assert fit.deviance <= bobyqa.deviance + 1e-10 * abs(bobyqa.deviance)
    _, grad, _ = value_and_gradient(PLS.of(fit.design), fit.theta, reml)
    at_bound = fit.theta <= 0.0
    projected = np.where(at_bound, np.minimum(grad, 0.0), grad)
    assert np.max(np.abs(projected)) < 1e-3, (fit.theta, grad)


def test_lbfgsb_resumes_from_a_trial_point_below_its_stop(monkeypatch) -> None:
    """The resume itself, on a criterion where L-BFGS-B is made to stop above a point it
    tried: the first run is cut short at a higher point (scipy's result replaced; lbfgsb
    imports scipy's minimize when it runs, so the patch is on scipy.optimize)."""
    import scipy.optimize

    from crossed.engines.native import optimize

    def fun_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        return float((x[0] - 2.0) ** 2), np.array([2.0 * (x[0] - 2.0)])

    real = scipy.optimize.minimize
    calls = []

    def first_stops_high(fun, x0, **kwargs):
        calls.append(np.array(x0))
        if len(calls) == 1:  # a trial at the optimum, then a "stop" at a higher point
            fun(np.array([2.0]))
            fun(np.array([5.0]))

            class Stop:
                x, fun, status, message = np.array([5.0]), 9.0, 0, "CONVERGENCE"
            return Stop()
        return real(fun, x0, **kwargs)

    monkeypatch.setattr(scipy.optimize, "minimize", first_stops_high)
    opt = optimize.lbfgsb(fun_grad, np.array([0.0]), np.array([-np.inf]), LmerControl())
    assert len(calls) == 2 and calls[1][0] == 2.0  # resumed from the lower trial point
    assert opt.fmin == 0.0 and opt.theta_final[0] == 2.0
    assert "resumed 1 time" in opt.message and opt.return_code == 1
    assert opt.feval == len(opt.log)


def _crossed_table(n_first: int, n_later: int, per: int, seed: int = 0):
    """Each of ``n_first`` raters scores ``per`` of ``n_later`` items (InstEval's shape)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    s = np.repeat(np.arange(n_first), per)
    d = rng.integers(0, n_later, size=len(s))
    x = rng.normal(size=len(s))
    y = (0.7 * rng.normal(size=n_first)[s] + 0.5 * rng.normal(size=n_later)[d]
         + 0.3 * rng.normal(size=n_later)[d] * x + 0.3 * x + rng.normal(size=len(s)))
    return pd.DataFrame({"y": y, "x": x, "s": s.astype(str), "d": d.astype(str)})


def test_auto_takes_lbfgsb_on_a_large_dense_part_with_scalar_later_blocks():
    """2 θ, a dense part of order 1,003 (1,000 items): each evaluation is a dense Cholesky,
    a gradient costs a few, and L-BFGS-B needs a fraction of BOBYQA's evaluations."""
    import crossed
    from crossed.model.pls import PLS

    data = _crossed_table(1500, 1000, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = crossed.lmer("y ~ x + (1 | s) + (1 | d)", data)
        bobyqa = crossed.lmer("y ~ x + (1 | s) + (1 | d)", data,
                              control=LmerControl(optimizer="bobyqa"))
    assert PLS.of(auto.design).dense_order >= 1000
    assert auto.opt.optimizer == "L-BFGS-B"
    assert bobyqa.opt.optimizer == "NLOPT_LN_BOBYQA"
    assert auto.deviance <= bobyqa.deviance * (1 + 1e-12)
    assert auto.opt.feval < bobyqa.opt.feval


def test_auto_keeps_bobyqa_with_a_later_block_of_several_columns():
    """The same size with a correlated slope in the later factor: its gradient costs more
    than L-BFGS-B's fewer evaluations save, so BOBYQA runs (4 θ)."""
    import crossed
    from crossed.model.pls import PLS

    data = _crossed_table(600, 520, 4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x + (1 | s) + (1 + x | d)", data)
    assert PLS.of(fit.design).dense_order >= 1000
    assert fit.opt.optimizer == "NLOPT_LN_BOBYQA"
