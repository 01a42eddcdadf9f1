"""The fit result: immutable, self-consistent fitted values and predictions, lmerTest's summary."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import crossed
from reference import case_data, fit_case, r_answers

# cases covering: correlated slopes, ||, nesting, crossed factors, factors in the fixed part,
# relevelled factors with derived columns, a singular fit, dropped NA rows
CASES = ["sleepstudy_slopes", "sleepstudy_zerocorr", "pastes_nested", "penicillin_crossed",
         "exist_multi_full", "ham_crossed", "blurb_ccmem_slopes", "dyestuff2_singular",
         "carrots_slopes", "exist_mono_nested"]


@functools.cache
def fit_of(case: str) -> crossed.LmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_case(case)


def complete_rows(case: str) -> pd.DataFrame:
    """The case's rows the model used (carrots has missing Preference values)."""
    fit = fit_of(case)
    data = case_data(case)
    used = [c for c in fit.design.columns if c in data.columns]
    return data.dropna(subset=used).reset_index(drop=True)


# ------------------------------------------------------------------ immutability
def test_fields_cannot_be_reassigned():
    fit = fit_of("sleepstudy_slopes")
    for name, value in [("sigma", 1.0), ("theta", np.zeros(3)), ("deviance", 0.0),
                        ("is_singular", True), ("beta", np.zeros(2))]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(fit, name, value)
    with pytest.raises(AttributeError):
        fit.fixef = pd.Series(dtype=float)
    with pytest.raises(AttributeError):
        fit.nobs = 3


def test_returned_tables_are_copies():
    fit = fit_of("sleepstudy_slopes")
    before = (fit.fixef.copy(), fit.vcov.copy(), fit.varcorr(), fit.ranef(), fit.fitted())
    fixef, vcov, vc, re_, fitted = fit.fixef, fit.vcov, fit.varcorr(), fit.ranef(), fit.fitted()
    fixef.iloc[0] = -1.0
    vcov.iloc[0, 0] = -1.0
    vc.loc[0, "variance_or_cov"] = -1.0
    re_.loc[0, "estimate"] = -1.0
    fitted[0] = -1.0
    pd.testing.assert_series_equal(fit.fixef, before[0])
    pd.testing.assert_frame_equal(fit.vcov, before[1])
    pd.testing.assert_frame_equal(fit.varcorr(), before[2])
    pd.testing.assert_frame_equal(fit.ranef(), before[3])
    np.testing.assert_array_equal(fit.fitted(), before[4])


@pytest.mark.parametrize("attr", ["theta", "beta", "vcov_beta"])
def test_arrays_are_read_only(attr):
    fit = fit_case("dyestuff")
    arr = getattr(fit, attr)
    before = np.array(arr, copy=True)
    try:
        arr.flat[0] = 5.0
    except ValueError:
        pass  # read-only: what an immutable result should do
    np.testing.assert_array_equal(getattr(fit, attr), before)


def test_result_does_not_keep_the_users_table():
    data = case_data("sleepstudy_slopes")
    fit = crossed.lmer("Reaction ~ Days + (Days | Subject)", data)
    before = fit.fitted().copy()
    data.loc[:, "Reaction"] = 0.0  # the user's table changes afterwards
    np.testing.assert_array_equal(fit.fitted(), before)
    assert not any(isinstance(getattr(fit, f.name), pd.DataFrame)
                   for f in dataclasses.fields(fit))


# ------------------------------------------------------------------ fitted values
@pytest.mark.parametrize("case", CASES)
def test_fitted_plus_residuals_is_the_response(case):
    fit = fit_of(case)
    y = fit.design.y
    np.testing.assert_allclose(fit.fitted() + fit.residuals(), y, rtol=1e-12, atol=1e-12)
    assert fit.fitted().shape == fit.residuals().shape == (fit.nobs,)
    data = complete_rows(case)
    response = r_answers(case)["formula"].split("~")[0].strip()
    np.testing.assert_allclose(y, data[response].to_numpy(dtype=float), rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES)
