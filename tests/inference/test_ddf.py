"""The one denominator-df dispatch (crossed.inference.ddf) used by the coefficient table,
ANOVA, EMMs and the simulation tests."""

import warnings

import numpy as np
import pytest

import crossed as cx
from crossed.inference import coefs
from crossed.inference.anova import f_test
from crossed.inference.ddf import (
    DDF_CHOICES,
    contrast_f,
    contrast_t,
    contrast_vcov,
    normalise_ddf,
)
from crossed.simulate.simtests import ContrastTest


@pytest.fixture(scope="module")
def fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("delta ~ mode * language + (1 | model) + (1 | task)",
                       cx.load_dataset("exist_mono"))


@pytest.mark.parametrize(("name", "canonical"), [
    ("satterthwaite", "satterthwaite"), ("Satterthwaite", "satterthwaite"),
    ("kenward-roger", "kenward-roger"), ("Kenward_Roger", "kenward-roger"),
    ("kr", "kenward-roger"), ("none", "none"), ("asymptotic", "none")])
def test_names_and_aliases(name, canonical):
    assert normalise_ddf(name) == canonical
    assert canonical in DDF_CHOICES


@pytest.mark.parametrize("call", [
    lambda f: f.coef_table(ddf="kenward"),
    lambda f: f.anova(ddf="kenward"),
    lambda f: f.emmeans("mode", ddf="kenward"),
    lambda f: cx.inference.joint_tests(f, ddf="kenward"),
    lambda f: contrast_t(f, np.eye(2, len(f.beta)), "kenward")])
def test_unknown_ddf_is_one_clear_error_everywhere(fit, call):
    with pytest.raises(ValueError, match=r"unknown ddf 'kenward'; use 'satterthwaite', "
                                         r"'kenward-roger' or 'none'"):
        call(fit)


def test_simulation_test_with_unknown_ddf_fails_clearly(fit):
    # before: any name but "satterthwaite" or "none" ran Kenward-Roger silently.
    t = ContrastTest(name="x", weights={fit.fixef_names[1]: 1.0}, ddf="sattherthwaite")
    with pytest.raises(ValueError, match="unknown ddf 'sattherthwaite'"):
        t(fit)


def test_the_callers_go_through_the_one_dispatch(fit):
    L = np.eye(len(fit.beta))[1:3]
    for ddf in DDF_CHOICES:
        est, se, df = contrast_t(fit, L, ddf)
        tab = coefs.contrast_tests(fit, L, ddf=ddf)
        np.testing.assert_array_equal(tab["df"], df)
        np.testing.assert_array_equal(tab["std_error"], se)
        F = contrast_f(fit, L, ddf)
        assert f_test(fit, L, ddf=ddf)["den_df"] == F["den_df"]
    est, se, df = contrast_t(fit, L, "none")
    np.testing.assert_array_equal(df, np.inf)
    np.testing.assert_allclose(se, np.sqrt(np.diag(L @ fit.vcov_beta @ L.T)), rtol=1e-12)
    assert contrast_f(fit, L, "none")["den_df"] == np.inf
    assert contrast_f(fit, np.zeros((0, len(fit.beta))), "none") is None
    np.testing.assert_array_equal(contrast_vcov(fit, "none"), fit.vcov_beta)
    kr = contrast_vcov(fit, "kenward-roger")
    # Kenward-Roger's adjusted covariance is never smaller than the model's
    assert np.all(np.diag(kr) >= np.diag(np.asarray(fit.vcov_beta)) - 1e-15)
