"""Kenward–Roger adjusted SEs and df against lmerTest/pbkrtest (summary(ddf = "Kenward-Roger")).

Tolerances: SE 1e-5 and df 1e-4 relative.
"""

import numpy as np
import pytest
from inference_fits import cases_with, fitted, rel_err

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