def test_predict_on_training_data_equals_fitted(case):
    fit = fit_of(case)
    data = complete_rows(case)
    np.testing.assert_allclose(fit.predict(data), fit.fitted(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fit.predict(), fit.fitted(), rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES)
def test_population_prediction_is_x_beta(case):
    fit = fit_of(case)
    data = complete_rows(case)
    xb = fit.design.X @ fit.fixef.to_numpy()
    np.testing.assert_allclose(fit.predict(data, include_random=False), xb, rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(fit.predict(include_random=False), xb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["sleepstudy_slopes", "pastes_nested", "ham_crossed"])
def test_fitted_is_x_beta_plus_z_b(case):
    """Rebuild Z b from ranef() by hand: the conditional modes and fitted() agree."""
    fit = fit_of(case)
    data = complete_rows(case)
    re_ = fit.ranef()
    zb = np.zeros(fit.nobs)
    for term in fit.spec.random:
        sub = re_[re_["group"] == term.name]
        labels = data[list(term.factors)].astype(str).agg(":".join, axis=1)
        for tname, block in sub.groupby("term", sort=False):
            value = dict(zip(block["level"].astype(str), block["estimate"], strict=True))
            cov = 1.0 if tname == "(Intercept)" else data[tname].to_numpy(dtype=float)
            zb += labels.map(value).to_numpy(dtype=float) * cov
    np.testing.assert_allclose(fit.fitted(), fit.design.X @ fit.beta + zb, rtol=1e-10)


def test_predict_subset_and_order_of_rows():
    fit = fit_of("penicillin_crossed")
    data = complete_rows("penicillin_crossed")
    idx = [5, 0, 17, 3]
    np.testing.assert_allclose(fit.predict(data.iloc[idx]), fit.fitted()[idx], rtol=1e-12)


def test_predict_categorical_newdata():
    """New data may carry categoricals (any category order) or plain strings."""
    fit = fit_of("exist_multi_full")
    data = complete_rows("exist_multi_full")
    cat = data.copy()
    for col in ("language", "task", "mode", "architecture"):
        cat[col] = pd.Categorical(cat[col], categories=sorted(cat[col].unique(), reverse=True))
    np.testing.assert_allclose(fit.predict(cat), fit.fitted(), rtol=1e-12)


# ------------------------------------------------------------------ tables
def test_table_schemas():
    fit = fit_of("sleepstudy_slopes")
    assert list(fit.varcorr().columns) == ["group", "term1", "term2", "variance_or_cov",
                                           "sd_or_cor"]
    assert list(fit.ranef().columns) == ["group", "level", "term", "estimate", "cond_sd"]
    tab = fit.coef_table()
    assert list(tab.columns) == ["term", "estimate", "std_error", "df", "statistic", "p_value",
                                 "conf_low", "conf_high"]
    assert tab.attrs["conf_level"] == 0.95
    tab90 = fit.coef_table(level=0.9)
    assert tab90.attrs["conf_level"] == 0.9
    q = stats.t.ppf(0.95, tab90["df"])
    np.testing.assert_allclose(tab90["conf_high"], tab90["estimate"] + q * tab90["std_error"],
                               rtol=1e-10)


def test_loglik_aic_bic_relations():
    for case in ("sleepstudy_slopes", "sleepstudy_ml"):
        fit = fit_of(case)
        k = len(fit.beta) + len(fit.theta) + 1
        assert fit.loglik == pytest.approx(-fit.deviance / 2, rel=1e-15)
        assert fit.aic == pytest.approx(-2 * fit.loglik + 2 * k, rel=1e-14)
        assert fit.bic == pytest.approx(-2 * fit.loglik + np.log(fit.nobs) * k, rel=1e-14)


def test_repr():
    text = repr(fit_of("dyestuff2_singular"))
    assert "Yield ~ 1 + (1 | Batch)" in text and "REML" in text and "singular" in text


# ------------------------------------------------------------------ summary()
def test_summary_reml_sections():
    """The sections summary(lmerTest::lmer(...)) prints, with the numbers lme4 prints."""
    text = fit_of("sleepstudy_slopes").summary()
    expected_in_order = [
        "Linear mixed model fit by REML. t-tests use Satterthwaite's method",
        "Formula: Reaction ~ Days + (Days | Subject)",
        "REML criterion at convergence: 1743.6",
        "Scaled residuals:",
        "Random effects:",
        "Groups", "Name", "Variance", "Std.Dev.", "Corr",
        "Subject", "(Intercept)", "612.10", "24.741",
        "Days", "35.07", "5.922", "0.07",
        "Residual", "654.94", "25.592",
        "Number of obs: 180, groups:  Subject, 18",
        "Fixed effects:",
        "Estimate", "Std. Error", "df", "t value", "Pr(>|t|)",
        "(Intercept)", "251.405", "6.825", "17.000", "36.838", "< 2e-16", "***",
        "Days", "10.467", "1.546", "6.771", "3.26e-06", "***",
        "Signif. codes:",
        "Correlation of Fixed Effects:",
        "-0.138",
    ]
    pos = 0
    for piece in expected_in_order:
        at = text.find(piece, pos)
        assert at >= 0, f"{piece!r} missing (after position {pos}) in:\n{text}"
        pos = at + len(piece)


def test_summary_scaled_residuals_are_quantiles():
    fit = fit_of("sleepstudy_slopes")
    text = fit.summary()
    q = np.quantile(fit.residuals() / fit.sigma, [0, 0.25, 0.5, 0.75, 1])
    # lme4 prints: -3.9536 -0.4634  0.0231  0.4634  5.1793
    np.testing.assert_allclose(q, [-3.9536, -0.4634, 0.0231, 0.4634, 5.1793], atol=6e-5)
    for v in q:
        assert f"{v:.4f}" in text


def test_summary_ml_information_criteria():
    text = fit_of("sleepstudy_ml").summary()
    assert "Linear mixed model fit by maximum likelihood" in text
    for piece in ("AIC", "BIC", "logLik", "deviance", "df.resid", "1763.9", "1783.1", "-876.0",
                  "1751.9"):
        assert piece in text, piece
    assert "REML criterion" not in text
    # R 4.2.2, lme4 1.1-31: summary(lmer(Reaction ~ Days + (Days | Subject), sleepstudy,
    # REML = FALSE)) prints
    #      AIC      BIC   logLik deviance df.resid
    #   1763.9   1783.1   -876.0   1751.9      174
    # df.resid = nobs - every parameter (2 fixed, 3 theta, sigma): 180 - 6 (before: 178)
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:1] == ["AIC"])
    assert lines[i + 1].split() == ["1763.9", "1783.1", "-876.0", "1751.9", "174"]
    assert fit_of("sleepstudy_ml").df_residual == 174


