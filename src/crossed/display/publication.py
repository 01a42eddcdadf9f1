"""Publication tables of fits (modelsummary / texreg style), in Markdown, LaTeX and HTML.

Formatting only: each cell is a number of one of crossed's own tables (``coef_table()``,
``varcorr()``, ``anova()``, ``eta_squared()``, ``r2()``, the EMM and contrast tables,
``crossed.compare``), rounded by the APA rules of :mod:`crossed.display.apa`.

- :func:`regression_table`: several fits side by side (LMMs and GLMMs mixed), rows
  aligned by term: fixed effects with standard errors in parentheses (or confidence
  intervals in brackets), the random effects' standard deviations and correlations, the
  numbers of observations and groups, AIC, BIC, log-likelihood and Nakagawa's R².
- :func:`anova_table`, :func:`emm_table`, :func:`variance_table`,
  :func:`comparison_table`: the ANOVA (with partial η²), EMMs or contrasts, variance
  components and a model comparison.

Each returns a :class:`PublicationTable`: ``markdown()``, ``latex()`` (booktabs:
``\\toprule``, ``\\midrule``, ``\\bottomrule``; labels escaped), ``html()``, ``frame()``
(the cells as a DataFrame whose first column is ``term``) and the notebook view. Stars
are off by default (``stars=True``: * p < .05, ** p < .01, *** p < .001).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from crossed.display.apa import (
    apa_df,
    apa_number,
    apa_p,
    eta_squared_of,
    latex_escape,
    roman_type,
    term_words,
)
from crossed.tables import wrap_html

__all__ = ["PublicationTable", "anova_table", "comparison_table", "emm_table",
           "regression_table", "variance_table"]

# header cells written as symbols: (HTML, LaTeX); other headers are escaped text
_HEADER_MARKUP = {
    "F": ("<i>F</i>", r"\textit{F}"), "t": ("<i>t</i>", r"\textit{t}"),
    "z": ("<i>z</i>", r"\textit{z}"), "p": ("<i>p</i>", r"\textit{p}"),
    "SE": ("<i>SE</i>", r"\textit{SE}"), "df": ("<i>df</i>", r"\textit{df}"),
    "df1": ("<i>df</i><sub>1</sub>", r"\textit{df}$_1$"),
    "df2": ("<i>df</i><sub>2</sub>", r"\textit{df}$_2$"),
    "η²p": ("<i>η</i><sup>2</sup><sub>p</sub>", r"$\eta^2_p$"),
    "χ²": ("<i>χ</i><sup>2</sup>", r"$\chi^2$"),
    "R² marginal": ("<i>R</i><sup>2</sup> marginal", r"$R^2$ marginal"),
    "R² conditional": ("<i>R</i><sup>2</sup> conditional", r"$R^2$ conditional"),
}


@dataclass(frozen=True, repr=False)
class PublicationTable:
    """A table for a paper: text cells, optional sections, notes below.

    Attributes
    ----------
    header : tuple of str
        Column headings; the first is the label column.
    rows : tuple of tuple of str
        Cells as text (ASCII ``-`` as the minus sign; a true minus in HTML, ``$-$`` in
        LaTeX).
    sections : tuple of (int, str)
        A section heading before row ``i`` (``"Random effects"``...); rendered as a
        spanning row (LaTeX: ``\\midrule`` and an italic heading).
    title : str or None
    notes : tuple of str
        Lines below the table (what the parentheses hold, the stars' levels ...).
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    sections: tuple[tuple[int, str], ...] = ()
    title: str | None = None
    notes: tuple[str, ...] = ()

    def frame(self) -> pd.DataFrame:
        """The cells as a DataFrame of strings: the label column ``term``, then one column
        per heading (section headings as rows whose other cells are empty)."""
        cols = ["term", *self.header[1:]]
        rows = []
        heads = dict(self.sections)
        for i, row in enumerate(self.rows):
            if i in heads:
                rows.append([heads[i]] + [""] * (len(cols) - 1))
            rows.append(list(row))
        return pd.DataFrame(rows, columns=cols)

    def aligns(self) -> list[str]:
        """``"l"`` for the label column and every column of text cells, ``"r"`` for the
        columns of numbers."""
        out = []
        for k in range(len(self.header)):
            cells = [r[k] for r in self.rows if r[k]]
            out.append("l" if k == 0 or any(not _is_number_cell(c) for c in cells)
                       else "r")
        return out

    # ------------------------------------------------------------------ renderers
    def markdown(self) -> str:
        """A pipe table (label column left aligned, the others right aligned); section
        headings as bold rows; title above and notes below as paragraphs."""
        def cell(s: str) -> str:
            return s.replace("|", "\\|")
        heads = dict(self.sections)
        lines = [f"**{cell(self.title)}**", ""] if self.title else []
        lines.append("| " + " | ".join(cell(h) for h in self.header) + " |")
        lines.append("|" + "|".join(":---" if a == "l" else "---:"
                                    for a in self.aligns()) + "|")
        width = len(self.header)
        for i, row in enumerate(self.rows):
            if i in heads:
                lines.append("| " + " | ".join([f"*{cell(heads[i])}*"] + [""] * (width - 1))
                             + " |")
            lines.append("| " + " | ".join(cell(c) for c in row) + " |")
        if self.notes:
            lines += [""] + [f"*Note.* {n}" if k == 0 else n
                             for k, n in enumerate(self.notes)]
        return "\n".join(lines)

    def latex(self) -> str:
        """A booktabs ``tabular`` (``l`` then ``r`` columns; ``\\toprule``, ``\\midrule``,
        ``\\bottomrule``) inside a ``table`` environment with the title as caption and the
        notes in a ``tablenotes``-free ``\\footnotesize`` paragraph; labels escaped."""
        width = len(self.header)
        heads = dict(self.sections)
        out = ["\\begin{table}[ht]", "\\centering"]
        if self.title:
            out.append(f"\\caption{{{latex_escape(self.title)}}}")
        out.append("\\begin{tabular}{" + "".join(self.aligns()) + "}")
        out.append("\\toprule")
        out.append(" & ".join(_header_latex(h) for h in self.header) + " \\\\")
        out.append("\\midrule")
        for i, row in enumerate(self.rows):
            if i in heads:
                if i > 0:
                    out.append("\\midrule")
                out.append(f"\\multicolumn{{{width}}}{{l}}{{\\textit{{"
                           f"{latex_escape(heads[i])}}}}} \\\\")
            out.append(" & ".join(_cell_latex(c, k == 0) for k, c in enumerate(row))
                       + " \\\\")
        out.append("\\bottomrule")
        out.append("\\end{tabular}")
        if self.notes:
            out.append("\\par\\footnotesize\\textit{Note.} "
                       + " ".join(latex_escape(n) for n in self.notes))
        out.append("\\end{table}")
        return "\n".join(out)

    def html(self) -> str:
        """An HTML ``<table>`` (statistic headings in italics, true minus signs), the
        title as caption and the notes below."""
        heads = dict(self.sections)
        width = len(self.header)
        parts = ['<table class="crossed">']
        if self.title:
            parts.append(f"<caption>{html.escape(self.title)}</caption>")
        parts.append("<thead><tr>" + "".join(
            f'<th class="{"txt" if k == 0 else "num"}">{_header_html(h)}</th>'
            for k, h in enumerate(self.header)) + "</tr></thead><tbody>")
        for i, row in enumerate(self.rows):
            if i in heads:
                parts.append(f'<tr><td class="txt" colspan="{width}"><i>'
                             f"{html.escape(heads[i])}</i></td></tr>")
            parts.append("<tr>" + "".join(
                f'<td class="{"txt" if k == 0 else "num"}">{_cell_html(c, k == 0)}</td>'
                for k, c in enumerate(row)) + "</tr>")
        parts.append("</tbody></table>")
        parts += [f'<p class="note">{"<i>Note.</i> " if k == 0 else ""}'
                  f"{html.escape(n)}</p>" for k, n in enumerate(self.notes)]
        return "".join(parts)

    def __str__(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:
        return self.markdown()

    def _repr_html_(self) -> str:
        return wrap_html(self.html())


def _header_latex(h: str) -> str:
    return _HEADER_MARKUP[h][1] if h in _HEADER_MARKUP else latex_escape(h)


def _header_html(h: str) -> str:
    return _HEADER_MARKUP[h][0] if h in _HEADER_MARKUP else html.escape(h)


def _is_number_cell(c: str) -> bool:
    return bool(c) and (c[0].isdigit() or c[0] in "-.([<>")


def _cell_latex(c: str, label: bool) -> str:
    if label:
        return _header_latex(c)
    if not _is_number_cell(c):
        return latex_escape(c)
    return latex_escape(c).replace("-", "$-$").replace("<", "$<$").replace(">", "$>$")


def _cell_html(c: str, label: bool) -> str:
    if label:
        return _header_html(c)
    if not _is_number_cell(c):
        return html.escape(c)
    return html.escape(c).replace("-", "\u2212")


# ---------------------------------------------------------------------------- helpers
def _p_cell(p: float) -> str:
    """A p value in a table cell: ``.032``, ``< .001``, ``> .999`` (APA)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    rel, _, value = apa_p(float(p)).partition(" ")
    return value if rel == "=" else f"{rel} {value}"


def _stars(p: float) -> str:
    if p is None or not math.isfinite(float(p)):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


_STARS_NOTE = "* p < .05, ** p < .01, *** p < .001."


def _names(fits: Sequence[Any], names: Sequence[str] | None) -> list[str]:
    if names is None:
        return [f"({k + 1})" for k in range(len(fits))]
    names = [str(n) for n in names]
    if len(names) != len(fits):
        raise ValueError(f"names= has {len(names)} names for {len(fits)} fits")
    if len(set(names)) != len(names):
        raise ValueError(f"names= repeats a name: {names}")
    return names


def _check_fits(fits: Sequence[Any], what: str) -> None:
    if not fits:
        raise ValueError(f"{what} needs at least one fit")
    for k, f in enumerate(fits):
        if not (hasattr(f, "coef_table") and hasattr(f, "varcorr")):
            raise TypeError(f"{what}: argument {k + 1} is a {type(f).__name__}, not a "
                            "fit of crossed.lmer or crossed.glmer")


def _is_glmm(fit: Any) -> bool:
    return hasattr(fit, "family")


def _coefs(fit: Any, ddf: str, level: float) -> pd.DataFrame:
    return (fit.coef_table(level=level) if _is_glmm(fit)
            else fit.coef_table(ddf=ddf, level=level))


def _vc_rows(fit: Any) -> list[tuple[str, float]]:
    """(label, value) of each standard deviation and correlation of ``fit.varcorr()``."""
    vc = fit.varcorr()
    out = []
    for r in vc.itertuples():
        group = str(r.group)
        if group == "Residual":
            out.append(("SD (Residual)", float(r.sd_or_cor)))
        elif pd.isna(r.term2) or r.term2 == "":
            out.append((f"SD ({r.term1} | {term_words(group)})", float(r.sd_or_cor)))
        else:
            out.append((f"Cor ({r.term1}, {r.term2} | {term_words(group)})",
                        float(r.sd_or_cor)))
    return out


# ---------------------------------------------------------------------------- tables
def regression_table(*fits: Any, names: Sequence[str] | None = None, stars: bool = False,
                     ci: bool = False, level: float = 0.95, digits: int = 2,
                     ddf: str = "satterthwaite", r2: bool = True,
                     omit: Sequence[str] = (), title: str | None = None) -> PublicationTable:
    """Fits side by side, modelsummary / texreg style.

    Parameters
    ----------
    *fits : LmerFit or GlmerFit
        LMMs and GLMMs may be mixed; rows are aligned by the fixed effects' and random
        terms' names (a term a fit lacks is an empty cell).
    names : list of str, optional
        Column headings (default ``(1)``, ``(2)``, ...).
    stars : bool
        Significance stars on the estimates (off by default).
    ci : bool
        Confidence intervals in brackets instead of standard errors in parentheses.
    level : float
        Level of the intervals.
    digits : int
        Decimals of estimates, SEs, SDs and correlations.
    ddf : str
        Denominator df of the LMMs' t tests (only the stars use them).
    r2 : bool
        Nakagawa's marginal and conditional R² (``fit.r2()``; a GLMM's refits its null
        model).
    omit : list of str
        Fixed terms (the design's term labels, e.g. a nuisance factor ``"seed"``) whose
        coefficients are left out (modelsummary's ``coef_omit``); a note names them and
        counts their coefficients. A name that is a term of no fit is an error.
    title : str, optional

    Returns
    -------
    PublicationTable
        Sections: the fixed effects (estimate, then its SE or interval), ``Random
        effects`` (SD and correlation of each term from ``varcorr()``; the residual SD
        of an LMM), ``Fit`` (observations, groups per factor, AIC, BIC, log-likelihood,
        R²). Every cell is the number of the fit's table rounded to ``digits``
        (tests/display/test_publication.py reads them back).
    """
    _check_fits(fits, "regression_table")
    heads = _names(fits, names)
    coefs = [_coefs(f, ddf, level) for f in fits]
    omitted: dict[str, int] = {}
    if omit:
        known = {str(t) for f in fits for t in f.design.fixed.term_labels}
        unknown = [o for o in omit if o not in known]
        if unknown:
            raise ValueError(f"omit=: {unknown} are not fixed terms of these fits (terms: "
                             f"{sorted(known)})")
        kept = []
        for f, c in zip(fits, coefs, strict=True):
            labels = f.design.fixed.term_labels
            term_of = dict(zip(f.design.fixed.names,
                               (str(labels[a]) for a in f.design.fixed.assign), strict=True))
            drop = c["term"].map(lambda n, t=term_of: t.get(str(n)) in omit)
            for o in omit:
                omitted[o] = max(omitted.get(o, 0), int(sum(
                    1 for n in c["term"] if term_of.get(str(n)) == o)))
            kept.append(c[~drop.to_numpy(bool)])
        coefs = kept
    terms: list[str] = []
    for c in coefs:
        terms += [str(t) for t in c["term"] if str(t) not in terms]
    rows: list[tuple[str, ...]] = []
    for term in terms:
        est, below = [], []
        for c in coefs:
            hit = c[c["term"].astype(str) == term]
            if not len(hit):
                est.append("")
                below.append("")
                continue
            r = hit.iloc[0]
            e = apa_number(r["estimate"], digits)
            if stars:
                e += _stars(r["p_value"])
            est.append(e)
            below.append(f"[{apa_number(r['conf_low'], digits)}, "
                         f"{apa_number(r['conf_high'], digits)}]" if ci
                         else f"({apa_number(r['std_error'], digits)})")
        rows.append((term, *est))
        rows.append(("", *below))
    sections = [(len(rows), "Random effects")]
    vcs = [dict(_vc_rows(f)) for f in fits]
    labels: list[str] = []
    for v in vcs:
        labels += [lab for lab in v if lab not in labels]
    labels = [lab for lab in labels if lab != "SD (Residual)"] + (
        ["SD (Residual)"] if "SD (Residual)" in labels else [])
    for lab in labels:
        rows.append((lab, *[apa_number(v[lab], digits, bounded=lab.startswith("Cor"))
                            if lab in v else "" for v in vcs]))
    sections.append((len(rows), "Fit"))
    rows.append(("Num. obs.", *[str(int(f.nobs)) for f in fits]))
    groups: list[str] = []
    for f in fits:
        groups += [str(g) for g in f.ngroups if str(g) not in groups]
    for g in groups:
        rows.append((f"Num. groups: {term_words(g)}",
                     *[str(int(f.ngroups[g])) if g in f.ngroups else "" for f in fits]))
    rows.append(("AIC", *[apa_number(f.aic, 1) for f in fits]))
    rows.append(("BIC", *[apa_number(f.bic, 1) for f in fits]))
    rows.append(("Log likelihood", *[apa_number(f.loglik, 1) for f in fits]))
    if r2:
        tabs = [f.r2() for f in fits]
        rows.append(("R² marginal", *[apa_number(t["marginal"].iloc[0], 2, bounded=True)
                                      for t in tabs]))
        rows.append(("R² conditional",
                     *[apa_number(t["conditional"].iloc[0], 2, bounded=True)
                       for t in tabs]))
    notes = [f"{100 * level:g}% confidence intervals in brackets." if ci
             else "Standard errors in parentheses."]
    if omitted:
        notes.append("Not shown: the coefficients of " + ", ".join(
            f"{term_words(o)} ({n})" for o, n in omitted.items()) + ".")
    if any(_is_glmm(f) for f in fits):
        links = sorted({f"{f.family.name} ({f.family.link.name} link)" for f in fits
                        if _is_glmm(f)})
        notes.append("GLMM estimates are on the link scale: " + ", ".join(links) + ".")
    if any(not _is_glmm(f) and f.reml for f in fits):
        notes.append("AIC, BIC and log likelihood of REML fits are from the REML "
                     "criterion (compare fixed effects with ML fits).")
    if stars:
        notes.append(_STARS_NOTE)
    return PublicationTable(("", *heads), tuple(rows), tuple(sections), title,
                            tuple(notes))


def anova_table(*fits: Any, names: Sequence[str] | None = None, ddf: str = "satterthwaite",
                type: int | str = 3, effect_size: bool = True, ci: float | None = None,
                alternative: str | None = None, test: str = "wald",
                title: str | None = None) -> PublicationTable:
    """The ANOVA of each fit: an LMM's F tests (``fit.anova()``) with partial η² and its
    interval (``fit.eta_squared()``), a GLMM's Wald χ² tests (``fit.anova()``, or the
    likelihood-ratio tests of ``fit.drop1()`` with ``test="lrt"``).

    Parameters
    ----------
    *fits : LmerFit or GlmerFit
        One fit, or several (one section each, headed by its name).
    names : list of str, optional
    ddf, type : as ``fit.anova``
    effect_size : bool
        The η²p column (LMMs).
    ci, alternative : optional
        ``eta_squared``'s interval (default: its own defaults; the note names the level
        and whether it is one-sided).
    test : {"wald", "lrt"}
        GLMMs' tests.
    title : str, optional

    Returns
    -------
    PublicationTable
        Columns ``Term``, ``F`` / ``χ²``, ``df1``, ``df2`` (LMM) or ``df`` (GLMM), ``p``,
        ``η²p``, ``CI``; each cell the fit's table's number rounded by APA's rules.
    """
    _check_fits(fits, "anova_table")
    heads = _names(fits, names)
    lmm = [not _is_glmm(f) for f in fits]
    if any(lmm) and not all(lmm):
        header: tuple[str, ...] = ("Term", "Test", "Statistic", "df", "p")
    elif all(lmm):
        header = ("Term", "F", "df1", "df2", "p") + (("η²p", "CI") if effect_size else ())
    else:
        header = ("Term", "χ²", "df", "p")
    rows: list[tuple[str, ...]] = []
    sections: list[tuple[int, str]] = []
    notes: list[str] = []
    for name, fit in zip(heads, fits, strict=True):
        if len(fits) > 1:
            sections.append((len(rows), name))
        if _is_glmm(fit):
            tab = fit.drop1() if test == "lrt" else fit.anova(type=type)
            for r in tab.itertuples():
                if str(r.term) in ("<none>", "(Intercept)"):
                    continue
                df = r.df if hasattr(r, "df") else r.npar
                cells = [term_words(r.term), apa_number(r.statistic), apa_df(df),
                         _p_cell(r.p_value)]
                rows.append(tuple([cells[0], "χ²", *cells[1:]] if len(header) == 5 and
                                  header[1] == "Test" else cells))
            what = ("likelihood-ratio tests" if test == "lrt" else
                    f"Type {roman_type(type)} Wald χ² tests")
            notes.append(f"{name}: {what}." if len(fits) > 1 else f"{what.capitalize()}.")
            continue
        tab = fit.anova(type=type, ddf=ddf)
        eff = None
        if effect_size:
            eff = eta_squared_of(fit, type, ddf, ci, alternative)
        by = {} if eff is None else {str(r.term): r for r in eff.itertuples()}
        for r in tab.itertuples():
            df2 = apa_df(r.den_df)
            if header[1] == "Test":
                rows.append((term_words(r.term), "F", apa_number(r.statistic),
                             f"{apa_df(r.num_df)}, {df2}", _p_cell(r.p_value)))
                continue
            cells = [term_words(r.term), apa_number(r.statistic), apa_df(r.num_df), df2,
                     _p_cell(r.p_value)]
            if effect_size:
                e = by.get(str(r.term))
                cells += ([apa_number(e.estimate, 2, bounded=True),
                           f"[{apa_number(e.conf_low, 2, bounded=True)}, "
                           f"{apa_number(e.conf_high, 2, bounded=True)}]"]
                          if e is not None else ["", ""])
            rows.append(tuple(cells))
        ddf_words = {"satterthwaite": "Satterthwaite", "kenward-roger": "Kenward-Roger"}.get(
            ddf, ddf)
        note = f"Type {roman_type(type)} F tests, {ddf_words} denominator df"
        if eff is not None and eff.attrs.get("conf_level") is not None:
            alt = str(eff.attrs.get("alternative", "two-sided"))
            side = "" if alt in ("two-sided", "two.sided") else " one-sided"
            note += (f"; partial η² with{side} {100 * float(eff.attrs['conf_level']):g}% "
                     "confidence intervals")
        notes.append(f"{name}: {note}." if len(fits) > 1 else f"{note}.")
    return PublicationTable(header, tuple(rows), tuple(sections), title, tuple(notes))


def emm_table(emm: Any, digits: int = 2, title: str | None = None) -> PublicationTable:
    """EMMs or contrasts for a paper.

    Parameters
    ----------
    emm : EMM object or DataFrame
        ``fit.emmeans(...)`` (its ``table()``), an EMM table or a contrast table
        (``fit.emmeans(...).pairs()``).
    digits : int
    title : str, optional

    Returns
    -------
    PublicationTable
        The level (or contrast) columns, ``Estimate``, ``SE``, ``df``, ``CI``, and for a
        contrast table ``t`` or ``z`` and ``p``; notes: confidence level, df method,
        adjustment.
    """
    from crossed.display.apa import adjustment_words
    table = emm.table() if not isinstance(emm, pd.DataFrame) and hasattr(emm, "table") else emm
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"emm_table takes an EMM object or table, got {type(emm).__name__}")
    stop = {"estimate", "std_error", "df", "conf_low", "conf_high", "statistic", "p_value"}
    labels = []
    for c in table.columns:
        if c in stop:
            break
        labels.append(str(c))
    has_df = "df" in table.columns and bool(pd.Series(table["df"]).map(
        lambda v: math.isfinite(float(v))).all())
    has_test = "statistic" in table.columns and "contrast" in table.columns
    header = [lab.capitalize() if lab == "contrast" else lab for lab in labels]
    header += ["Estimate", "SE"] + (["df"] if has_df else []) + (
        ["CI"] if "conf_low" in table.columns else [])
    if has_test:
        header += ["t" if has_df else "z", "p"]
    rows = []
    for _, r in table.iterrows():
        cells = [str(r[c]) for c in labels]
        cells += [apa_number(r["estimate"], digits), apa_number(r["std_error"], digits)]
        if has_df:
            cells.append(apa_df(r["df"]))
        if "conf_low" in table.columns:
            cells.append(f"[{apa_number(r['conf_low'], digits)}, "
                         f"{apa_number(r['conf_high'], digits)}]")
        if has_test:
            cells += [apa_number(r["statistic"]), _p_cell(r["p_value"])]
        rows.append(tuple(cells))
    notes = []
    if table.attrs.get("conf_level") is not None:
        notes.append(f"{100 * float(table.attrs['conf_level']):g}% confidence intervals.")
    ddf = table.attrs.get("ddf")
    if ddf and ddf != "none":
        notes.append(f"Degrees of freedom: {ddf}.")
    adj = adjustment_words(table.attrs.get("adjust"))
    if adj:
        notes.append(f"p values and intervals {adj}-adjusted.")
    if table.attrs.get("type") == "response" and "contrast" in table.columns:
        notes.append("Ratios on the response scale; tests on the link scale.")
    return PublicationTable(tuple(header), tuple(rows), (), title, tuple(notes))


def variance_table(*fits: Any, names: Sequence[str] | None = None, digits: int = 2,
                   title: str | None = None) -> PublicationTable:
    """The random effects of one or several fits: per grouping factor and term, the
    variance and SD (one fit) or the SD of each fit (several; correlations too), from
    ``fit.varcorr()``.

    Returns
    -------
    PublicationTable
        One fit: ``Group``, ``Term``, ``Variance``, ``SD``, ``Cor`` (correlations listed
        with their pair of terms). Several: one row per SD/correlation label, one column
        per fit.
    """
    _check_fits(fits, "variance_table")
    heads = _names(fits, names)
    if len(fits) == 1:
        vc = fits[0].varcorr()
        rows = []
        for r in vc.itertuples():
            group = term_words(r.group)
            if pd.isna(r.term2) or r.term2 == "":
                rows.append((group, "" if pd.isna(r.term1) else str(r.term1),
                             apa_number(r.variance_or_cov, digits),
                             apa_number(r.sd_or_cor, digits), ""))
            else:
                rows.append((group, f"{r.term1}, {r.term2}", "", "",
                             apa_number(r.sd_or_cor, 2, bounded=True)))
        return PublicationTable(("Group", "Term", "Variance", "SD", "Cor"), tuple(rows), (),
                                title, ("Variances and standard deviations of the random "
                                        "effects; correlations between a group's terms.",))
    vcs = [dict(_vc_rows(f)) for f in fits]
    labels: list[str] = []
    for v in vcs:
        labels += [lab for lab in v if lab not in labels]
    rows = [(lab, *[apa_number(v[lab], digits, bounded=lab.startswith("Cor"))
                    if lab in v else "" for v in vcs]) for lab in labels]
    return PublicationTable(("", *heads), tuple(rows), (), title,
                            ("Standard deviations (SD) and correlations (Cor) of the "
                             "random effects.",))


def comparison_table(comparison: pd.DataFrame, title: str | None = None) -> PublicationTable:
    """A model comparison (``crossed.compare(...)`` / ``anova(m0, m1)``) for a paper.

    Returns
    -------
    PublicationTable
        ``Model``, ``npar``, ``AIC``, ``BIC``, ``Log likelihood``, ``Deviance``, ``χ²``,
        ``df``, ``p`` (the likelihood-ratio test against the previous row); each cell the
        comparison's number (criteria to one decimal, χ² to two, p by APA's rules).
    """
    need = {"model", "npar", "aic", "bic", "loglik", "deviance"}
    missing = sorted(need - set(comparison.columns))
    if missing:
        raise ValueError(f"comparison_table takes crossed.compare's table; it lacks the "
                         f"columns {missing}")
    rows = []
    for r in comparison.itertuples():
        test = ["", "", ""]
        if "statistic" in comparison.columns and pd.notna(r.statistic):
            test = [apa_number(r.statistic), apa_df(r.df), _p_cell(r.p_value)]
        rows.append((str(r.model), str(int(r.npar)), apa_number(r.aic, 1),
                     apa_number(r.bic, 1), apa_number(r.loglik, 1),
                     apa_number(r.deviance, 1), *test))
    notes = ["Likelihood-ratio tests of each model against the one above it."]
    if comparison.attrs.get("refit"):
        notes.append("REML fits were refitted by maximum likelihood for the comparison.")
    return PublicationTable(("Model", "npar", "AIC", "BIC", "Log likelihood", "Deviance",
                             "χ²", "df", "p"), tuple(rows), (), title, tuple(notes))
