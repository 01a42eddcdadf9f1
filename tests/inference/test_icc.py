"""``fit.icc()`` against performance's ``icc(fit)`` and ``icc(fit, by_group = TRUE)``
(r_ci.R). Tolerance 1e-5 relative."""

import pytest

from r_ci_cases import answers, fit


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_icc_matches_performance(name):
    ref = answers()[name]["icc"]
    got = fit(name).icc()
    assert got["adjusted"][0] == pytest.approx(ref["adjusted"], rel=1e-5)
    assert got["conditional"][0] == pytest.approx(ref["conditional"], rel=1e-5)


def test_icc_by_group_matches_performance():
    ref = answers()["penicillin"]["icc_by_group"]
    got = fit("penicillin").icc(by_group=True).set_index("group")["icc"]
    for row in ref:
        assert got[row["Group"]] == pytest.approx(row["ICC"], rel=1e-5)


def test_icc_by_group_refuses_random_slopes():
    with pytest.raises(ValueError, match="random intercepts only"):
        fit("sleepstudy").icc(by_group=True)
