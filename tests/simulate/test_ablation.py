"""Missing-data ablation, the EMM contrast test on refits, and the RM-ANOVA alternative."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed import simulate as cs
from crossed.inference.emmeans import emmeans

FORMULA = "delta ~ language * task * mode + (1 | architecture)"
RM = {"subject": "model", "within": ["language", "task", "mode"], "effect": "language"}


@pytest.fixture(scope="module")
def data():
    return cx.load_dataset("exist_multi")


def test_emm_contrast_on_a_refit_equals_emmeans(exist_fit):
    keep = np.arange(exist_fit.nobs) != 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = exist_fit.refit(rows=keep)
        direct = emmeans(refit, "language").pairs().iloc[0]
    test = cs.emm_contrast("language")(exist_fit)
    res = test(refit, keep)
    assert res["status"] == "ok"
    for key in ("estimate", "std_error", "df", "statistic", "p_value"):
        np.testing.assert_allclose(res[key], direct[key], rtol=1e-8)


def test_missing_cell_makes_the_contrast_non_estimable(exist_fit, data):
    cell = ((data.language == "es") & (data.task == "t3") & (data["mode"] == "soft")).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = exist_fit.refit(rows=~cell)
    assert len(refit.beta) == len(exist_fit.beta) - 1
    test = cs.emm_contrast("language")(exist_fit)
    assert test(refit, ~cell)["status"] == "non_estimable"
    # the main effect of mode averaged over a complete margin stays estimable
    lr = cs.lrt("language")(exist_fit)(refit, ~cell)
    assert lr["status"] == "ok" and lr["df"] == 1


def test_rm_anova_matches_statsmodels(data):
    from statsmodels.stats.anova import AnovaRM

    table = AnovaRM(data, "delta", "model", within=["language", "task", "mode"]).fit()
    sm = table.anova_table
    for effect in ["language", "task", "language:task", "language:task:mode"]:
        prepared = cs.RMAnova("model", ["language", "task", "mode"], effect,
                              "delta").prepare(data)
        res = prepared()
        row = sm.loc[effect.replace(":", ":")]
        np.testing.assert_allclose(res["statistic"], row["F Value"], rtol=1e-8)
        np.testing.assert_allclose([res["num_df"], res["den_df"]], [row["Num DF"],
                                                                    row["Den DF"]])
        np.testing.assert_allclose(res["p_value"], row["Pr > F"], rtol=1e-6)
        assert res["n_subjects"] == 3


def test_rm_anova_drops_incomplete_subjects(data):
    prepared = cs.RMAnova("model", ["language", "task", "mode"], "language",
                          "delta").prepare(data)
    keep = np.ones(len(data), dtype=bool)
    keep[0] = False  # one cell of the first model
    res = prepared(keep)
    assert res["n_subjects"] == 2 and res["status"] == "ok"
    keep[data["model"] == data["model"].iloc[12]] = False
    assert prepared(keep)["status"] == "failed"


def test_ablation_tables(data):
    res = cx.ablation(data, FORMULA, cs.emm_contrast("language"), fractions=[0.05, 0.3],
                      reps=12, seed=1, rm_anova=RM)
    reps = res.replicates
    assert list(reps.columns) == ["fraction", "rep", "method", "n_removed", "nobs", "status",
                                  "estimate", "std_error", "df", "statistic", "p_value",
                                  "detected", "n_subjects", "message"]
    assert len(reps) == 2 * 12 * 2
    lmm = reps[reps.method == "lmm"]
    assert set(lmm["nobs"]) == {36 - 2, 36 - 11}
    summary = res.summary()
    assert list(summary.columns) == ["method", "fraction", "reps", "n_ok", "n_failed",
                                     "n_non_estimable", "detections", "rate", "conf_low",
                                     "conf_high", "mean_nobs", "mean_subjects"]
    row = summary[(summary.method == "lmm") & (summary.fraction == 0.05)].iloc[0]
    assert row["rate"] == 1.0 and row["conf_low"] > 0.7
    rm = summary[summary.method == "rm_anova"]
    # RM-ANOVA keeps complete subjects only: 2 of 36 rows removed already cost subjects
    assert (rm["mean_subjects"] < 3).all()
    assert (rm["n_failed"] > 0).all()
    full = res.full.set_index("method")
    assert full.loc["lmm", "detected"] and full.loc["rm_anova", "n_subjects"] == 3
    again = cx.ablation(data, FORMULA, cs.emm_contrast("language"), fractions=[0.05, 0.3],
                        reps=12, seed=1, rm_anova=RM)
    pd.testing.assert_frame_equal(reps, again.replicates)


def test_ablation_of_whole_cells(data):
    res = cx.ablation(data, FORMULA, cs.fixed("languagees"), fractions=[0.25], reps=5,
                      seed=3, unit=["model", "task"])
    assert res.unit == "model:task"
    lmm = res.replicates
    # 9 model x task cells of 4 rows: 2 cells removed
    assert (lmm["n_removed"] == 2).all() and (lmm["nobs"] == 36 - 8).all()


def test_fractions_validated(data):
    with pytest.raises(ValueError, match="fractions"):
        cx.ablation(data, FORMULA, "languagees", fractions=[1.0], reps=1, seed=1)
