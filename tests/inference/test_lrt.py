"""ranova (lmerTest 3.1-3), compare (lme4's anova with ML refits) and variance components.
Tolerance (issue 3): LRT statistics 1e-4 relative."""

import numpy as np
import pytest
from inference_fits import cases_with, fitted, rel_err

import crossed
from crossed.design.frame import DataError
from reference import as_list, load_case, r_answers

CASES = cases_with("ranova")


@pytest.mark.parametrize("name", CASES)
def test_ranova(name):
    ref = as_list(r_answers(name)["ranova"])
    tab = fitted(name).ranova()
    assert list(tab["term"]) == [r["term"] for r in ref]
    assert list(tab["npar"]) == [r["npar"] for r in ref]
    assert rel_err(tab["loglik"], [r["logLik"] for r in ref]) < 1e-6
    lrt = np.array([r.get("LRT", np.nan) for r in ref[1:]], dtype=float)
    # a variance estimated as zero gives LRT 0 up to optimiser noise (R: -2e-9, ours -1e-11)
    assert rel_err(tab["statistic"][1:], lrt, floor=1e-6) < 1e-4
    assert np.allclose(tab["df"][1:], [r["Df"] for r in ref[1:]])


def test_ranova_slope_only_term():
    """(0 + Days | Subject) is replaced by (1 | Subject): same npar, df 0 (lmerTest)."""
    import json

    from reference import EXTRA_DIR, load_table

    ref = json.loads((EXTRA_DIR / "inference.json").read_text())["sleepstudy_slope_only"]
    fit = crossed.lmer(ref["formula"], load_table("sleepstudy.csv", ("Subject",)))
    tab = fit.ranova()
    rr = as_list(ref["ranova"])
    assert list(tab["term"]) == [r["term"] for r in rr]
    assert list(tab["npar"]) == [r["npar"] for r in rr]
    assert tab["statistic"][1] == pytest.approx(rr[1]["LRT"], rel=1e-4)
    assert tab["df"][1] == 0 and np.isnan(tab["p_value"][1])


def test_compare_against_lme4():
    case = load_case("exist_multi_full")
    fit = fitted("exist_multi_full")
    for other in case.r["compare"]:
        m2 = crossed.lmer(other["formula"], case.data, reference=case.reference)
        assert m2.loglik == pytest.approx(other["reml_loglik"], rel=1e-6)
        tab = crossed.compare(fit, m2, names=["m", "m2"])
        ref = as_list(other["table"])
        assert list(tab["model"]) == [r["term"] for r in ref]  # sorted by npar
        assert list(tab["npar"]) == [r["npar"] for r in ref]
        assert rel_err(tab["loglik"], [r["logLik"] for r in ref]) < 1e-6
        assert rel_err(tab["aic"], [r["AIC"] for r in ref]) < 1e-6
        assert rel_err(tab["bic"], [r["BIC"] for r in ref]) < 1e-6
        assert rel_err(tab["statistic"][1:], [ref[1]["Chisq"]]) < 1e-4
        assert rel_err(tab["p_value"][1:], [ref[1]["Pr(>Chisq)"]]) < 1e-4
        assert tab.attrs["refit"]


def test_compare_rejects_different_rows():
    case = load_case("exist_multi_full")
    fit = fitted("exist_multi_full")
    other = crossed.lmer(case.formula, case.data.iloc[:-6], reference=case.reference)
    with pytest.raises(DataError, match="same rows"):
        crossed.compare(fit, other)


def test_variance_components():
    vc = fitted("ham_crossed").variance_components()
    assert list(vc.columns) == ["group", "term", "variance", "sd", "share", "share_random",
                                "statistic", "df", "p_value"]
    assert vc["share"].sum() == pytest.approx(1.0)
    assert vc["share_random"].sum() == pytest.approx(1.0)
    ref = {r["term"]: r for r in as_list(r_answers("ham_crossed")["ranova"])}
    row = vc[vc["group"] == "Product:Consumer"].iloc[0]
    assert row["statistic"] == pytest.approx(ref["(1 | Product:Consumer)"]["LRT"], rel=1e-4)
    assert np.isnan(vc[vc["group"] == "Residual"]["p_value"].iloc[0])
    slopes = fitted("sleepstudy_slopes").variance_components()
    days = slopes[slopes["term"] == "Days"].iloc[0]
    ref = as_list(r_answers("sleepstudy_slopes")["ranova"])[1]
    assert days["statistic"] == pytest.approx(ref["LRT"], rel=1e-4)
    assert np.isnan(slopes[slopes["term"] == "(Intercept)"]["p_value"].iloc[0])


def test_compare_refuses_a_string_of_names_and_a_non_boolean_refit():
    # before: names="ab" labelled the models 'a' and 'b'; refit="no" refitted (truthy)
    case = load_case("exist_multi_full")
    fit = fitted("exist_multi_full")
    m2 = crossed.lmer(case.r["compare"][0]["formula"], case.data, reference=case.reference)
    with pytest.raises(TypeError, match="names must be a list of labels"):
        crossed.compare(fit, m2, names="ab")
    with pytest.raises(TypeError, match="refit must be True or False, got 'no'"):
        crossed.compare(fit, m2, refit="no")


def test_ranova_removes_every_column_of_a_factor_slope(monkeypatch):
    """A factor in a random term is one model term of several columns (lmerTest's
    ranova drops them together), whether the design coded it itself or by formulaic:
    removing the 3-level D3 from (1 + Days + D3 | Subject) leaves (1 + Days | Subject),
    2 fixed effects + 3 θ + σ = 6 parameters, 13 - 6 = 7 df."""
    import warnings

    import pandas as pd

    import crossed.design.fixed as fixed_mod
    from reference import load_table

    data = load_table("sleepstudy.csv", ("Subject",))
    data["D3"] = pd.cut(data["Days"], [-1, 2, 5, 9], labels=["a", "b", "c"]).astype(str)
    formula = "Reaction ~ Days + (1 + Days + D3 | Subject)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = crossed.lmer(formula, data).ranova()
        with monkeypatch.context() as m:
            m.setattr(fixed_mod, "_coded_columns", lambda rhs, frame: None)
            general = crossed.lmer(formula, data).ranova()
    assert list(direct["term"]) == ["<none>", "Days in (1 + Days + D3 | Subject)",
                                    "D3 in (1 + Days + D3 | Subject)"]
    assert list(direct["npar"]) == [13, 9, 6] and list(direct["df"][1:]) == [4, 7]
    np.testing.assert_allclose(direct["statistic"][1:], general["statistic"][1:], rtol=1e-9)
    assert list(direct["npar"]) == list(general["npar"])
