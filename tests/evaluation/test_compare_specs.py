"""compare_specs on exist_multi reproduces the EMM contrasts of the three R reference fits."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.evaluation.compare_specs import nested_in, residual_checks
from reference import r_answers

CASES = ["exist_multi_full", "exist_multi_arch_fixed", "exist_multi_additive"]


@pytest.fixture(scope="module")
def comparison():
    df = cx.load_dataset("exist_multi")
    formulas = [r_answers(c)["formula"] for c in CASES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.compare_specs(df, formulas, focus="language", names=CASES)


@pytest.mark.parametrize("case", CASES)
def test_focus_contrast_matches_emmeans(comparison, case):
    ref = r_answers(case)["emmeans"][0]
    assert ref["spec"] == "language"
    pair = ref["pairs_satterthwaite"][0]
    row = comparison.table.set_index("spec").loc[case]
    assert row["contrast"] == pair["contrast"]
    assert row["estimate"] == pytest.approx(pair["estimate"], rel=1e-6)
    assert row["std_error"] == pytest.approx(pair["SE"], rel=1e-4)
    assert row["df"] == pytest.approx(pair["df"], rel=1e-4)
    assert row["statistic"] == pytest.approx(pair["t.ratio"], rel=1e-4)
    assert row["p_value"] == pytest.approx(pair["p.value"], rel=1e-3)
    emm = comparison.emmeans[case]
    want = pd.DataFrame(ref["emm_satterthwaite"])
    np.testing.assert_allclose(emm["estimate"], want["emmean"], rtol=1e-6)
    np.testing.assert_allclose(emm["std_error"], want["SE"], rtol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_r2_and_flags(comparison, case):
    ref = r_answers(case)
    row = comparison.table.set_index("spec").loc[case]
    assert row["r2_marginal"] == pytest.approx(ref["r2"]["marginal"], rel=1e-4)
    assert row["r2_conditional"] == pytest.approx(ref["r2"]["conditional"], rel=1e-4)
    assert bool(row["is_singular"]) == bool(ref["singular"])
    assert row["converged"]
    assert row["nobs"] == 36
    for col in ("resid_normality_p", "resid_spread_p", "sim_uniformity_p",
                "sim_dispersion_p", "sim_outliers_p"):
        assert 0.0 <= row[col] <= 1.0


def test_ml_information_criteria_and_lrt(comparison):
    """AIC/BIC are those of lme4's anova() (ML refits); the nested pair gets an LRT."""
    full = r_answers("exist_multi_full")["compare"]
    table = comparison.table.set_index("spec")
    for entry, name in zip(full, ["exist_multi_arch_fixed", "exist_multi_additive"],
                           strict=True):
        small, big = entry["table"]
        assert table.loc[name, "aic"] == pytest.approx(small["AIC"], rel=1e-5)
        assert table.loc[name, "bic"] == pytest.approx(small["BIC"], rel=1e-5)
        assert table.loc["exist_multi_full", "aic"] == pytest.approx(big["AIC"], rel=1e-5)
    lrt = comparison.lrt
    assert len(lrt) == 1  # additive is nested in full; arch_fixed is nested in neither
    row = lrt.iloc[0]
    assert (row["smaller"], row["larger"]) == ("exist_multi_additive", "exist_multi_full")
    ref = full[1]["table"][1]
    assert row["statistic"] == pytest.approx(ref["Chisq"], rel=1e-4)
    assert row["df"] == ref["Df"]
    assert row["p_value"] == pytest.approx(ref["Pr(>Chisq)"], rel=1e-3)
    assert "Likelihood-ratio" in comparison.summary()


def test_nesting_rules(comparison):
    f = comparison.fits
    assert nested_in(f["exist_multi_additive"], f["exist_multi_full"])
    assert not nested_in(f["exist_multi_full"], f["exist_multi_additive"])
    assert not nested_in(f["exist_multi_arch_fixed"], f["exist_multi_full"])


