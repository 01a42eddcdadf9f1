"""laplace_many: the same values, bit for bit, as GlmmProblem.deviance one point at a time
(near the optimum as the finite-difference Hessian asks, and far from it, where PIRLS halves
its steps or fails), with lme4's PIRLS stopping rule and with PIRLS run to the modes."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.model.glmm.batch import laplace_many
from crossed.model.glmm.pirls import GlmmProblem

DATA = Path(__file__).resolve().parents[2] / "data" / "glmm"


def _cbpp() -> pd.DataFrame:
    return pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("family", ["logit", "probit", "cloglog"])
def test_same_values_as_one_at_a_time(family: str, exact: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", _cbpp(),
                       family=cx.binomial(family))
    prob = GlmmProblem(fit.design, fit.family)
    prob.exact = exact
    s = prob.pirls(fit.theta, None, joint=True)
    prob.set_lp0(s, joint=False)
    x0 = np.concatenate([fit.theta, fit.beta])
    rng = np.random.default_rng(1)
    pts = [x0 + 1e-4 * rng.choice([-1.0, 0.0, 1.0], len(x0)) for _ in range(20)]
    pts += [x0 + rng.normal(0, 2.0, len(x0)) for _ in range(10)]
    pts += [x0 + np.r_[0.0, 40.0, 0, 0, 0], np.abs(x0) * 0.0]
    one = np.array([prob.deviance(p) for p in pts])
    many = laplace_many(prob, pts)
    np.testing.assert_array_equal(many, one)


def test_poisson_with_offset() -> None:
    d = pd.read_csv(DATA / "pois_offset.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("count ~ x + offset(log(exposure)) + (1 | site)", d, family="poisson")
    prob = GlmmProblem(fit.design, fit.family)
    s = prob.pirls(fit.theta, None, joint=True)
    prob.set_lp0(s, joint=False)
    x0 = np.concatenate([fit.theta, fit.beta])
    rng = np.random.default_rng(2)
    pts = [x0 + rng.normal(0, s_, len(x0)) for s_ in (1e-4, 1e-4, 0.5, 3.0, 10.0)]
    np.testing.assert_array_equal(laplace_many(prob, pts),
                                  np.array([prob.deviance(p) for p in pts]))


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("joint", [False, True])
def test_inlined_scalar_pirls_is_the_general_loop(joint: bool, exact: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", _cbpp())
    probs = [GlmmProblem(fit.design, fit.family) for _ in range(2)]
    probs[1].inline_scalar = False
    for pr in probs:
        pr.exact = exact
    rng = np.random.default_rng(3)
    x0 = np.concatenate([fit.theta, fit.beta])
    for x in [x0] + [x0 + rng.normal(0, s_, len(x0)) for s_ in (1e-4, 0.3, 2.0)]:
        a, b = (pr.pirls(x[:1], None if joint else x[1:], joint=joint) for pr in probs)
        for name in ("u", "beta", "eta", "mu", "sqrt_w", "diag"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert a.ldL2 == b.ldL2 and a.iterations == b.iterations
