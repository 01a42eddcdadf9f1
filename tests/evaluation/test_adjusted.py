"""fit.adjusted_means / interaction_effects against R (tests/data/reference/extra/adjusted.R)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from reference import EXTRA_DIR


@pytest.fixture(scope="module")
def ref():
    return json.loads((EXTRA_DIR / "adjusted.json").read_text())


@pytest.fixture(scope="module")
def fit(ref):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer(ref["formula"], cx.load_dataset("blurb_like"))


def test_adjusted_means_match_r(fit, ref):
    out = fit.adjusted_means("model")
    assert list(out.columns) == ["level", "estimate", "std_error", "conf_low", "conf_high",
                                 "population_mean", "conditional_mode", "cond_sd", "rank"]
    want = pd.DataFrame(ref["adjusted_means"]).set_index("level").loc[out["level"]]
    for col in ("estimate", "population_mean", "std_error"):
        np.testing.assert_allclose(out[col], want[col], rtol=1e-5, err_msg=col)
    np.testing.assert_allclose(out["conditional_mode"], want["conditional_mode"],
                               rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out["cond_sd"], want["cond_sd"], rtol=1e-4)
    assert out["estimate"].is_monotonic_decreasing
    assert list(out["rank"]) == [1, 2, 3, 4]
    z = 1.959963984540054
    np.testing.assert_allclose(out["conf_high"] - out["estimate"], z * out["std_error"])
    assert out.attrs["kind"] == "random"


def test_interaction_effects_match_r(fit, ref):
    out = fit.interaction_effects("model", "dataset")
    assert len(out) == 4 * 13
    assert list(out.columns[:2]) == ["model", "dataset"]
    want = pd.DataFrame(ref["interaction"]).set_index("level")
    labels = out["model"] + ":" + out["dataset"]
    np.testing.assert_allclose(out["estimate"], want.loc[labels, "estimate"], atol=2e-4)
    np.testing.assert_allclose(out["cond_sd"], want.loc[labels, "cond_sd"], rtol=1e-4)
    main = fit.ranef().query("group == 'model'").set_index("level")["estimate"]
    np.testing.assert_allclose(out["main_effect"], main.loc[out["model"]].to_numpy())
    np.testing.assert_allclose(out["combined"], out["main_effect"] + out["estimate"])
    # same cells whichever order the factors are named in
    swapped = fit.interaction_effects("dataset", "model")
    assert set(swapped["dataset"]) == set(out["dataset"])
    assert (swapped["main_effect"] != 0).any()


def test_fixed_factor_and_errors(fit):
    lr = fit.adjusted_means("lr")
    assert lr.attrs["kind"] == "fixed" and len(lr) == 5
    assert lr["conditional_mode"].isna().all()
    with pytest.raises(ValueError, match="neither a grouping factor"):
        fit.adjusted_means("nope")
    with pytest.raises(ValueError, match="no \\(1 \\| model:lr\\) term"):
        fit.interaction_effects("model", "lr")


def test_interaction_effects_with_colons_in_level_names():
    """Model names such as 'llama3:8b' (Ollama's) contain ':'; the cells must not be cut at
    the first ':' of the joined label 'llama3:8b:mmlu' (issue 14 §2 item 5)."""
    rng = np.random.default_rng(2)
    models = ["llama3:8b", "qwen2:7b", "phi3", "gemma:2b"]
    rows = [(m, d, 50 + i + rng.normal()) for i, m in enumerate(models)
            for d in ("mmlu", "gsm8k:cot", "arc") for _ in range(3)]
    data = pd.DataFrame(rows, columns=["model", "dataset", "score"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("score ~ 1 + (1 | model) + (1 | dataset) + (1 | model:dataset)", data)
    tab = fit.interaction_effects("model", "dataset")
    assert set(zip(tab["model"], tab["dataset"], strict=True)) == set(
        zip(data["model"], data["dataset"], strict=True))


@pytest.fixture(scope="module")
def rank_deficient(exist_missing_cell_fit):
    """exist_multi without the cell es:t3:soft (lme4 drops languagees:taskt3:modesoft)."""
    return exist_missing_cell_fit


def test_population_mean_not_estimable_raises(rank_deficient):
    # emmeans(m, ~ 1) is nonEst on this fit (R 4.2, emmeans 1.8.4.1)
    from crossed.evaluation.adjusted import grand_mean

    assert np.isnan(grand_mean(rank_deficient)).all()
    with pytest.raises(ValueError, match="not estimable.*languagees:taskt3:modesoft"):
        rank_deficient.adjusted_means("architecture")


def test_fixed_group_nonest_levels_are_nan_and_unranked(rank_deficient):
    # emmeans(m, "task"), lmer.df = "satterthwaite": t1 0.307323961417, t2 0.128882979631,
    # t3 nonEst
    out = rank_deficient.adjusted_means("task")
    assert out["level"].tolist() == ["t1", "t2", "t3"]
    np.testing.assert_allclose(out["estimate"][:2], [0.307323961417, 0.128882979631],
                               rtol=1e-7)
    assert np.isnan(out["estimate"].iloc[2]) and np.isnan(out["rank"].iloc[2])
    assert out["rank"].tolist()[:2] == [1, 2]


@pytest.mark.parametrize("level", [2, -1, 0, 1])
def test_interval_level_outside_0_1_is_refused_by_name(level):
    # adjusted_means(level=2) and interaction_effects(level=-1) gave NaN or zero-width
    # intervals without a word
    rng = np.random.default_rng(1)
    d = pd.DataFrame({"g": rng.integers(0, 6, 90), "h": rng.choice(list("pqr"), 90)})
    d["y"] = rng.normal(size=90) + d.g * 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ 1 + (1 | g) + (1 | h) + (1 | g:h)", d)
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        fit.adjusted_means("g", level=level)
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        fit.interaction_effects("g", "h", level=level)


def test_a_numeric_variable_has_no_adjusted_means():
    # before: a one-row table (the EMM at the covariate's mean) ranked as if a system
    rng = np.random.default_rng(3)
    d = pd.DataFrame({"x": rng.normal(size=60), "g": np.repeat(list("abcdef"), 10),
                      "y": rng.normal(size=60)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("y ~ x + (1 | g)", d)
    with pytest.raises(ValueError, match="'x' is a numeric variable of the model"):
        fit.adjusted_means("x")
    assert len(fit.adjusted_means("g")) == 6
