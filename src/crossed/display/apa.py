"""APA-style write-up of a fit: the results and methods paragraphs (``fit.report()``).

Formatting only: every number in a sentence is a number of one of crossed's own tables
(``fit.anova()``, ``fit.eta_squared()``, ``fit.coef_table()``, the EMM and contrast
tables), rounded by the APA 7 rules below; the tables are kept on the result
(:attr:`WriteUp.tables`) so that a reader can check each sentence against them.

Number rules (APA Publication Manual, 7th ed., sections 6.36 and 6.44; table-tested in
tests/display/test_apa.py):

- p values: three decimals without a leading zero (``p = .032``), ``p < .001`` below
  .001 and ``p > .999`` above .999 (APA: "report exact p values to two or three
  decimals"; crossed uses three everywhere so that the cut-off .05 is never rounded over).
- Statistics that cannot exceed 1 (partial η², probabilities, correlations, R²): no
  leading zero (``.39``), two decimals; an interval's limit of exactly 1 is ``1.00``.
- Test statistics (F, t, z, χ²) and estimates: two decimals (``digits`` changes the
  estimates' decimals).
- Degrees of freedom: whole numbers as integers (``F(1, 300)``; within 1e-5 relative,
  :data:`WHOLE_DF_TOL`); fractional (Satterthwaite, Kenward–Roger) denominator df with
  one decimal at 10 and above (``F(1, 22.3)``) and two below 10 (``t(4.52)``), where a
  tenth is a large share of the df.
- Minus signs: ASCII ``-`` in the plain text and Markdown (safe in every terminal and
  file), the true minus ``−`` in HTML and ``$-$`` in LaTeX. Greek letters are Unicode
  in text (``η²p``, ``χ²``) and markup in HTML/LaTeX; statistic symbols are italic in
  HTML (``<i>F</i>``) and LaTeX (``\\textit{F}``), as APA prescribes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import pandas as pd

from crossed.inference.emmeans import estimate_column
from crossed.tables import wrap_html

if TYPE_CHECKING:
    from crossed.model.fitbase import FitBase

__all__ = ["RandomSelectionLike", "Sentence", "WriteUp", "apa_df", "apa_number", "apa_p",
           "latex_escape", "optimizer_name", "term_words", "write_up"]


# ---------------------------------------------------------------------------- number rules
def _round_half_up(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` decimals, halves away from zero (APA's rounding; binary
    floats' own rounding would print 0.125 as 0.12)."""
    from decimal import ROUND_HALF_UP, Decimal
    q = Decimal(1).scaleb(-digits)
    return float(Decimal(repr(float(x))).quantize(q, rounding=ROUND_HALF_UP))


def apa_number(x: float, digits: int = 2, bounded: bool = False) -> str:
    """A number as APA writes it.

    Parameters
    ----------
    x : float
    digits : int
        Decimals.
    bounded : bool
        A statistic that cannot exceed 1 in absolute value (η², r, R², a proportion):
        written without the leading zero (``.39``, ``-.05``).

    Returns
    -------
    str
        ASCII (``-`` as the minus sign); ``NA`` for a missing value, ``Inf``/``-Inf``.
    """
    x = float(x)
    if math.isnan(x):
        return "NA"
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    r = _round_half_up(x, digits)
    if r == 0:
        r = 0.0  # never "-0.00"
    s = f"{r:.{digits}f}"
    if bounded and abs(r) < 1:
        s = s.replace("0.", ".", 1)
    return s


def apa_p(p: float, digits: int = 3) -> str:
    """A p value as APA writes it, with its relation: ``"= .032"``, ``"< .001"``,
    ``"> .999"`` (no leading zero; ``digits`` decimals, 3 by default).

    Returns
    -------
    str
        The relation and the value, to follow an italic *p*; ``"= NA"`` for a missing p.
    """
    p = float(p)
    if math.isnan(p):
        return "= NA"
    lo = 10.0 ** -digits
    if p < lo:
        return f"< {apa_number(lo, digits, bounded=True)}"
    if p > 1 - lo:
        return f"> {apa_number(1 - lo, digits, bounded=True)}"
    r = _round_half_up(p, digits)
    if r < lo:  # (cannot happen after the test above; kept for exactness)
        r = lo
    return f"= {apa_number(min(r, 1 - lo), digits, bounded=True)}"


