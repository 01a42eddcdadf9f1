"""Estimated marginal means, contrasts and joint tests against emmeans 1.8.4.

Tolerances (issue 3): estimates 1e-6, SE 1e-5, df 1e-3, p values (Tukey, none) 1e-4
relative, plus an absolute 1e-11 on p values: R's ptukey computes the upper tail as 1 minus
the lower tail, so its p values carry absolute rounding noise of ~1e-12.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from inference_fits import fitted, rel_err

from crossed.inference.adjust import adjust_p, ptukey_sf, qtukey
from crossed.inference.emmeans import INTERACTION_NOTE, emmeans
from reference import EXTRA_DIR, as_list, case_names, r_answers

PARAMS = []
for _name in case_names():
    _r = r_answers(_name)
    for _e in as_list(_r.get("emmeans")):
        for _ddf in ("satterthwaite", "kenward-roger"):
            if f"emm_{_ddf}" in _e:
                PARAMS.append((_name, _e["spec"], _ddf))


def _emm(name, spec, ddf):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return emmeans(fitted(name), spec, ddf=ddf)


def _ref(name, spec):
    return next(e for e in as_list(r_answers(name)["emmeans"]) if e["spec"] == spec)


def _close_p(ours, theirs, rtol=1e-4, atol=1e-11) -> bool:
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return bool(np.all(np.abs(ours - theirs) <= rtol * np.abs(theirs) + atol))


def _check_contrasts(tab, ref, atol=1e-11):
    assert list(tab["contrast"]) == [r["contrast"] for r in ref]
    assert np.max(np.abs(tab["estimate"] - [r["estimate"] for r in ref])) < 1e-6
    assert rel_err(tab["std_error"], [r["SE"] for r in ref]) < 1e-5
    assert rel_err(tab["df"], [r["df"] for r in ref]) < 1e-3
    assert rel_err(tab["statistic"], [r["t.ratio"] for r in ref]) < 1e-5
    assert _close_p(tab["p_value"], [r["p.value"] for r in ref], atol=atol)


@pytest.mark.parametrize(("name", "spec", "ddf"), PARAMS,
                         ids=[f"{n}-{s}-{d}" for n, s, d in PARAMS])
def test_emmeans_table(name, spec, ddf):
    ref = as_list(_ref(name, spec)[f"emm_{ddf}"])
    tab = _emm(name, spec, ddf).table()
    for f in spec.split(":"):
        assert [str(v) for v in tab[f]] == [r[f] for r in ref]
    assert np.max(np.abs(tab["estimate"] - [r["emmean"] for r in ref])) < 1e-6
    assert rel_err(tab["std_error"], [r["SE"] for r in ref]) < 1e-5
    assert rel_err(tab["df"], [r["df"] for r in ref]) < 1e-3
    assert np.max(np.abs(tab["conf_low"] - [r["lower.CL"] for r in ref])) < 1e-5
    assert np.max(np.abs(tab["conf_high"] - [r["upper.CL"] for r in ref])) < 1e-5
    assert tab.attrs["conf_level"] == 0.95


@pytest.mark.parametrize(("name", "spec", "ddf"), PARAMS,
                         ids=[f"{n}-{s}-{d}" for n, s, d in PARAMS])
@pytest.mark.parametrize("adjust", ["tukey", "none"])
def test_pairs(name, spec, ddf, adjust):
    key = f"pairs_{ddf}" if adjust == "tukey" else f"pairs_none_{ddf}"
    tab = _emm(name, spec, ddf).pairs(adjust=adjust)
    _check_contrasts(tab, as_list(_ref(name, spec)[key]))
    # emmeans does not adjust a family of one contrast
    assert tab.attrs["adjust"] == (adjust if len(tab) > 1 else "none")


EXTRA = json.loads((EXTRA_DIR / "inference.json").read_text())
EXTRA_CASES = sorted(n for n in EXTRA if "anova2_satterthwaite" in EXTRA[n])
SPECS = {"cake_split_plot": "recipe", "exist_multi_full": "task", "ham_crossed": "Product"}
XPARAMS = [(n, d) for n in EXTRA_CASES for d in ("satterthwaite", "kenward-roger")]


@pytest.mark.parametrize(("name", "ddf"), XPARAMS)
@pytest.mark.parametrize("adjust", ["holm", "bonferroni", "sidak", "fdr"])
def test_pairs_other_adjustments(name, ddf, adjust):
    tab = _emm(name, SPECS[name], ddf).pairs(adjust=adjust)
    _check_contrasts(tab, as_list(EXTRA[name][f"pairs_{adjust}_{ddf}"]))


@pytest.mark.parametrize(("name", "ddf"), XPARAMS)
@pytest.mark.parametrize(("key", "method", "adjust"), [
    ("revpairs", "revpairwise", "tukey"), ("trt", "trt.vs.ctrl", None),
    ("pairs_tukey_ci", "pairwise", "tukey")])
def test_contrast_methods_with_intervals(name, ddf, key, method, adjust):
    ref = as_list(EXTRA[name][f"{key}_{ddf}"])
    tab = _emm(name, SPECS[name], ddf).contrast(method, adjust=adjust)
    _check_contrasts(tab, ref, atol=1e-9)
    assert np.max(np.abs(tab["conf_low"] - [r["lower.CL"] for r in ref])) < 1e-4
    assert np.max(np.abs(tab["conf_high"] - [r["upper.CL"] for r in ref])) < 1e-4


@pytest.mark.parametrize(("name", "ddf"), XPARAMS)
def test_joint_tests(name, ddf):
    ref = as_list(EXTRA[name][f"joint_{ddf}"])
    tab = _emm(name, SPECS[name], ddf).joint_tests()
    assert list(tab["term"]) == [r["model term"] for r in ref]
    assert np.allclose(tab["num_df"], [r["df1"] for r in ref])
    # emmeans prints df2 to 2 decimals and F to 3
    assert np.allclose(tab["den_df"], [r["df2"] for r in ref], atol=0.006)
    assert np.allclose(tab["statistic"], [r["F.ratio"] for r in ref], atol=6e-4)
    assert rel_err(tab["p_value"], [r["p.value"] for r in ref], floor=1e-12) < 1e-4


def test_custom_contrast_and_by():
    fit = fitted("exist_multi_full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emm = fit.emmeans("task", by="language")
    tab = emm.table()
    assert list(tab.columns[:2]) == ["task", "language"]
    assert len(tab) == 6
    con = emm.contrast({"t1 vs rest": [1, -0.5, -0.5]})
    assert list(con["language"]) == ["en", "es"]
    direct = tab["estimate"].to_numpy().reshape(2, 3) @ np.array([1, -0.5, -0.5])
    assert np.allclose(con["estimate"], direct)
    assert con.attrs["adjust"] == "none"
    # pairs within each language: 3 per group
    assert len(emm.pairs()) == 6


def test_interaction_note():
    with pytest.warns(UserWarning, match="involvement in interactions"):
        emm = fitted("exist_multi_full").emmeans("language")
    assert INTERACTION_NOTE in emm.table().attrs["messages"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted("exist_multi_additive").emmeans("language")  # no interactions: no note


def test_ptukey_against_r():
    # R 4.2.2: ptukey(c(3.5, 5, 10), c(3, 6, 6), c(10, 22, 22.5), lower.tail = FALSE)
    r = [7.71033108386604e-02, 2.00629776081398e-02, 5.14243371163570e-06]
    ours = [ptukey_sf(3.5, 3, 10), ptukey_sf(5, 6, 22), ptukey_sf(10, 6, 22.5)]
    assert rel_err(ours, r) < 1e-7
    assert ptukey_sf(qtukey(0.95, 4, 12), 4, 12) == pytest.approx(0.05, rel=1e-8)


def test_step_down_adjustments():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    t = df = np.ones(4)
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") and "fdr"
    assert np.allclose(adjust_p(t, df, p, "holm", 4), [0.03, 0.06, 0.06, 0.02])
    assert np.allclose(adjust_p(t, df, p, "fdr", 4), [0.02, 0.04, 0.04, 0.02])


def test_emmeans_one_sided_formula_specs():
    """emmeans' ``~ x`` and ``~ x * y | z`` (``fit.emmeans("~ lr_o")`` was refused while
    ``emtrends`` took a tilde): the same tables as the plain names."""
    import crossed as cx

    fit = cx.lmer("delta ~ language * task + (1 | architecture)",
                  cx.load_dataset("exist_multi"))
    plain = fit.emmeans("language").table()
    pd.testing.assert_frame_equal(fit.emmeans("~ language").table(), plain)
    both = fit.emmeans(["language", "task"]).table()
    pd.testing.assert_frame_equal(fit.emmeans("~ language * task").table(), both)
    by = fit.emmeans("language", by="task").table()
    pd.testing.assert_frame_equal(fit.emmeans("~ language | task").table(), by)


def test_contrast_labels_at_numeric_values_read_as_rs():
    """emmeans 1.8.4 labels a covariate held at numeric ``at`` values as R writes the
    numbers (before: ``Days0.0 - Days3.0``). R 4.2.2::

        m <- lmer(Reaction ~ Days + (Days | Subject), sleepstudy, REML = FALSE)
        pairs(emmeans(m, ~ Days, at = list(Days = c(0, 3))))    # Days0 - Days3
        pairs(emmeans(m, ~ Days, at = list(Days = c(0.5, 3))))  # Days0.5 - Days3
    """
    import crossed as cx

    fit = cx.lmer("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"),
                  reml=False)
    assert list(fit.emmeans("Days", at={"Days": [0, 3]}).pairs()["contrast"]) == [
        "Days0 - Days3"]
    assert list(fit.emmeans("Days", at={"Days": [0.5, 3]}).pairs()["contrast"]) == [
        "Days0.5 - Days3"]
    assert list(fit.emmeans("Days", at={"Days": [0, 3]}).pairs(type="response")["contrast"]
                ) == ["Days0 - Days3"]


def test_asymptotic_lmm_grid_names_its_df_method_as_emmeans():
    """emmeans 1.8.4 on an lmer with ``lmer.df = "asymptotic"`` prints
    "Degrees-of-freedom method: asymptotic" (R 4.2.2::

        m <- lmer(Reaction ~ Days + (Days | Subject), sleepstudy)
        emmeans(m, ~ Days, at = list(Days = c(0, 3)), lmer.df = "asymptotic")

    ); before, crossed printed "none". A glmer's grid prints no df method (its tests:
    tests/inference/test_glmm_emm_scales.py)."""
    import crossed as cx

    fit = cx.lmer("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"))
    emm = fit.emmeans("Days", at={"Days": [0, 3]}, ddf="none")
    for text in (str(emm.table()), str(emm.pairs())):
        assert "Degrees-of-freedom method: asymptotic" in text
        assert "method: none" not in text
    assert "Degrees-of-freedom method: satterthwaite" in str(fit.emmeans("Days").table())
