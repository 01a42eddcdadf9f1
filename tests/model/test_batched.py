"""The criterion at many θ at once (model/batched.py) against PLS.objective."""

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design import build_design
from crossed.formula import parse
from crossed.model import batched
from crossed.model.convergence import derivatives
from crossed.model.pls import PLS

FORMULAS = {
    "intercept": "Reaction ~ Days + (1 | Subject)",
    "correlated slope": "Reaction ~ Days + (Days | Subject)",
    "uncorrelated slope": "Reaction ~ Days + (Days || Subject)",
}


@pytest.fixture(scope="module")
def sleep() -> pd.DataFrame:
    return pd.read_csv("tests/data/sleepstudy.csv", dtype={"Subject": str})


def _points(design, rng) -> list[np.ndarray]:
    start = design.random.theta_start()
    lower = design.random.theta_lower
    points = [start, np.where(np.isfinite(lower), 0.0, start)]  # (a boundary point)
    for _ in range(6):
        th = start * rng.uniform(0.2, 3.0, size=len(start))
        points.append(np.where(np.isfinite(lower), np.abs(th), th - 0.3))
    return points


@pytest.mark.parametrize("reml", [True, False])
@pytest.mark.parametrize("name", list(FORMULAS))
def test_batch_matches_one_by_one(name, reml, sleep):
    design = build_design(parse(FORMULAS[name]), sleep)
    pls = PLS(design.random.blocks, design.X, design.y)
    assert batched.batchable(pls)
    points = _points(design, np.random.default_rng(1))
    expected = [pls.objective(th, reml) for th in points]
    np.testing.assert_allclose(batched.objectives(pls, points, reml), expected, rtol=1e-12)


def test_designs_with_more_factors_are_evaluated_one_by_one(sleep):
    """Two grouping factors: not batchable; the values are PLS.objective's, exactly."""
    df = sleep.assign(half=np.where(sleep["Days"] < 5, "early", "late"))
    design = build_design(parse("Reaction ~ Days + (1 | Subject) + (1 | half)"), df)
    pls = PLS(design.random.blocks, design.X, design.y)
    assert not batched.batchable(pls)
    points = _points(design, np.random.default_rng(2))
    assert list(batched.objectives(pls, points, True)) == [pls.objective(t, True)
                                                            for t in points]


@pytest.mark.parametrize("compiled", [False, True])
def test_convergence_check_uses_the_batch(sleep, monkeypatch, compiled):
    """The fit's gradient and Hessian (lme4's deriv12 points) agree with those from
    one-by-one evaluations to the finite differences' noise (values that differ by ~1e-14
    relative, divided by 2δ = 2e-4 and δ² = 1e-8), and the batch is what the fit used
    where the optimiser runs the Python criterion; with the compiled criterion (NLopt's C
    interface, the default) its own ``deriv12`` evaluates the points, and no batch."""
    from crossed.engines.native import optimize

    monkeypatch.setattr(optimize, "_USE_COMPILED", compiled)
    calls = []
    real = batched.objectives

    def spy(pls, thetas, reml):
        calls.append(len(thetas))
        return real(pls, thetas, reml)

    monkeypatch.setattr("crossed.engines.native.engine.objectives", spy)
    fit = crossed.lmer(FORMULAS["correlated slope"], sleep)
    assert calls == ([] if compiled else [18])  # 2k + 2k(k - 1) for k = 3
    pls = fit.pls
    g, H = derivatives(lambda th: pls.objective(th, True), fit.theta,
                       np.ones(3, dtype=bool), fit.deviance)
    np.testing.assert_allclose(fit.opt.gradient, g, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fit.opt.hessian, H, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("reml", [True, False])
@pytest.mark.parametrize("formula", [*FORMULAS.values(),
                                     "Reaction ~ Days + (1 | Subject) + (1 | half)"])
def test_small_designs_are_factored_in_one_compiled_loop(formula, reml, sleep):
    """A design evaluated in one compiled call (``PLS.factor_batch``) gives
    ``PLS.objective``'s values bitwise, two grouping factors included; a point whose
    factorisation is not positive definite gives inf, one with θ not finite the one-by-one
    value."""
    df = sleep.assign(half=np.where(sleep["Days"] < 5, "early", "late"))
    design = build_design(parse(formula), df)
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls.factor_batch(np.array([design.random.theta_start()])) is not None
    points = _points(design, np.random.default_rng(3))
    not_finite = points[0].copy()
    not_finite[-1] = np.nan
    points.append(not_finite)
    values = batched.objectives(pls, points, reml)
    expected = [pls.objective(th, reml) for th in points]
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("name", list(FORMULAS))
def test_numpy_batch_matches_one_by_one(name, sleep):
    """Single-factor designs not evaluated in one compiled call (a Schur complement past
    ``MIN_DIAGONAL``: many fixed effects) take the NumPy batch: ``PLS.objective`` to
    rounding."""
    design = build_design(parse(FORMULAS[name]), sleep)
    pls = PLS(design.random.blocks, design.X, design.y)
    pls._small = None  # (as for a design past the compiled call's size)
    assert batched.batchable(pls) and pls.factor_batch(np.zeros((1, 1))) is None
    points = _points(design, np.random.default_rng(1))
    for reml in (True, False):
        expected = [pls.objective(th, reml) for th in points]
        np.testing.assert_allclose(batched.objectives(pls, points, reml), expected,
                                   rtol=1e-12)
