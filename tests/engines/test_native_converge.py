"""The native engine continues after lme4's stopping rule (engines/native/converge.py).

What is asserted is what the continuation is for, never where it stopped: the criterion is
never raised, the continuation is recorded (OptSummary.restarts, the fit's messages), and
the fit's verdict (converged, singular) is lme4's at the optimum.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crossed
from crossed.engines.native.optimize import LmerControl
from crossed.model.convergence import (
    ConvergenceStatus,
    assess,
    check_convergence,
    classify_convergence,
    derivatives,
    derivatives_from_gradient,
)
from crossed.model.gradient import value_and_gradient
from reference import CRIT_SLACK, case_names, fit_case, load_table, r_answers

# BOBYQA stopped far too early: lme4's derivative check fails at its point
LOOSE = dict(xtol_rel=0.3, ftol_abs=10.0, xtol_abs=1e-2)


def _fit(case: str, **control):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_case(case, control=LmerControl(**control))
    return fit, [w for w in caught if issubclass(w.category, crossed.ConvergenceWarning)]


def test_failed_check_is_continued_to_the_optimum():
    stopped, warned = _fit("sleepstudy_slopes", restarts=0, **LOOSE)
    assert not stopped.converged and warned  # lme4's verdict on the early stop
    assert stopped.opt.restarts == ()
    fit, warned = _fit("sleepstudy_slopes", **LOOSE)
    r = r_answers("sleepstudy_slopes")
    assert fit.converged and not warned, fit.messages
    assert fit.deviance <= r["deviance"] + CRIT_SLACK * abs(r["deviance"])
    assert fit.deviance < stopped.deviance
    first = fit.opt.restarts[0]
    assert first.reason.startswith("gradient check failed")
    assert first.fmin_before == pytest.approx(stopped.deviance, rel=1e-12)
    assert any(m.startswith("optimizer continued after lme4's stopping rule")
               for m in fit.messages)
    # feval and the log count every evaluation, the continuations' too
    assert fit.opt.feval == len(fit.opt.log) > stopped.opt.feval


@pytest.mark.parametrize("restarts", [1, 2, 3])
def test_continuations_are_bounded_and_never_raise_the_criterion(restarts):
    fit, _ = _fit("sleepstudy_slopes", restarts=restarts, **LOOSE)
    assert 1 <= len(fit.opt.restarts) <= restarts
    for rs in fit.opt.restarts:
        assert rs.fmin_after <= rs.fmin_before
        assert rs.feval > 0
    assert fit.deviance == pytest.approx(fit.opt.restarts[-1].fmin_after, rel=1e-14)


def test_theta_near_its_bound_is_continued_once():
    """blurb_ccmem_slopes: lme4's rule stops with a bounded theta below 1e-3 where singular
    or not, converged or not, depends on the BLAS kernel; the continuation reaches the
    optimum on the boundary, as a tightly converged lme4 does."""
    lme4_path, _ = _fit("blurb_ccmem_slopes", restarts=0, optimizer="bobyqa")
    fit, warned = _fit("blurb_ccmem_slopes", optimizer="bobyqa")
    r = r_answers("blurb_ccmem_slopes")
    # continued: for the theta near its bound, or (other BLAS kernels) the failed check
    assert fit.opt.restarts
    assert ("of its bound" in fit.opt.restarts[0].reason
            or "check failed" in fit.opt.restarts[0].reason)
    assert fit.deviance <= min(lme4_path.deviance, r["deviance"] + CRIT_SLACK * abs(r["deviance"]))
    assert fit.is_singular is bool(r["singular"])
    assert fit.converged and not warned


def test_lme4_path_is_unchanged_where_its_checks_pass():
    """A well-determined fit whose theta is away from its bounds is not continued."""
    fit, _ = _fit("sleepstudy_slopes")
    lme4_path, _ = _fit("sleepstudy_slopes", restarts=0)
    assert fit.opt.restarts == ()
    np.testing.assert_array_equal(fit.theta, lme4_path.theta)
    assert not any("continued" in m for m in fit.messages)


def test_non_finite_derivatives_give_a_message_not_an_error():
    msgs = check_convergence(np.array([np.nan, 1.0]), np.full((2, 2), np.nan), 2e-3)
    assert len(msgs) == 1 and "not finite" in msgs[0] and "converge" in msgs[0]
    check = assess(np.array([1.0]), 1.0, np.array([0.0]), LmerControl(),
                   lambda t: np.nan)
    assert not check.converged and "not finite" in check.messages[0]


@pytest.mark.parametrize("kwargs,err", [
    (dict(restarts=-1), ValueError), (dict(restarts=1.5), ValueError),
    (dict(maxeval=0.5), ValueError), (dict(edge_tol=-1.0), ValueError),
    (dict(xtol_rel=float("nan")), ValueError), (dict(restart_step=0.0), ValueError),
    (dict(optimizer="nelder"), ValueError), (dict(check_conv="yes"), TypeError),
])
def test_control_is_validated(kwargs, err):
    with pytest.raises(err, match="LmerControl|optimizer"):
        LmerControl(**kwargs)


def _sleepstudy():
    import pandas as pd

    from reference import DATA_DIR

    return pd.read_csv(DATA_DIR / "sleepstudy.csv")


def test_a_slope_in_extreme_units_is_the_same_fit():
    """Days * 1e12 with (Days | Subject): lme4 stops with 'Downdated VtV is not positive
    definite' (and crossed raised a DataError before the optimiser scaled such columns,
    ``rescale.SCALE_RATIO``). Now the same fit as on Days: σ, β and the covariance in the
    units of the column, with the scaling said in the messages."""
    df = _sleepstudy()
    days = crossed.lmer("Reaction ~ Days + (Days | Subject)", df)
    df["Days"] = df["Days"] * 1e12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("Reaction ~ Days + (Days | Subject)", df)
    assert "'Days' in the term on 'Subject' scaled to unit SD" in fit.opt.rescaled
    assert fit.sigma == pytest.approx(days.sigma, rel=1e-5)
    np.testing.assert_allclose(fit.fixef.to_numpy() * [1, 1e12], days.fixef.to_numpy(),
                               rtol=1e-6)
    units = np.diag([1.0, 1e-12])
    lam, lam_days = (np.array([[t[0], 0.0], [t[1], t[2]]]) for t in (fit.theta, days.theta))
    np.testing.assert_allclose(lam @ lam.T, units @ lam_days @ lam_days.T @ units,
                               rtol=1e-3, atol=1e-30)  # (the optimiser's tolerance)


def test_criterion_not_finite_anywhere_is_a_clear_error():
    df = _sleepstudy()
    df["Days"] = df["Days"] * 1e200  # squares overflow: no finite criterion
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(crossed.DataError):
            crossed.lmer("Reaction ~ Days + (Days | Subject)", df)


def test_roundoff_limited_continuation_is_not_an_error():
    """Before: nlopt.RoundoffLimited escaped from the edge continuation of this fit.
    R: d <- read.csv("Dyestuff2.csv"); f <- lmer(Yield ~ 1 + (1|Batch), d, REML = FALSE)
       deviance(f) -> 162.873036653826; getME(f, "theta") -> 0; sigma(f) -> 3.65323135137465
       isSingular(f) -> TRUE, no convergence warning."""
    data = load_table("Dyestuff2.csv", ("Batch",))
    with pytest.warns(crossed.SingularFitWarning):
        fit = crossed.lmer("Yield ~ 1 + (1 | Batch)", data, reml=False)
    assert fit.deviance <= 162.873036653826 * (1 + CRIT_SLACK)
    assert fit.sigma == pytest.approx(3.65323135137465, rel=1e-6)
    assert fit.is_singular and fit.converged
    assert fit.convergence is ConvergenceStatus.SINGULAR


# ---------------------------------------------------------------- ConvergenceStatus


def test_status_is_lme4s_verdict_on_the_run():
    stopped, _ = _fit("sleepstudy_slopes", restarts=0, **LOOSE)
    assert stopped.convergence in (ConvergenceStatus.GRADIENT, ConvergenceStatus.HESSIAN)
    assert stopped.opt.status is stopped.convergence and not stopped.converged
    fit, _ = _fit("sleepstudy_slopes", **LOOSE)
    assert fit.convergence is ConvergenceStatus.OK and fit.opt.status == "ok"
    singular, _ = _fit("dyestuff2_singular")
    assert singular.convergence is ConvergenceStatus.SINGULAR and singular.converged


def test_evaluation_limit_is_its_own_status():
    fit, warned = _fit("sleepstudy_slopes", maxeval=5, restarts=0)
    assert fit.opt.return_code == 5
    assert fit.convergence is ConvergenceStatus.MAX_EVALUATIONS and not fit.converged
    assert any("maxeval" in m for m in fit.messages)


def test_status_combines_in_order_and_says_converged():
    S = ConvergenceStatus
    assert S.combine(False) is S.OK and S.combine(True) is S.SINGULAR
    assert S.combine(True, None, S.HESSIAN) is S.HESSIAN
    assert S.combine(False, S.HESSIAN, S.GRADIENT) is S.GRADIENT
    assert S.combine(False, S.GRADIENT, S.MAX_EVALUATIONS) is S.MAX_EVALUATIONS
    assert [s for s in S if s.converged] == [S.OK, S.SINGULAR]
    assert S.from_return_code(4) is None and S.from_return_code(5) is S.MAX_EVALUATIONS
    assert S.from_return_code(-4) is S.FAILED
    assert S("gradient") is S.GRADIENT and str(S.HESSIAN) == "hessian"


def test_non_finite_derivatives_are_a_gradient_failure():
    check = assess(np.array([1.0]), 1.0, np.array([0.0]), LmerControl(), lambda t: np.nan)
    assert check.status is ConvergenceStatus.GRADIENT and not check.converged
    assert check.issues == (ConvergenceStatus.GRADIENT,)


def test_notes_do_not_fail_the_check():
    """lme4's checkHess: a numerically singular Hessian is a note, not a failure."""
    checked = classify_convergence(np.zeros(2), np.diag([1.0, 0.0]), 2e-3)
    assert [kind for _, kind in checked] == [ConvergenceStatus.GRADIENT, None]  # chol fails
    checked = classify_convergence(np.zeros(2), np.diag([1.0, 1e-8]), 2e-3)
    assert [kind for _, kind in checked] == [None]
    checked = classify_convergence(np.zeros(2), np.diag([1.0, -1.0]), 2e-3)
    assert ConvergenceStatus.HESSIAN in [kind for _, kind in checked]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", [n for n in case_names() if "insteval" not in n])
