"""APA-style write-ups (``fit.report()``, :mod:`crossed.display.apa`).

1. The number rules, table-driven (APA 7: p to three decimals without a leading zero,
   ``p < .001``, bounded statistics without a leading zero, two decimals, df).
2. Every number of a sentence is read back (a regular expression on the sentence crossed
   wrote) and compared with crossed's own table, as the string the rules give for that
   table's number (exact), then with R (tests/data/reference/apa/apa.R: lmerTest 3.1-3,
   lme4 1.1-31, emmeans, effectsize; R 4.2.2) within half a unit of the printed last digit
   plus 1e-3 of a unit (crossed and R agree to ~1e-6 relative on these fits; a number on a
   rounding boundary may print one unit apart, which the half-unit allows for).
3. The methods paragraph is built from the fit (design, optimiser, dropped rows,
   singularity) and from a random-structure selection through its ``methods_sentence()``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.display.apa import (
    RandomSelectionLike,
    WriteUp,
    apa_df,
    apa_number,
    apa_p,
    latex_escape,
    optimizer_name,
    term_words,
)

REF = json.loads((Path(__file__).resolve().parents[1] / "data" / "reference" / "apa"
                  / "apa.json").read_text())
NUM = r"(-?\d*\.?\d+|1\.00)"


# ------------------------------------------------------------------------ 1. number rules
@pytest.mark.parametrize("p, text", [
    (0.0321, "= .032"), (0.03249, "= .032"), (0.0325, "= .033"), (0.001, "= .001"),
    (0.00099, "< .001"), (1e-20, "< .001"), (0.0, "< .001"), (0.05, "= .050"),
    (0.0495, "= .050"), (0.5, "= .500"), (0.999, "= .999"), (0.9991, "> .999"),
    (1.0, "> .999"), (float("nan"), "= NA"),
])
def test_p_values(p, text):
    assert apa_p(p) == text


@pytest.mark.parametrize("x, digits, bounded, text", [
    (0.3912, 2, True, ".39"), (0.3912, 2, False, "0.39"), (-0.05, 2, True, "-.05"),
    (1.0, 2, True, "1.00"), (0.999, 2, True, "1.00"), (0.004, 2, True, ".00"),
    (14.296, 2, False, "14.30"), (0.125, 2, False, "0.13"),  # halves away from zero
    (-0.125, 2, False, "-0.13"), (2.675, 2, False, "2.68"), (-0.001, 2, False, "0.00"),
    (1234.56, 1, False, "1234.6"), (float("nan"), 2, False, "NA"),
    (float("inf"), 2, False, "Inf"), (-float("inf"), 2, False, "-Inf"),
])
def test_numbers(x, digits, bounded, text):
    assert apa_number(x, digits, bounded) == text


@pytest.mark.parametrize("df, text", [
    (1, "1"), (5.0, "5"), (300, "300"), (22.04, "22.0"), (21.96, "22.0"),
    (300.000055885885, "300"), (300.0000014, "300"), (300.00003, "300"), (300.01, "300.0"),
    (299.99, "300.0"), (4.523, "4.52"), (9.999, "10.00"), (4.0003, "4.00"), (17.00000001, "17"),
    (float("inf"), "Inf"), (float("nan"), "NA"),
])
def test_degrees_of_freedom(df, text):
    assert apa_df(df) == text


def test_labels_and_names():
    assert term_words("language:task:mode") == "language × task × mode"
    assert latex_escape("a_b 50% x&y $#{}") == r"a\_b 50\% x\&y \$\#\{\}"
    assert optimizer_name("NLOPT_LN_BOBYQA") == "BOBYQA (NLopt)"
    assert optimizer_name("L-BFGS-B") == "L-BFGS-B (SciPy)"


# ------------------------------------------------------------------------ fits
@pytest.fixture(scope="module")
def ner():
    d = cx.load_dataset("ner_like")
    return cx.lmer("f1 ~ model + (1 | language) + (1 | model:language)", d)


@pytest.fixture(scope="module")
def cbpp():
    d = cx.load_dataset("cbpp")
    return cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                    family="binomial")


def _close_to_r(printed: str, r_value: float, digits: int) -> None:
    assert abs(float(printed) - r_value) <= 0.5 * 10 ** -digits + 1e-3 * 10 ** -digits, \
        (printed, r_value)


# ------------------------------------------------------------------------ 2. LMM sentences
F_SENTENCE = re.compile(
    r"^The effect of (?P<term>\w+) was (?P<verdict>significant|not significant), "
    r"F\((?P<df1>[\d.]+), (?P<df2>[\d.]+)\) = (?P<F>[\d.]+), p (?P<rel>[=<>]) "
    r"(?P<p>\.\d+), η²p = (?P<eta>\.\d+|1\.00), (?P<side>one-sided )?(?P<lvl>[\d.]+)% CI "
    r"\[(?P<lo>\.\d+|1\.00), (?P<hi>\.\d+|1\.00)\]\.$")


def test_f_sentence_reads_back_as_the_tables(ner):
    w = ner.report()
    assert isinstance(w, WriteUp) and len(w.results_sentences) == 1
    m = F_SENTENCE.match(w.sentences()[0])
    assert m, w.sentences()[0]
    a = ner.anova().iloc[0]
    e = ner.eta_squared().iloc[0]
    assert m["term"] == a["term"] == "model" and m["verdict"] == "significant"
    assert (m["df1"], m["df2"]) == (apa_df(a["num_df"]), apa_df(a["den_df"]))
    assert m["F"] == apa_number(a["statistic"])
    assert f"{m['rel']} {m['p']}" == apa_p(a["p_value"]) == "< .001"
    assert m["eta"] == apa_number(e["estimate"], 2, True)
    assert (m["lo"], m["hi"]) == (apa_number(e["conf_low"], 2, True),
                                  apa_number(e["conf_high"], 2, True))
    # whatever eta_squared's default convention is, the sentence prints the table's
    attrs = ner.eta_squared().attrs
    one_sided = attrs["alternative"] not in ("two-sided", "two.sided")
    assert float(m["lvl"]) == 100 * attrs["conf_level"] and bool(m["side"]) == one_sided
    # ... and as lmerTest / effectsize
    r = REF["lmm"]
    assert m["df1"] == "5"
    _close_to_r(m["df2"], r["anova"]["den_df"][0], 1)
    _close_to_r(m["F"], r["anova"]["F"][0], 2)
    assert r["anova"]["p"][0] < 0.001
    ref = r["eta2_greater"] if one_sided else r["eta2_two_sided"]
    if attrs["conf_level"] == 0.95 and attrs["alternative"] in ("two-sided", "greater"):
        _close_to_r(m["eta"], ref["estimate"][0], 2)
        _close_to_r(m["lo"], ref["low"][0], 2)
        _close_to_r(m["hi"], ref["high"][0], 2)
    two = F_SENTENCE.match(ner.report(ci=0.95, alternative="two-sided").sentences()[0])
    for key, name in (("eta", "estimate"), ("lo", "low"), ("hi", "high")):
        _close_to_r(two[key], r["eta2_two_sided"][name][0], 2)


def test_the_interval_follows_the_effect_size_table(ner):
    """The sentence prints the level and the side eta_squared's table carries, whatever
    its default: nothing about the convention is written into the sentence code."""
    one = ner.report(alternative="greater")
    m = F_SENTENCE.match(one.sentences()[0])
    e = ner.eta_squared(alternative="greater")
    assert m and m["side"] == "one-sided " and m["hi"] == "1.00"
    assert m["lo"] == apa_number(e["conf_low"].iloc[0], 2, True)
    _close_to_r(m["lo"], REF["lmm"]["eta2_greater"]["low"][0], 2)
    assert "one-sided 95% confidence intervals (upper limit 1, as effectsize)" in one.methods
    ninety = ner.report(ci=0.9)
    m = F_SENTENCE.match(ninety.sentences()[0])
    assert m and m["lvl"] == "90"
    assert m["lo"] == apa_number(ner.eta_squared(ci=0.9)["conf_low"].iloc[0], 2, True)
    side = ("two-sided" if ninety.tables["eta_squared"].attrs["alternative"] == "two-sided"
            else "one-sided")
    assert f"{side} 90% confidence intervals" in ninety.methods
    # the table the sentence was read from is kept with it
    assert ninety.tables["eta_squared"].attrs["conf_level"] == 0.9


EMM_SENTENCE = re.compile(r"^The EMM of model (?P<level>.+) was (?P<est>[\d.]+), 95% CI "
                          r"\[(?P<lo>[\d.]+), (?P<hi>[\d.]+)\]\.$")
CONTRAST_SENTENCE = re.compile(
    r"^The (?P<word>contrast|odds ratio) (?P<contrast>.+) was (?P<est>-?[\d.]+), SE = "
    r"(?P<se>[\d.]+), 95% CI \[(?P<lo>-?[\d.]+), (?P<hi>-?[\d.]+)\], "
    r"(?:t\((?P<df>[\d.]+)\)|z) = (?P<stat>-?[\d.]+), p (?P<rel>[=<>]) (?P<p>\.\d+)\.$")


def test_emm_and_contrast_sentences_read_back(ner):
    emm = ner.emmeans("model")
    pairs = emm.pairs()
    w = ner.report(contrasts=[emm, pairs])
    s = w.sentences()
    table = emm.table()
    emms = [EMM_SENTENCE.match(x) for x in s if x.startswith("The EMM")]
    assert len(emms) == len(table) == 6 and all(emms)
    r = REF["lmm"]["emmeans"]
    for m, (_, row) in zip(emms, table.iterrows(), strict=True):
        assert m["level"] == str(row["model"])
        assert (m["est"], m["lo"], m["hi"]) == tuple(apa_number(row[c]) for c in
                                                     ("estimate", "conf_low", "conf_high"))
        k = r["level"].index(m["level"])
        for key, ref in (("est", "estimate"), ("lo", "low"), ("hi", "high")):
            _close_to_r(m[key], r[ref][k], 2)
    assert any(x == "p values and confidence intervals of these 15 comparisons are "
               "Tukey-adjusted." for x in s)
    cons = [CONTRAST_SENTENCE.match(x) for x in s if x.startswith("The contrast")]
    assert len(cons) == len(pairs) == 15 and all(cons)
    rp = REF["lmm"]["pairs"]
    for m, (_, row) in zip(cons, pairs.iterrows(), strict=True):
        assert m["contrast"] == row["contrast"]
        assert m["est"] == apa_number(row["estimate"]) and m["se"] == apa_number(
            row["std_error"])
        assert (m["lo"], m["hi"]) == (apa_number(row["conf_low"]),
                                      apa_number(row["conf_high"]))
        assert m["df"] == apa_df(row["df"]) and m["stat"] == apa_number(row["statistic"])
        assert f"{m['rel']} {m['p']}" == apa_p(row["p_value"])
        k = rp["contrast"].index(m["contrast"])
        for key, ref in (("est", "estimate"), ("se", "se"), ("lo", "low"), ("hi", "high"),
                         ("stat", "t")):
            _close_to_r(m[key], rp[ref][k], 2)
        if m["rel"] == "=":
            _close_to_r(m["p"], rp["p"][k], 3)
        else:
            assert rp["p"][k] < 0.001
    assert "with the Tukey adjustment for multiple comparisons" in w.methods
    # emmeans= gives the same sentences
    assert ner.report(emmeans="model").sentences() == w.sentences()


def test_coefficient_sentences_of_an_lmm(ner):
    w = ner.report(coefficients=True)
    ct = ner.coef_table()
    pattern = re.compile(r"^For (?P<term>.+), b = (?P<b>-?[\d.]+), SE = (?P<se>[\d.]+), "
                         r"95% CI \[(?P<lo>-?[\d.]+), (?P<hi>-?[\d.]+)\], t\((?P<df>[\d.]+)"
                         r"\) = (?P<t>-?[\d.]+), p (?P<rel>[=<>]) (?P<p>\.\d+)\.$")
    got = [pattern.match(x) for x in w.sentences() if x.startswith("For ")]
    assert len(got) == len(ct) - 1 and all(got)
    for m, (_, row) in zip(got, ct.iloc[1:].iterrows(), strict=True):
        assert m["term"] == row["term"]
        assert [m[k] for k in ("b", "se", "lo", "hi", "t")] == [
            apa_number(row[c]) for c in ("estimate", "std_error", "conf_low", "conf_high",
                                         "statistic")]
        assert m["df"] == apa_df(row["df"])
        assert f"{m['rel']} {m['p']}" == apa_p(row["p_value"])


# ------------------------------------------------------------------------ GLMM sentences
def test_glmm_sentences_read_back(cbpp):
    w = cbpp.report(emmeans="period")
    s = w.sentences()
    chi = re.match(r"^The effect of period was significant, χ²\((\d+)\) = ([\d.]+), "
                   r"p < \.001\.$", s[0])
    a = cbpp.anova().iloc[0]
    assert chi and chi[1] == apa_df(a["df"]) and chi[2] == apa_number(a["statistic"])
    _close_to_r(chi[2], REF["glmm"]["wald"]["chisq"][0], 2)
    assert REF["glmm"]["wald"]["p"][0] < 0.001 and a["p_value"] < 0.001
    ors = re.compile(r"^For (?P<term>\w+), OR = (?P<or>[\d.]+), 95% CI \[(?P<lo>[\d.]+), "
                     r"(?P<hi>[\d.]+)\], z = (?P<z>-?[\d.]+), p (?P<rel>[=<>]) "
                     r"(?P<p>\.\d+)\.$")
    got = [ors.match(x) for x in s if x.startswith("For ")]
    ct = cbpp.coef_table().iloc[1:]
    assert len(got) == 3 and all(got)
    rg = REF["glmm"]
    for k, (m, (_, row)) in enumerate(zip(got, ct.iterrows(), strict=True)):
        assert m["term"] == row["term"] == rg["term"][k]
        assert [m["or"], m["lo"], m["hi"]] == [apa_number(math.exp(row[c])) for c in
                                               ("estimate", "conf_low", "conf_high")]
        assert m["z"] == apa_number(row["statistic"])
        assert f"{m['rel']} {m['p']}" == apa_p(row["p_value"])
        for key, ref in (("or", "or"), ("lo", "or_low"), ("hi", "or_high"), ("z", "z")):
            _close_to_r(m[key], rg[ref][k], 2)
    probs = [re.match(r"^The estimated probability of period (\d) was (\.\d+), 95% CI "
                      r"\[(\.\d+), (\.\d+)\]\.$", x) for x in s if "probability" in x]
    # the write-up reports a GLMM's EMMs on the response scale (emmeans' type="response")
    table = cbpp.emmeans("period", type="response").table()
    assert len(probs) == 4 and all(probs)
    for k, (m, (_, row)) in enumerate(zip(probs, table.iterrows(), strict=True)):
        assert list(m.groups()[1:]) == [apa_number(row[c], 2, True) for c in
                                        ("prob", "conf_low", "conf_high")]
        for j, ref in ((2, "prob"), (3, "low"), (4, "high")):
            _close_to_r("0" + m[j], rg["emmeans"][ref][k], 2)
    cons = [CONTRAST_SENTENCE.match(x) for x in s if x.startswith("The odds ratio")]
    pairs = cbpp.emmeans("period", type="response").pairs()
    assert len(cons) == 6 and all(cons)
    for k, (m, (_, row)) in enumerate(zip(cons, pairs.iterrows(), strict=True)):
        assert m["contrast"] == row["contrast"] == rg["pairs"]["contrast"][k]  # (a / b)
        assert m["df"] is None and m["stat"] == apa_number(row["statistic"])
        for key, ref in (("est", "ratio"), ("se", "se"), ("lo", "low"), ("hi", "high"),
                         ("stat", "z")):
            _close_to_r(m[key], rg["pairs"][ref][k], 2)
    assert "binomial family, logit link" in w.methods
    assert "Laplace approximation" in w.methods and "Wald χ² tests" in w.methods
    assert "odds ratios" in w.methods


def test_glmm_likelihood_ratio_sentences(cbpp):
    w = cbpp.report(test="lrt", coefficients=False)
    d1 = cbpp.drop1()
    row = d1[d1["term"] == "period"].iloc[0]
    assert w.sentences()[0] == (f"The effect of period was significant, χ²("
                                f"{apa_df(row['npar'])}) = {apa_number(row['statistic'])}, "
                                f"p {apa_p(row['p_value'])}.")
    assert "likelihood-ratio" in w.methods
    with pytest.raises(ValueError, match="test must be"):
        cbpp.report(test="score")


# ------------------------------------------------------------------------ 3. methods
class Selection:
    """Stands for crossed.select_random's result (only its methods_sentence is used)."""

    def methods_sentence(self) -> str:
        return "The random slopes of mode by seed were dropped by a likelihood-ratio test"


