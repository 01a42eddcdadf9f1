"""specify(): deviance and vcov at the given parameters (issue 14, item 15)."""

import warnings

import numpy as np
import pytest
from scipy import stats

import crossed as cx

FORMULA = "delta ~ language + task + (1 | architecture)"


@pytest.fixture(scope="module")
def data():
    return cx.load_dataset("exist_multi")


def _fit(data, reml):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer(FORMULA, data, reml=reml)


def _specify_like(fit, data, beta=None):
    sd = fit.varcorr().query("group == 'architecture'")["sd_or_cor"].iloc[0]
    beta = fit.beta if beta is None else beta
    return cx.specify(FORMULA, data, fixef=dict(zip(fit.fixef_names, beta, strict=True)),
                      varcorr={"architecture": sd}, sigma=fit.sigma, reml=fit.reml)


@pytest.mark.parametrize("reml", [True, False])
def test_at_the_estimates_it_reproduces_the_fit(data, reml):
    # before: deviance and vcov were NaN
    fit = _fit(data, reml)
    model = _specify_like(fit, data)
    assert model.deviance == pytest.approx(fit.deviance, rel=1e-9)
    np.testing.assert_allclose(model.vcov_beta, fit.vcov_beta, rtol=1e-8, atol=1e-15)


def _dense_cov(fit, data, sd, sigma):
    codes = data["architecture"].astype("category").cat.codes.to_numpy()
    Z = (codes[:, None] == np.arange(codes.max() + 1)[None, :]).astype(float)
    return sd**2 * Z @ Z.T + sigma**2 * np.eye(len(data))


def test_ml_deviance_at_other_parameters_is_the_gaussian_log_density(data):
    fit = _fit(data, reml=False)
    beta = fit.beta + 0.01
    sd, sigma = 0.05, 0.08
    model = cx.specify(FORMULA, data, fixef=dict(zip(fit.fixef_names, beta, strict=True)),
                       varcorr={"architecture": sd}, sigma=sigma, reml=False)
    V = _dense_cov(fit, data, sd, sigma)
    X, y = fit.design.X, fit.design.y
    want = -2 * stats.multivariate_normal(X @ beta, V).logpdf(y)
    assert model.deviance == pytest.approx(want, rel=1e-10)
    np.testing.assert_allclose(model.vcov_beta, np.linalg.inv(X.T @ np.linalg.solve(V, X)),
                               rtol=1e-9, atol=1e-15)


def test_reml_criterion_at_other_parameters(data):
    fit = _fit(data, reml=True)
    sd, sigma = 0.05, 0.08
    model = cx.specify(FORMULA, data, fixef=dict(zip(fit.fixef_names, fit.beta, strict=True)),
                       varcorr={"architecture": sd}, sigma=sigma, reml=True)
    V = _dense_cov(fit, data, sd, sigma)
    X, y = fit.design.X, fit.design.y
    n, p = X.shape
    XtVX = X.T @ np.linalg.solve(V, X)
    b = np.linalg.solve(XtVX, X.T @ np.linalg.solve(V, y))
    r = y - X @ b
    want = ((n - p) * np.log(2 * np.pi) + np.linalg.slogdet(V)[1]
            + np.linalg.slogdet(XtVX)[1] + r @ np.linalg.solve(V, r))
    assert model.deviance == pytest.approx(want, rel=1e-10)


def test_without_a_response_the_deviance_is_unavailable_and_said_so(data):
    design = data.drop(columns="delta")
    model = cx.specify(FORMULA, design, fixef={"(Intercept)": 0.2, "languagees": 0.0,
                                               "taskt2": 0.0, "taskt3": 0.0},
                       varcorr={"architecture": 0.05}, sigma=0.08)
    assert np.isnan(model.deviance) and np.isnan(model.aic)
    assert any("not available" in m for m in model.messages)
    # the vcov does not depend on the response: the same as with it
    with_y = cx.specify(FORMULA, data, fixef={"(Intercept)": 0.2, "languagees": 0.0,
                                              "taskt2": 0.0, "taskt3": 0.0},
                        varcorr={"architecture": 0.05}, sigma=0.08)
    np.testing.assert_allclose(model.vcov_beta, with_y.vcov_beta, rtol=1e-10, atol=1e-15)


def test_specify_and_extend_name_a_bad_argument(truth):
    from _simdata import small_design

    # before: "could not convert string to float: 'a'"
    with pytest.raises(ValueError, match="varcorr for 'g' must be a number"):
        cx.specify("y ~ x + (1 | g)", small_design(), fixef={"(Intercept)": 1.0, "x": 0.5},
                   varcorr={"g": "a"}, sigma=1.0)
    # before: TypeError "'<=' not supported between instances of 'str' and 'int'"
    with pytest.raises(ValueError, match="n must be a whole number >= 1, got '20'"):
        cx.extend(truth, along="g", n="20")
