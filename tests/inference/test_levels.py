"""``fit.coef()`` against lme4 1.1-31's ``coef(fit)`` (r_ci.R). Tolerance 1e-5 relative
(conditional modes at the native optimum; θ agrees with lme4's to ~1e-6)."""

import numpy as np
import pandas as pd
import pytest

from r_ci_cases import answers, fit


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_coef_matches_lme4(name):
    ref = answers()[name]["coef"]
    got = fit(name).coef()
    assert list(got) == list(ref)
    for group, rows in ref.items():
        tab = got[group]
        assert isinstance(tab.index, pd.RangeIndex) and tab.columns[0] == group
        assert list(tab[group]) == [r["level"] for r in rows]
        for col in tab.columns[1:]:
            np.testing.assert_allclose(tab[col], [r[col] for r in rows], rtol=1e-5)


def test_columns_without_random_effect_are_the_fixed_effect():
    tab = fit("penicillin").coef()["plate"]
    assert list(tab.columns) == ["plate", "(Intercept)"]
    assert tab["(Intercept)"].std() > 0
