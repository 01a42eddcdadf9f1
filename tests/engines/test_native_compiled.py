"""NLopt's C interface with the compiled criterion (engines/native/_nlopt.pyx,
optimize.run_nlopt's compiled path, model/_core.pyx: SmallCriterion).

A small design's NLopt runs evaluate the compiled criterion without calling Python. On
the same values NLopt's C run is its Python interface's run (the same iterates, log and
stop); the compiled criterion is the Python one to rounding (its log is libm's where
NumPy's may differ in the last bit: tests/model/test_pls.py), so a fit is the Python
path's to the optimiser's tolerance.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import nlopt
import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.engines.native import optimize
from crossed.engines.native.optimize import Criterion, LmerControl, run_bobyqa, run_nlopt
from crossed.model import _core
from crossed.model.pls import PLS


def _sleep_far() -> pd.DataFrame:
    df = crossed.load_dataset("sleepstudy").copy()
    df["far"] = df["Days"] + 300.0  # (a slope far from 0: the optimiser's reparametrisation)
    df["w"] = np.random.default_rng(1).uniform(0.5, 2.0, len(df))
    return df


FITS = [
    ("Reaction ~ Days + (Days | Subject)", {}),
    ("Reaction ~ Days + (1 | Subject)", {"reml": False}),
    ("Reaction ~ Days + (Days || Subject)", {}),
    ("Reaction ~ Days + (1 | Subject)", {"weights": "w"}),
    ("Reaction ~ far + (far | Subject)", {}),  # (rescaled: the criterion's shift)
]


def _fit(formula: str, options: dict) -> crossed.LmerFit:
    df = _sleep_far()
    options = dict(options)
    if "weights" in options:
        options["weights"] = df[options["weights"]].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, df, **options)


def _count_compiled_runs(monkeypatch) -> list:
    """The arguments of every run through NLopt's C loop from now on (appended as they
    happen)."""
    runs = []
    run = optimize._run_compiled

    def counted(*args, **kwargs):
        runs.append(args)
        return run(*args, **kwargs)

    monkeypatch.setattr(optimize, "_run_compiled", counted)
    return runs


@pytest.mark.parametrize(("formula", "options"), FITS)
def test_a_fit_through_the_c_interface_is_the_python_paths(formula, options, monkeypatch):
    """A fit whose NLopt runs go through the C interface (they do: counted) reaches the
    Python path's optimum: the criterion to 1e-10 relative, θ to the optimiser's
    tolerance; every evaluation is logged."""
    monkeypatch.setattr(optimize, "_USE_COMPILED", False)
    reference = _fit(formula, options)
    monkeypatch.setattr(optimize, "_USE_COMPILED", True)
    assert optimize.nlopt_c_api()
    runs = _count_compiled_runs(monkeypatch)
    compiled = _fit(formula, options)
    assert runs  # (NLopt's C loop ran)
    assert compiled.deviance == pytest.approx(reference.deviance, rel=1e-10)
    np.testing.assert_allclose(compiled.theta, reference.theta, rtol=1e-4, atol=1e-5)
    assert compiled.opt.feval == len(compiled.opt.log)
    assert compiled.converged == reference.converged
    if "far" in formula:
        assert compiled.opt.rescaled


@pytest.mark.parametrize(("formula", "reml"), [
    ("Reaction ~ Days + (Days | Subject)", True),
    ("Reaction ~ Days + (1 | Subject)", False),
    ("Reaction ~ Days + (Days || Subject)", True),
])
@pytest.mark.parametrize("algorithm", ["NLOPT_LN_BOBYQA", "NLOPT_LN_NELDERMEAD"])
def test_the_c_run_is_nlopts_python_run_on_the_same_values(formula, reml, algorithm):
    """NLopt's C run on the compiled criterion and its Python interface's run on the same
    criterion called from Python: every iterate, value, the stop and its code are the
    same, bit for bit (lme4's settings, an initial step, bounds)."""
    fit = _fit(formula, {})
    pls, lower = fit.pls, fit.design.random.theta_lower
    crit = pls.compiled_criterion(reml, 0.0, lambda t: pls.objective(t, reml))
    assert crit is not None
    x0 = np.full(len(lower), 0.5)
    settings = dict(algorithm=algorithm, xtol_abs=1e-8, ftol_abs=1e-8, xtol_rel=1e-4,
                    step=0.3)
    c_run = run_nlopt(Criterion(crit, crit), x0, lower, LmerControl(), **settings)
    crit.take_log()
    python_run = run_nlopt(lambda t: crit(np.ascontiguousarray(t)), x0, lower,
                           LmerControl(), **settings)
    assert c_run.feval == python_run.feval == len(c_run.log) > 0
    assert c_run.return_code == python_run.return_code and c_run.fmin == python_run.fmin
    np.testing.assert_array_equal(c_run.theta_final, python_run.theta_final)
    for (xc, fc), (xp, fp) in zip(c_run.log, python_run.log, strict=True):
        np.testing.assert_array_equal(xc, xp)
        assert fc == fp


def _criterion(fallback) -> tuple[Criterion, np.ndarray, np.ndarray]:
    """sleepstudy's (Days | Subject) criterion with every evaluation given to ``fallback``
    (the residual-form limits 0 to inf), its start and bounds."""
    fit = _fit("Reaction ~ Days + (Days | Subject)", {})
    pls: PLS = fit.pls
    compiled = _core.SmallCriterion(pls._small, pls.n, pls.p, True, pls.ldW, 0.0, pls.yc_ss,
                                    True, (0.0, np.inf), fallback)
    return (Criterion(fallback, compiled), np.array([1.0, 0.0, 1.0]),
            fit.design.random.theta_lower)


def test_an_error_in_the_fallback_stops_nlopt_and_is_raised():
    """The third evaluation's fallback raises: NLopt is stopped, the error is raised as
    it was, and the run makes no further evaluation."""
    calls = []

    def fallback(theta):
        calls.append(theta)
        if len(calls) == 3:
            raise ArithmeticError("the residual form failed")
        return float(theta @ theta)

    crit, x0, lower = _criterion(fallback)
    with pytest.raises(ArithmeticError, match="residual form failed"):
        run_bobyqa(crit, x0, lower, LmerControl(), xtol_abs=1e-8, ftol_abs=1e-8,
                   xtol_rel=1e-4)
    assert len(calls) == 3


def test_fallback_values_reach_nlopt_and_the_log():
    """Where every evaluation is the fallback's (a quadratic here), the run is NLopt's
    Python run on that function: the same log and stop."""
    def quadratic(theta):
        return float((theta - [0.8, 0.1, 0.3]) @ (theta - [0.8, 0.1, 0.3]))

    crit, x0, lower = _criterion(quadratic)
    settings = dict(xtol_abs=1e-8, ftol_abs=1e-10, xtol_rel=0.0)
    compiled = run_bobyqa(crit, x0, lower, LmerControl(), **settings)
    plain = run_bobyqa(quadratic, x0, lower, LmerControl(), **settings)
    assert compiled.feval == plain.feval and compiled.return_code == plain.return_code
    np.testing.assert_array_equal(compiled.theta_final, plain.theta_final)
    assert [f for _, f in compiled.log] == [f for _, f in plain.log]


def test_nlopts_refusals_are_its_python_interfaces_errors():
    """A setting NLopt refuses (an initial step of 0) raises what its Python interface
    raises for it."""
    crit, x0, lower = _criterion(lambda t: float(t @ t))
    settings = dict(algorithm="NLOPT_LN_BOBYQA", xtol_abs=1e-8, ftol_abs=1e-8, xtol_rel=0.0,
                    step=0.0)
    with pytest.raises(Exception) as python_error:  # noqa: PT011 (NLopt's own class)
        run_nlopt(crit.fun, x0, lower, LmerControl(), **settings)
    with pytest.raises(python_error.type):
        run_nlopt(crit, x0, lower, LmerControl(), **settings)
    assert optimize._NLOPT_ERRORS[-4] is nlopt.RoundoffLimited


GLMMS = [
    ("cbind(incidence, size - incidence) ~ period + (1 | herd)", "cbpp", "binomial", 1),
    ("cbind(incidence, size - incidence) ~ period + (1 | herd)", "cbpp", "binomial", 0),
    ("cbind(incidence, size - incidence) ~ 0 + period + (1 | herd)", "cbpp",
     crossed.binomial("probit"), 1),
    ("TICKS ~ YEAR + cHEIGHT + (1 | LOCATION)", "grouseticks", "poisson", 1),
    ("TICKS ~ YEAR + cHEIGHT + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION)", "grouseticks",
     "poisson", 1),
    ("cbind(incidence, size - incidence) ~ 1 + (1 | herd) + (1 | period)", "cbpp",
     "binomial", 0),
]


def _glmer(formula: str, data: str, family, nagq: int) -> crossed.GlmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.glmer(formula, crossed.load_dataset(data), family=family, nAGQ=nagq)


@pytest.mark.parametrize(("formula", "data", "family", "nagq"), GLMMS)
def test_a_glmm_through_the_c_interface_is_the_python_paths_bit_for_bit(
        formula, data, family, nagq, monkeypatch):
    """A GLMM whose terms are scalar (one, or several nested or crossed) runs its stages'
    NLopt runs through the C interface on the compiled criterion (model/glmm/_scalar.pyx:
    ScalarDeviance), whose values are the Python criterion's bit for bit: the fit is the
    Python path's exactly (estimates, criterion, every logged evaluation, the derivative
    check and the PIRLS count)."""
    monkeypatch.setattr(optimize, "_USE_COMPILED", False)
    reference = _glmer(formula, data, family, nagq)
    monkeypatch.setattr(optimize, "_USE_COMPILED", True)
    runs = _count_compiled_runs(monkeypatch)
    compiled = _glmer(formula, data, family, nagq)
    assert len(runs) >= (1 if nagq == 0 else 2)  # (both stages in NLopt's C loop)
    np.testing.assert_array_equal(compiled.theta, reference.theta)
    np.testing.assert_array_equal(compiled.beta, reference.beta)
    np.testing.assert_array_equal(compiled.vcov_beta, reference.vcov_beta)
    assert compiled.criterion == reference.criterion
    assert compiled.opt.feval == reference.opt.feval == len(compiled.opt.log)
    for (xc, fc), (xp, fp) in zip(compiled.opt.log, reference.opt.log, strict=True):
        np.testing.assert_array_equal(xc, xp)
        assert fc == fp or (np.isnan(fc) and np.isnan(fp))
    for key in ("feval_stage1", "pirls_evaluations", "gradient", "hessian"):
        np.testing.assert_array_equal(compiled.engine_info[key], reference.engine_info[key])
    assert compiled.messages == reference.messages


# ---------------------------------------------------------------------------- the library
def _bind(library: str) -> None:
    """Bind NLopt's C functions of ``library`` (a loadable name or path)."""
    import ctypes

    from crossed.engines.native import _nlopt

    _nlopt.bind(optimize._nlopt_addresses(ctypes.CDLL(library)))


def _system_library() -> str:
    """The system NLopt bound, or a skip where there is none (CI machines have Debian's
    libnlopt0, installed with R's lme4: there the test fails instead)."""
    library = optimize.nlopt_library()
    if library not in optimize.SYSTEM_NLOPT:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no system NLopt bound on this CI machine ({library})")
        pytest.skip("no system NLopt that takes the package's steps on this machine")
    return library


def test_the_probe_runs_each_algorithm_to_its_stop_the_same_way_twice():
    """The probe's runs (BOBYQA and Nelder–Mead, NLopt's default step and a given one)
    log every evaluation and end with a positive code; a second probe gives the same
    bits."""
    from crossed.engines.native import _nlopt

    assert optimize.nlopt_c_api()
    codes = list(optimize.NLOPT_ALGORITHMS.values())
    first, second = _nlopt.probe(codes), _nlopt.probe(codes)
    assert first.tobytes() == second.tobytes()
    ends = first[-2 * len(codes):]
    assert np.all(ends[:, 0] > 0) and np.all(np.isfinite(ends[:, 1]))
    assert len(first) > 2 * len(codes) * 20  # (runs of tens of evaluations)


def test_a_system_nlopt_takes_the_packages_steps_bit_for_bit():
    """Where the system NLopt is bound, its probe and the package's are the same bits,
    and so are fits through each: every iterate, θ, β and the criterion (BOBYQA with its
    restart, Nelder–Mead, a GLMM's stages)."""
    from crossed.engines.native import _nlopt

    system = _system_library()
    codes = list(optimize.NLOPT_ALGORITHMS.values())
    data = crossed.load_dataset("sleepstudy")
    cbpp = pd.read_csv(Path(__file__).parents[1] / "data/glmm/cbpp.csv",
                       dtype={"herd": str, "period": str})

    def fits() -> list:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [
                crossed.lmer("Reaction ~ Days + (Days | Subject)", data),
                crossed.lmer("Reaction ~ Days + (Days || Subject)", data,
                             control=LmerControl(optimizer="nelder_mead")),
                crossed.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                              cbpp, family="binomial"),
            ]

    ours, probe = fits(), _nlopt.probe(codes)
    try:
        _bind(nlopt._nlopt.__file__)
        package, package_probe = fits(), _nlopt.probe(codes)
    finally:
        _bind(system)
    assert probe.tobytes() == package_probe.tobytes()
    for a, b in zip(ours, package, strict=True):
        np.testing.assert_array_equal(a.theta, b.theta)
        np.testing.assert_array_equal(a.beta, b.beta)
        assert a.opt.feval == b.opt.feval
        for (xa, fa), (xb, fb) in zip(a.opt.log, b.opt.log, strict=True):
            np.testing.assert_array_equal(xa, xb)
            assert fa == fb


