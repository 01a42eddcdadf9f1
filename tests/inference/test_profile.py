"""Likelihood-profile intervals against lme4 1.1-31's ``confint(fit, method = "profile")``
(tests/data/reference/r_ci/r_ci.R). Tolerance: 1e-4 relative (achieved: ~1e-6)."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.inference.profile import back_spline, profile, var_params
from r_ci_cases import answers, data, fit, interval_table


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
@pytest.mark.parametrize("level,key", [(0.95, "confint_profile"), (0.90, "confint_profile_90")])
def test_profile_intervals_match_lme4(name, level, key):
    ref = interval_table(answers()[name][key])
    got = fit(name).confint(method="profile", level=level).set_index("parameter")
    assert list(got.index) == list(ref.index)  # .sig01 ..., .sigma, fixed effects
    np.testing.assert_allclose(got["conf_low"], ref.iloc[:, 0], rtol=1e-4)
    np.testing.assert_allclose(got["conf_high"], ref.iloc[:, 1], rtol=1e-4)


def test_names_follow_lme4_order():
    params = var_params(fit("sleepstudy"))
    assert [p.r_name for p in params] == [".sig01", ".sig02", ".sig03"]
    assert [p.name for p in params] == ["sd_(Intercept)|Subject",
                                        "cor_Days.(Intercept)|Subject", "sd_Days|Subject"]


def test_parm_selects_and_accepts_crossed_names():
    f = fit("sleepstudy")
    one = f.confint(parm="sd_Days|Subject")
    assert list(one["parameter"]) == [".sig03"]
    ref = interval_table(answers()["sleepstudy"]["confint_profile"]).loc[".sig03"]
    assert one["conf_low"][0] == pytest.approx(ref.iloc[0], rel=1e-4)
    assert list(f.confint(parm="beta_", method="Wald")["parameter"]) == ["(Intercept)", "Days"]
    with pytest.raises(ValueError, match="no parameter"):
        f.confint(parm="nope")


def test_profile_is_zero_at_the_ml_estimate_and_monotone():
    for pr in profile(fit("penicillin")):
        assert np.all(np.diff(pr.zeta) > 0)
        assert np.min(np.abs(pr.zeta)) == 0.0
        assert pr.zeta[0] < -2.5 and pr.zeta[-1] > 2.5


def test_back_spline_inverts_a_monotone_curve():
    x = np.linspace(-2, 2, 15)
    z = np.sinh(x)
    inv = back_spline(x, z)
    np.testing.assert_allclose(inv(np.sinh(np.array([-1.3, 0.2, 1.7]))), [-1.3, 0.2, 1.7],
                               atol=2e-3)
    assert np.isnan(inv(np.array([10.0]))[0])  # outside the profiled range
    with pytest.raises(ValueError, match="monotone"):
        back_spline(x, np.cos(x))


@pytest.mark.parametrize("case", ["dyestuff2", "sleepstudy_zerocorr"])
def test_profile_singular_and_uncorrelated(case):
    """A singular fit (the SD's interval starts at its bound 0) and ``||`` terms."""
    ref_case = answers()["profile_extra"][case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = cx.lmer(ref_case["formula"], data(ref_case["data"], (ref_case["factors"],)))
    ref = interval_table(ref_case["ci"])
    got = f.confint().set_index("parameter")
    assert list(got.index) == list(ref.index)
    np.testing.assert_allclose(got["conf_low"], ref.iloc[:, 0], rtol=1e-4, atol=1e-8)
    np.testing.assert_allclose(got["conf_high"], ref.iloc[:, 1], rtol=1e-4)


# lme4 1.1-31 on x − 2000 (the same model; on the raw x lme4 stops 1.92 above the optimum):
#   d <- read.csv("tests/data/yearx_slope_df.csv.gz"); d$xc <- d$x - 2000
#   confint(lmer(y ~ xc + (xc | g), d), method = "profile")
YEAR_SLOPE_PROFILE = {".sig03": (0.0, 0.2543654588), ".sigma": (1.6676117712, 1.7710159972),
                      "x": (0.4300417160, 0.5959356589)}


def test_a_random_slope_on_a_year_profiles_in_the_centred_columns():
    """``(x | g)`` with x ≈ 2000: the inner minimisations run on the optimiser's centred
    columns, so the slope's SD, σ and the fixed effects get the intervals of the same model
    on x − 2000. In the formula's columns σ's lower bound was 1.6819 (1.6676) and x's
    interval 0.429925 to 0.594727, silently. The intercept at x = 0 and its correlation are
    not coordinates of the centred term: no interval, with a warning, where the profile had
    given [0, inf] and [-1, 1]."""
    d = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "yearx_slope_df.csv.gz",
                    dtype={"g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = cx.lmer("y ~ x + (x | g)", d)
    with pytest.warns(UserWarning, match="no profile interval for .sig01"):
        got = f.confint(method="profile").set_index("parameter")
    for name, (lo, hi) in YEAR_SLOPE_PROFILE.items():
        assert got.loc[name, "conf_low"] == pytest.approx(lo, rel=1e-4, abs=1e-8)
        assert got.loc[name, "conf_high"] == pytest.approx(hi, rel=1e-4)
    assert got.loc[[".sig01", ".sig02"], ["conf_low", "conf_high"]].isna().all().all()


def test_profile_interval_rows_carry_lme4s_names():
    """The correlation row is named as lme4 names it (``cor_Days.(Intercept)|Subject``);
    ``parameter`` keeps lme4's default (old) names."""
    # fm <- lmer(Reaction ~ Days + (Days | Subject), sleepstudy)
    # rownames(confint(fm, oldNames = FALSE)):
    #   "sd_(Intercept)|Subject" "cor_Days.(Intercept)|Subject" "sd_Days|Subject" "sigma"
    #   "(Intercept)" "Days"
    # rownames(confint(fm)): ".sig01" ".sig02" ".sig03" ".sigma" "(Intercept)" "Days"
    got = fit("sleepstudy").confint(method="profile")
    assert list(got["term"]) == ["sd_(Intercept)|Subject", "cor_Days.(Intercept)|Subject",
                                 "sd_Days|Subject", "sigma", "(Intercept)", "Days"]
    assert list(got["parameter"]) == [".sig01", ".sig02", ".sig03", ".sigma", "(Intercept)",
                                      "Days"]