WHOLE_DF_TOL = 1e-5
"""A df within this (relative) of a whole number is written as that number: a
Satterthwaite df that is whole by the design (a balanced one) comes from numerical
derivatives at an optimum the optimiser resolves to about 1e-7, and moves that much
between BLAS kernels (ner_like's model test: 300.0000014 under one kernel, 300.00003
under the other, 300.000056 in lmerTest), where a tolerance of 1e-8 wrote ``300`` under
one and ``300.0`` under the other."""


def apa_df(df: float) -> str:
    """Degrees of freedom: whole numbers as integers (within :data:`WHOLE_DF_TOL`),
    fractional df with one decimal at 10 and above, two below 10 (see the module's rules);
    ``Inf`` stays ``Inf``."""
    df = float(df)
    if math.isnan(df):
        return "NA"
    if math.isinf(df):
        return "Inf"
    if abs(df - round(df)) < WHOLE_DF_TOL * max(1.0, abs(df)):
        return str(int(round(df)))
    return apa_number(df, 1 if df >= 10 else 2)


# ---------------------------------------------------------------------------- sentences
# A sentence is a tuple of segments (kind, text): "t" plain text, "i" italic text, "n" a
# number (its ASCII minus becomes a true minus in HTML/LaTeX), "s" a symbol by name.
Segment = tuple[str, str]
Sentence = tuple[Segment, ...]

_SYMBOLS = {  # name: (text and Markdown, HTML, LaTeX)
    "eta2p": ("η²p", "<i>η</i><sup>2</sup><sub>p</sub>", r"$\eta^2_p$"),
    "eta2": ("η²", "<i>η</i><sup>2</sup>", r"$\eta^2$"),
    "chi2": ("χ²", "<i>χ</i><sup>2</sup>", r"$\chi^2$"),
    "alpha": ("α", "<i>α</i>", r"$\alpha$"),
    "times": ("×", "×", r"$\times$"),
}

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$",
                  "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "×": r"$\times$", "≥": r"$\geq$",
                  "≤": r"$\leq$", "−": "$-$", "η": r"$\eta$", "χ": r"$\chi$", "²": r"$^2$",
                  "±": r"$\pm$", "–": "--", "α": r"$\alpha$"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``_ % & $ # { } ~ ^ \\``) and the
    few non-ASCII symbols crossed writes (×, −, η, χ, ², ±, –, α) as LaTeX."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def _render(sentence: Sentence, fmt: str) -> str:
    out = []
    for kind, text in sentence:
        if kind == "s":
            plain, htm, tex = _SYMBOLS[text]
            out.append(htm if fmt == "html" else tex if fmt == "latex" else plain)
        elif kind == "n":
            if fmt == "html":
                out.append(html.escape(text).replace("-", "\u2212"))
            elif fmt == "latex":
                out.append(text.replace("-", "$-$"))
            else:
                out.append(text)
        elif kind == "i":
            out.append({"html": f"<i>{html.escape(text)}</i>",
                        "latex": rf"\textit{{{latex_escape(text)}}}",
                        "markdown": f"*{_md_escape(text)}*"}.get(fmt, text))
        else:
            out.append(html.escape(text) if fmt == "html" else latex_escape(text)
                       if fmt == "latex" else _md_escape(text) if fmt == "markdown" else text)
    return "".join(out)


def _md_escape(text: str) -> str:
    """Markdown's emphasis and code characters escaped in a label (``*``, ``_``, `` ` ``)."""
    return "".join("\\" + c if c in "*_`[]" else c for c in text)


def _t(text: str) -> Segment:
    return ("t", text)


def _i(text: str) -> Segment:
    return ("i", text)


def _n(text: str) -> Segment:
    return ("n", text)


def _s(name: str) -> Segment:
    return ("s", name)


def _p_segments(p: float) -> list[Segment]:
    rel, _, value = apa_p(p).partition(" ")
    return [_i("p"), _t(f" {rel} "), _n(value)]


def _ci_segments(level: float | None, low: float, high: float, digits: int,
                 bounded: bool = False, alternative: str = "two-sided") -> list[Segment]:
    if level is None or (math.isnan(float(low)) and math.isnan(float(high))):
        return []
    lvl = f"{100 * float(level):g}% CI"
    if alternative not in ("two-sided", "two.sided"):
        lvl = f"one-sided {lvl}"
    return [_t(f", {lvl} ["), _n(apa_number(low, digits, bounded)), _t(", "),
            _n(apa_number(high, digits, bounded)), _t("]")]


