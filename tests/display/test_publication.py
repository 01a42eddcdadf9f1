"""Publication tables (:mod:`crossed.display.publication`): every cell is the number of one
of crossed's own tables rounded by the APA rules (read back here, exact), rows are aligned
by term across LMMs and GLMMs, LaTeX is booktabs with escaped labels, stars are off by
default."""

from __future__ import annotations

import math
import re

import pytest

import crossed as cx
from crossed.display.apa import apa_df, apa_number, apa_p
from crossed.display.publication import PublicationTable


@pytest.fixture(scope="module")
def fits():
    d = cx.load_dataset("sleepstudy")
    lmm = cx.lmer("Reaction ~ Days + (Days | Subject)", d)
    ml = cx.lmer("Reaction ~ Days + (1 | Subject)", d, reml=False)
    c = cx.load_dataset("cbpp")
    glmm = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", c,
                    family="binomial")
    return lmm, ml, glmm


def _row(table: PublicationTable, label: str) -> tuple[str, ...]:
    hits = [r for r in table.rows if r[0] == label]
    assert len(hits) == 1, (label, [r[0] for r in table.rows])
    return hits[0]


def test_regression_table_aligns_terms_and_reads_back(fits):
    lmm, ml, glmm = fits
    t = cx.regression_table(lmm, ml, glmm, names=["slopes", "intercepts", "cbpp"])
    assert t.header == ("", "slopes", "intercepts", "cbpp")
    # fixed effects: one row per term across fits, the SE row below it
    labels = [r[0] for r in t.rows]
    assert labels[:10] == ["(Intercept)", "", "Days", "", "period2", "", "period3", "",
                           "period4", ""]
    for k, fit in enumerate(fits):
        ct = fit.coef_table()
        for _, r in ct.iterrows():
            i = labels.index(r["term"])
            assert t.rows[i][k + 1] == apa_number(r["estimate"])
            assert t.rows[i + 1][k + 1] == f"({apa_number(r['std_error'])})"
    assert _row(t, "Days")[3] == "" and _row(t, "period2")[1:3] == ("", "")
    # random effects from varcorr(), aligned by group and term
    vc = lmm.varcorr()
    assert _row(t, "SD ((Intercept) | Subject)")[1] == apa_number(vc["sd_or_cor"].iloc[0])
    assert _row(t, "Cor ((Intercept), Days | Subject)")[1:] == (
        apa_number(vc["sd_or_cor"].iloc[2], 2, bounded=True), "", "")
    assert _row(t, "SD ((Intercept) | herd)")[1:] == (
        "", "", apa_number(glmm.varcorr()["sd_or_cor"].iloc[0]))
    assert _row(t, "SD (Residual)")[3] == ""
    # fit statistics
    assert _row(t, "Num. obs.")[1:] == ("180", "180", "56")
    assert _row(t, "Num. groups: herd")[1:] == ("", "", "15")
    assert _row(t, "AIC")[1:] == tuple(apa_number(f.aic, 1) for f in fits)
    assert _row(t, "Log likelihood")[2] == apa_number(ml.loglik, 1)
    assert _row(t, "R² conditional")[1:] == tuple(
        apa_number(f.r2()["conditional"].iloc[0], 2, bounded=True) for f in fits)
    assert dict(t.sections) == {10: "Random effects", labels.index("Num. obs."): "Fit"}
    # no stars unless asked for
    assert not any("*" in c for r in t.rows for c in r[1:])
    assert any("link scale" in n for n in t.notes)
    assert any("REML" in n for n in t.notes)
    starred = cx.regression_table(lmm, glmm, stars=True)
    assert _row(starred, "Days")[1].endswith("***") and "*** p < .001." in starred.notes[-1]
    assert _row(starred, "period2")[2] == apa_number(glmm.fixef["period2"]) + "**"


def test_regression_table_with_intervals(fits):
    lmm = fits[0]
    t = cx.regression_table(lmm, ci=True, level=0.9, r2=False)
    ct = lmm.coef_table(level=0.9)
    i = [r[0] for r in t.rows].index("Days")
    assert t.rows[i + 1][1] == (f"[{apa_number(ct['conf_low'].iloc[1])}, "
                                f"{apa_number(ct['conf_high'].iloc[1])}]")
    assert t.notes[0] == "90% confidence intervals in brackets."
    assert "R² marginal" not in [r[0] for r in t.rows]


def test_booktabs_latex_and_escaping(fits):
    lmm, ml, _ = fits
    t = cx.regression_table(lmm, ml, names=["model_a", "50% & more"], title="Fits #1")
    tex = t.latex()
    lines = tex.splitlines()
    top, mids, bottom = (lines.index(r"\toprule"),
                         [i for i, x in enumerate(lines) if x == r"\midrule"],
                         lines.index(r"\bottomrule"))
    assert top < mids[0] < bottom and len(mids) == 3  # header, random effects, fit
    assert lines[top + 1] == r" & model\_a & 50\% \& more \\"
    assert r"\begin{tabular}{lrr}" in tex and r"\caption{Fits \#1}" in tex
    assert r"\multicolumn{3}{l}{\textit{Random effects}} \\" in tex
    assert r"Log likelihood & $-$871.8 & $-$897.0 \\" in tex
    assert "$R^2$ marginal" in tex
    # every body row has as many cells as the header
    body = lines[top + 1:bottom]
    for x in body:
        if x.endswith(r"\\") and not x.startswith(r"\multicolumn"):
            assert x.count(" & ") == 2, x


