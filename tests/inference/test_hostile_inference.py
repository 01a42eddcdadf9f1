"""Inference on hostile specifications found by adversarial probing (issue 14)."""


import numpy as np
import pandas as pd
import pytest

import crossed
from _hostile import hostile_data, quiet_lmer

_data = hostile_data
_quiet = quiet_lmer


# d <- read.csv("d1.csv")   # _data() written with to_csv(index=False)
# m <- lmer(y ~ factor(g) + (1|h), d); as.data.frame(emmeans(m, "g"))   # (KR df)
R_EMM_FACTOR_G = [-0.1098566, 0.5955702, 1.0950878, 1.4934082, 1.4078381, 1.7777746,
                  1.7311042, 2.3904527]
R_SE_FACTOR_G = [0.4147151, 0.4866301, 0.3948968, 0.3947180, 0.4175978, 0.5093416,
                 0.3388833, 0.4668229]


def test_emmeans_of_a_numeric_column_made_a_factor_with_C_has_every_level():
    # it used to give one row at the mean of g, with the reference level's linear function
    fit = _quiet("y ~ C(g) + (1 | h)", _data())
    tab = fit.emmeans("g", ddf="kenward-roger").table()
    assert tab["g"].tolist() == list(range(8))
    np.testing.assert_allclose(tab["estimate"], R_EMM_FACTOR_G, atol=1e-6)
    np.testing.assert_allclose(tab["std_error"], R_SE_FACTOR_G, rtol=1e-4)


def test_emmeans_of_C_column_by_another_factor():
    fit = _quiet("y ~ C(g) * x + f + (1 | h)", _data())
    tab = fit.emmeans("g", by="f").table()
    assert len(tab) == 8 * 3
    assert tab["estimate"].notna().all()


@pytest.mark.parametrize("specs", [3, [1, 2], {"f": 1}])
def test_emmeans_specs_of_the_wrong_type_are_refused_by_name(specs):
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(TypeError, match="specs and by"):
        fit.emmeans(specs)


@pytest.mark.parametrize("level", [1.5, 0, 1, -0.1, True, "0.95", np.nan])
def test_confidence_level_outside_0_1_is_refused(level):
    # coef_table(level=1.5) used to give NaN intervals, level=0 zero-width ones
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        fit.coef_table(level=level)
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        fit.emmeans("f", level=level).table()


@pytest.mark.parametrize("ci", [2, 0, -1])
def test_eta_squared_ci_outside_0_1_is_refused(ci):
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(ValueError, match="ci must be a number between 0 and 1"):
        fit.eta_squared(ci=ci)


def test_compare_refuses_a_non_fit_by_position():
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(TypeError, match="argument 2 is int"):
        crossed.compare(fit, 3)


def test_pairs_of_a_single_mean_is_nothing_nonest():
    # R: pairs(emmeans(m, "x")) prints "(nothing)  nonEst"; crossed raised
    # "need at least one array to concatenate"
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    tab = fit.emmeans("x").pairs()
    assert tab["contrast"].tolist() == ["(nothing)"]
    assert tab["note"].tolist() == ["nonEst"] and tab["estimate"].isna().all()


@pytest.mark.parametrize("ref", [3, -1, 1.0, True])
def test_trt_vs_ctrl_ref_out_of_range_is_refused(ref):
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(ValueError, match="ref must be the index of the control level"):
        fit.emmeans("f").contrast("trt.vs.ctrl", ref=ref)


@pytest.mark.parametrize("weights,match", [({}, "dict is empty"),
                                           ({"a": ["x", 1, 2]}, "'a': weights must be numbers")])
def test_bad_contrast_weights_are_refused_by_name(weights, match):
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    with pytest.raises(ValueError, match=match):
        fit.emmeans("f").contrast(weights)


def test_a_repeated_spec_is_one_variable():
    # "f*f" gave a numpy matmul shape error
    fit = _quiet("y ~ x + f + (1 | g)", _data())
    tab = fit.emmeans("f*f").table()
    pd.testing.assert_frame_equal(tab, fit.emmeans("f").table())


def test_tukey_and_dunnettx_below_two_df_are_nan_as_in_r():
    # R: qtukey(0.95, 3, 0.26) and ptukey(q, 3, 0.26) are NaN ("NaNs produced"); crossed's
    # quantile search raised "f(a) and f(b) must have different signs" from brentq
    from crossed.inference.adjust import critical_values, ptukey_sf, qtukey

    assert np.isnan(qtukey(0.95, 3, 0.26)) and np.isnan(ptukey_sf(3.0, 3, 1.5))
    assert np.isfinite(qtukey(0.95, 3, 2.0))  # R: qtukey(0.95, 3, 2) = 8.330783
    np.testing.assert_allclose(qtukey(0.95, 3, 2.0), 8.330783, rtol=1e-6)
    for method in ("tukey", "dunnettx"):
        assert np.isnan(critical_values(np.array([0.3]), 0.95, method, 3, 2)[0])


def test_pairs_with_a_contrast_below_two_df_reports_nan_not_a_crash():
    # d <- data.frame(a = ..., g = ..., y = ...)   # the values below
    # pairs(emmeans(lmer(y ~ a + (a||g), d), "a", lmer.df = "satterthwaite")): the two
    # contrasts with r have df < 1 and NaN p value and interval ("NaNs produced")
    d = pd.DataFrame({
        "a": list("pppqpppqpqpprpprqqrqrprpqqqrqqrqp"),
        "g": [1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0,
              0, 0, 1, 0, 0, 0, 0],
        "y": [-0.9549, -1.2252, -1.0642, 0.2458, 0.4942, -1.608, -0.718, 0.4682, -1.6982,
              -1.9462, -0.7333, -2.2976, -1.1042, -2.4261, -2.842, 1.138, 0.3366, 0.1085,
              0.2406, -0.2965, 1.4071, -1.9599, -0.8669, -0.5659, 1.2395, -1.7018, -0.3116,
              1.0709, -1.351, 0.2313, 0.8313, 0.0286, 0.5295]})
    fit = _quiet("y ~ a + (a || g)", d)
    tab = fit.emmeans("a").pairs()
    small = tab["df"] < 2
    assert small.sum() == 2
    assert tab.loc[small, ["p_value", "conf_low", "conf_high"]].isna().all().all()
    assert tab.loc[~small, "p_value"].notna().all()


def test_ranova_lists_an_expanded_double_bar_term_as_lmertest_does():
    # ranova(lmer(y ~ x + (x || g) + (1 | h/g), d)) lists (1 | g) before x in (0 + x | g);
    # crossed listed the slope first, so positional access picked the wrong row
    d = _data()
    d["y"] = d["y"] + d["h"].map({"p": -2.0, "q": 0.0, "r": 1.0, "s": 2.5})
    tab = _quiet("y ~ x + (x || g) + (1 | h/g)", d).ranova()
    assert tab["term"].tolist() == ["<none>", "(1 | g)", "x in (0 + x | g)", "(1 | g:h)",
                                    "(1 | h)"]