def term_words(label: str) -> str:
    """A fixed or grouping term's label for a sentence: an interaction's ``:`` written
    ``×`` (``language:task`` -> ``language × task``); the label itself is not parsed."""
    return str(label).replace(":", " × ")


def _effect_subject(term: str) -> str:
    return (f"The {term_words(term)} interaction" if ":" in str(term)
            else f"The effect of {term}")


# ---------------------------------------------------------------------------- the result
@runtime_checkable
class RandomSelectionLike(Protocol):
    """What the methods paragraph needs of a random-structure selection (the result of
    ``crossed.select_random``): one sentence saying how the structure was chosen."""

    def methods_sentence(self) -> str:
        """How the random-effects structure was chosen, as one or more sentences."""
        ...


@dataclass(frozen=True, repr=False)
class WriteUp:
    """An APA-style write-up: a results paragraph and a methods paragraph.

    Attributes
    ----------
    results_sentences, methods_sentences : tuple of Sentence
        The sentences, as segments (plain text, italic symbols, numbers), rendered by
        :meth:`markdown`, :meth:`html` and :meth:`latex`.
    tables : dict of str to pandas.DataFrame
        The tables whose numbers the sentences print (``"anova"``, ``"eta_squared"``,
        ``"coefficients"``, ``"emmeans <spec>"``, ``"contrasts <n>"``).
    """

    results_sentences: tuple[Sentence, ...]
    methods_sentences: tuple[Sentence, ...]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def _paragraph(self, sentences: Sequence[Sentence], fmt: str) -> str:
        return " ".join(_render(s, fmt) for s in sentences)

    @property
    def results(self) -> str:
        """The results paragraph as plain text."""
        return self._paragraph(self.results_sentences, "text")

    @property
    def methods(self) -> str:
        """The methods paragraph as plain text."""
        return self._paragraph(self.methods_sentences, "text")

    @property
    def text(self) -> str:
        """Both paragraphs as plain text: results, a blank line, methods."""
        return "\n\n".join(p for p in (self.results, self.methods) if p)

    def sentences(self) -> list[str]:
        """Every sentence as plain text, results first (one per ANOVA term, coefficient,
        EMM and contrast), then the methods."""
        return [_render(s, "text") for s in (*self.results_sentences,
                                             *self.methods_sentences)]

    def markdown(self) -> str:
        """Both paragraphs as Markdown (statistic symbols in ``*italics*``)."""
        return "\n\n".join(p for p in (self._paragraph(self.results_sentences, "markdown"),
                                        self._paragraph(self.methods_sentences, "markdown"))
                           if p)

    def html(self) -> str:
        """Both paragraphs as HTML ``<p>`` elements (``<i>F</i>``, true minus signs)."""
        return (f"<p>{self._paragraph(self.results_sentences, 'html')}</p>"
                f"<p>{self._paragraph(self.methods_sentences, 'html')}</p>")

    def latex(self) -> str:
        """Both paragraphs as LaTeX (``\\textit{F}``, ``$\\eta^2_p$``, escaped labels)."""
        return "\n\n".join(p for p in (self._paragraph(self.results_sentences, "latex"),
                                        self._paragraph(self.methods_sentences, "latex"))
                           if p)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return wrap_html("<h4>Results</h4><p>"
                         + self._paragraph(self.results_sentences, "html")
                         + "</p><h4>Methods</h4><p>"
                         + self._paragraph(self.methods_sentences, "html") + "</p>")


