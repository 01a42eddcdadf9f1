"""``cx.lm`` and the likelihood-ratio test of a mixed model against it, against lme4
1.1-31's ``anova(lmer_fit, lm_fit)`` (r_ci.R). Tolerance 1e-6 relative (the lmer refitted
by ML at the native optimum)."""

import numpy as np
import pytest

import crossed as cx
from r_ci_cases import CASES, answers, data, fit, num

LM = {"sleepstudy": "Reaction ~ Days", "penicillin": "diameter ~ 1"}


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_compare_with_lm_matches_anova_lmer_lm(name):
    ref = answers()[name]["compare_lm"]
    ols = cx.lm(LM[name], data(*CASES[name]))
    tab = cx.compare(fit(name), ols, names=["mixed", "ols"])
    assert list(tab["model"]) == ["ols", "mixed"]  # sorted by npar, as lme4
    for row, r in zip(tab.itertuples(), ref, strict=True):
        assert row.npar == r["npar"]
        assert row.loglik == pytest.approx(r["logLik"], rel=1e-6)
        assert row.aic == pytest.approx(r["AIC"], rel=1e-6)
        assert row.bic == pytest.approx(r["BIC"], rel=1e-6)
    assert tab["statistic"][1] == pytest.approx(num(ref[1]["Chisq"]), rel=1e-5)
    assert tab["df"][1] == ref[1]["Df"]
    assert tab["p_value"][1] == pytest.approx(num(ref[1]["Pr(>Chisq)"]), rel=1e-4)


def test_lm_coefficients_are_least_squares():
    d = data(*CASES["sleepstudy"])
    ols = cx.lm("Reaction ~ Days", d)
    X = np.column_stack([np.ones(len(d)), d["Days"]])
    np.testing.assert_allclose(ols.beta, np.linalg.lstsq(X, d["Reaction"], rcond=None)[0])
    assert list(ols.fixef.index) == ["(Intercept)", "Days"]
    assert ols.npar == 3 and ols.nobs == len(d)
    assert ols.sigma == pytest.approx(np.sqrt(np.sum(ols.residuals() ** 2) / (len(d) - 2)))


def test_lm_refuses_random_terms_and_other_rows():
    d = data(*CASES["sleepstudy"])
    with pytest.raises(ValueError, match="random-effects terms"):
        cx.lm("Reaction ~ Days + (1 | Subject)", d)
    with pytest.raises(cx.DataError, match="same rows"):
        cx.compare(fit("sleepstudy"), cx.lm("Reaction ~ Days", d.iloc[:100]))


def test_lm_arrays_are_read_only_and_fixef_is_a_copy():
    ols = cx.lm(LM["sleepstudy"], data(*CASES["sleepstudy"]))
    for name in ("X", "y", "beta"):
        assert not getattr(ols, name).flags.writeable, name
    fixef = ols.fixef
    assert not np.shares_memory(fixef.to_numpy(), ols.beta)
    fixef.iloc[0] = 0.0
    assert ols.fixef.iloc[0] != 0.0
