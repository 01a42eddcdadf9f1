"""Kenward–Roger adjusted SEs and df against lmerTest/pbkrtest (summary(ddf = "Kenward-Roger")).

Tolerances: SE 1e-5 and df 1e-4 relative.
"""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from inference_fits import cases_with, fitted, rel_err

import crossed
from crossed.inference.kenward_roger import KRModel, lb_ddf
from reference import as_list, r_answers

CASES = cases_with("coef_kenward_roger")


@pytest.mark.parametrize("name", CASES)
def test_kr_coef_table(name):
    ref = as_list(r_answers(name)["coef_kenward_roger"])
    tab = fitted(name).coef_table(ddf="kenward-roger")
    assert list(tab["term"]) == [r["term"] for r in ref]
    assert rel_err(tab["std_error"], [r["Std. Error"] for r in ref]) < 1e-5
    assert rel_err(tab["df"], [r["df"] for r in ref]) < 1e-4
    assert rel_err(tab["p_value"], [r["Pr(>|t|)"] for r in ref], floor=1e-12) < 1e-4


def test_adjusted_vcov_is_symmetric_and_larger():
    fit = fitted("ham_crossed")
    kr = KRModel.from_fit(fit)
    assert np.allclose(kr.vcov_adj, kr.vcov_adj.T)
    assert np.all(np.diag(kr.vcov_adj) >= np.diag(kr.vcov) * (1 - 1e-12))
    assert KRModel.from_fit(fit) is kr  # cached on the fit


def test_lb_ddf_balanced_split_plot():
    """Within-plot effects of the balanced split plot have df = 222 exactly (pbkrtest)."""
    fit = fitted("cake_split_plot")
    assert lb_ddf(fit, np.eye(6)[3]) == pytest.approx(222.0, rel=1e-8)


# R (lmerTest 3.1-3, pbkrtest 0.5.2), on x − 2000 (the same model):
#   d <- read.csv("tests/data/yearx_slope_df.csv.gz"); d$xc <- d$x - 2000
#   m <- lmer(y ~ xc + (xc | g), d)
#   coef(summary(m, ddf = "Kenward-Roger"))["xc", ]     # SE 0.0421775907469, df 53.4410819230
#   contest(m, c(1, -2000), joint = FALSE, ddf = "Kenward-Roger")   # the intercept at x = 0:
#                                                        # SE 84.3531474651, df 53.4407418666
YEAR_SLOPE_KR = {"x": (0.0421775907469, 53.4410819230),
                 "(Intercept)": (84.3531474651, 53.4407418666)}


def test_a_random_slope_on_a_year_gives_the_centred_models_kenward_roger():
    """``(x | g)`` with x ≈ 2000 (SD 1): the variance components of the formula's columns
    span 1e4 σ² to 1e-9 σ², and the inverse of their information matrix lost every digit:
    df 3448 and an SE of x 3 % too small, silently. Computed on the optimiser's centred
    columns, they are those of the same model on x − 2000."""
    data = Path(__file__).resolve().parents[1] / "data" / "yearx_slope_df.csv.gz"
    d = pd.read_csv(data, dtype={"g": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x + (x | g)", d)
    tab = fit.coef_table(ddf="kenward-roger").set_index("term")
    for term, (se, df) in YEAR_SLOPE_KR.items():
        assert tab.loc[term, "std_error"] == pytest.approx(se, rel=1e-5)
        assert tab.loc[term, "df"] == pytest.approx(df, rel=1e-4)
