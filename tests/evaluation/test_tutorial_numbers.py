"""The numbers pasted in docs/tutorial-*.md are what the code produces (fast steps only)."""

import warnings

import pytest

import crossed as cx


@pytest.fixture(scope="module")
def headroom_fit():
    raw = cx.load_dataset("exist_raw")
    df = cx.headroom(raw.drop(columns="delta"), score="icm", gold="gold_icm",
                     baseline="baseline_icm")
    spec = cx.specs.repeated_measures("delta", within=["language", "task", "mode"],
                                      subjects="architecture")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return df, spec.fit(df)


def test_repeated_measures_tutorial(headroom_fit):
    df, fit = headroom_fit
    means = df.groupby("language")["delta"].mean()
    assert means["en"] == pytest.approx(0.2071, abs=5e-5)
    assert means["es"] == pytest.approx(0.1811, abs=5e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pair = fit.emmeans("language").pairs().iloc[0]
    assert pair["estimate"] == pytest.approx(0.0259, abs=5e-5)
    assert pair["std_error"] == pytest.approx(0.0124, abs=5e-5)
    assert pair["p_value"] == pytest.approx(0.0486, abs=5e-5)
    eta = fit.eta_squared(alternative="two-sided").set_index("term").loc["language"]
    assert eta["estimate"] == pytest.approx(0.1653, abs=5e-5)
    assert eta["conf_high"] == pytest.approx(0.4355, abs=5e-5)
    # effectsize's default: one-sided, [low, 1]
    assert fit.eta_squared().set_index("term").loc["language", "conf_high"] == 1.0
    r2 = fit.r2().iloc[0]
    assert r2["marginal"] == pytest.approx(0.7745, abs=5e-5)


def test_cross_classified_tutorial():
    d = cx.load_dataset("model_recycling_seeds")
    spec = cx.specs.cross_classified("score", nuisance=["seed"], slopes="none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = spec.fit(d)
    assert fit.deviance == pytest.approx(29662.6822, abs=1e-3)
    vc = fit.variance_components(test=False).set_index("group")
    # shares to the tutorial's 4 digits, within 1e-4: where lme4's stopping rule leaves theta
    # moves the model share by 5e-6 between BLAS kernels (0.045446 / 0.045451), across the
    # rounding boundary of the printed 0.0454
    assert vc.loc["dataset", "share"] == pytest.approx(0.7339, abs=1e-4)
    assert vc.loc["model", "share"] == pytest.approx(0.0454, abs=1e-4)
    am = fit.adjusted_means("model")
    assert am["level"].iloc[0] == "deberta-v3-base"
    assert am["estimate"].iloc[0] == pytest.approx(78.8961, abs=5e-4)
    an = fit.anova().iloc[0]
    assert an["statistic"] == pytest.approx(1.1569, abs=5e-4)