def test_check_on_exact_gradient_is_lme4s_check(name):
    """lme4's check on the exact gradient (and the Hessian from differences of exact
    gradients, crossed's path from CHECK_GRADIENT_THETA θ on) gives the verdict and the
    messages of lme4's deriv12 check at the fit's θ (also at singular fits, where lme4
    skips it), and the same numbers: the gradients to 2e-3 absolute (deriv12's truncation
    and rounding errors at its step 1e-4: ner_crossed's criterion, ~1e4, has rounding noise
    that its deriv12 Hessian amplifies to ~60% in one entry, so there only the verdict is
    compared) and the Hessians to 1e-2 of their largest entry."""
    fit = fit_case(name)
    pls, reml, theta = fit.pls, fit.reml, fit.theta.copy()
    free = np.ones(len(theta), dtype=bool)
    with np.errstate(all="ignore"):
        g0, H0 = derivatives(lambda t: pls.objective(t, reml), theta, free,
                             pls.objective(theta, reml))
        g1, H1 = derivatives_from_gradient(lambda t: value_and_gradient(pls, t, reml)[:2],
                                           theta, free)
    fd, exact = classify_convergence(g0, H0, 2e-3), classify_convergence(g1, H1, 2e-3)
    assert [kind for _, kind in fd] == [kind for _, kind in exact]
    assert [m.split(" = ")[0] for m, _ in fd] == [m.split(" = ")[0] for m, _ in exact]
    np.testing.assert_allclose(g1, g0, rtol=0, atol=2e-3)
    if name != "ner_crossed":
        # deriv12's Hessian has truncation and rounding error at its step 1e-4 that moves
        # with the BLAS kernel (pastes: 2.7e-3 of the largest entry under Haswell)
        np.testing.assert_allclose(H1, H0, rtol=0, atol=1e-2 * np.max(np.abs(H0)))


