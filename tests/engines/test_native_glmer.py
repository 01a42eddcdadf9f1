"""The native glmer's covariance of β (engines/native/glmer.py, ``_hessian_vcov``).

``probit_boundary.csv`` is a fuzzed probit table (148 rows, 4 with missing values) whose
item variance ends at the boundary. Under one BLAS kernel (``OPENBLAS_CORETYPE=Haswell``)
crossed stopped at θ_item = 0.0023, within the finite differences' step of 0, and the
Hessian gave SEs of 0.0023 where R_X and glmer give 0.66. glmer's numbers (R 4.2.2,
lme4 1.1-31)::

    d <- read.csv("tests/data/glmm/probit_boundary.csv")
    m <- glmer(cbind(succ, fail) ~ x + (1 | item) + (1 | system), d,
               family = binomial(link = "probit"))
    -2 * logLik(m)           # 272.488811
    sqrt(diag(vcov(m)))      # 0.6636999 0.0674832
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.engines.native.glmer import (
    HESSIAN_SE_FLOOR,
    SeparationWarning,
    _check_separation,
    _hessian_vcov,
)
from crossed.model.finish import ConvergenceWarning
from crossed.model.glmm.family import family_of

DATA = Path(__file__).resolve().parents[1] / "data"
GLMER_SE = np.array([0.6636999, 0.0674832])


def test_a_boundary_probit_fit_has_glmers_standard_errors():
    d = pd.read_csv(DATA / "glmm" / "probit_boundary.csv", dtype={"item": str, "system": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.glmer("cbind(succ, fail) ~ x + (1 | item) + (1 | system)", d,
                            family=crossed.binomial(link="probit"))
    assert -2 * fit.loglik == pytest.approx(272.488811, abs=5e-3)
    # from the Hessian (glmer's) or, where it failed, from R_X: within 2 % either way
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov_beta)), GLMER_SE, rtol=2e-2)


def test_a_hessian_with_small_standard_errors_falls_back_to_rx():
    unsc = np.array([[1.0, 0.1], [0.1, 0.5]])
    # θ, then β: an information 1e4 times R_X's in β
    H = np.diag([2.0, 2e4, 1e4])
    messages: list[str] = []
    with pytest.warns(ConvergenceWarning, match="below 0.5 times those from RX"):
        out = _hessian_vcov(H, 1, unsc, messages)
    assert out is unsc and "unreliable" in messages[0]


def test_a_sound_hessian_gives_its_covariance():
    unsc = np.array([[1.0, 0.1], [0.1, 0.5]])
    info = np.linalg.inv(unsc)  # the deviance's Hessian is twice the information
    H = np.zeros((3, 3))
    H[0, 0] = 2.0
    H[1:, 1:] = 2.0 * info * 0.9  # a little less information: larger SEs than R_X's
    H[0, 1:] = H[1:, 0] = 0.1
    messages: list[str] = []
    out = _hessian_vcov(H, 1, unsc, messages)
    assert not messages
    np.testing.assert_allclose(out, 2.0 * np.linalg.inv(H)[1:, 1:])
    assert np.all(np.sqrt(np.diag(out) / np.diag(unsc)) >= HESSIAN_SE_FLOOR)


def test_a_hessian_that_is_not_positive_definite_falls_back_to_rx():
    unsc = np.eye(2)
    with pytest.warns(ConvergenceWarning, match="not positive definite"):
        assert _hessian_vcov(np.diag([1.0, -1.0, 1.0]), 1, unsc, []) is unsc


def test_fitted_probabilities_at_one_reveal_separation():
    """The reference system right on every item: no column is its indicator, so where the
    SEs are not huge only the fitted probabilities (numerically 1, R's glm.fit rule) show
    it (``_check_separation``; the fit itself now takes R_X's huge SEs). The criterion is
    flat along the separation (the intercept up, every other system's coefficient down by
    as much): where a fit stops along it is the optimiser's (lme4 stops at an intercept of
    19.4), so the probabilities are taken further out along it, where the reference
    system's are numerically 1."""
    d = pd.read_csv(DATA / "glmm" / "separated_reference.csv",
                    dtype={"item": str, "system": str, "cat": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.glmer("correct ~ system + (1 | item) + (1 | cat)", d, family="binomial")
    p = len(fit.fixef)
    further = np.zeros(p)
    further[0] = 1500.0  # (the intercept up, each system's indicator down: the
    further[1:] = -1500.0  # reference system's η alone moves)
    eta = np.asarray(fit.eta) + np.asarray(fit.design.X) @ further
    mu = family_of("binomial").link.linkinv(eta)
    messages: list[str] = []
    with pytest.warns(SeparationWarning, match="numerically 0 or 1 occurred in 20 of 200"):
        _check_separation(fit.design, family_of("binomial"), fit.fixef.to_numpy() + further,
                          np.eye(p) * 100.0, mu, messages)
    assert "(Intercept)" in messages[0]


def _flat_binomial() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({"x": rng.normal(size=120),
                         "g": rng.choice([f"g{i}" for i in range(8)], 120),
                         "s": 1, "f": 3, "p": 0.5, "w": np.resize([0.0, 4.0], 120)})


def test_a_constant_binomial_proportion_is_refused_as_lme4_does():
    # lme4 1.1-31: glmer(cbind(s, f) ~ x + (1 | g)) with cbind(1, 3) on every row stops
    # with "Response is constant"; before: a bare AssertionError after PIRLS failed
    with pytest.raises(crossed.DataError, match=r"the response 'cbind\(s, f\)' is constant"):
        crossed.glmer("cbind(s, f) ~ x + (1 | g)", _flat_binomial(), family="binomial")


def test_pirls_failing_at_the_start_is_an_error_naming_the_response():
    # lme4 1.1-31 on data of this shape: "pwrssUpdate did not converge in (maxit) iterations";
    # before: a bare AssertionError
    with pytest.raises(crossed.DataError, match="cannot start the GLMM of 'p': PIRLS"):
        crossed.glmer("p ~ x + (1 | g)", _flat_binomial(), family="binomial",
                      weights="w")
