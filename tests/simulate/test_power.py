"""Power analysis: specify, extend, power_sim, power_curve."""

import numpy as np
import pandas as pd
import pytest
from _simdata import small_design

import crossed as cx
from crossed import simulate as cs

BLURB = ("score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) "
         "+ (1 | model:dataset)")
REF = {"batch_size": "32", "lr": "5e-5", "seed": "59"}


def test_specify_sets_lme4_parameters():
    data = small_design().assign(z=np.tile([0.0, 1.0], 20))
    cov = np.array([[1.0, 0.3], [0.3, 0.5]])
    model = cx.specify("y ~ x + (1 + z | g)", data, fixef={"(Intercept)": 2.0, "x": 0.5},
                       varcorr={"g": cov}, sigma=2.0)
    vc = model.varcorr()
    np.testing.assert_allclose(vc["variance_or_cov"].to_numpy(), [1.0, 0.5, 0.3, 4.0])
    np.testing.assert_allclose(model.fixef.to_numpy(), [2.0, 0.5])
    with pytest.raises(ValueError, match="missing"):
        cx.specify("y ~ x + (1 | g)", data, fixef={"x": 1.0}, varcorr={"g": 1.0}, sigma=1.0)
    with pytest.raises(ValueError, match="no variance"):
        cx.specify("y ~ x + (1 | g)", data, fixef={"(Intercept)": 0, "x": 1.0}, varcorr={},
                   sigma=1.0)


def test_type_one_error_near_alpha():
    null = cx.specify("y ~ x + (1 | g)", small_design(12, 5),
                      fixef={"(Intercept)": 1.0, "x": 0.0}, varcorr={"g": 0.8}, sigma=1.0)
    res = cx.power_sim(null, cs.fixed("x"), nsim=300, seed=1)
    s = res.summary().iloc[0]
    assert s["nsim"] == 300 and s["n_failed"] == 0
    assert s["conf_low"] <= 0.05 <= s["conf_high"]
    lrt = cx.power_sim(null, cs.lrt("x"), nsim=200, seed=1).summary().iloc[0]
    assert lrt["conf_low"] <= 0.05 <= lrt["conf_high"] + 0.02


def test_power_matches_the_t_distribution():
    # within-group covariate, balanced: t = b/se is close to noncentral t with n - 2 - (g - 1)
    design = small_design(12, 5)
    model = cx.specify("y ~ x + (1 | g)", design, fixef={"(Intercept)": 0.0, "x": 0.6},
                       varcorr={"g": 1.0}, sigma=1.0)
    res = cx.power_sim(model, "x", nsim=300, seed=2).summary().iloc[0]
    from scipy import stats

    sxx = float(np.sum((design["x"] - design.groupby("g")["x"].transform("mean")) ** 2))
    df = len(design) - 12 - 1
    nc = 0.6 / np.sqrt(1.0 / sxx)
    crit = stats.t.ppf(0.975, df)
    expected = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
    assert res["conf_low"] - 0.03 <= expected <= res["conf_high"] + 0.03
    assert str(cx.power_sim(model, "x", nsim=5, seed=2)).startswith("Power for x")


def test_extend_and_power_curve():
    data = cx.load_dataset("blurb_like")
    fit = cx.lmer(BLURB, data, reference=REF)
    ext = cx.extend(fit, along="dataset", n=20)
    assert ext.ngroups["dataset"] == 20 and ext.ngroups["model:dataset"] == 80
    np.testing.assert_array_equal(ext.beta, fit.beta)
    np.testing.assert_array_equal(ext.theta, fit.theta)
    curve = cx.power_curve(ext, cs.fixed("seed20"), along="dataset", breaks=[4, 20],
                           nsim=20, seed=3)
    tab = curve.table
    assert list(tab["break"]) == [4, 20]
    assert tab["nobs"].iloc[0] < tab["nobs"].iloc[1] == ext.nobs
    assert tab["power"].iloc[0] <= tab["power"].iloc[1]
    assert set(curve.replicates["break"]) == {4, 20}
    with pytest.raises(ValueError, match="new_fixef"):
        cx.extend(fit, along="seed", n=5)
    seeds = cx.extend(fit, along="seed", n=5, new_fixef={"seed59.2": 0.0, "seed20.2": 0.3})
    assert seeds.fixef["seed20.2"] == 0.3 and seeds.fixef["seed47"] == fit.fixef["seed47"]
    assert seeds.nobs == fit.nobs + fit.design.frame["seed"].isin(["59", "20"]).sum()
    within = cx.extend(fit, within=["model", "dataset"], n=80)
    assert within.nobs == 4 * 13 * 80


def test_power_curve_within_rows():
    model = cx.specify("y ~ x + (1 | g)", small_design(8, 6),
                       fixef={"(Intercept)": 0.0, "x": 0.8}, varcorr={"g": 1.0}, sigma=1.0)
    curve = cx.power_curve(model, "x", along="x", within="g", breaks=[2, 4, 6], nsim=40,
                           seed=5)
    assert list(curve.table["nobs"]) == [16, 32, 48]
    p = curve.table["power"].to_numpy()
    assert p[0] < p[-1]
    assert "rows per g" in str(curve)


def test_failed_fits_are_counted_separately(truth):
    def flaky(fit):
        if fit.beta[1] > 0.5:
            raise ValueError("refused")
        return 0.01

    res = cx.power_sim(truth, flaky, nsim=40, seed=1)
    s = res.summary().iloc[0]
    assert s["n_failed"] > 0 and s["n_ok"] + s["n_failed"] == 40
    assert s["power"] == 1.0
    assert isinstance(res.replicates, pd.DataFrame)
    assert (res.replicates.loc[res.replicates["status"] == "failed", "message"]
            .str.contains("refused").all())


@pytest.mark.parametrize("breaks, err, match", [
    ([4, 100], ValueError, r"break 100 is outside 1\.\.10: the data have 10 levels of 'g'"),
    ([0, 4], ValueError, r"break 0 is outside"),
    ([2.5], TypeError, "breaks must be whole numbers"),
    ("4", TypeError, "breaks must be a list"),
])
def test_power_curve_breaks_beyond_the_data_are_refused(truth, breaks, err, match):
    # before: a break of 100 levels was run on the 10 there are, labelled 100
    with pytest.raises(err, match=match):
        cx.power_curve(truth, "x", along="g", breaks=breaks, nsim=2, seed=1)
