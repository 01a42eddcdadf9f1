"""emm_contrast: which contrast is tested (issue 14, item 13)."""

import warnings

import numpy as np
import pytest

import crossed as cx
import crossed.simulate as cs
from crossed.simulate.simtests import ContrastTest, JointContrastTest


def test_more_than_two_means_run_the_joint_f_test(exist_fit):
    # before: the first pair "t1 - t2" was tested silently.
    # emmeans 1.8.4.1 (lmer.df = "satterthwaite"):
    #   test(contrast(emmeans(m, "task"), "consec"), joint = TRUE)
    #   df1 2, df2 22, F.ratio 168.725, p.value 4.51473471353e-14
    test = cs.emm_contrast("task")(exist_fit)
    assert isinstance(test, JointContrastTest)
    assert test.name == "task: all 3 means equal (joint F, df1 = 2)"
    res = test(exist_fit)
    assert res["status"] == "ok" and np.isnan(res["estimate"])
    assert res["df"] == pytest.approx(22, rel=1e-6)
    assert res["statistic"] == pytest.approx(168.725, abs=6e-4)
    assert res["p_value"] == pytest.approx(4.51473471353e-14, rel=1e-5)


def test_two_means_or_a_named_pair_run_the_t_test(exist_fit):
    two = cs.emm_contrast("language")(exist_fit)
    assert isinstance(two, ContrastTest) and two.name == "en - es"
    pair = cs.emm_contrast("task", contrast="t1 - t3")(exist_fit)
    assert pair.name == "t1 - t3"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = exist_fit.emmeans("task").pairs(adjust="none").set_index("contrast")
    res = pair(exist_fit)
    assert res["estimate"] == pytest.approx(direct.loc["t1 - t3", "estimate"], rel=1e-10)
    assert res["p_value"] == pytest.approx(direct.loc["t1 - t3", "p_value"], rel=1e-8)


def test_contrast_vectors_and_dicts(exist_fit):
    vec = cs.emm_contrast("task", contrast=[1, -0.5, -0.5])(exist_fit)
    assert isinstance(vec, ContrastTest)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = exist_fit.emmeans("task").table()
    want = tab["estimate"].iloc[0] - tab["estimate"].iloc[1:].mean()
    assert vec(exist_fit)["estimate"] == pytest.approx(want, rel=1e-10)
    both = cs.emm_contrast("task", contrast={"a": [1, -1, 0], "b": [0, 1, -1]})(exist_fit)
    assert isinstance(both, JointContrastTest) and "a, b" in both.name
    assert both(exist_fit)["statistic"] == pytest.approx(168.725, abs=6e-4)
    with pytest.raises(ValueError, match="weights for 3 means"):
        cs.emm_contrast("task", contrast=[1, -1])(exist_fit)
    with pytest.raises(ValueError, match="not among"):
        cs.emm_contrast("task", contrast="t1 - t9")(exist_fit)


def test_joint_test_is_non_estimable_when_a_cell_is_lost(exist_fit):
    d = cx.load_dataset("exist_multi")
    cell = ((d["language"] == "es") & (d["task"] == "t3") & (d["mode"] == "soft")).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = exist_fit.refit(rows=~cell)
    assert cs.emm_contrast("task")(exist_fit)(refit, ~cell)["status"] == "non_estimable"
    assert cs.emm_contrast("task", contrast="t1 - t2")(exist_fit)(refit, ~cell)["status"] == "ok"


def test_summaries_name_the_test(exist_fit):
    res = cx.ablation(cx.load_dataset("exist_multi"), exist_fit.formula,
                      cs.emm_contrast("task"), fractions=[0.1], reps=2, seed=1)
    assert res.test == "task: all 3 means equal (joint F, df1 = 2)"
    assert res.summary().attrs["test"] == res.test
    assert "joint F" in repr(res)


def test_non_estimable_contrast_on_the_fit_raises():
    d = cx.load_dataset("exist_multi")
    d = d[~((d["language"] == "es") & (d["task"] == "t3") & (d["mode"] == "soft"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("delta ~ language * task * mode + (1 | architecture)", d)
    with pytest.raises(ValueError, match="not estimable"):
        cs.emm_contrast("language")(fit)
    assert cs.emm_contrast("task", contrast="t1 - t2")(fit)(fit)["status"] == "ok"