# ---------------------------------------------------------------------------- results
def anova_sentences(anova: pd.DataFrame, effects: pd.DataFrame | None = None,
                    alpha: float = 0.05, test: str = "F") -> list[Sentence]:
    """One sentence per row of an ANOVA table.

    Parameters
    ----------
    anova : pandas.DataFrame
        ``test="F"``: ``fit.anova()`` of an LMM (``term``, ``num_df``, ``den_df``,
        ``statistic``, ``p_value``); ``test="chisq"``: a GLMM's Wald table (``term``,
        ``statistic``, ``df``, ``p_value``) or likelihood-ratio table (``drop1``: ``npar``
        as the df).
    effects : pandas.DataFrame, optional
        ``fit.eta_squared()`` (``term``, ``estimate``, ``conf_low``, ``conf_high``; its
        ``attrs`` give the confidence level and the alternative).
    alpha : float
        Significance level of the words "significant" / "not significant".
    """
    eff = {} if effects is None else {str(r.term): r for r in effects.itertuples()}
    level = None if effects is None else effects.attrs.get("conf_level")
    alternative = "two-sided" if effects is None else effects.attrs.get("alternative",
                                                                         "two-sided")
    partial = effects is None or str(effects.attrs.get("effect", "eta2_partial")).endswith(
        "partial")
    out: list[Sentence] = []
    for row in anova.itertuples():
        term = str(row.term)
        if term in ("<none>", "(Intercept)"):
            continue
        p = float(row.p_value)
        verdict = "significant" if p < alpha else "not significant"
        seg: list[Segment] = [_t(f"{_effect_subject(term)} was {verdict}, ")]
        if test == "F":
            seg += [_i("F"), _t("("), _n(apa_df(row.num_df)), _t(", "),
                    _n(apa_df(row.den_df)), _t(") = "), _n(apa_number(row.statistic)),
                    _t(", ")]
        else:
            df = row.df if hasattr(row, "df") else row.npar
            seg += [_s("chi2"), _t("("), _n(apa_df(df)), _t(") = "),
                    _n(apa_number(row.statistic)), _t(", ")]
        seg += _p_segments(p)
        if term in eff:
            e = eff[term]
            seg += [_t(", "), _s("eta2p" if partial else "eta2"), _t(" = "),
                    _n(apa_number(e.estimate, 2, bounded=True))]
            seg += _ci_segments(level, e.conf_low, e.conf_high, 2, bounded=True,
                                alternative=alternative)
        seg.append(_t("."))
        out.append(tuple(seg))
    return out


_RATIO = {"logit": ("OR", "odds ratio"), "log": ("RR", "rate ratio")}


def coefficient_sentences(coefs: pd.DataFrame, link: str | None = None,
                          digits: int = 2) -> list[Sentence]:
    """One sentence per fixed effect other than the intercept.

    ``link`` ``"logit"`` or ``"log"`` (a GLMM): the exponentiated estimate and Wald
    interval (``OR``/``RR``) with the z test of the coefficient table; otherwise the
    coefficient ``b``, its SE and interval, and its t (``df`` column) or z test.
    """
    level = coefs.attrs.get("conf_level", 0.95)
    ratio = _RATIO.get(link or "")
    out: list[Sentence] = []
    for row in coefs.itertuples():
        term = str(row.term)
        if term == "(Intercept)":
            continue
        seg: list[Segment] = [_t(f"For {term_words(term)}, ")]
        if ratio:
            seg += [_i(ratio[0]), _t(" = "), _n(apa_number(math.exp(row.estimate), digits))]
            seg += _ci_segments(level, math.exp(row.conf_low), math.exp(row.conf_high),
                                digits)
        else:
            seg += [_i("b"), _t(" = "), _n(apa_number(row.estimate, digits)), _t(", "),
                    _i("SE"), _t(" = "), _n(apa_number(row.std_error, digits))]
            seg += _ci_segments(level, row.conf_low, row.conf_high, digits)
        seg += _test_segments(getattr(row, "df", math.inf), row.statistic)
        seg += [_t(", ")] + _p_segments(row.p_value) + [_t(".")]
        out.append(tuple(seg))
    return out


def _test_segments(df: float, statistic: float) -> list[Segment]:
    df = float(df)
    if math.isfinite(df):
        return [_t(", "), _i("t"), _t("("), _n(apa_df(df)), _t(") = "),
                _n(apa_number(statistic))]
    return [_t(", "), _i("z"), _t(" = "), _n(apa_number(statistic))]


_BOUNDED_ESTIMATES = {"prob"}
_EMM_WORDS = {"emmean": "EMM", "prob": "estimated probability", "rate": "estimated rate",
              "response": "EMM (response scale)", "trend": "estimated slope"}


def _level_columns(table: pd.DataFrame) -> list[str]:
    stop = {estimate_column(table), "std_error", "df", "conf_low", "conf_high", "statistic",
            "p_value"}
    cols = []
    for c in table.columns:
        if c in stop:
            break
        cols.append(str(c))
    return cols


