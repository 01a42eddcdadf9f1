"""contrasts= and ordered factors (R's contr.poly) against R.

Reference: tests/data/reference/r_features/emmeans_features.R (section ``contrasts``):
``lmer(angle ~ recipe * temperature + (1 | recipe:replicate), cake, contrasts = ...)`` with
lme4 1.1-31 / lmerTest 3.1-3 / emmeans 1.8.4-1 / effectsize; ``temperature`` is an ordered
factor as in lme4::cake. Tolerances: fixed effects 1e-5 relative to the largest (both
optimisers stop near the optimum), their SEs 1e-4 relative, REML criterion 1e-7 relative,
F values 1e-5 relative, denominator df 1e-3 relative, partial η² 1e-5 absolute, EMMs 1e-5
absolute (SE 1e-4 relative), predictions on new rows 1e-5.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design.contrasts import contrast_matrix, poly_matrix
from crossed.design.formulaic_contrasts import rewrite_formula
from crossed.inference.effect_sizes import eta_squared
from crossed.inference.emmeans import emmeans

DATA = Path(__file__).resolve().parents[1] / "data"
REF = json.loads((DATA / "reference" / "r_features" / "emmeans_features.json").read_text())
FORMULA = "angle ~ recipe * temperature + (1 | recipe:replicate)"
CASES = {  # name -> (temperature ordered?, contrasts)
    "poly_default": (True, None),
    "sum_poly": (True, {"recipe": "sum"}),
    "helmert_treatment": (True, {"recipe": "helmert", "temperature": "treatment"}),
    "treatment": (False, None),
    "sum_sum": (False, {"recipe": "contr.sum", "temperature": "contr.sum"}),
    "poly_unordered": (False, {"temperature": "poly"}),
}


def cake(ordered: bool = True) -> pd.DataFrame:
    d = pd.read_csv(DATA / "cake.csv", dtype={"replicate": str, "recipe": str,
                                               "temperature": str})
    levels = sorted(d["temperature"].unique(), key=float)
    d["temperature"] = pd.Categorical(d["temperature"], categories=levels, ordered=ordered)
    return d


@pytest.fixture(scope="module")
def fits():
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (ordered, contrasts) in CASES.items():
            out[name] = crossed.lmer(FORMULA, cake(ordered), contrasts=contrasts)
    return out


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


@pytest.mark.parametrize("name", list(CASES))
def test_coefficients_and_names_match_r(fits, name):
    fit, r = fits[name], REF["contrasts"][name]
    assert list(fit.fixef.index) == r["fixef_names"]
    scale = np.max(np.abs(r["fixef"]))
    assert np.max(np.abs(fit.fixef.to_numpy() - r["fixef"])) < 1e-5 * scale
    assert _rel(np.sqrt(np.diag(fit.vcov.to_numpy())), r["se"]) < 1e-4
    assert fit.deviance == pytest.approx(r["reml_crit"], rel=1e-7)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("type_", [1, 2, 3])
def test_anova_matches_lmertest_under_each_coding(fits, name, type_):
    """Type III under sum/Helmert/poly coding: lmerTest maps the treatment hypotheses."""
    tab = fits[name].anova(type=type_)
    r = REF["contrasts"][name][f"anova{type_}"]
    assert list(tab["term"]) == [x["term"] for x in r]
    assert _rel(tab["statistic"], [x["statistic"] for x in r]) < 1e-5
    assert _rel(tab["den_df"], [x["den_df"] for x in r]) < 1e-3
    assert list(tab["num_df"]) == [x["num_df"] for x in r]


@pytest.mark.parametrize("name", ["sum_poly", "poly_default", "treatment"])
def test_type3_kenward_roger(fits, name):
    tab = fits[name].anova(type=3, ddf="kenward-roger")
    r = REF["contrasts"][name]["anova3_kr"]
    assert _rel(tab["statistic"], [x["statistic"] for x in r]) < 1e-5
    assert _rel(tab["den_df"], [x["den_df"] for x in r]) < 1e-3


@pytest.mark.parametrize("name", list(CASES))
def test_partial_eta_squared(fits, name):
    tab = eta_squared(fits[name])
    r = REF["contrasts"][name]["eta2"]
    assert np.max(np.abs(tab["estimate"].to_numpy() - [x["eta2"] for x in r])) < 1e-5
    # effectsize's defaults (eta_squared(a3, partial = TRUE, ci = 0.95), no alternative:
    # "greater"): the one-sided interval [low, 1], the same default here
    assert np.max(np.abs(tab["conf_low"].to_numpy() - [x["ci_low"] for x in r])) < 1e-4
    np.testing.assert_array_equal([x["ci_high"] for x in r], 1.0)
    np.testing.assert_array_equal(tab["conf_high"], 1.0)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("spec", ["temperature", "recipe"])
def test_emmeans_do_not_depend_on_coding(fits, name, spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = emmeans(fits[name], spec).table()
    r = REF["contrasts"][name][f"emm_{spec}"]
    assert [str(v) for v in tab[spec]] == [x[spec] for x in r]
    assert np.max(np.abs(tab["estimate"] - [x["emmean"] for x in r])) < 1e-5
    assert _rel(tab["std_error"], [x["SE"] for x in r]) < 1e-4
    assert _rel(tab["df"], [x["df"] for x in r]) < 1e-3


@pytest.mark.parametrize("name", list(CASES))
def test_new_data_rebuilds_the_same_columns(fits, name):
    fit = fits[name]
    new = cake(CASES[name][0]).iloc[[0, 49, 199]]
    pred = fit.predict(new, include_random=False)
    assert np.max(np.abs(pred - REF["contrasts"][name]["newdata_pred"])) < 1e-5
    # the design's encoder gives the fitted rows of X back
    rows = fit.design.encode(new, include_random=False)
    assert np.allclose(rows.X, fit.design.X[[0, 49, 199]])


def test_r_contrast_matrices():
    # R: contr.poly(4), contr.helmert(4), contr.sum(3)
    assert np.allclose(poly_matrix(4), [[-0.670820393249937, 0.5, -0.223606797749979],
                                        [-0.223606797749979, -0.5, 0.670820393249937],
                                        [0.223606797749979, -0.5, -0.670820393249937],
                                        [0.670820393249937, 0.5, 0.223606797749979]])
    m, names = contrast_matrix("helmert", ["a", "b", "c", "d"])
    assert m.tolist() == [[-1, -1, -1], [1, -1, -1], [0, 2, -1], [0, 0, 3]]
    assert names == ["1", "2", "3"]
    m, names = contrast_matrix("sum", ["a", "b", "c"])
    assert m.tolist() == [[1, 0], [0, 1], [-1, -1]]
    assert contrast_matrix("poly", list("abcdef"))[1] == [".L", ".Q", ".C", "^4", "^5"]


def test_rewrite_only_bare_top_level_uses():
    text, ctx, found = rewrite_formula("a * b + C(a) + a:x + `my a`", {"a": "sum"})
    assert text == "C(a, cx_contr_0) * b + C(a) + C(a, cx_contr_0):x + `my a`"
    assert found == {"a"} and set(ctx) == {"cx_contr_0"}


def test_matrix_contrasts_and_no_intercept():
    d = cake(False)
    m = [[1, 0], [0, 1], [-1, -1]]  # contr.sum(3) as a matrix: columns recipe1, recipe2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("angle ~ recipe + temp + (1 | recipe:replicate)", d,
                           contrasts={"recipe": m})
        ref = crossed.lmer("angle ~ recipe + temp + (1 | recipe:replicate)", d,
                           contrasts={"recipe": "sum"})
        full = crossed.lmer("angle ~ 0 + recipe + temp + (1 | recipe:replicate)", d,
                            contrasts={"recipe": "sum"})
    assert list(fit.fixef.index) == ["(Intercept)", "recipe1", "recipe2", "temp"]
    assert np.allclose(fit.fixef, ref.fixef, atol=1e-8)
    # R: indicator coding for a factor without an intercept, whatever its contrasts
    assert list(full.fixef.index) == ["recipeA", "recipeB", "recipeC", "temp"]


def test_contrasts_refusals():
    d = cake(False)
    with pytest.raises(ValueError, match="unknown coding"):
        crossed.lmer(FORMULA, d, contrasts={"recipe": "deviation"})
    with pytest.raises(crossed.DataError, match="not a factor"):
        crossed.lmer(FORMULA, d, contrasts={"angle": "sum"})
    with pytest.raises(ValueError, match="rows for 3 levels"):
        crossed.lmer(FORMULA, d, contrasts={"recipe": [[1], [-1]]})
    with pytest.raises(TypeError, match="dict"):
        crossed.lmer(FORMULA, d, contrasts=["recipe"])


def test_ordered_factor_in_a_random_term_gets_contr_poly():
    """lme4 codes the random-effects matrices with R's default contrasts too: an ordered
    factor gets ``x.L`` (emmeans_features.R, ``random_ordered``; θ 1e-3 relative,
    REML criterion 1e-7 relative)."""
    r = REF["random_ordered"]
    ss = pd.read_csv(DATA / "sleepstudy.csv", dtype={"Subject": str})
    half = np.where(ss["Days"] < 5, "early", "late")
    ss["x"] = pd.Categorical(half, categories=["early", "late"], ordered=True)
    fit = crossed.lmer(r["formula"], ss)
    assert list(fit.fixef.index) == r["fixef_names"]
    assert fit.design.random.blocks[0].column_names == tuple(r["ranef_names"])
    assert fit.deviance == pytest.approx(r["reml_crit"], rel=1e-7)
    assert _rel(fit.theta, r["theta"]) < 1e-3
    assert np.max(np.abs(fit.fixef.to_numpy() - r["fixef"])) < 1e-4