def test_summary_singular_note():
    text = fit_of("dyestuff2_singular").summary()
    assert "boundary (singular) fit: see help('isSingular')" in text
    assert "singular" not in fit_of("dyestuff").summary()


def test_summary_groups_line_lists_every_factor():
    text = fit_of("pastes_nested").summary()
    assert "Number of obs: 60, groups:  cask:batch, 30; batch, 10" in text


def test_summary_is_only_display():
    """summary() formats and computes nothing new: the same numbers as the tables."""
    fit = fit_of("exist_multi_full")
    text = fit.summary()
    for _, row in fit.coef_table().iterrows():
        assert row["term"] in text
        assert f"{row['statistic']:.3f}" in text


# ------------------------------------------------------------------ convergence status
def test_convergence_status_matches_the_flags():
    for case in ("sleepstudy_slopes", "dyestuff2_singular"):
        fit = fit_of(case)
        assert fit.convergence is fit.opt.status
        assert fit.convergence.converged is fit.converged
        expected = "singular" if fit.is_singular else "ok"
        assert fit.convergence == expected


def test_convergence_is_derived_when_a_fit_is_built_without_one():
    """LmerFit's constructor stays backward compatible (simulate.specify, user code)."""
    fit = fit_of("dyestuff2_singular")
    fields = {f.name: getattr(fit, f.name) for f in dataclasses.fields(fit) if f.init}
    del fields["convergence"]
    assert crossed.LmerFit(**fields).convergence is crossed.ConvergenceStatus.SINGULAR
    failed = crossed.LmerFit(**{**fields, "converged": False})
    assert failed.convergence is crossed.ConvergenceStatus.FAILED
    with pytest.raises(ValueError, match="contradicts"):
        dataclasses.replace(fit, converged=False)
    assert dataclasses.replace(fit, converged=False,
                               convergence=crossed.ConvergenceStatus.HESSIAN).is_singular
