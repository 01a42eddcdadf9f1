"""Satterthwaite's method (inference/satterthwaite.py): the inverse of the deviance's
Hessian in the variance parameters. The df themselves are validated against lmerTest in
``test_ddf.py``."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.inference import _hessian
from crossed.inference.satterthwaite import EIG_SCALED, EIG_TOL, _pinv_psd

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_hessian_that_is_not_finite_gives_nan_df_with_a_warning():
    """Nearly collinear predictors (x ≈ 2000 and x²) can leave the deviance not finite
    beside the optimum in the formula's parametrisation: no df rather than LAPACK's
    'Eigenvalues did not converge'."""
    H = np.array([[1.0, np.nan], [np.nan, 2.0]])
    with pytest.warns(UserWarning, match="Satterthwaite df are not available"):
        A = _pinv_psd(H)
    assert A.shape == (2, 2) and np.all(np.isnan(A))


# R (lmerTest 3.1-3), on the centred covariate (the raw one loses lmerTest's digits: its
# df for I(x^2) there is 51.3):
#   d <- read.csv("tests/data/yearx_quadratic_reml.csv"); d$xc <- d$x - mean(d$x)
#   m <- lmer(y ~ xc + I(xc^2) + (1 + z | g), d)
#   coef(summary(m))["I(xc^2)", "df"]   # 156.67643137
LMERTEST_CENTRED_DF = 156.67643137


def test_nearly_collinear_columns_give_the_centred_models_df():
    """x ≈ 2000 and x²: the engine solves on orthogonalised columns (fixed_basis), and so
    does Satterthwaite's Hessian and Jacobian. The df of the x² coefficient does not depend
    on where x is centred; on the formula's own columns it came out 149.8, silently."""
    d = pd.read_csv(DATA / "yearx_quadratic_reml.csv")
    d["xc"] = d["x"] - d["x"].mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = crossed.lmer("y ~ x + I(x^2) + (1 + z | g)", d)
        centred = crossed.lmer("y ~ xc + I(xc^2) + (1 + z | g)", d)
    assert raw.fixed_basis is not None and centred.fixed_basis is None
    df_raw = raw.coef_table()["df"].iloc[-1]
    df_centred = centred.coef_table()["df"].iloc[-1]
    # (the two fits stop at θ 1e-5 apart: the df move by 2e-6 with them)
    assert df_raw == pytest.approx(df_centred, rel=1e-5)
    assert df_raw == pytest.approx(LMERTEST_CENTRED_DF, rel=1e-5)


