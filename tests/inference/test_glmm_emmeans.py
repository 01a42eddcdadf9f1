"""``GlmerFit.emmeans`` options beyond the R reference cases (test_glmm_native.py):
``at=`` and ``cov_reduce=``, checked against the linear predictor computed by hand."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx


@functools.cache
def _fit() -> cx.GlmerFit:
    rng = np.random.default_rng(11)
    n = 400
    d = pd.DataFrame({"x": rng.normal(1.0, 1.0, n), "f": rng.choice(list("abc"), n),
                      "g": rng.choice([f"g{i}" for i in range(12)], n)})
    u = dict(zip(sorted(d["g"].unique()), rng.normal(0, 0.5, 12), strict=True))
    eta = -0.3 + 0.6 * d["x"] + 0.8 * (d["f"] == "b") - 0.5 * (d["f"] == "c") + d["g"].map(u)
    d["y"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer("y ~ x + f + (1 | g)", d, family="binomial")


def _by_hand(fit: cx.GlmerFit, x: float) -> tuple[np.ndarray, np.ndarray]:
    """Link-scale EMMs of f at x and their SEs: rows [1, x, f==b, f==c] times β̂."""
    assert list(fit.fixef_names) == ["(Intercept)", "x", "fb", "fc"]
    L = np.array([[1.0, x, 0.0, 0.0], [1.0, x, 1.0, 0.0], [1.0, x, 0.0, 1.0]])
    V = np.asarray(fit.vcov_beta)
    return L @ np.asarray(fit.beta), np.sqrt(np.einsum("ij,jk,ik->i", L, V, L))


def test_at_holds_a_covariate_at_a_value_on_the_link_scale() -> None:
    fit = _fit()
    tab = fit.emmeans("f", at={"x": 2.5}, type="link").table()
    est, se = _by_hand(fit, 2.5)
    assert list(tab["f"]) == ["a", "b", "c"]
    np.testing.assert_allclose(tab["estimate"], est, rtol=1e-10)
    np.testing.assert_allclose(tab["std_error"], se, rtol=1e-10)
    # the population-level prediction at that grid point is the same number
    new = pd.DataFrame({"x": 2.5, "f": ["a", "b", "c"], "g": "g0"})
    np.testing.assert_allclose(tab["estimate"],
                               fit.predict(new, include_random=False), rtol=1e-10)


def test_at_on_the_response_scale_back_transforms() -> None:
    fit = _fit()
    tab = fit.emmeans("f", at={"x": -1.0}, type="response").table()
    est, _ = _by_hand(fit, -1.0)
    np.testing.assert_allclose(tab["prob"], 1 / (1 + np.exp(-est)), rtol=1e-10)
    # emmeans' default is the link scale (before: the response scale)
    np.testing.assert_allclose(fit.emmeans("f", at={"x": -1.0}).table()["estimate"], est,
                               rtol=1e-10)


def test_at_restricts_a_factor_and_averages_covariate_values() -> None:
    fit = _fit()
    tab = fit.emmeans("f", at={"f": ["a", "c"], "x": [0.0, 2.0]}, type="link").table()
    est, _ = _by_hand(fit, 1.0)  # the link is linear in x: the mean over 0 and 2 is at 1
    assert list(tab["f"]) == ["a", "c"]
    np.testing.assert_allclose(tab["estimate"], est[[0, 2]], rtol=1e-10)


def test_default_grid_is_at_the_covariate_mean_and_cov_reduce_changes_it() -> None:
    fit = _fit()
    x = fit.design.frame["x"].to_numpy(dtype=float)
    tab = fit.emmeans("f", type="link", cov_reduce="median").table()
    np.testing.assert_allclose(tab["estimate"], _by_hand(fit, float(np.median(x)))[0],
                               rtol=1e-10)
    assert not np.allclose(tab["estimate"], fit.emmeans("f", type="link").table()["estimate"])


def test_at_names_an_unknown_variable() -> None:
    with pytest.raises(ValueError, match="'z'"):
        _fit().emmeans("f", at={"z": 1.0})


@pytest.mark.parametrize("offset", ["a", np.nan, True, [1.0]])
def test_offset_must_be_a_finite_number(offset) -> None:
    with pytest.raises(TypeError, match="offset must be a finite number"):
        _fit().emmeans("f", offset=offset)


def test_ratio_labels_keep_level_names_that_hold_a_dash() -> None:
    # before: "(claude - 3) - base" became "(claude / 3) / base"
    from crossed.inference.emm_response import ratio_label

    assert ratio_label("(claude - 3) - base") == "(claude - 3) / base"
    assert ratio_label("a - b") == "a / b"
    assert ratio_label("(a - b) - (c - d)") == "(a - b) / (c - d)"
    rng = np.random.default_rng(2)
    d = pd.DataFrame({"f": np.resize(["claude - 3", "base"], 200),
                      "g": np.repeat([f"g{i}" for i in range(10)], 20)})
    d["y"] = (rng.random(200) < 0.5).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("y ~ f + (1 | g)", d, family="binomial")
    assert list(fit.emmeans("f", type="response").pairs()["contrast"]) == [
        "base / (claude - 3)"]
    assert list(fit.emmeans("f").pairs()["contrast"]) == ["base - (claude - 3)"]


def test_at_agrees_with_r_emmeans() -> None:
    """emmeans 1.8.4-1 on lme4 1.1-31's glmer of the same data (written by _fit):
    ``emmeans(m, ~ f, at = list(x = 2.5), type = "response")`` and
    ``emmeans(m, ~ f, at = list(f = c("a", "c"), x = c(0, 2)))``. The optimisers stop
    ~1e-5 apart in β, hence the tolerance."""
    fit = _fit()
    prob = fit.emmeans("f", at={"x": 2.5}, type="response").table()
    np.testing.assert_allclose(prob["prob"], [0.70619525, 0.87503276, 0.61443303],
                               rtol=1e-4)
    np.testing.assert_allclose(prob["std_error"], [0.06690094, 0.03745468, 0.07235909],
                               rtol=1e-4)
    link = fit.emmeans("f", at={"f": ["a", "c"], "x": [0.0, 2.0]}, type="link").table()
    np.testing.assert_allclose(link["estimate"], [0.16051510, -0.25047620], rtol=1e-4)
    np.testing.assert_allclose(link["std_error"], [0.25265148, 0.25585851], rtol=1e-4)


def test_at_on_a_variable_of_the_offset_only_says_what_to_pass() -> None:
    # before: "at: 't' is not a variable of the fixed part (reference grid has f)"
    rng = np.random.default_rng(1)
    d = pd.DataFrame({"f": np.resize(["a", "b"], 200), "t": rng.uniform(1, 5, 200),
                      "g": rng.choice([f"g{i}" for i in range(8)], 200)})
    d["c"] = rng.poisson(d["t"] * np.where(d["f"] == "a", 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("c ~ f + offset(log(t)) + (1 | g)", d, family="poisson")
    with pytest.raises(ValueError, match=r"'t' enters only the offset \(offset\(log\(t\)\)\)"
                                         r".*pass the offset's value instead"):
        fit.emmeans("f", at={"t": 2.0})
    rate = fit.emmeans("f", offset=float(np.log(2.0)), type="response").table()["rate"]
    per_unit = fit.emmeans("f", offset=0.0, type="response").table()["rate"]
    np.testing.assert_allclose(rate, 2.0 * per_unit, rtol=1e-12)


def test_glmm_emmeans_display_their_table_not_their_internals():
    """``repr(g.emmeans(...))`` dumped the dataclass (``<function _logit_inv at 0x...>``)
    and had no HTML view; it now reads as the LMM's EMMeans does."""
    import warnings

    import crossed as cx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = cx.glmer("cbind(incidence, size - incidence) ~ period + (1|herd)",
                     cx.load_dataset("cbpp"), family="binomial")
    e = g.emmeans("period", type="response")
    assert e.describe() == ("<GlmmEMMeans of period: 4 means, binomial ( logit ), "
                            "response scale, 95% intervals>")
    # shown as emmeans shows it: the table of the EMMs, then its notes
    assert repr(e) == str(e) == str(e.table())
    assert repr(e).splitlines()[0].split() == ["period", "prob", "std_error", "df",
                                                "conf_low", "conf_high"]
    assert repr(e).splitlines()[-1] == "Intervals are back-transformed from the logit scale"
    link = g.emmeans("period")  # emmeans' default: the link scale
    assert "link scale" in link.describe()
    assert repr(link).splitlines()[-2:] == [
        "Results are given on the logit (not the response) scale.",
        "Confidence level used: 0.95"]
    assert "function" not in repr(e) and "0x" not in repr(e)
    html = e._repr_html_()
    assert html.startswith('<div class="crossed-result">') and "period" in html
    # the response-scale ratios and the link-scale differences are result tables too
    for tab in (e.pairs(), e.contrast("trt.vs.ctrl"), g.emmeans("period", type="link").pairs()):
        assert isinstance(tab, cx.tables.ResultTable)
        assert '<table class="crossed">' in tab._repr_html_()
        assert "P value adjustment" in repr(tab)


def test_glmm_anova_says_it_is_a_wald_chisquare_table():
    """``g.anova()`` printed an untitled table; car's ``Anova`` of a glmer is titled
    "Analysis of Deviance Table (Type III Wald chisquare tests)"."""
    import warnings

    import crossed as cx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = cx.load_dataset("cbpp")
        g = cx.glmer("cbind(incidence, size - incidence) ~ period + (1|herd)", data,
                     family="binomial")
        g0 = cx.glmer("cbind(incidence, size - incidence) ~ 1 + (1|herd)", data,
                      family="binomial")
    assert str(g.anova()).splitlines()[0] == ("Analysis of Deviance Table (Type III Wald "
                                              "chisquare tests)")
    assert "Type II Wald" in str(g.anova(type=2))
    assert "likelihood-ratio tests" in str(g.anova(g0)).splitlines()[0]