def test_methods_paragraph(ner):
    w = ner.report()
    m = w.methods
    assert f"crossed {cx.__version__}" in m
    assert "linear mixed model to the 3,660 observations of f1" in m
    assert ("fixed effects of model and random intercepts for model × language and for "
            "language") in m
    assert "restricted maximum likelihood (REML)" in m and "BOBYQA (NLopt)" in m
    assert "the optimiser converged and passed lme4's convergence checks" in m
    assert "No rows were dropped for missing values." in m
    assert "The fit was not singular." in m
    assert "Satterthwaite's approximation" in m
    assert m.endswith("The random-effects structure was specified a priori.")
    sel = Selection()
    assert isinstance(sel, RandomSelectionLike)
    m2 = ner.report(random_selection=sel).methods
    assert m2.endswith("dropped by a likelihood-ratio test.")
    assert "a priori" not in m2


def test_methods_of_slopes_dropped_rows_and_singular_fits():
    d = cx.load_dataset("sleepstudy")
    m = cx.lmer("Reaction ~ Days + (Days | Subject)", d).report().methods
    assert "correlated random intercepts and slopes of Days by Subject" in m
    m = cx.lmer("Reaction ~ Days + (Days || Subject)", d).report().methods
    assert "uncorrelated random intercepts and slopes of Days by Subject" in m
    holes = d.copy()
    holes.loc[[3, 50, 77], "Reaction"] = np.nan
    with pytest.warns(UserWarning, match="3 of 180 rows dropped"):
        fit = cx.lmer("Reaction ~ Days + (1 | Subject)", holes, reml=False)
    m = fit.report().methods
    assert fit.n_dropped == 3 and "Of the 180 rows, 3 had missing values and were dropped." in m
    assert "fit reported" not in m  # (the fit's own message about them is not repeated)
    assert "maximum likelihood (ML)" in m
    # lme4's Dyestuff2: the batch variance is estimated at zero (a singular fit)
    dye2 = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "Dyestuff2.csv")
    with pytest.warns(Warning, match="singular"):
        sing = cx.lmer("Yield ~ 1 + (1 | Batch)", dye2)
    assert sing.is_singular
    m = sing.report().methods
    assert "The fit was singular (a variance at zero or a correlation at ±1)" in m
    assert "an intercept only as fixed effect" in m and "not singular" not in m
    assert sing.report().results == "" and sing.report().text == m  # no fixed term


