"""Probes off a singular face of a correlated term (engines/native/faces.py).

The two tables are random ``(x | g)`` designs on which lme4 (and crossed before these
probes) stopped on the face Λ_00 = 0 with a criterion well above the optimum. lme4's
numbers, for the record (R 4.2.2, lme4 1.1-31):

    d <- read.csv("tests/data/face_slope_lmm.csv")
    REMLcrit(lmer(y ~ x + (x | g), d))                 # 75.048009, theta 0 -0.0822 0.8997
    deviance(lmer(y ~ x + (x | g), d, REML = FALSE))   # 73.350148, theta 0 -0.4033 0.5861
    d <- read.csv("tests/data/glmm/face_slope.csv", stringsAsFactors = TRUE)
    -2 * logLik(glmer(y ~ f1 + x + (x | g), d, family = binomial))
                                  # 131.401877225, theta 0.1946 0.8899 6e-05
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.engines.native import faces
from crossed.engines.native.faces import correlated_ranges, face_probes
from crossed.engines.native.optimize import LmerControl

DATA = Path(__file__).resolve().parents[1] / "data"

LME4_FACE = {True: 75.048009, False: 73.350148}  # lme4's criterion, on the face


@pytest.mark.parametrize(("template", "expected"), [
    ([[0, -1], [1, 2]], [(0, 2)]),                                   # (x | g)
    ([[0, -1], [-1, 1]], []),                                        # (x || g)
    ([[0, -1, -1], [-1, 1, -1], [-1, 2, 3]], [(1, 3)]),              # (1 | g) + (x | g)
    ([[0, -1, -1], [1, 2, -1], [3, 4, 5]], [(0, 3)]),                # (1 + x + z | g)
    ([[0, -1, -1], [1, 2, -1], [-1, -1, 3]], [(0, 2)]),              # (x | g) + (0 + z | g)
    ([[0]], []),
])
def test_correlated_ranges(template, expected):
    assert correlated_ranges(np.array(template)) == expected


class _Block:
    def __init__(self, theta_index):
        self.theta_index = np.array(theta_index)


def _sigma(theta, idx):
    L = np.zeros(idx.shape)
    mask = idx >= 0
    L[mask] = theta[idx[mask]]
    return L @ L.T


@pytest.mark.parametrize("seed", range(5))
def test_probes_keep_the_covariance_except_the_moved_pivot(seed):
    # a 3 x 3 correlated term with Λ_00 = 0: each probe, with its Λ_00 set back to 0,
    # has the same Σ as the point it started from (only the factor was rewritten)
    rng = np.random.default_rng(seed)
    idx = np.array([[0, -1, -1], [1, 2, -1], [3, 4, 5]])
    theta = rng.normal(size=6)
    theta[[0, 2, 5]] = np.abs(theta[[0, 2, 5]])
    theta[0] = 0.0
    seen = []
    tried, _ = face_probes(lambda t: seen.append(t.copy()) or 1.0, theta, 1.0,
                           [_Block(idx)], LmerControl())
    assert len(tried) == 2 * len(faces.FACE_PROBES)  # both signs, one pivot (Λ_00)
    for point in seen:
        assert point[0] > 0
        back = point.copy()
        back[0] = 0.0
        np.testing.assert_allclose(_sigma(back, idx), _sigma(theta, idx), atol=1e-12)
        assert np.all(point[[2, 5]] >= 0)  # the later pivots stay feasible (0 here)


def test_no_probe_off_the_face_when_no_pivot_is_near_zero():
    idx = np.array([[0, -1], [1, 2]])
    calls = []
    tried, start = face_probes(lambda t: calls.append(t) or 0.0, np.array([0.5, 0.1, 0.3]),
                               0.0, [_Block(idx)], LmerControl())
    assert tried == [] and start is None and calls == []


def _lmm(reml: bool):
    d = pd.read_csv(DATA / "face_slope_lmm.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer("y ~ x + (x | g)", d, reml=reml)


@pytest.mark.parametrize("reml", [True, False])
def test_lmm_leaves_the_face_lme4_stops_on(reml, monkeypatch):
    fit = _lmm(reml)
    # strictly below lme4's stop, by far more than any optimiser tolerance
    assert fit.opt.fmin < LME4_FACE[reml] - 0.5
    assert any("written with another factor" in r.reason for r in fit.opt.restarts)
    assert fit.opt.feval == len(fit.opt.log)
    assert any(m.startswith("optimizer continued") for m in fit.messages)
    # without the probes crossed stops where lme4 does
    monkeypatch.setattr(faces, "FACE_PROBES", ())
    stuck = _lmm(reml)
    assert stuck.opt.fmin == pytest.approx(LME4_FACE[reml], abs=1e-5)


def test_glmm_leaves_the_face_to_glmer_s_optimum(monkeypatch):
    d = pd.read_csv(DATA / "glmm" / "face_slope.csv", dtype={"g": str, "f1": str})

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return crossed.glmer("y ~ f1 + x + (x | g)", d, family="binomial")

    glmer_value = 131.401877225
    got = fit()
    assert got.criterion <= glmer_value + 1e-6
    assert any("written with another factor" in m for m in got.messages)
    monkeypatch.setattr(faces, "FACE_PROBES", ())
    assert fit().criterion > glmer_value + 0.4  # on the face: 131.8995


def test_curvature_of_a_quadratic_in_sigma_is_recovered():
    # f(Σ) = tr(G Σ) exactly: the rank-one rises give G back
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3))
    G = A + A.T
    rises = [float(v @ G @ v) for v in faces._rank_one_directions(3)]
    np.testing.assert_allclose(faces._curvature(rises, 3), G, atol=1e-12)


def test_a_zero_term_leaves_along_its_negative_curvature(monkeypatch):
    """Σ = 0 for (1 + x + z | g), where every single variance and pair of them rises but
    the rank-one direction (0.024, 0.023, 0.042) descends. lme4 (1.1-31):
        REMLcrit(lmer(y ~ x + I(x^2) + (1 + x + z | g), read.csv("face_zero_lmm.csv")))
        # 272.162933, theta 0.02403 0.02264 0.04217 0 0 0
    """
    d = pd.read_csv(DATA / "face_zero_lmm.csv")

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return crossed.lmer("y ~ x + I(x^2) + (1 + x + z | g)", d)

    got = fit()
    assert got.opt.fmin <= 272.162933 + 1e-6
    # the axis and pair probes alone (no curvature, so no eigenvector): stuck at Σ = 0
    monkeypatch.setattr(faces, "_curvature", lambda rises, m: np.zeros((m, m)))
    assert fit().opt.fmin > 272.162933 + 1e-3  # 272.16444


# A fuzzed table (50 rows, y of order 1e5) where lme4 stops on a face:
#   d <- read.csv("tests/data/face_after_edge_lmm.csv")
#   deviance(lmer(y ~ z + f + (x | g), d, REML = FALSE))
#   # 1131.770225, theta 0, 0.173, 0.363 (singular; "failed to converge with 1 negative
#   # eigenvalue")
LME4_AFTER_EDGE = 1131.770225


def test_faces_are_probed_after_a_continuation_that_did_not_help():
    """The edge restart from lme4's stop (Λ₀₀ = 0) did not lower the criterion, and the fit
    ended there under one BLAS kernel (as lme4), while under the other the continuations
    reached the face Λ = [[0.70, 0], [-0.41, 0]], 0.51 lower. A kind of continuation that
    does not help now passes to the next (here the face probes), under either kernel."""
    d = pd.read_csv(DATA / "face_after_edge_lmm.csv", dtype={"g": str, "f": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ z + f + (x | g)", d, reml=False)
    assert fit.opt.fmin < LME4_AFTER_EDGE - 0.5
    assert any("written with another factor" in r.reason for r in fit.opt.restarts)
    assert fit.opt.feval == len(fit.opt.log)
