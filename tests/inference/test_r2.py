"""Nakagawa R² against performance 0.10.2 (r2_nakagawa). Tolerance (issue 3): 1e-4."""

import numpy as np
import pytest
from inference_fits import fitted

from reference import case_names, r_answers

CASES = [n for n in case_names() if isinstance(r_answers(n).get("r2"), dict)]


@pytest.mark.parametrize("name", CASES)
def test_r2_nakagawa(name):
    ref = r_answers(name)["r2"]
    r2 = fitted(name).r2()
    assert list(r2.columns[:2]) == ["marginal", "conditional"]
    assert r2["marginal"][0] == pytest.approx(ref["marginal"], rel=1e-4, abs=1e-12)
    assert r2["conditional"][0] == pytest.approx(ref["conditional"], rel=1e-4)


def test_r2_parts_add_up():
    r2 = fitted("sleepstudy_slopes").r2()
    total = r2["var_fixed"] + r2["var_random"] + r2["var_residual"]
    assert np.allclose(r2["marginal"], r2["var_fixed"] / total)