def test_markdown_and_html(fits):
    lmm, _, glmm = fits
    t = cx.regression_table(lmm, glmm)
    md = t.markdown().splitlines()
    assert md[0] == "|  | (1) | (2) |" and md[1] == "|:---|---:|---:|"
    assert "| SD ((Intercept) \\| Subject) | 24.74 |  |" in md
    assert "| *Random effects* |  |  |" in md
    h = t.html()
    assert '<td class="num">\u22121.40</td>' in h
    assert "<i>R</i><sup>2</sup> marginal" in h
    assert t._repr_html_().startswith('<div class="crossed-result">')
    f = t.frame()
    assert list(f.columns) == ["term", "(1)", "(2)"] and f["term"].iloc[0] == "(Intercept)"
    assert "Random effects" in list(f["term"])
    assert str(t) == t.markdown()


def test_anova_table(fits):
    lmm, _, glmm = fits
    t = cx.anova_table(lmm)
    a, e = lmm.anova().iloc[0], lmm.eta_squared().iloc[0]
    assert t.header == ("Term", "F", "df1", "df2", "p", "η²p", "CI")
    assert t.rows == (("Days", apa_number(a["statistic"]), apa_df(a["num_df"]),
                       apa_df(a["den_df"]), "< .001", apa_number(e["estimate"], 2, True),
                       f"[{apa_number(e['conf_low'], 2, True)}, "
                       f"{apa_number(e['conf_high'], 2, True)}]"),)
    assert "95% confidence intervals" in t.notes[0]
    one = cx.anova_table(lmm, alternative="greater")
    assert one.rows[0][-1].endswith(", 1.00]") and "one-sided 95%" in one.notes[0]
    g = cx.anova_table(glmm)
    w = glmm.anova().iloc[0]
    assert g.header == ("Term", "χ²", "df", "p")
    assert g.rows == (("period", apa_number(w["statistic"]), apa_df(w["df"]),
                       apa_p(w["p_value"]).split(" ", 1)[0] + " .001"),)
    both = cx.anova_table(lmm, glmm, names=["LMM", "GLMM"])
    assert both.header[:3] == ("Term", "Test", "Statistic")
    assert dict(both.sections) == {0: "LMM", 1: "GLMM"}
    assert both.rows[0][1:4] == ("F", apa_number(a["statistic"]),
                                 f"{apa_df(a['num_df'])}, {apa_df(a['den_df'])}")
    assert r"\textit{df}$_1$" in t.latex() and r"$\eta^2_p$" in t.latex()


def test_emm_variance_and_comparison_tables(fits):
    lmm, ml, glmm = fits
    pairs = glmm.emmeans("period").pairs()
    t = cx.emm_table(pairs)
    assert t.header == ("Contrast", "Estimate", "SE", "CI", "z", "p")
    for cells, (_, r) in zip(t.rows, pairs.iterrows(), strict=True):
        assert cells == (r["contrast"], apa_number(r["estimate"]),
                         apa_number(r["std_error"]),
                         f"[{apa_number(r['conf_low'])}, {apa_number(r['conf_high'])}]",
                         apa_number(r["statistic"]),
                         re.sub(r"^= ", "", apa_p(r["p_value"])))
    assert "p values and intervals Tukey-adjusted." in t.notes
    emm = lmm.emmeans("Days", at={"Days": [0, 9]})
    te = cx.emm_table(emm)
    assert te.header == ("Days", "Estimate", "SE", "df", "CI")
    assert te.rows[1][1] == apa_number(emm.table()["estimate"].iloc[1])
    vt = cx.variance_table(lmm)
    assert vt.rows[0] == ("Subject", "(Intercept)", apa_number(612.1002, 2),
                          apa_number(lmm.varcorr()["sd_or_cor"].iloc[0]), "")
    vt2 = cx.variance_table(lmm, ml, names=["a", "b"])
    assert _row(vt2, "SD (Days | Subject)") == (
        "SD (Days | Subject)", apa_number(lmm.varcorr()["sd_or_cor"].iloc[1]), "")
    comp = cx.compare(ml, lmm)
    ct = cx.comparison_table(comp)
    last = comp.iloc[1]
    assert ct.rows[1][1:] == (str(int(last["npar"])), apa_number(last["aic"], 1),
                              apa_number(last["bic"], 1), apa_number(last["loglik"], 1),
                              apa_number(last["deviance"], 1), apa_number(last["statistic"]),
                              apa_df(last["df"]), "< .001")
    assert ct.rows[0][-3:] == ("", "", "")
    assert math.isfinite(float(ct.rows[1][2]))


def test_bad_input(fits):
    lmm = fits[0]
    with pytest.raises(ValueError, match="names= has 1 names for 2 fits"):
        cx.regression_table(lmm, lmm, names=["a"])
    with pytest.raises(ValueError, match="repeats a name"):
        cx.regression_table(lmm, lmm, names=["a", "a"])
    with pytest.raises(TypeError, match="argument 2 is a ResultTable, not a fit"):
        cx.regression_table(lmm, lmm.coef_table())
    with pytest.raises(ValueError, match="at least one fit"):
        cx.regression_table()
    with pytest.raises(ValueError, match="lacks the columns"):
        cx.comparison_table(lmm.coef_table())


def test_omit_leaves_out_a_term_and_says_so():
    d = cx.load_dataset("ner_like")
    f = cx.lmer("f1 ~ model + seed + (1 | language)", d)
    t = cx.regression_table(f, omit=["seed"], r2=False)
    labels = [r[0] for r in t.rows]
    assert not any(lab.startswith("seed") for lab in labels)
    n_seed = sum(1 for n in f.fixef_names if n.startswith("seed"))
    assert n_seed > 0 and f"Not shown: the coefficients of seed ({n_seed})." in t.notes
    assert "modelmBERT (c)" in labels
    with pytest.raises(ValueError, match=r"omit=: \['sed'\] are not fixed terms"):
        cx.regression_table(f, omit=["sed"])