def test_residual_checks_and_errors():
    df = cx.load_dataset("exist_multi")
    fit = cx.lmer("delta ~ language + (1 | task)", df)
    checks = residual_checks(fit)
    assert set(checks) == {"resid_normality_p", "resid_spread_p", "resid_max_abs"}
    assert checks["resid_max_abs"] > 0
    with pytest.raises(ValueError, match="focus 'nope'"):
        cx.compare_specs(df, ["delta ~ language + (1 | task)"], focus="nope")
    with pytest.raises(ValueError, match="one label per formula"):
        cx.compare_specs(df, ["delta ~ language + (1 | task)"], focus="language",
                         names=["a", "b"])


def test_simulated_checks_are_seeded_and_optional():
    df = cx.load_dataset("exist_multi")
    f = ["delta ~ language + task + (1 | architecture)"]
    a = cx.compare_specs(df, f, focus="language", seed=3, nsim=100).table
    b = cx.compare_specs(df, f, focus="language", seed=3, nsim=100).table
    assert a["sim_uniformity_p"].iloc[0] == b["sim_uniformity_p"].iloc[0]
    off = cx.compare_specs(df, f, focus="language", check=False).table
    assert off[["sim_uniformity_p", "sim_dispersion_p", "sim_outliers_p"]].isna().all().all()


def test_nonest_focus_contrast_is_reported_not_estimated():
    # exist_multi without es:t3:soft: emmeans reports "en - es" as nonEst in the full model
    df = cx.load_dataset("exist_multi")
    df = df[~((df["language"] == "es") & (df["task"] == "t3") & (df["mode"] == "soft"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        comp = cx.compare_specs(df, ["delta ~ language * task * mode + (1 | architecture)",
                                     "delta ~ language + task + mode + (1 | architecture)"],
                                focus="language", names=["full", "additive"], check=False)
    tab = comp.table.set_index("spec")
    assert np.isnan(tab.loc["full", "estimate"]) and np.isnan(tab.loc["full", "p_value"])
    assert np.isfinite(tab.loc["additive", "p_value"])
    text = comp.summary()
    assert "full: nonEst" in text
    assert "tukey adjustment" in text


def test_glmm_specifications_are_refused_not_fitted_as_lmms():
    """An item-level (binomial) specification must not be fitted by lmer silently."""
    d = cx.datasets.item_level_irt(seed=1)
    spec = cx.specs.item_level("correct", systems="system", items="item", groups="dataset")
    with pytest.raises(ValueError, match="binomial GLMM: compare_specs compares linear"):
        cx.compare_specs(d, [spec, "correct ~ system + (1 | item)"], focus="system")


def test_a_focus_without_two_levels_is_refused_naming_it():
    # before: a "(nothing)" contrast row with a note about an empty cell of the design
    rng = np.random.default_rng(6)
    d = pd.DataFrame({"x": rng.normal(size=60), "g": np.repeat(list("abcdef"), 10),
                      "h": "only", "y": rng.normal(size=60)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="focus 'x' is a numeric variable in "
                                             "specification 'spec_1'.*--factor x"):
            cx.compare_specs(d, ["y ~ x + (1 | g)"], focus="x", check=False)
        with pytest.raises(ValueError, match="'h' has a single level"):  # (as R: the fit)
            cx.compare_specs(d, ["y ~ 0 + h + x + (1 | g)"], focus="h", check=False)


def test_formulas_and_fits_of_the_wrong_type_are_named():
    df = cx.load_dataset("exist_multi")
    with pytest.raises(ValueError, match="no formulas given"):
        cx.compare_specs(df, [], focus="language", check=False)  # before: an empty result
    with pytest.raises(TypeError, match=r"fits\[0\] must be an LmerFit"):
        cx.compare_specs(df, ["delta ~ language + (1 | task)"], focus="language",
                         fits=[3], check=False)  # before: AttributeError on int.design
    one = cx.compare_specs(df, "delta ~ language + (1 | task)", focus="language",
                           check=False)  # before: its characters were read as formulas
    assert list(one.fits) == ["spec_1"]
