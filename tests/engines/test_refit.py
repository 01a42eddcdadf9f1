"""Refits (engines/refit.py): where the native engine's optimiser starts.

lme4's ``refit`` (and so ``bootMer`` and simr's ``powerSim``) starts the optimiser at the
fit's θ; crossed's native refits on the fit's rows do too, with BOBYQA's initial steps
``refit_step(θ)``. These tests read where a refit started (its first logged evaluations),
never where the optimiser stopped.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.engines.native.engine import REFIT_STEP, refit_step
from crossed.engines.native.rescale import reparametrisation
from crossed.simulate import Refitter

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def sleep() -> crossed.LmerFit:
    data = pd.read_csv(DATA / "sleepstudy.csv", dtype={"Subject": str})
    return crossed.lmer("Reaction ~ Days + (Days | Subject)", data)


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


@pytest.mark.parametrize("how", ["refit", "Refitter"])
def test_a_new_response_starts_at_the_fits_theta_with_the_refit_step(sleep, how):
    y = sleep.simulate(1, seed=4).to_numpy()[:, 0]
    refit = _quiet(sleep.refit if how == "refit" else Refitter(sleep).refit, y)
    log = refit.opt.log
    step = refit_step(sleep.theta)
    # (sleepstudy's θ is over its step from its bounds: BOBYQA starts at it, up to the
    # rounding of NLopt's scaling of each θ by its step)
    assert np.all(sleep.theta[[0, 2]] > step[[0, 2]])
    np.testing.assert_allclose(log[0][0], sleep.theta, rtol=1e-14)
    # the first interpolation points: each θ moved by its own step
    assert step[0] != step[1]
    for i in (0, 1):
        np.testing.assert_allclose(log[1 + i][0] - log[0][0], np.eye(3)[i] * step[i],
                                   rtol=1e-12, atol=1e-15)


def test_the_refit_step_is_a_quarter_of_each_theta_within_bounds():
    fraction, low, high = REFIT_STEP
    theta = np.array([0.0, 1e-9, -0.04, 0.3, -2.0, 50.0])
    np.testing.assert_allclose(refit_step(theta),
                               [low, low, low, fraction * 0.3, high, high])


def test_another_criterion_on_the_same_rows_starts_at_the_fits_theta(sleep):
    ml = _quiet(sleep.refit, reml=False)
    np.testing.assert_allclose(ml.opt.log[0][0], sleep.theta, rtol=1e-14)
    assert not ml.reml


def test_a_row_subset_starts_where_a_new_fit_does(sleep):
    rows = np.arange(sleep.nobs) % 6 != 0
    sub = _quiet(sleep.refit, rows=rows)
    np.testing.assert_array_equal(sub.opt.log[0][0],
                                  sub.design.random.theta_start(sub.design.y))


def test_a_reparametrised_fit_starts_at_its_theta_in_the_optimisers_columns():
    """A slope on a year-like covariate: the optimiser runs on centred columns
    (rescale.py), and a refit starts from the fit's θ mapped there."""
    table = pd.read_csv(DATA / "yearx_slope_lmm.csv", dtype={"g": str, "h": str, "f": str})
    fit = _quiet(crossed.lmer, "y ~ x:f + (x | g) + (1 | h)", table)
    assert fit.opt.rescaled
    rep = reparametrisation(fit.design.random.blocks, fit.pls.X, fit.reml, fit.pls.xtx)
    assert rep is not None and rep.columns is not None
    theta_opt = rep.optimiser_theta(fit.theta)
    np.testing.assert_allclose(rep.theta(theta_opt), fit.theta, rtol=1e-8, atol=1e-10)
    assert not np.allclose(theta_opt, fit.theta)  # (another parametrisation)
    refit = _quiet(fit.refit, fit.simulate(1, seed=2).to_numpy()[:, 0])
    start = refit.opt.log[0][0]
    # BOBYQA starts at θ′, except that a θ within its step of a bound starts at the bound
    # or one step off it (Powell's rule)
    lower = fit.design.random.theta_lower
    step = refit_step(theta_opt)
    near = theta_opt - lower < step
    assert near.sum() < len(near)
    np.testing.assert_allclose(start[~near], theta_opt[~near], rtol=1e-14)
    assert np.all((start[near] == lower[near])
                  | np.isclose(start[near], lower[near] + step[near], rtol=1e-12, atol=0))


def test_other_engines_refit_from_their_own_start(sleep, monkeypatch):
    """A fit of another engine is refitted through the registry, with no start."""
    import crossed.engines.refit as refit_module

    calls = []

    def fake_fit_with(engine, design, reml, control, data_name="data"):
        calls.append(engine)
        return sleep

    monkeypatch.setattr(refit_module, "fit_with", fake_fit_with)
    other = sleep.like(sleep)
    object.__setattr__(other, "engine", "lme4")
    refit_module.refit_lmer(other, y=sleep.design.y + 1.0)
    assert calls == ["lme4"]


def test_a_start_and_a_fits_theta_are_alternatives(sleep):
    from crossed.engines.native.engine import fit_pls

    with pytest.raises(ValueError, match="not both"):
        fit_pls(sleep.design, sleep.pls, True, sleep.opt.control,
                theta0=sleep.theta, warm=sleep.theta)
