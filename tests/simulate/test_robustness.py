"""Simulations never lose finished work: failed replicates are recorded, Ctrl-C keeps what
is done, bad counts and levels are clear errors, and refits use the fit's own engine."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
from _simdata import small_design

import crossed as cx
from crossed import simulate as cs
from crossed.simulate.execution import run_tasks, spawn_seeds


@pytest.fixture(scope="module")
def small_data(truth):
    df = small_design()
    df["y"] = truth.simulate(1, seed=11)["sim_1"].to_numpy()
    return df


@pytest.fixture(scope="module")
def small_fit(small_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("y ~ x + (1 | g)", small_data)


class FailingEvery:
    """A statistic / test that raises ``exc`` on every other call after the first."""

    def __init__(self, exc: BaseException, value=0.5):
        self.exc, self.value, self.calls = exc, value, 0

    def __call__(self, fit):
        self.calls += 1
        if self.calls > 1 and self.calls % 2 == 0:
            raise self.exc
        return self.value


class InterruptAfter:
    """Returns ``value`` for ``n`` calls, then raises KeyboardInterrupt (a Ctrl-C)."""

    def __init__(self, n: int, value=0.5):
        self.n, self.value, self.calls = n, value, 0

    def __call__(self, fit):
        self.calls += 1
        if self.calls > self.n:
            raise KeyboardInterrupt
        return self.value


# ------------------------------------------------------------------ any exception is a failure
@pytest.mark.parametrize("exc", [KeyError("col"), TypeError("bad type"), IndexError("index 9")])
def test_bootstrap_records_any_exception_as_a_failed_replicate(small_fit, exc):
    stat = FailingEvery(exc, value=1.0)
    res = cs.bootstrap(small_fit, stat, nsim=6, seed=1)
    assert len(res.replicates) == 6
    # calls 2, 4, 6 (replicates 0, 2, 4) failed; t0 was call 1
    assert res.failures["replicate"].tolist() == [0, 2, 4]
    assert res.failures["message"].str.startswith(type(exc).__name__).all()
    assert res.replicates["t1"].notna().sum() == 3


@pytest.mark.parametrize("exc", [KeyError("col"), TypeError("bad type"), IndexError("index 9")])
def test_power_records_any_exception_as_a_failed_simulation(small_fit, exc):
    res = cs.power_sim(small_fit, FailingEvery(exc, value=0.01), nsim=6, seed=1)
    reps = res.replicates
    assert len(reps) == 6
    failed = reps[reps["status"] == "failed"]
    assert failed["sim"].tolist() == [1, 3, 5]  # calls 2, 4, 6
    assert failed["message"].str.startswith(type(exc).__name__).all()
    s = res.summary().iloc[0]
    assert (s.n_ok, s.n_failed, s.successes) == (3, 3, 3)


def test_ablation_records_any_exception(small_data):
    test = FailingEvery(IndexError("index 9"), value=0.01)
    res = cx.ablation(small_data, "y ~ x + (1 | g)", test, fractions=[0.1], reps=4, seed=2)
    lmm = res.replicates[res.replicates["method"] == "lmm"]
    assert len(lmm) == 4
    assert (lmm["status"] == "failed").sum() >= 1
    assert lmm.loc[lmm["status"] == "failed", "message"].str.startswith("IndexError").all()


def test_check_calibration_records_any_exception(small_fit, monkeypatch):
    from crossed.simulate.fastrefit import Refitter

    calls = {"n": 0}
    original = Refitter.refit

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise KeyError("flaky")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Refitter, "refit", flaky)
    diag = cs.check(small_fit, nsim=19, seed=3, calibrate=4)
    assert len(diag.failures) == 2
    assert diag.failures["message"].str.startswith("KeyError").all()
    assert diag.tests["method"].str.contains("calibrated by 2 ").all()


def test_keyboard_interrupt_is_not_swallowed_as_a_failure(small_fit):
    res = _quiet(cs.bootstrap, small_fit, InterruptAfter(3), nsim=5, seed=1)
    assert res.interrupted and len(res.failures) == 0


# ------------------------------------------------------------------ Ctrl-C keeps finished work
def _quiet(func, *args, **kwargs):
    with pytest.warns(UserWarning, match="interrupted after"):
        return func(*args, **kwargs)


def _draw(shared, item):
    i, ss = item
    if i == shared:
        raise KeyboardInterrupt
    return i


def test_run_tasks_returns_the_finished_tasks_on_interrupt():
    items = list(enumerate(spawn_seeds(1, 10)))
    with pytest.warns(UserWarning, match="interrupted after 4 of 10 replicates"):
        out = run_tasks(_draw, 4, items)
    assert out.interrupted and out == [0, 1, 2, 3]
    done = run_tasks(_draw, -1, items)
    assert not done.interrupted and done == list(range(10))


def test_bootstrap_keeps_replicates_finished_before_ctrl_c(small_fit):
    # call 1 is t0 on the original fit; replicates 0..3 finish, replicate 4 is interrupted
    res = _quiet(cs.bootstrap, small_fit, InterruptAfter(5, value=2.0), nsim=50, seed=1)
    assert res.interrupted
    assert res.replicates["replicate"].tolist() == [0, 1, 2, 3]
    assert (res.replicates["t1"] == 2.0).all()
    assert res.intervals()["n_boot"].iloc[0] == 4
    assert "interrupted" in repr(res)


def test_power_keeps_simulations_finished_before_ctrl_c(small_fit):
    res = _quiet(cs.power_sim, small_fit, InterruptAfter(3, value=0.01), nsim=40, seed=1)
    assert res.interrupted
    assert res.replicates["sim"].tolist() == [0, 1, 2]
    assert res.summary()["nsim"].iloc[0] == 3
    assert res.power == 1.0
    assert "interrupted" in str(res)


def test_power_curve_and_ablation_keep_finished_work(small_fit, small_data):
    curve = _quiet(cs.power_curve, small_fit, InterruptAfter(4, value=0.01), along="g",
                   breaks=[5, 10], nsim=3, seed=1)
    assert curve.interrupted
    assert curve.table["nsim"].tolist() == [3, 1]
    # call 1 is the test on the complete data, then replicates
    abl = _quiet(cx.ablation, small_data, "y ~ x + (1 | g)", InterruptAfter(4, value=0.01),
                 fractions=[0.1, 0.2], reps=5, seed=1)
    assert abl.interrupted
    assert len(abl.replicates) == 3 and len(abl.full) == 1


def test_interrupted_run_with_nothing_finished(small_fit):
    res = _quiet(cs.power_sim, small_fit, InterruptAfter(0), nsim=5, seed=1)
    assert res.interrupted and len(res.replicates) == 0
    assert res.summary()["n_ok"].iloc[0] == 0


# ------------------------------------------------------------------ counts and levels
def _calls(fit, data):
    return {
        "bootstrap": lambda **kw: cs.bootstrap(fit, "fixef", **{"nsim": 2, **kw}),
        "power_sim": lambda **kw: cs.power_sim(fit, "x", **{"nsim": 2, **kw}),
        "power_curve": lambda **kw: cs.power_curve(fit, "x", along="g", breaks=[5],
                                                   **{"nsim": 2, **kw}),
        "simulate": lambda **kw: fit.simulate(**{"nsim": 2, **kw}),
        "simulate_responses": lambda **kw: cs.simulate_responses(fit, **{"nsim": 2, **kw}),
        "simulate_residuals": lambda **kw: cs.simulate_residuals(fit, **{"nsim": 2, **kw}),
        "check": lambda **kw: cs.check(fit, **{"nsim": 2, **kw}),
        "ablation": lambda **kw: cx.ablation(data, "y ~ x + (1 | g)", "x", fractions=[0.1],
                                             **{"reps": 2, **kw}),
    }


COUNT_ARG = {"ablation": "reps"}
WITH_ALPHA = ["power_sim", "power_curve", "check", "ablation"]


@pytest.mark.parametrize("name", ["bootstrap", "power_sim", "power_curve", "simulate",
                                  "simulate_responses", "simulate_residuals", "check",
                                  "ablation"])
@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_zero_or_negative_count_is_a_clear_error(small_fit, small_data, name, bad):
    arg = COUNT_ARG.get(name, "nsim")
    with pytest.raises(ValueError, match=arg):
        _calls(small_fit, small_data)[name](**{arg: bad})


@pytest.mark.parametrize("name", WITH_ALPHA)
@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.05])
def test_alpha_outside_the_unit_interval_is_a_clear_error(small_fit, small_data, name, bad):
    with pytest.raises(ValueError, match="alpha"):
        _calls(small_fit, small_data)[name](alpha=bad)


@pytest.mark.parametrize("name", ["bootstrap", "power_sim", "ablation"])
def test_level_outside_the_unit_interval_is_a_clear_error(small_fit, small_data, name):
    with pytest.raises(ValueError, match="level"):
        _calls(small_fit, small_data)[name](level=95)


def test_check_calibrate_must_be_a_count(small_fit):
    with pytest.raises(ValueError, match="calibrate"):
        cs.check(small_fit, nsim=5, calibrate=-1)


# ------------------------------------------------------------------ lrt uses the fit's engine
def test_lrt_refits_with_the_fits_own_engine(small_data, monkeypatch):
    import crossed.engines.statsmodels as sm_engine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ x + (1 | g)", small_data, engine="statsmodels")
    engines = []
    original = sm_engine.fit_statsmodels

    def spy(design, *args, **kwargs):
        engines.append("statsmodels")
        return original(design, *args, **kwargs)

    from crossed.engines import get_engine, registry

    get_engine("statsmodels")  # loaded, then replaced by the spy in the registry
    monkeypatch.setitem(registry._LOADED, "statsmodels",
                        registry.FunctionEngine("statsmodels", spy, sm_engine.supports))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = cs.lrt("x")(fit)(fit)
        n_calls = len(engines)
        ml_full = fit.refit(reml=False)
        design = fit.design
        keep = [i for i, n in enumerate(design.fixed.names) if n != "x"]
        reduced = dataclasses.replace(design, fixed=dataclasses.replace(
            design.fixed, X=design.fixed.X[:, keep],
            names=tuple(design.fixed.names[i] for i in keep),
            assign=tuple(design.fixed.assign[i] for i in keep)))
        ml_reduced = sm_engine.fit_statsmodels(reduced, reml=False)
    assert row["status"] == "ok"
    assert n_calls == 2  # the full (a REML fit: refitted by ML) and the reduced model
    np.testing.assert_allclose(row["statistic"], ml_reduced.deviance - ml_full.deviance,
                               rtol=1e-10, atol=1e-10)


def test_lrt_refuses_an_engine_that_cannot_refit(small_fit):
    odd = dataclasses.replace(small_fit, engine="mystery")
    with pytest.raises(ValueError, match="'mystery'"):
        cs.lrt("x")(odd)


def test_lrt_on_native_fit_unchanged(small_fit):
    from crossed.engines.native.engine import fit_native

    row = cs.lrt("x")(small_fit)(small_fit)
    d = small_fit.design
    full = fit_native(d, False, small_fit.opt.control)
    reduced = fit_native(dataclasses.replace(d, fixed=dataclasses.replace(
        d.fixed, X=d.fixed.X[:, :1], names=d.fixed.names[:1], assign=d.fixed.assign[:1])),
        False, small_fit.opt.control)
    np.testing.assert_allclose(row["statistic"], reduced.deviance - full.deviance, rtol=1e-12)
    assert isinstance(pd.Series(row), pd.Series)


def test_check_calibration_keeps_finished_draws_on_ctrl_c(small_fit, monkeypatch):
    from crossed.simulate.fastrefit import Refitter

    calls = {"n": 0}
    original = Refitter.refit

    def stop_after_three(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Refitter, "refit", stop_after_three)
    diag = _quiet(cs.check, small_fit, nsim=19, seed=3, calibrate=10)
    assert diag.interrupted
    assert diag.tests["method"].str.contains("calibrated by 3 ").all()
    assert "interrupted" in str(diag)


def test_lrt_on_an_lme4_fit_is_rs_anova(small_data):
    """R's answer, computed live:
    anova(lmer(y ~ 1 + (1 | g), d, REML = FALSE), lmer(y ~ x + (1 | g), d, REML = FALSE))"""
    from crossed.engines import EngineUnavailableError
    from crossed.engines.lme4 import r_session, to_r_frame

    try:
        r = r_session()
    except EngineUnavailableError as exc:
        pytest.skip(f"lme4 engine unavailable: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ x + (1 | g)", small_data, engine="lme4")
        row = cs.lrt("x")(fit)(fit)
    chisq = r.ro.r("""function(d) {
        m0 <- lme4::lmer(y ~ 1 + (1 | g), d, REML = FALSE)
        m1 <- lme4::lmer(y ~ x + (1 | g), d, REML = FALSE)
        anova(m0, m1)$Chisq[2]
    }""")(to_r_frame(small_data))[0]
    assert row["status"] == "ok"
    np.testing.assert_allclose(row["statistic"], chisq, rtol=1e-6)
