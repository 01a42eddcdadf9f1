"""The pwrss from the residuals where the factor's pivot cancels (model/pwrss.py), against
lme4's criterion at given θ (R code beside each value; lme4 computes the pwrss from the
residuals always) and where lme4's fit stops."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design import build_design
from crossed.formula.spec import parse
from crossed.model.pls import PLS, profiled_deviance
from crossed.model.pwrss import from_residuals, pivot_cancels
from reference import read_csv

# R (lme4 1.1-31), an uncorrelated random slope on an uncentred year (fuzz seed 20461):
#   d <- read.csv("tests/data/yearx_uncorrelated.csv", stringsAsFactors = TRUE)
#   f <- lmer(y ~ 1 + (x || g) + (1 | h), d, REML = FALSE, devFunOnly = TRUE)
#   f(c(250, 0.5, 0.08))           # 12325.3324412463
#   f(c(423.3, 0.4907, 0.0922))    # 12307.0935103014
#   deviance(lmer(y ~ 1 + (x || g) + (1 | h), d, REML = FALSE))
#   # 12307.0935083827 (and 12307.0935004764 in another run: R's BLAS threads)
YEARX_AT = {(250.0, 0.5, 0.08): 12325.3324412463, (423.3, 0.4907, 0.0922): 12307.0935103014}
YEARX_LME4 = 12307.0935083827


def _yearx_uncorrelated():
    path = Path(__file__).resolve().parents[1] / "data" / "yearx_uncorrelated.csv"
    return read_csv(path, dtype={"g": str, "h": str})


def test_ill_conditioned_levels_take_the_pwrss_from_the_residuals():
    """Within a level the intercept and x ≈ 2000 (SD 10) are nearly collinear (Hadamard
    ratio 8e4): the factor's last pivot lost 7 digits of the pwrss, and the ML criterion
    was 1e-7 off lme4's (and the exact value, to 50 digits) at the same θ. From the
    residuals it is within 1e-11."""
    design = build_design(parse("y ~ 1 + (x || g) + (1 | h)"), _yearx_uncorrelated())
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls.residual_pwrss == "always"
    for theta, expected in YEARX_AT.items():
        assert pls.objective(np.array(theta), reml=False) == pytest.approx(expected, rel=1e-11)
    # the optimum: where lme4 stops (before, 17.3 above it, and 15 apart between kernels),
    # within the criterion's precision on this design: the oldest supported NumPy and SciPy
    # under OpenBLAS's SkylakeX kernel stop 5.9e-4 (4.8e-8 relative) above it, where
    # L-BFGS-B's line search finds no lower criterion (lme4's own two runs: 7.9e-6 apart)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ 1 + (x || g) + (1 | h)", _yearx_uncorrelated(), reml=False)
    assert fit.deviance <= YEARX_LME4 * (1 + 1e-7)


def test_well_conditioned_levels_keep_the_factors_pwrss():
    """sleepstudy's levels (Days 0-9: Hadamard ratio 3.5) keep the last pivot (no extra
    solve per evaluation); the residual form agrees with it there."""
    d = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv",
                    dtype={"Subject": str})
    design = build_design(parse("Reaction ~ Days + (Days | Subject)"), d)
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls.residual_pwrss == "auto" and not pivot_cancels(pls, pls.factor(np.ones(3)).pwrss)
    f = pls.factor(np.array([0.9, 0.02, 0.2]))
    assert from_residuals(pls, f).pwrss == pytest.approx(f.pwrss, rel=1e-12)


# R (lme4 1.1-31), a response of order 1e-4 with an O(1) offset absorbed by a slope on it
# (fuzz seed 30050):
#   d <- read.csv("tests/data/tiny_offset_slope.csv", stringsAsFactors = TRUE)
#   f <- lmer(y ~ x + offset(z) + (1 | g) + (0 + z | g), d, REML = FALSE,
#             devFunOnly = TRUE)
#   f(c(0, 7257.6))     # -15644.1237280378
#   f(c(0.5, 5000))     # -15579.6234408168
#   deviance(lmer(y ~ x + offset(z) + (1 | g) + (0 + z | g), d, REML = FALSE))
#   # -15644.1237280386
TINY_OFFSET_AT = {(0.0, 7257.6): -15644.1237280378, (0.5, 5000.0): -15579.6234408168}
TINY_OFFSET_LME4 = -15644.1237280386


def test_a_pivot_that_cancels_is_recomputed_from_the_residuals():
    """The random slope explains all but 1/1.8e7 of y - offset: the factor's last pivot
    kept 5 digits of the pwrss (the criterion 0.11 off at lme4's θ; the fit stopped 0.16
    above lme4, and 0.27 apart between BLAS kernels)."""
    d = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "tiny_offset_slope.csv",
                    dtype={"g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x + offset(z) + (1 | g) + (0 + z | g)", d, reml=False)
    design = fit.design
    pls = PLS(design.random.blocks, design.X, design.y - design.offset)
    assert pls.residual_pwrss == "auto"  # (the levels are well conditioned)
    for theta, expected in TINY_OFFSET_AT.items():
        f = pls.factor(np.array(theta))
        assert pivot_cancels(pls, f.pwrss)
        assert profiled_deviance(f, pls.n, pls.p, False) == pytest.approx(expected, rel=1e-12)
    assert fit.deviance <= TINY_OFFSET_LME4 + 1e-9 * abs(TINY_OFFSET_LME4)