@pytest.fixture
def rebinding():
    """A MonkeyPatch whose changes are undone after the test, and then NLopt's library
    chosen and bound afresh (the test made another choice)."""
    with pytest.MonkeyPatch.context() as patch:
        yield patch
    optimize._CHOICE.clear()
    assert optimize.nlopt_c_api()


def test_a_library_that_takes_other_steps_is_not_bound(rebinding):
    """A system NLopt whose probe differs from the package's in one bit (another build's
    rounding) is not used: the package's library is bound again."""
    from crossed.engines.native import _nlopt

    _system_library()
    real = _nlopt.probe
    probes: list[int] = []

    def differing(codes):
        out = real(codes)
        probes.append(1)
        if len(probes) > 1:  # (the system library's)
            out[0, 4] = np.nextafter(out[0, 4], np.inf)
        return out

    rebinding.setattr(_nlopt, "probe", differing)
    optimize._CHOICE.clear()
    assert optimize.nlopt_c_api()
    assert len(probes) >= 2
    assert optimize.nlopt_library() == nlopt._nlopt.__file__
    fit = _fit("Reaction ~ Days + (Days | Subject)", {})
    assert fit.opt.feval == len(fit.opt.log) > 0  # (the package's functions are bound)


def test_crossed_nlopt_package_keeps_the_packages_library(rebinding):
    """``CROSSED_NLOPT=package``: the Python package's NLopt, without probing another."""
    from crossed.engines.native import _nlopt

    rebinding.setenv("CROSSED_NLOPT", "package")
    rebinding.setattr(_nlopt, "probe", lambda codes: pytest.fail("probed"))
    optimize._CHOICE.clear()
    assert optimize.nlopt_c_api()
    assert optimize.nlopt_library() == nlopt._nlopt.__file__