def emm_sentences(table: pd.DataFrame, digits: int = 2) -> list[Sentence]:
    """One sentence per row of an EMM table: ``The EMM of model A was 0.43, 95% CI [0.38,
    0.48].`` (a probability's estimate and limits without leading zeros)."""
    name = str(table.attrs.get("estimate_name", "emmean"))
    if table.attrs.get("type") == "link" and name == "emmean" and "offset" in table.attrs:
        name = "link"
    word = _EMM_WORDS.get(name, "EMM (link scale)" if name == "link" else "EMM")
    if name.endswith(".trend"):
        word = f"estimated slope of {name[:-6]}"
    bounded = name in _BOUNDED_ESTIMATES
    level = table.attrs.get("conf_level", 0.95)
    cols = _level_columns(table)
    est = estimate_column(table)  # (emmeans' name on the response scale: prob, rate ...)
    out: list[Sentence] = []
    for _, row in table.iterrows():
        where = ", ".join(f"{c} {row[c]}" for c in cols)
        seg: list[Segment] = [_t(f"The {word} of {where} was "),
                              _n(apa_number(row[est], digits, bounded))]
        seg += _ci_segments(level, row["conf_low"], row["conf_high"], digits, bounded)
        seg.append(_t("."))
        out.append(tuple(seg))
    return out


_ADJUST_WORDS = {"tukey": "Tukey", "bonferroni": "Bonferroni", "holm": "Holm",
                 "sidak": "Šidák", "mvt": "multivariate-t", "scheffe": "Scheffé",
                 "fdr": "false-discovery-rate (Benjamini–Hochberg)",
                 "BH": "false-discovery-rate (Benjamini–Hochberg)", "hochberg": "Hochberg",
                 "hommel": "Hommel", "dunnettx": "Dunnett"}


def adjustment_words(adjust: str | None) -> str | None:
    """The name of a p-value adjustment for a sentence (``"tukey"`` -> ``"Tukey"``), or
    None for no adjustment."""
    if not adjust or adjust == "none":
        return None
    return _ADJUST_WORDS.get(str(adjust), str(adjust))


def contrast_sentences(table: pd.DataFrame, digits: int = 2) -> list[Sentence]:
    """A lead sentence naming the adjustment, then one sentence per contrast: estimate,
    SE, interval, t(df) or z, p."""
    name = str(table.attrs.get("estimate_name", "estimate"))
    word = {"odds.ratio": "odds ratio", "ratio": "rate ratio"}.get(name, "contrast")
    level = table.attrs.get("conf_level", 0.95)
    adj = adjustment_words(table.attrs.get("adjust"))
    n = len(table)
    lead = (f"p values and confidence intervals of these {n} comparisons are "
            f"{adj}-adjusted." if adj else None)
    out: list[Sentence] = []
    if lead:
        out.append((_i("p"), _t(lead[1:])))
    by = [c for c in _level_columns(table) if c != "contrast"]
    est = estimate_column(table)  # (odds_ratio, ratio on the response scale)
    for _, row in table.iterrows():
        cond = "".join(f" at {c} {row[c]}" for c in by)
        seg: list[Segment] = [_t(f"The {word} {row['contrast']}{cond} was "),
                              _n(apa_number(row[est], digits)), _t(", "),
                              _i("SE"), _t(" = "), _n(apa_number(row["std_error"], digits))]
        if "conf_low" in table.columns:
            seg += _ci_segments(level, row["conf_low"], row["conf_high"], digits)
        if "statistic" in table.columns:
            seg += _test_segments(row.get("df", math.inf), row["statistic"])
            seg += [_t(", ")] + _p_segments(row["p_value"])
        seg.append(_t("."))
        out.append(tuple(seg))
    return out


# ---------------------------------------------------------------------------- methods
_OPTIMISERS = {"NLOPT_LN_BOBYQA": "BOBYQA (NLopt)", "L-BFGS-B": "L-BFGS-B (SciPy)",
               "NLOPT_LN_NELDERMEAD": "Nelder–Mead (NLopt)", "bobyqa": "BOBYQA",
               "Nelder_Mead": "Nelder–Mead", "nlminb": "nlminb", "lbfgsb": "L-BFGS-B"}


def optimizer_name(name: str | None) -> str:
    """An optimiser's name for a sentence (``NLOPT_LN_BOBYQA`` -> ``BOBYQA (NLopt)``)."""
    if not name:
        return "an unrecorded optimiser"
    return _OPTIMISERS.get(str(name), str(name))