def test_a_convergence_failure_is_reported(ner):
    """A fit that failed lme4's checks says so, with its messages verbatim (the fit is
    the same one with the failure written into its fields: a real failure depends on the
    platform's arithmetic)."""
    from dataclasses import replace

    from crossed.model.status import ConvergenceStatus
    msg = "Model failed to converge with max|grad| = 0.0123 (tol = 0.002, component 1)"
    bad = replace(ner, converged=False, convergence=ConvergenceStatus.GRADIENT,
                  messages=(msg,))
    m = bad.report().methods
    assert "did not pass lme4's convergence checks (gradient)" in m
    assert f"The fit reported: {msg}." in m and "optimiser converged" not in m


# ------------------------------------------------------------------------ renderings
def test_markup_of_each_format(ner, cbpp):
    w = ner.report(coefficients=True)
    h = w.html()
    assert "<i>F</i>(5, 300)" in h and "<i>p</i> &lt; .001" in h
    assert "<i>η</i><sup>2</sup><sub>p</sub>" in h and "\u22121.56" in h
    t = w.latex()
    assert r"\textit{F}(5, 300)" in t and r"$\eta^2_p$" in t and "$-$1.56" in t
    assert r"95\% CI" in t
    md = w.markdown()
    assert "*F*(5, 300)" in md and "*p* < .001" in md
    assert w.text == f"{w.results}\n\n{w.methods}" and str(w) == w.text
    assert "-1.56" in w.text and "\u2212" not in w.text  # ASCII minus in plain text
    assert w._repr_html_().startswith('<div class="crossed-result">')
    assert "<h4>Methods</h4>" in w._repr_html_()
    g = cbpp.report().latex()
    assert r"$\chi^2$(3)" in g and r"\textit{OR}" in g


def test_bad_contrasts_argument(ner):
    with pytest.raises(TypeError, match="contrasts= takes EMM objects"):
        ner.report(contrasts=["model"])


def test_glmm_methods_name_the_quadrature():
    d = cx.load_dataset("cbpp")
    g = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                 family="binomial", nAGQ=5)
    m = g.report(coefficients=False).methods
    assert "adaptive Gauss–Hermite quadrature with 5 points (nAGQ = 5)" in m
    assert "odds ratios" not in m
    assert "random intercepts for herd" in m