def test_threads_asking_at_once_wait_for_one_choice(rebinding):
    """The library is chosen once: threads that ask while it is being chosen wait for
    that choice (a second choice would rebind the functions under a run in progress)."""
    import threading
    import time

    real = optimize._bind_nlopt
    choices: list[int] = []

    def slow_choice():
        choices.append(1)
        time.sleep(0.05)
        return real()

    rebinding.setattr(optimize, "_bind_nlopt", slow_choice)
    optimize._CHOICE.clear()
    answers: list[bool] = []
    threads = [threading.Thread(target=lambda: answers.append(optimize.nlopt_c_api()))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [True] * 4
    assert len(choices) == 1


@pytest.mark.parametrize("failing_probe", [1, 2])
def test_a_probe_that_fails_keeps_the_packages_library(rebinding, failing_probe):
    """A probe that raises, the package's (1: nothing to compare) or a system library's
    (2), leaves the package's functions bound and fits running on them."""
    from crossed.engines.native import _nlopt

    _system_library()
    real = _nlopt.probe
    probes: list[int] = []

    def failing(codes):
        probes.append(1)
        if len(probes) == failing_probe:
            raise RuntimeError("this build fails the probe")
        return real(codes)

    rebinding.setattr(_nlopt, "probe", failing)
    optimize._CHOICE.clear()
    assert optimize.nlopt_c_api()
    assert optimize.nlopt_library() == nlopt._nlopt.__file__
    assert len(probes) == failing_probe
    fit = _fit("Reaction ~ Days + (Days | Subject)", {})
    assert fit.opt.feval == len(fit.opt.log) > 0