@pytest.mark.filterwarnings("ignore")
def test_large_models_are_checked_on_the_exact_gradient(monkeypatch):
    """From CHECK_GRADIENT_THETA θ on, the fit's check runs on the exact gradient; below,
    on lme4's finite differences (here of the Python criterion: with the compiled one, by
    its ``deriv12``, which this does not count)."""
    import crossed.model.convergence as convergence
    from crossed.engines.native import optimize

    monkeypatch.setattr(optimize, "_USE_COMPILED", False)

    calls = {"fd": 0, "exact": 0}
    fd, exact = convergence.derivatives, convergence.derivatives_from_gradient

    def count(kind, fun):
        def wrapped(*args, **kwargs):
            calls[kind] += 1
            return fun(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(convergence, "derivatives", count("fd", fd))
    monkeypatch.setattr(convergence, "derivatives_from_gradient", count("exact", exact))
    fit_case("sleepstudy_slopes")  # k = 3: lme4's finite differences
    assert calls == {"fd": 1, "exact": 0}
    fit, _ = _fit("blurb_ccmem_slopes", edge_tol=0.0, singular_tol=0.0)  # k = 11, checked
    assert calls["exact"] >= 1 and calls["fd"] == 1
    assert fit.opt.gradient is not None and len(fit.opt.gradient) == 11


def _saddle(theta: np.ndarray) -> tuple[float, np.ndarray]:
    """Even in θ[1] (as the criterion is in a scalar block's θ): θ[1] = 0 is a saddle,
    the minima are at θ[1] = ±1/√2."""
    x, y = theta
    return (x - 1.0) ** 2 + y**4 - y**2, np.array([2.0 * (x - 1.0), 4.0 * y**3 - 2.0 * y])


def _bowl(theta: np.ndarray) -> tuple[float, np.ndarray]:
    """Even in θ[1] with its minimum on the bound θ[1] = 0."""
    x, y = theta
    return (x - 1.0) ** 2 + y**2, np.array([2.0 * (x - 1.0), 2.0 * y])


def _optimize(fun, start):
    from crossed.engines.native.converge import optimize_theta

    control = LmerControl(optimizer="lbfgsb", check_conv=False)
    return optimize_theta(lambda t: fun(t)[0], np.asarray(start, float),
                          np.array([-np.inf, 0.0]), control, crit_grad=fun)[0]


def test_a_saddle_on_the_bound_is_left_by_the_probe():
    """L-BFGS-B started on the bound stays there (the gradient in θ[1] is 0); the probe
    finds the descent and the continuation reaches the minimum."""
    opt = _optimize(_saddle, [3.0, 0.0])
    assert opt.fmin == pytest.approx(-0.25, abs=1e-9)
    assert opt.theta_final[1] == pytest.approx(2**-0.5, abs=1e-4)
    assert opt.probes >= 3 and opt.restarts
    assert opt.restarts[0].fmin_after < opt.restarts[0].fmin_before
    assert "lowers the criterion" in opt.restarts[0].reason


def test_a_minimum_on_the_bound_passes_the_probe():
    opt = _optimize(_bowl, [3.0, 0.5])
    assert opt.theta_final[1] == 0.0 and opt.fmin == pytest.approx(0.0, abs=1e-12)
    assert opt.probes == 3 and not opt.restarts  # the second-order test, nothing more
    assert opt.feval == len(opt.log)


def test_probes_move_each_near_bound_theta_alone():
    from crossed.engines.native.converge import EDGE_PROBES, _probe_edges

    def crit(t: np.ndarray) -> float:
        return float(-t[1] ** 2 + t[2] ** 2)  # descends in θ[1] only

    theta = np.array([0.5, 0.0, 0.0])
    lower = np.array([0.0, 0.0, 0.0])
    tried, start = _probe_edges(crit, theta, 0.0, lower, LmerControl())
    assert len(tried) == 2 * len(EDGE_PROBES)  # θ[1] and θ[2]; θ[0] is off its bound
    assert all(np.count_nonzero(p != theta) == 1 for p, _ in tried)
    assert start is not None
    assert start[1] == max(EDGE_PROBES) and start[2] == 0.0 and start[0] == 0.5
    assert _probe_edges(lambda t: float(t @ t), theta, 0.25, lower, LmerControl())[1] is None


def test_newton_probe_of_a_passing_check_in_a_flat_valley():
    """Where lme4's check passes on a small gradient in a nearly flat direction, the
    Newton step of its derivatives is probed (one evaluation): it is the start of a
    continuation when it descends, projected onto the bounds; nothing is evaluated where
    the predicted decrease is below NEWTON_GAIN or the Hessian is not positive definite."""
    from crossed.engines.native.converge import NEWTON_GAIN, _probe_newton
    from crossed.model.convergence import ConvergenceCheck

    H = np.diag([20.0, 1e-4])  # the valley: flat along θ[1], its minimum on the bound

    def crit(t: np.ndarray) -> float:
        d = t - np.array([0.3, -0.2])
        return float(350.0 + 0.5 * d @ H @ d)

    theta, lower = np.array([0.3, 0.79]), np.array([-np.inf, 0.0])
    g = H @ (theta - np.array([0.3, -0.2]))  # 9.9e-5: lme4's check passes
    check = ConvergenceCheck(singular=False, converged=True, gradient=g, hessian=H,
                             free=np.array([True, True]))
    tried, start = _probe_newton(crit, theta, crit(theta), lower, check)
    assert len(tried) == 1 and start is not None
    np.testing.assert_allclose(start, [0.3, 0.0], atol=1e-12)  # (projected: θ[1] ≥ 0)
    assert tried[0][1] < crit(theta)
    # near the optimum: the (projected) step's predicted decrease is below the gain,
    # nothing is evaluated
    near = np.array([0.3, 1e-4])
    g_near = H @ (near - np.array([0.3, -0.2]))
    step = np.array([0.0, -1e-4])  # (to the bound)
    assert -(g_near @ step + 0.5 * step @ H @ step) < NEWTON_GAIN * 350.0
    close = ConvergenceCheck(singular=False, converged=True, gradient=g_near, hessian=H,
                             free=np.array([True, True]))
    assert _probe_newton(crit, near, crit(near), lower, close) == ([], None)
    # not positive definite: no Newton step
    saddle = ConvergenceCheck(singular=False, converged=True, gradient=g,
                              hessian=np.diag([20.0, -1e-4]), free=np.array([True, True]))
    assert _probe_newton(crit, theta, crit(theta), lower, saddle) == ([], None)


def _quadratic_valley():
    """A criterion that is exactly quadratic (so finite-difference derivatives are exact to
    rounding), its optimum, and lower bounds."""
    at = np.array([1.7, 0.4, 2.5])
    A = np.array([[30.0, 4.0, 0.0], [4.0, 8.0, 1.0], [0.0, 1.0, 2.0]])

    def crit(t: np.ndarray) -> float:
        d = np.asarray(t) - at
        return float(1000.0 + 0.5 * d @ A @ d)

    return crit, at, np.array([0.0, -np.inf, 0.0])


def test_a_failed_gradient_check_is_continued_by_its_newton_step_first():
    """BOBYQA stopped far too early (LOOSE): lme4's gradient check fails there, and its own
    gradient and Hessian give the Newton step, which is taken first (one evaluation);
    on a quadratic it is the optimum, where the check passes, and no BOBYQA continuation
    is needed."""
    from crossed.engines.native.converge import NEWTON_STEP, optimize_theta

    crit, at, lower = _quadratic_valley()
    first, _ = optimize_theta(crit, np.ones(3), lower, LmerControl(restarts=0, **LOOSE))
    opt, check = optimize_theta(crit, np.ones(3), lower, LmerControl(**LOOSE))
    assert opt.restarts[0].reason.startswith("gradient check failed")
    assert opt.restarts[0].fmin_before == first.fmin
    assert len(opt.restarts) == 1 and opt.restarts[0].optimizer == NEWTON_STEP
    assert opt.restarts[0].feval == 1
    np.testing.assert_allclose(opt.theta_final, at, atol=1e-5)
    assert check.converged and opt.fmin < first.fmin
    assert opt.feval == len(opt.log)


def test_a_newton_step_that_does_not_descend_leaves_it_to_bobyqa(monkeypatch):
    """Where the failed check's Newton step is not lower, its evaluation is logged and
    BOBYQA continues from the best point, as without the step."""
    from crossed.engines.native import converge

    crit, at, lower = _quadratic_valley()
    calls = []

    def uphill(crit_, theta, fmin, lower_, check, **kw):
        calls.append(kw)
        point = theta + 1.0
        return [(point, crit_(point))], None

    monkeypatch.setattr(converge, "_probe_newton", uphill)
    opt, check = converge.optimize_theta(crit, np.ones(3), lower, LmerControl(**LOOSE))
    assert calls and calls[0] == {"gain": 0.0, "descent": 0.0}
    assert opt.restarts[0].optimizer == "NLOPT_LN_BOBYQA"
    assert opt.probes >= 1 and opt.feval == len(opt.log)
    np.testing.assert_allclose(opt.theta_final, at, atol=1e-3)


def test_a_flat_valley_stop_is_continued_to_the_optimum():
    """A fit whose BOBYQA stop is above the optimum on the bound
    (``tests/engines/test_engine_properties.py``: a correlated slope of a column far from
    0) is continued to it, and the continuation is recorded. Which stop BOBYQA makes
    depends on the arithmetic: under one NumPy a failed check continues it; under another
    the check passes 2.4e-5 above the optimum and the Newton probe continues it; under
    others BOBYQA stops at the optimum (then nothing is continued)."""
    from test_engine_properties import EARLY_STOPS, make_case, quiet_lmer

    params = next(p.values[0] for p in EARLY_STOPS if p.id == "gradient-check-8.8e-3")
    case = make_case(**params)
    fit = quiet_lmer(case.formula, case.data, reml=True)
    first = quiet_lmer(case.formula, case.data, reml=True, control=LmerControl(restarts=0))
    known = fit.pls.objective(np.array([0.16226, 35.992787, 0.0]), True)
    assert fit.deviance <= known + 1e-9 * abs(known)
    if first.deviance > known + 1e-9 * abs(known):  # (BOBYQA's stop above the optimum)
        assert fit.opt.restarts