def test_nearly_collinear_columns_raise_no_spurious_hessian_warning():
    d = pd.read_csv(DATA / "yearx_quadratic_reml.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = crossed.lmer("y ~ x + I(x^2) + (1 | g)", d)
        table = fit.coef_table()
    assert not [w for w in caught if "eigenvalue" in str(w.message)]
    assert table["df"].iloc[-1] == pytest.approx(183.0, rel=1e-6)  # (as centred: n - p)


# R (lmerTest 3.1-3), on x − 2000 (the same model; lme4 on the raw x stops at a singular
# fit 1.92 above the optimum and reports df 1805 and 1802):
#   d <- read.csv("tests/data/yearx_slope_df.csv.gz"); d$xc <- d$x - 2000
#   m <- lmer(y ~ xc + (xc | g), d)
#   coef(summary(m))["xc", "df"]                      # 56.4396508012
#   contest(m, c(1, -2000), joint = FALSE)$df         # 56.4419986996 (the intercept at x = 0)
YEAR_SLOPE_DF = {"x": 56.4396508012, "(Intercept)": 56.4419986996}


def test_a_random_slope_on_a_year_gives_the_centred_models_df():
    """``(x | g)`` with x ≈ 2000 (SD 1): the optimiser runs on the centred column, and so
    do Satterthwaite's derivatives. In the formula's θ (167, −0.083, 6e-5) the central
    differences lost the Hessian's smallest eigenvalue: df 2230 under the SkylakeX kernel
    and 1827 under Haswell, silently, where the model's df are 56.4."""
    d = pd.read_csv(DATA / "yearx_slope_df.csv.gz", dtype={"g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x + (x | g)", d)
        centred = crossed.lmer("y ~ xc + (xc | g)", d.assign(xc=d["x"] - 2000.0))
    assert fit.opt.rescaled  # (the optimiser's columns were centred)
    df = fit.coef_table().set_index("term")["df"]
    for term, expected in YEAR_SLOPE_DF.items():
        assert df[term] == pytest.approx(expected, rel=1e-4)
    # (the two fits are two floating-point problems whose θ agree to about 1e-5: the
    # oldest supported NumPy and SciPy under SkylakeX's kernel give df 1.0e-5 apart)
    assert df["x"] == pytest.approx(centred.coef_table()["df"].iloc[1], rel=5e-5)


def test_an_eigenvalue_the_differences_do_not_resolve_is_zero():
    """A direction whose eigenvalue of the unit-diagonal Hessian is under ``EIG_SCALED``
    is dropped (lmerTest's 1e-8 on the unscaled Hessian alone left it to the BLAS kernel),
    and the rest inverted: a generalised inverse of rank 2."""
    V = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]
    H = (V * [1.2e-8, 0.1, 4e3]) @ V.T
    with pytest.warns(UserWarning, match="1 eigenvalue"):
        A = _pinv_psd(H)
    assert np.linalg.matrix_rank(A, tol=1e-9 * np.abs(A).max()) == 2
    np.testing.assert_allclose(A @ H @ A, A, atol=1e-9 * np.abs(A).max())
    # well-resolved eigenvalues: lmerTest's inverse, whatever the units
    H2 = (V * [1e-3, 0.1, 4e3]) @ V.T
    np.testing.assert_allclose(_pinv_psd(H2), np.linalg.inv(H2), rtol=1e-9)


def test_a_singular_fit_with_a_flat_direction_gives_the_same_df_under_every_kernel():
    """A fuzzed singular fit (31 rows): the Hessian's smallest eigenvalue was 1.2e-8 under
    SkylakeX and 4.6e-9 under Haswell (largest 4e3), on either side of lmerTest's 1e-8:
    the intercept's df was 1e-6 without a warning under one kernel and 3.6 with one under
    the other. Now the direction is dropped where the scaled Hessian cannot resolve it: the
    same df (5.70) and the warning under both (CI runs both)."""
    d = pd.read_csv(DATA / "singular_flat_eigen.csv", dtype={c: str for c in "ghf"} | {"f2": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x*f*f2 + (x | g) + (z | h)", d)
    with pytest.warns(UserWarning, match="close to zero"):
        df = fit.coef_table()["df"]
    assert df.iloc[0] == pytest.approx(5.703, rel=1e-3)


@pytest.mark.parametrize(("formula", "reml"), [
    ("Reaction ~ Days + (Days | Subject)", True),
    ("Reaction ~ Days + (Days | Subject)", False),
    ("Reaction ~ Days + (Days || Subject)", True),
    ("Reaction ~ Year + Days2 + (Days | Subject)", True),  # (X orthogonalised: back)
])
def test_the_compiled_batch_of_derivative_points_gives_the_same_model(formula, reml,
                                                                       monkeypatch):
    """A small design's ~50 derivative points are evaluated in one compiled loop
    (``PLS.deviance_batch``: deviance, pwrss and unscaled vcov, in the orthogonalised
    basis too): the Hessian, A and the Jacobian are bitwise those of factoring each point
    alone."""
    from crossed.inference.satterthwaite import SatterthwaiteModel
    from crossed.model.pls import PLS

    data = crossed.load_dataset("sleepstudy")
    data = data.assign(Year=data["Days"] + 2000.0, Days2=data["Days"] * 1e4 + 0.5 * (
        np.arange(len(data)) % 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(formula, data, reml=reml)
    assert fit.pls.deviance_batch(np.array([fit.theta, fit.theta]), 1.0, reml) is not None
    batched = SatterthwaiteModel._compute(fit)
    monkeypatch.setattr(PLS, "deviance_batch", lambda self, *args, **kwargs: None)
    alone = SatterthwaiteModel._compute(fit)
    for name in ("hessian", "A", "jac", "vcov", "varpar"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(alone, name))


def _numpy_pinv(H):
    """The rule written with NumPy (what the compiled ``_hessian.pinv_psd`` replaced)."""
    H = 0.5 * (H + H.T)
    d = np.sqrt(np.abs(np.diag(H)))
    scaled, svecs = np.linalg.eigh(H / np.outer(d, d)) if (d > 0).all() else (None, None)
    if scaled is not None and (np.abs(scaled) < EIG_SCALED).any():
        vals, vecs, tol = scaled, svecs / d[:, None], EIG_SCALED
    else:
        (vals, vecs), tol = np.linalg.eigh(H), EIG_TOL
    pos = vals > tol
    counts = (int(np.sum(vals < -tol)), int(np.sum(np.abs(vals) <= tol)))
    # (the condition of the inverse: two eigensolvers' inverses differ by about this
    # times the rounding, e.g. NumPy's LAPACK and SciPy's of other versions)
    condition = float(np.abs(vals).max() / vals[pos].min()) if pos.any() else 1.0
    return (vecs[:, pos] / vals[pos]) @ vecs[:, pos].T, counts, condition


@pytest.mark.parametrize("seed", range(60))
def test_the_pseudo_inverse_is_numpys_rule(seed):
    """Positive definite, semi-definite (a direction scaled to 1e-9: the scaled
    coordinates), indefinite and zero-diagonal Hessians of 1 to 7 parameters whose
    scales differ by up to e^±6: the compiled inverse is the NumPy rule's to rounding,
    with the same counts of negative and near-zero eigenvalues (the warnings). (To
    rounding times the inverse's condition: the eigenvectors of two LAPACK builds differ
    in their last bits, and 1/λ of the smallest kept eigenvalue scales that.)"""
    rng = np.random.default_rng(seed)
    n = 1 + seed % 7
    B = rng.normal(size=(n, n)) * np.exp(rng.normal(0, 2, n))
    H = B @ B.T
    kind = seed // 7 % 4
    if kind == 1:
        H[0] *= 1e-9
        H[:, 0] *= 1e-9
    elif kind == 2:
        H -= np.eye(n) * np.abs(H).max() * 0.5
    elif kind == 3:
        H[-1] = H[:, -1] = 0.0
    H += rng.normal(size=(n, n)) * 1e-12 * np.abs(H).max()  # (not quite symmetric)
    want, (neg, zero), condition = _numpy_pinv(H)
    A, finite, got_neg, got_zero = _hessian.pinv_psd(H, EIG_SCALED, EIG_TOL)
    assert finite and (got_neg, got_zero) == (neg, zero)
    np.testing.assert_allclose(A, want, rtol=0,
                               atol=1e-13 * condition * np.abs(want).max())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(_pinv_psd(H), A)
    messages = " ".join(str(w.message) for w in caught)
    assert ("negative eigenvalue" in messages) == (neg > 0)
    assert ("close to zero" in messages) == (zero > 0)