def _join_words(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def random_words(fit: FitBase) -> str:
    """The random part of the design in words, from the design's random terms (grouping
    factor and columns; a grouping factor with several terms is uncorrelated, ``||``)."""
    by_group: dict[str, list[tuple[str, ...]]] = {}
    for term in fit.design.random.terms:
        by_group.setdefault(str(term.group), []).append(tuple(str(c) for c in term.columns))
    intercepts: list[str] = []
    others: list[str] = []
    for group, blocks in by_group.items():
        cols = [c for b in blocks for c in b]
        g = term_words(group)
        slopes = [c for c in cols if c != "(Intercept)"]
        if not slopes:
            intercepts.append(g)
            continue
        shape = ("correlated " if len(blocks) == 1 and len(cols) > 1 else
                 "uncorrelated " if len(cols) > 1 else "")
        what = ("random intercepts and slopes" if "(Intercept)" in cols
                else "random slopes")
        others.append(f"{shape}{what} of {_join_words(slopes)} by {g}")
    parts = []
    if intercepts:
        parts.append("random intercepts for " + _join_words(intercepts).replace(
            ", ", ", for ").replace(" and ", " and for ") if len(intercepts) > 1
            else f"random intercepts for {intercepts[0]}")
    parts += others
    return _join_words(parts) if parts else "no random effects"


def _fixed_words(fit: FitBase) -> str:
    labels = [str(t) for t in fit.design.fixed.term_labels if t != "(Intercept)"]
    if not labels:
        return "an intercept only as fixed effect"
    return "fixed effects of " + _join_words([term_words(t) for t in labels])


def _response_name(fit: FitBase) -> str:
    spec = fit.design.spec
    return str(spec.successes if spec.cbind else spec.response)


def methods_sentences(fit: Any, ddf: str = "satterthwaite", anova_type: int | str = 3,
                      effects: pd.DataFrame | None = None, glmm_test: str = "wald",
                      contrasts: Sequence[pd.DataFrame] = (), alpha: float = 0.05,
                      random_selection: RandomSelectionLike | None = None,
                      ratios: bool = False) -> list[Sentence]:
    """The methods paragraph of :func:`write_up` (see there)."""
    glmm = hasattr(fit, "family")
    kind = "generalised linear mixed model" if glmm else "linear mixed model"
    family = (f" ({fit.family.name} family, {fit.family.link.name} link)" if glmm else "")
    out: list[Sentence] = []
    out.append((_t(f"We fitted a {kind}{family} to the {fit.nobs:,} observations of "
                   f"{_response_name(fit)} with the Python package crossed "
                   f"{crossed_version()}, with {_fixed_words(fit)} and {random_words(fit)}."),))
    if glmm:
        how = ("the Laplace approximation" if fit.nagq == 1 else
               "the nAGQ = 0 approximation (fixed effects estimated in the penalised "
               "iteratively reweighted least squares)" if fit.nagq == 0 else
               f"adaptive Gauss–Hermite quadrature with {fit.nagq} points (nAGQ = "
               f"{fit.nagq})")
        est = f"Parameters were estimated by maximum likelihood with {how}"
    else:
        est = ("Parameters were estimated by restricted maximum likelihood (REML)"
               if fit.reml else "Parameters were estimated by maximum likelihood (ML)")
    opt = fit.opt
    if opt is not None:
        est += f", optimised with {optimizer_name(opt.optimizer)}"
    status = getattr(fit, "convergence", None)
    status_value = getattr(status, "value", str(status))
    if fit.converged and status_value in ("ok", "singular"):
        conv = "; the optimiser converged and passed lme4's convergence checks."
    else:
        conv = (f"; the fit did not pass lme4's convergence checks ({status_value}), so the "
                "estimates may not be at the optimum.")
    out.append((_t(est + conv),))
    # the fit's other messages (optimiser restarts, convergence warnings) verbatim; the
    # singular-fit and dropped-rows messages have their own sentences below
    warnings = [str(m) for m in fit.messages
                if "singular" not in str(m) and "dropped for missing values" not in str(m)]
    if warnings:
        out.append((_t("The fit reported: " + "; ".join(warnings) + "."),))
    dropped = int(getattr(fit, "n_dropped", 0) or 0)
    # (APA: a sentence does not begin with a numeral)
    out.append((_t(f"Of the {fit.nobs + dropped:,} rows, {dropped:,} had missing values and "
                   f"{'were' if dropped != 1 else 'was'} dropped." if dropped
                   else "No rows were dropped for missing values."),))
    out.append((_t("The fit was singular (a variance at zero or a correlation at ±1): "
                   "the random-effects structure is more complex than the data support."
                   if fit.is_singular else "The fit was not singular."),))
    kind_words = roman_type(anova_type)
    if glmm:
        if glmm_test == "lrt":
            out.append((_t("Fixed terms were tested by likelihood-ratio ("), _s("chi2"),
                        _t(") tests, each marginal term dropped and the model refitted.")))
        else:
            out.append((_t(f"Fixed terms were tested with Type {kind_words} Wald "),
                        _s("chi2"), _t(" tests.")))
        if ratios:
            word = "odds ratios" if fit.family.link.name == "logit" else "rate ratios"
            out.append((_t(f"Coefficients are reported as {word} (exponentiated "
                           "estimates) with Wald confidence intervals and "), _i("z"),
                        _t(" tests.")))
    else:
        ddf_words = {"satterthwaite": "Satterthwaite's approximation",
                     "kenward-roger": "the Kenward–Roger approximation"}.get(ddf, ddf)
        out.append((_t(f"Fixed terms were tested with Type {kind_words} "), _i("F"),
                    _t(f" tests, with {ddf_words} to the denominator degrees of freedom "
                       "(as lmerTest).")))
        if effects is not None and effects.attrs.get("conf_level") is not None:
            alt = str(effects.attrs.get("alternative", "two-sided"))
            lvl = f"{100 * float(effects.attrs['conf_level']):g}%"
            side = ("two-sided" if alt in ("two-sided", "two.sided") else "one-sided")
            limit = {"greater": "upper limit 1, ", "less": "lower limit 0, "}.get(alt, "")
            out.append((_t("Effect sizes are partial "), _s("eta2"),
                        _t(" from the "), _i("F"),
                        _t(f" tests with {side} {lvl} confidence intervals"
                           f" ({limit}as effectsize).")))
    for table in contrasts:
        adj = adjustment_words(table.attrs.get("adjust"))
        if "contrast" in table.columns:
            df_words = _ddf_words(table.attrs.get("ddf"))
            out.append((_t("Contrasts between estimated marginal means were computed as "
                           f"in emmeans{df_words}"
                           + (f", with the {adj} adjustment for multiple comparisons."
                              if adj else ", without adjustment for multiple comparisons.")),))
            break
    out.append((_t("Effects were called significant at "), _s("alpha"), _t(" = "),
                _n(apa_number(alpha, 2, bounded=True)), _t(".")))
    if random_selection is not None:
        sentence = str(random_selection.methods_sentence()).strip()
        out.append((_t(sentence if sentence.endswith(".") else sentence + "."),))
    else:
        out.append((_t("The random-effects structure was specified a priori."),))
    return out


def crossed_version() -> str:
    """The installed crossed's version (``crossed.__version__``, read from the
    distribution's metadata here: the package root sits above this layer)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("crossed")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _ddf_words(ddf: str | None) -> str:
    return {"satterthwaite": " (Satterthwaite degrees of freedom)",
            "kenward-roger": " (Kenward–Roger degrees of freedom)",
            "none": " (asymptotic z tests)"}.get(str(ddf), "")


# ---------------------------------------------------------------------------- the write-up
def _as_tables(item: Any) -> list[pd.DataFrame]:
    """An EMM object (``table()``) or a table: the tables it contributes."""
    if isinstance(item, pd.DataFrame):
        return [item]
    if hasattr(item, "table") and callable(item.table):
        return [item.table()]
    raise TypeError(f"contrasts= takes EMM objects (fit.emmeans(...)) and EMM or contrast "
                    f"tables (fit.emmeans(...).pairs()); got {type(item).__name__}")


def roman_type(type: int | str) -> str:
    """An ANOVA type as APA writes it: 3 -> ``"III"``."""
    return {"1": "I", "2": "II", "3": "III"}.get(str(type), str(type))


def eta_squared_of(fit: Any, type: int | str, ddf: str, ci: float | None,
                   alternative: str | None) -> pd.DataFrame:
    """``fit.eta_squared`` with ``ci`` and ``alternative`` passed only when given (else
    its own defaults: the sentences and tables print whatever the table carries)."""
    kw: dict[str, Any] = {}
    if ci is not None:
        kw["ci"] = ci
    if alternative is not None:
        kw["alternative"] = alternative
    return cast(pd.DataFrame, fit.eta_squared(type=type, ddf=ddf, **kw))


def write_up(fit: Any, emmeans: str | Sequence[str] | None = None,
             contrasts: Sequence[Any] = (), ddf: str = "satterthwaite",
             type: int | str = 3, effect_size: bool = True, ci: float | None = None,
             alternative: str | None = None, test: str = "wald",
             coefficients: bool | None = None, alpha: float = 0.05, digits: int = 2,
             random_selection: RandomSelectionLike | None = None) -> WriteUp:
    """The APA-style write-up of an LMM or GLMM fit (what ``fit.report()`` returns).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    emmeans : str or list of str, optional
        Factors whose EMMs are reported, each with its pairwise contrasts
        (``fit.emmeans(spec)`` and ``.pairs()``; a GLMM's with ``type="response"``:
        probabilities or rates and odds or rate ratios, as papers report them, where
        emmeans' default is the link scale; pass ``contrasts=[fit.emmeans(spec)]`` for
        that).
    contrasts : sequence
        EMM objects (``fit.emmeans("system")``) or EMM / contrast tables
        (``fit.emmeans("system").pairs()``) to report.
    ddf : {"satterthwaite", "kenward-roger"}
        Denominator df of the LMM's F tests.
    type : {1, 2, 3}
        Type of the ANOVA hypotheses.
    effect_size : bool
        LMM: partial η² (``fit.eta_squared()``) beside each F test.
    ci, alternative : optional
        Passed to ``fit.eta_squared`` when given; by default its own defaults (the
        sentences print whatever level and alternative the table carries).
    test : {"wald", "lrt"}
        GLMM: Wald χ² tests (``fit.anova()``) or likelihood-ratio tests (``fit.drop1()``).
    coefficients : bool, optional
        A sentence per fixed effect (default: True for a GLMM with a logit or log link,
        as odds / rate ratios; False for an LMM, whose terms have their F sentences).
    alpha : float
        Level at which an effect is called significant.
    digits : int
        Decimals of estimates (EMMs, contrasts, coefficients, ratios).
    random_selection : object with ``methods_sentence()``, optional
        How the random-effects structure was chosen (``crossed.select_random``'s result);
        without it, the methods say it was specified a priori.
    """
    glmm = hasattr(fit, "family")
    tables: dict[str, pd.DataFrame] = {}
    results: list[Sentence] = []
    effects = None
    if glmm:
        if test not in ("wald", "lrt"):
            raise ValueError(f"test must be 'wald' or 'lrt', got {test!r}")
        anova = fit.drop1() if test == "lrt" else fit.anova(type=type)
        tables["anova"] = anova
        results += anova_sentences(anova, alpha=alpha, test="chisq")
    else:
        anova = fit.anova(type=type, ddf=ddf)
        tables["anova"] = anova
        if effect_size:
            effects = eta_squared_of(fit, type, ddf, ci, alternative)
            tables["eta_squared"] = effects
        results += anova_sentences(anova, effects, alpha=alpha, test="F")
    link = fit.family.link.name if glmm else None
    if coefficients is None:
        coefficients = bool(glmm and link in _RATIO)
    if coefficients:
        coefs = fit.coef_table() if glmm else fit.coef_table(ddf=ddf)
        tables["coefficients"] = coefs
        results += coefficient_sentences(coefs, link if glmm else None, digits)
    items: list[pd.DataFrame] = []
    specs = [emmeans] if isinstance(emmeans, str) else list(emmeans or [])
    for spec in specs:
        # a GLMM's EMMs as a paper reports them: probabilities (rates) and odds (rate)
        # ratios, emmeans' type = "response" (its default, the link scale, on request
        # through contrasts=)
        emm = fit.emmeans(spec, type="response") if glmm else fit.emmeans(spec)
        items += [emm.table(), emm.pairs()]
    for item in contrasts:
        items += _as_tables(item)
    contrast_tables = []
    for k, table in enumerate(items):
        if "contrast" in table.columns:
            tables[f"contrasts {k}"] = table
            contrast_tables.append(table)
            results += contrast_sentences(table, digits)
        else:
            tables[f"emmeans {k}"] = table
            results += emm_sentences(table, digits)
    methods = methods_sentences(fit, ddf=ddf, anova_type=type, effects=effects,
                                glmm_test=test, contrasts=contrast_tables, alpha=alpha,
                                random_selection=random_selection,
                                ratios=bool(glmm and coefficients and link in _RATIO))
    return WriteUp(tuple(results), tuple(methods), tables)
