"""lmer with prior weights and offsets against lme4 1.1-31.

References: ``tests/data/reference/weights/weights.R`` (sleepstudy, weights = 1 + Days %% 3,
offset = 2 Days). ``crit`` is ``REMLcrit(fit)`` (REML) or ``deviance(fit)`` (ML), both with
lme4's −log|W| term; tolerances as lme4's: criterion/logLik 1e-6 relative, β 1e-5 relative
(absolute 1e-5 on a scale of 250), SE 1e-4, θ 1e-3.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.design.frame import DataError

DATA = Path(__file__).resolve().parents[1] / "data"
REF = json.loads((DATA / "reference" / "weights" / "weights.json").read_text())


def _sleep() -> pd.DataFrame:
    d = pd.read_csv(DATA / "sleepstudy.csv", dtype={"Subject": str})
    d["w"] = 1.0 + d["Days"] % 3
    d["off"] = 2.0 * d["Days"]
    return d


CASES = {
    "reml": lambda d: cx.lmer("Reaction ~ Days + (Days | Subject)", d, weights="w"),
    "ml": lambda d: cx.lmer("Reaction ~ Days + (Days | Subject)", d, weights=d["w"].to_numpy(),
                            reml=False),
    "offset": lambda d: cx.lmer("Reaction ~ Days + (1 | Subject)", d, offset="off"),
    "offset_formula_weights": lambda d: cx.lmer(
        "Reaction ~ Days + offset(off) + (1 | Subject)", d, weights="w"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_weighted_lmer_against_lme4(name: str) -> None:
    r = REF[name]
    fit = CASES[name](_sleep())
    assert fit.deviance == pytest.approx(r["crit"], rel=1e-6)
    assert fit.loglik == pytest.approx(r["loglik"], rel=1e-6)
    assert fit.sigma == pytest.approx(r["sigma"], rel=1e-5)
    np.testing.assert_allclose(fit.beta, r["beta"], rtol=1e-5)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov_beta)), r["se"], rtol=1e-4)
    np.testing.assert_allclose(fit.theta, r["theta"], atol=1e-3)
    np.testing.assert_allclose(fit.fitted()[:5], r["fitted_head"], rtol=1e-5)


def test_unit_weights_equal_no_weights() -> None:
    d = _sleep()
    a = cx.lmer("Reaction ~ Days + (Days | Subject)", d)
    b = cx.lmer("Reaction ~ Days + (Days | Subject)", d.assign(w=1.0), weights="w")
    assert a.deviance == pytest.approx(b.deviance, rel=1e-12)


def test_bad_weights() -> None:
    d = _sleep()
    with pytest.raises(DataError, match="negative weights.*'w'"):
        cx.lmer("Reaction ~ Days + (1 | Subject)", d.assign(w=-d["w"]), weights="w")
    with pytest.raises(DataError, match="zero weights"):
        cx.lmer("Reaction ~ Days + (1 | Subject)", d.assign(w=d["Days"] * 1.0), weights="w")
    d.loc[[3, 4], "w"] = np.nan
    with pytest.warns(UserWarning, match="2 of 180 rows dropped"):
        f = cx.lmer("Reaction ~ Days + (1 | Subject)", d, weights="w")
    assert f.nobs == 178 and f.n_dropped == 2


def test_weights_on_a_first_factor_of_many_levels_against_lme4() -> None:
    """Prior weights make every level's A_s distinct: from 500 levels on, the sparse map
    classes them in the order of their A_s, and W's columns must follow those classes.
    Before the fix its columns were the levels' own order, G was gathered by class, and
    this fit went to a criterion 392 below lme4's (β 4.65 instead of 0.023): a plausible
    wrong number. ``tests/data/weighted_levels.csv.gz``: 3,000 rows, 520 levels of ``a``
    crossed with 100 of ``b``, weights uniform on [0.5, 2]. lme4 1.1-31::

        d <- read.csv(gzfile("tests/data/weighted_levels.csv.gz"))
        m <- lmer(y ~ 1 + (1 | a) + (1 | b), d, weights = w)
        -2 * logLik(m); getME(m, "theta"); fixef(m); sigma(m)
        # 9319.2204880446  0.37010665 0.46093904  0.0232254987  1.1242092598
    """
    d = pd.read_csv(DATA / "weighted_levels.csv.gz")
    fit = cx.lmer("y ~ 1 + (1 | a) + (1 | b)", d, weights="w")
    assert fit.pls.sparse_map is not None  # (the path of the fault)
    assert fit.deviance == pytest.approx(9319.2204880446, rel=1e-9)
    np.testing.assert_allclose(fit.theta, [0.37010665, 0.46093904], rtol=1e-4)
    np.testing.assert_allclose(fit.beta, [0.0232254987], rtol=1e-4)
    assert fit.sigma == pytest.approx(1.1242092598, rel=1e-6)


def test_weights_with_a_correlated_later_slope_against_lme4() -> None:
    """Prior weights with a correlated random slope on the later factor (its Schur
    complement scaled by T_k on both sides, ``_core.scale_both_sides``): the criterion at
    fixed θ is lme4's deviance function's, and the fit ends at lme4's criterion or below
    (lme4's own fit fails its gradient check here, max|grad| 0.0023).
    ``tests/data/weighted_slope.csv.gz``: 1,500 rows, 488 levels of ``a`` crossed with 45
    of ``b``, weights between 0.4 and 3.6 (a generated design, found by fuzzing against
    lme4). lme4 1.1-31::

        d <- read.csv(gzfile("tests/data/weighted_slope.csv.gz"))
        d$a <- factor(d$a); d$b <- factor(d$b)
        m <- lmer(y ~ x + (1 | a) + (1 + x | b), d, weights = w, REML = FALSE)
        deviance(m); fixef(m)  # 4123.8046299326934  0.25087200680874988 0.49540762515083547
        f <- lmer(y ~ x + (1 | a) + (1 + x | b), d, weights = w, REML = FALSE,
                  devFunOnly = TRUE)
        f(c(0.5, 0.3, -0.2, 0.1)); f(c(0.2, 0.4, 0, 0)); f(c(1.5, 0.05, 0.6, 0.3))
        # 4347.488568727902  4125.6873057268531  4989.8042841409415
    """
    d = pd.read_csv(DATA / "weighted_slope.csv.gz", dtype={"a": str, "b": str})
    fit = cx.lmer("y ~ x + (1 | a) + (1 + x | b)", d, weights="w", reml=False)
    assert not fit.pls.scalar_later_blocks  # (the path)
    for theta, value in (([0.5, 0.3, -0.2, 0.1], 4347.488568727902),
                         ([0.2, 0.4, 0.0, 0.0], 4125.6873057268531),
                         ([1.5, 0.05, 0.6, 0.3], 4989.8042841409415)):
        assert fit.pls.objective(np.array(theta), False) == pytest.approx(value, rel=1e-10)
    assert fit.deviance <= 4123.8046299326934 * (1 + 1e-9)
    np.testing.assert_allclose(fit.beta, [0.25087200680874988, 0.49540762515083547],
                               rtol=1e-4)
