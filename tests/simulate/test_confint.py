"""``fit.confint()`` Wald and bootstrap intervals against lme4 1.1-31's ``confint(fit,
method = "Wald" | "boot")`` (tests/data/reference/r_ci/r_ci.R; the profile method is tested in
tests/inference/test_profile.py).

Tolerances: Wald 1e-6 relative (closed form). Bootstrap: R's random numbers differ, so the
percentile limits (500 replicates each side) agree only up to Monte Carlo error: within 15%
of the width of R's interval.
"""

import numpy as np
import pandas as pd
import pytest

from r_ci_cases import answers, fit, interval_table


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_wald_matches_lme4(name):
    ref = interval_table(answers()[name]["confint_wald"])
    got = fit(name).confint(method="Wald").set_index("parameter")
    assert list(got.index) == list(ref.index)
    np.testing.assert_allclose(got["conf_low"], ref.iloc[:, 0], rtol=1e-6)  # NaN == NaN
    np.testing.assert_allclose(got["conf_high"], ref.iloc[:, 1], rtol=1e-6)
    assert got.attrs == {"method": "Wald", "conf_level": 0.95}


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_boot_percentile_within_monte_carlo_error_of_lme4(name):
    ref = interval_table(answers()[name]["confint_boot"])
    got = fit(name).confint(method="boot", nsim=500, seed=1).set_index("parameter")
    assert list(got.index) == list(ref.index)
    width = (ref.iloc[:, 1] - ref.iloc[:, 0]).to_numpy()
    assert np.all(np.abs(got["conf_low"].to_numpy() - ref.iloc[:, 0].to_numpy()) < 0.15 * width)
    assert np.all(np.abs(got["conf_high"].to_numpy() - ref.iloc[:, 1].to_numpy()) < 0.15 * width)


def test_boot_is_reproducible_with_a_seed():
    f = fit("penicillin")
    a = f.confint(method="boot", nsim=20, seed=7)
    b = f.confint(method="boot", nsim=20, seed=7)
    assert a.equals(b)


def test_bad_method_is_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        fit("penicillin").confint(method="wlad")


def test_the_method_name_is_not_case_sensitive():
    """``confint(method="wald")`` was refused (only "Wald"); lme4's names in any case."""
    import crossed as cx

    fit = cx.lmer("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"))
    a = fit.confint(method="wald")
    b = fit.confint(method="Wald")
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["method"] == "Wald"
    with pytest.raises(ValueError, match="method must be one of"):
        fit.confint(method="walds")
