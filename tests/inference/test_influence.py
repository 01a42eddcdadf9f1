"""Leverage, Cook's distance, case-deletion influence and scaled residuals against lme4
1.1-31 (r_ci.R: ``hatvalues``, ``cooks.distance``, ``influence(fit, groups)``,
``residuals(fit, scaled = TRUE)``, ``residuals(fit, type = "pearson")``).

Tolerances: hat values 1e-7 absolute, Cook's distances 1e-5 relative, residuals 1e-6
absolute (closed forms at the native optimum). Case deletion: refitted fixed effects 1e-5
relative, variance components 1e-3 relative, covariances 1e-4 of √(v₁v₂) (lme4 refits
each deletion with ``maxfun = 1000`` from the full fit's θ, and stops ~5e-5 from the
optimum), Cook's distances and dfbetas 1e-3 relative.
"""

import warnings

import numpy as np
import pytest

import crossed as cx
from crossed.design.frame import DataError
from crossed.inference.influence import InfluenceWarning
from r_ci_cases import answers, arr, fit


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_hatvalues_and_cooks_distance(name):
    ref = answers()[name]
    f = fit(name)
    np.testing.assert_allclose(f.hatvalues(), arr(ref["hatvalues"]), atol=1e-7)
    np.testing.assert_allclose(f.cooks_distance(), arr(ref["cooks"]), rtol=1e-5)


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_scaled_and_pearson_residuals(name):
    ref = answers()[name]
    f = fit(name)
    np.testing.assert_allclose(f.residuals(scaled=True), arr(ref["resid_scaled"]), atol=1e-6)
    np.testing.assert_allclose(f.residuals(type="pearson"), arr(ref["resid_pearson"]),
                               atol=1e-6)
    np.testing.assert_allclose(f.residuals(), f.design.y - f.fitted())


def test_hat_matrix_trace_is_between_p_and_p_plus_q():
    f = fit("sleepstudy")
    h = f.hatvalues()
    assert np.all((h > 0) & (h < 1))
    assert 2 < h.sum() < 2 + 36


@pytest.mark.parametrize("name", ["sleepstudy", "penicillin"])
def test_group_deletion_matches_lme4(name):
    ref = answers()[name]
    f = fit(name)
    infl = f.influence(groups=ref["influence_group"])
    assert [str(v) for v in infl["deleted"]] == ref["influence_deleted"]
    fe = list(f.fixef_names)
    fixef = np.array([[float(v) for v in row] for row in ref["influence_fixef"]])
    np.testing.assert_allclose(infl[fe].to_numpy(), fixef, rtol=1e-5)
    np.testing.assert_allclose(infl["cooks_distance"], arr(ref["influence_cooks"]), rtol=1e-3)
    vc = ref["influence_varcov"]
    for col in [c for c in vc[0] if not c.startswith("_")]:
        if col.split(":")[-1].startswith("C["):  # a covariance near 0: absolute, on the
            continue  # scale of its variances (below)
        np.testing.assert_allclose(infl[col], [r[col] for r in vc], rtol=1e-3)
    if "C[Days,(Intercept)]" in vc[0]:
        scale = np.sqrt(infl["v[(Intercept)]"] * infl["v[Days]"])
        diff = infl["C[Days,(Intercept)]"] - [r["C[Days,(Intercept)]"] for r in vc]
        assert np.all(np.abs(diff) < 1e-4 * scale)
    if ref.get("influence_dfbetas"):  # R's dfbetas fails with a single fixed effect
        for col in fe:
            np.testing.assert_allclose(infl[f"dfbetas_{col}"],
                                       [r[col] for r in ref["influence_dfbetas"]], rtol=1e-3)
    assert infl["converged"].all()
    assert infl["n_deleted"].sum() == f.nobs


def test_unknown_group_column_is_refused():
    with pytest.raises(DataError, match="no column 'nope'"):
        fit("penicillin").influence(groups="nope")


def test_bad_residual_type_is_refused():
    with pytest.raises(ValueError, match="type must be"):
        fit("penicillin").residuals(type="deviance")


def test_observation_deletion_matches_lme4():
    ref = answers()["penicillin"]
    infl = fit("penicillin").influence()
    assert list(infl["deleted"]) == list(range(fit("penicillin").nobs))
    np.testing.assert_allclose(infl["(Intercept)"], arr(ref["influence_obs_fixef"]), rtol=1e-6)
    np.testing.assert_allclose(infl["cooks_distance"], arr(ref["influence_obs_cooks"]),
                               rtol=1e-3)


def test_fewer_groups_than_fixed_effects_warns_that_cooks_distances_are_negative():
    # lme4 1.1-31 gives these negative numbers without a word:
    #   d <- subset(sleepstudy, Subject %in% c("308", "309", "310", "330"))
    #   d$phase <- factor(pmin(d$Days, 5))
    #   fm <- lmer(Reaction ~ phase + (1 | Subject), d)
    #   formatC(cooks.distance(influence(fm, groups = "Subject")), digits = 10)
    #   "-0.4591853726" "-0.1033393754" "-0.05731995428" "-0.1035957638"
    d = cx.load_dataset("sleepstudy")
    d = d[d["Subject"].astype(str).isin(["308", "309", "310", "330"])].copy()
    d["phase"] = np.minimum(d["Days"], 5).astype(str)
    f = cx.lmer("Reaction ~ phase + (1 | Subject)", d)
    with pytest.warns(InfluenceWarning, match=r"negative .*'Subject'.*308, 309, 310, 330"
                      r".*m = 4 ≤ p = 6") as caught:
        infl = f.influence(groups="Subject")
    assert len([w for w in caught if w.category is InfluenceWarning]) == 1
    np.testing.assert_allclose(infl["cooks_distance"],
                               [-0.4591853726, -0.1033393754, -0.05731995428, -0.1035957638],
                               rtol=1e-3)
    note = infl.attrs["messages"][0]
    assert "(m − p)/(m·p) = -0.0833" in note and "dfbetas" in note


def test_enough_groups_give_no_influence_note():
    with warnings.catch_warnings():
        warnings.simplefilter("error", InfluenceWarning)
        infl = fit("sleepstudy").influence(groups="Subject")  # 18 subjects, 2 effects
    assert infl.attrs["messages"] == []
    assert (infl["cooks_distance"] > 0).all()
