"""Random slopes on covariates far from zero (engines/native/rescale.py).

``yearx_slope_lmm.csv`` is a fuzzed table (258 rows) with a year-like x (about 2000, SD
about 10) and a random slope on it. lme4 and crossed before the rescaling stopped far
above the optimum; the same model with x centred and scaled reaches it. lme4's numbers
(R 4.2.2, lme4 1.1-31):

    d <- read.csv("tests/data/yearx_slope_lmm.csv", stringsAsFactors = TRUE)
    REMLcrit(lmer(y ~ x:f + (x | g) + (1 | h), d))      # -1085.338454 (max|grad| 18)
    d$xc <- (d$x - mean(d$x)) / sd(d$x)
    REMLcrit(lmer(y ~ x:f + (xc | g) + (1 | h), d))     # -1099.463019 (singular)
    REMLcrit(lmer(y ~ x:f + (x | g) + (1 | h), d, weights = w))    # -1071.198694
    REMLcrit(lmer(y ~ x:f + (xc | g) + (1 | h), d, weights = w))   # -1078.913923
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design import build_design
from crossed.engines.native.glmer import SeparationWarning
from crossed.engines.native.rescale import (
    CENTRE_RATIO,
    SCALE_RATIO,
    column_rescaling,
    fixed_preconditioner,
    lower_factor,
)
from crossed.formula import parse
from crossed.model.pls import PLS
from reference import read_csv

DATA = Path(__file__).resolve().parents[1] / "data"
FORMULA = "y ~ x:f + (x | g) + (1 | h)"
LME4 = {False: -1085.338454, True: -1071.198694}  # lme4's REML criterion (weights=w)
CENTRED = {False: -1099.463019, True: -1078.913923}  # lme4 on the centred x


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(DATA / "yearx_slope_lmm.csv", dtype={"g": str, "h": str, "f": str})


def _fit(formula, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, data, **kw)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_year_like_slope_reaches_the_centred_models_optimum(table, weighted):
    kw = {"weights": "w"} if weighted else {}
    fit = _fit(FORMULA, table, **kw)
    data = table.assign(xc=(table.x - table.x.mean()) / table.x.std())
    centred = _fit(FORMULA.replace("(x | g)", "(xc | g)"), data, **kw)
    # the same model: crossed reaches the centred fit's criterion, far below lme4's stop
    assert fit.deviance < LME4[weighted] - 5.0
    assert fit.deviance <= centred.deviance + 1e-6 * abs(centred.deviance)
    assert fit.deviance <= CENTRED[weighted] + 1e-6 * abs(CENTRED[weighted])
    assert fit.opt.rescaled and "'x' in the term on 'g'" in fit.opt.rescaled
    assert fit.opt.rescaled in fit.messages
    # the same covariance as the centred fit, mapped through x = m + s·xc
    m, s = table.x.mean(), table.x.std()
    T = np.array([[1.0, m], [0.0, s]])  # (1, x) = (1, xc) T
    lam = np.array([[fit.theta[0], 0.0], [fit.theta[1], fit.theta[2]]])
    lam_c = np.array([[centred.theta[0], 0.0], [centred.theta[1], centred.theta[2]]])
    np.testing.assert_allclose(T @ lam @ lam.T @ T.T * fit.sigma**2,
                               lam_c @ lam_c.T * centred.sigma**2, rtol=2e-3, atol=1e-7)


def test_the_criterion_is_the_same_in_both_parametrisations(table):
    design = build_design(parse(FORMULA), table)
    rescaling = column_rescaling(design.random.blocks)
    assert rescaling is not None
    pls = PLS.of(design)
    centred = pls.reparametrised(rescaling.apply(pls.blocks))
    rng = np.random.default_rng(1)
    for _ in range(10):
        theta_c = np.abs(rng.normal(size=4)) * np.array([1, -1, 1, 1])
        theta = rescaling.to_original(theta_c)
        np.testing.assert_allclose(pls.objective(theta, True),
                                   centred.objective(theta_c, True), rtol=1e-7)  # (x·θ ≈ 2e3)
        np.testing.assert_allclose(rescaling.from_original(theta), theta_c, rtol=1e-8,
                                   atol=1e-10)
    assert theta[3] == theta_c[3]  # the (1 | h) term is left as it is


@pytest.mark.parametrize("seed", range(5))
def test_lower_factor_keeps_the_covariance(seed):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(3, 3))
    M[:, 1] = M[:, 0] * 2.0  # singular too
    L = lower_factor(M)
    assert np.allclose(np.triu(L, 1), 0.0) and np.all(np.diag(L) >= 0)
    np.testing.assert_allclose(L @ L.T, M @ M.T, atol=1e-12)


def _blocks(formula, data):
    return build_design(parse(formula), data).random.blocks


def test_only_far_correlated_slopes_beside_an_intercept_are_rescaled(table):
    far = table.assign(x2=table.x - table.x.mean() + CENTRE_RATIO * 0.9 * table.x.std(ddof=0))
    assert column_rescaling(_blocks("y ~ 1 + (x2 | g)", far)) is None  # below the ratio
    assert column_rescaling(_blocks("y ~ 1 + (x || g)", table)) is None  # not correlated
    assert column_rescaling(_blocks("y ~ 1 + (0 + x | g)", table)) is None  # no intercept
    assert column_rescaling(_blocks("y ~ 1 + (1 | g)", table)) is None
    both = column_rescaling(_blocks("y ~ 1 + (x | g) + (x | h)", table))
    assert both is not None and {g for g, _ in both.columns} == {"g", "h"}


def test_the_sleepstudy_path_is_lme4s(table):
    sleep = pd.read_csv(DATA / "sleepstudy.csv", dtype={"Subject": str})
    assert column_rescaling(_blocks("Reaction ~ Days + (Days | Subject)", sleep)) is None
    fit = crossed.lmer("Reaction ~ Days + (Days | Subject)", sleep)
    assert fit.opt.rescaled == ""


# glmer on a binomial table with a year-like x (600 rows, 30 groups):
#   d <- read.csv("tests/data/glmm/yearx_slope.csv")
#   -2 * logLik(glmer(y ~ x + (x | g), d, family = binomial))    # 769.432172
#   d$xc <- (d$x - mean(d$x)) / sd(d$x)
#   -2 * logLik(glmer(y ~ x + (xc | g), d, family = binomial))   # 769.432276
# crossed before the rescaling stopped at 770.332 (theta 1.03, -1e-4, 0: "singular" only).
GLMER_YEARX = 769.432172


def test_a_year_like_slope_in_a_glmm():
    d = pd.read_csv(DATA / "glmm" / "yearx_slope.csv", dtype={"g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.glmer("y ~ x + (x | g)", d, family="binomial")
        d["xc"] = (d.x - d.x.mean()) / d.x.std()
        centred = crossed.glmer("y ~ x + (xc | g)", d, family="binomial")
    assert -2 * fit.loglik <= GLMER_YEARX + 5e-4
    assert fit.opt.rescaled in fit.messages
    assert fit.design.random.blocks[0].column_names == ("(Intercept)", "x")
    # the same fitted model as the centred one: probabilities, and b = T⁻¹b′ per level
    np.testing.assert_allclose(fit.fitted(), centred.fitted(), atol=2e-4)
    m, s = d.x.mean(), d.x.std()
    b = fit.ranef().pivot(index="level", columns="term", values="estimate")
    bc = centred.ranef().pivot(index="level", columns="term", values="estimate")
    np.testing.assert_allclose(b["x"], bc["xc"] / s, rtol=5e-3, atol=1e-6)
    np.testing.assert_allclose(b["(Intercept)"], bc["(Intercept)"] - m / s * bc["xc"],
                               rtol=5e-3, atol=1e-3)
    sd = fit.ranef().pivot(index="level", columns="term", values="cond_sd")
    sdc = centred.ranef().pivot(index="level", columns="term", values="cond_sd")
    np.testing.assert_allclose(sd["x"], sdc["xc"] / s, rtol=1e-2)


# Nearly collinear fixed effects (x ≈ 2000 and I(x^2)), with a slope on x: lme4 (R 4.2.2,
# lme4 1.1-31) stops far above the optimum and evaluates crossed's optimum to the digits
# below; crossed before the orthogonalised X was 4.1 (REML) and 46 (ML) above it, and under
# OPENBLAS_CORETYPE=Haswell raised "not finite" on the ML table.
#   d <- read.csv("tests/data/yearx_quadratic_reml.csv", stringsAsFactors = TRUE)
#   REMLcrit(lmer(y ~ x + I(x^2) + (1 + x + z | g), d))          # 899.963
#   lmer(..., devFunOnly = TRUE)(crossed's theta)                 # 898.7588
#   d <- read.csv("tests/data/yearx_quadratic_ml.csv", stringsAsFactors = TRUE)
#   deviance(lmer(y ~ x + I(x^2) + (x | g) + (1 | h), d, REML = FALSE))   # 3120.987
#   lmer(..., REML = FALSE, devFunOnly = TRUE)(crossed's theta)          # 3067.806
QUADRATIC = {
    "yearx_quadratic_reml.csv": ("y ~ x + I(x^2) + (1 + x + z | g)", True, 899.963, 898.7588),
    "yearx_quadratic_ml.csv": ("y ~ x + I(x^2) + (x | g) + (1 | h)", False, 3120.987, 3067.806),
}


@pytest.mark.parametrize("name", list(QUADRATIC))
def test_collinear_fixed_effects_reach_the_centred_models_optimum(name):
    formula, reml, lme4_fit, lme4_at_ours = QUADRATIC[name]
    d = pd.read_csv(DATA / name, dtype={"g": str, "h": str})
    fit = _fit(formula, d, reml=reml)
    # x - 2000 spans the same columns (a unit-triangular map: the same REML criterion too)
    centred = _fit(formula.replace("x", "xc"), d.assign(xc=d.x - 2000.0), reml=reml)
    assert fit.deviance == pytest.approx(centred.deviance, rel=1e-8)
    assert fit.deviance == pytest.approx(lme4_at_ours, abs=1e-3)
    assert fit.deviance < lme4_fit - 1.0
    assert "orthogonalised" in fit.opt.rescaled and fit.opt.rescaled in fit.messages
    # the same fitted model: fixed part of the fitted values, and the whole fit
    np.testing.assert_allclose(fit.design.X @ fit.beta, centred.design.X @ centred.beta,
                               rtol=1e-6, atol=1e-6 * np.abs(d.y).max())
    np.testing.assert_allclose(fit.fitted(), centred.fitted(), rtol=1e-6,
                               atol=1e-6 * np.abs(d.y).max())


def test_fixed_preconditioner():
    rng = np.random.default_rng(3)
    x = 2000.0 + rng.normal(size=200)
    X = np.column_stack([np.ones(200), x, x * x])
    R = fixed_preconditioner(X)
    assert R is not None and np.allclose(np.tril(R, -1), 0.0) and np.all(np.diag(R) > 0)
    Q = np.linalg.solve(R.T, X.T).T
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-6)
    assert fixed_preconditioner(np.column_stack([np.ones(200), x - 2000.0])) is None
    assert fixed_preconditioner(np.ones((200, 1))) is None


def _binomial_quadratic(seed: int, separated: bool = False) -> pd.DataFrame:
    """Binary outcomes on a quadratic in x ≈ 2000 (x's SD 5), 30 groups; ``separated``
    adds an indicator ``s`` whose rows are all 1 (complete separation)."""
    rng = np.random.default_rng(seed)
    n, ng = 900, 30
    g = rng.integers(0, ng, size=n)
    x = 2000.0 + rng.normal(0.0, 5.0, size=n)
    eta = -0.3 + 0.15 * (x - 2000) - 0.01 * (x - 2000) ** 2 + 0.8 * rng.normal(size=ng)[g]
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    d = pd.DataFrame({"y": y, "x": x, "g": g.astype(str)})
    if separated:
        d["s"] = (rng.uniform(size=n) < 0.05).astype(float)
        d.loc[d.s == 1, "y"] = 1.0
    return d.assign(xc=d.x - d.x.mean())


@pytest.mark.parametrize("seed", [0, 3])
def test_collinear_fixed_effects_in_a_glmm(seed):
    """glmer on x + I(x^2), x ≈ 2000: fitted on orthogonalised columns, the criterion,
    the x² coefficient and its SE are the centred model's, and lme4's convergence check
    (on the orthogonalised coefficients) raises no false alarm. On the raw columns it
    warned max|grad| = 5.9 and 42 and fell back to R_X's SEs."""
    d = _binomial_quadratic(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = crossed.glmer("y ~ x + I(x^2) + (1 | g)", d, family="binomial")
    assert not [w for w in caught if issubclass(w.category, crossed.ConvergenceWarning)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        centred = crossed.glmer("y ~ xc + I(xc^2) + (1 | g)", d, family="binomial")
    assert fit.criterion == pytest.approx(centred.criterion, rel=1e-8)
    assert fit.beta[2] == pytest.approx(centred.beta[2], rel=1e-5)
    se, se_centred = np.sqrt(np.diag(fit.vcov_beta)), np.sqrt(np.diag(centred.vcov_beta))
    assert se[2] == pytest.approx(se_centred[2], rel=1e-3)  # (finite-difference Hessians)
    assert any("orthogonalised" in m for m in fit.messages)
    np.testing.assert_allclose(fit.fitted(), centred.fitted(), rtol=1e-5, atol=1e-7)
    # the optimiser's record and the check's derivatives are in the formula's β
    assert fit.opt.theta_final[1:] == pytest.approx(fit.beta)
    assert len(fit.engine_info["gradient"]) == 1 + 3


def test_separation_is_judged_on_the_formulas_columns_in_a_glmm():
    """The indicator s separates; on the orthogonalised columns no column is an indicator
    and their coefficients are large: the check named (Intercept) and x there."""
    d = _binomial_quadratic(1, separated=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        crossed.glmer("y ~ x + I(x^2) + s + (1 | g)", d, family="binomial")
    said = [str(w.message) for w in caught if issubclass(w.category, SeparationWarning)]
    assert len(said) == 1 and "every response is 1 where s = 1" in said[0]


# An uncorrelated slope on a year-like x (tests/data/yearx_uncorrelated.csv, fuzzed: 539
# rows, 33 groups g, 16 groups h), ML. lme4 (R 4.2.2, lme4 1.1-31):
#   d <- read.csv("tests/data/yearx_uncorrelated.csv")
#   f <- function(c) { d$xs <- d$x / c; lmer(y ~ 1 + (xs || g) + (1 | h), d, REML = FALSE) }
#   deviance(f(1))      # 12307.0935083827, theta 423.32, 0.49066, 0.09221
#   deviance(f(100))    # 12307.0936 (max|grad| 0.0143)
#   deviance(f(1000))   # 13478.3420, theta 0, 0.0231, 0 (singular)
# crossed before the scaling stopped at 12990.83, 12320.43, 12307.11 and 13478.34 for
# c = 0.001, 0.01, 30 and 1000.
YEARX_OPTIMUM = 12307.0935083827
YEARX_SLOPE = 0.49066


def _yearx() -> pd.DataFrame:
    return read_csv(DATA / "yearx_uncorrelated.csv", dtype={"g": str, "h": str})


@pytest.mark.parametrize("units", [0.001, 0.01, 30.0, 1000.0])
def test_an_uncorrelated_slope_in_any_units_reaches_the_optimum(units):
    """The same model in other units of x: the optimiser scales a column whose SD is far
    from 1 (x / 1000: SD 0.01; x / 0.01: SD 1000) and continues a θ over ``FAR_THETA`` by
    L-BFGS-B (the intercept's θ is 423 in every unit), so each reaches the optimum of
    x's fit (to the optimiser's tolerance in this long curved valley), with the slope's θ
    in the units of x / c."""
    d = _yearx()
    d["xs"] = d["x"] / units
    fit = _fit("y ~ 1 + (xs || g) + (1 | h)", d, reml=False)
    assert fit.deviance == pytest.approx(YEARX_OPTIMUM, rel=1e-6)
    assert fit.theta[1] == pytest.approx(YEARX_SLOPE * units, rel=2e-2)
    sd = d["xs"].std(ddof=0)
    scaled = not (1 / SCALE_RATIO <= sd <= SCALE_RATIO)
    assert ("'xs' in the term on 'g' scaled to unit SD" in fit.opt.rescaled) == scaled
    if not scaled:  # (x / 30: SD 0.34) BOBYQA's stop, 0.02 above, continued by L-BFGS-B
        # (after a continuation of a failed check or not, as the arithmetic has it: the
        # fit's message names the first continuation's reason, the record each one's)
        assert any("two decades from lme4's start" in r.reason for r in fit.opt.restarts)


def test_scaled_columns_give_the_same_criterion():
    """Scaling alone (an uncorrelated term, and a correlated one without an intercept):
    the criterion at θ′ of the scaled columns is the formula's at ``to_original(θ′)``."""
    d = _yearx()
    d["xs"] = d["x"] / 1000.0  # SD 0.01
    for formula, k, slope in (("y ~ 1 + (xs || g) + (1 | h)", 3, 1),
                               ("y ~ 1 + (0 + xs | g)", 1, 0)):
        design = build_design(parse(formula), d)
        rescaling = column_rescaling(design.random.blocks)
        assert rescaling is not None and rescaling.scaled == (("g", "xs"),)
        assert rescaling.columns == ()  # (not centred)
        pls = PLS.of(design)
        scaled = pls.reparametrised(rescaling.apply(pls.blocks))
        rng = np.random.default_rng(2)
        for _ in range(5):
            theta_s = np.abs(rng.normal(size=k))
            theta = rescaling.to_original(theta_s)
            sd = d["xs"].std(ddof=0)
            assert theta[slope] == pytest.approx(theta_s[slope] / sd)
            np.testing.assert_allclose(pls.objective(theta, False),
                                       scaled.objective(theta_s, False), rtol=1e-9)
            np.testing.assert_allclose(rescaling.from_original(theta), theta_s, rtol=1e-12)
    # columns within the ratio keep lme4's path
    assert column_rescaling(_blocks("y ~ 1 + (x || g) + (1 | h)", _yearx())) is None


def test_a_glmm_slope_in_other_units_is_the_same_fit():
    """glmer, ``y ~ xs + (xs || g)`` on the binomial year table with xs the centred x
    divided by c: the Laplace criterion is flat in the slope's variance near 0, and crossed
    before the scaling stopped 4.8e-6 above the optimum for c = 1000 (θ_slope 0.96; lme4
    770.347659347 there, and 770.347659335 for c = 1). Now every c gives c = 1's fit."""
    d = pd.read_csv(DATA / "glmm" / "yearx_slope.csv", dtype={"g": str})
    d["xc"] = (d["x"] - d["x"].mean()) / d["x"].std()
    fits = {}
    for units in (1.0, 1e-3, 1e3):
        d["xs"] = d["xc"] / units
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits[units] = crossed.glmer("y ~ xs + (xs || g)", d, family="binomial")
    for units in (1e-3, 1e3):
        assert fits[units].criterion == pytest.approx(fits[1.0].criterion, rel=1e-10)
        assert "scaled to unit SD" in " ".join(fits[units].messages)
    assert "scaled to unit SD" not in " ".join(fits[1.0].messages)
