"""A self-contained HTML report of one analysis: tables and figures (embedded PNG).

The report fits the model, and shows what the evaluation analyses ask of it: the model
summary, fixed effects, ANOVA with partial η², R², variance components, EMMs of the focus
factor with pairwise contrasts, and optionally other specifications side by side; figures:
the interaction plot of the design, the EMMs with intervals, caterpillar plots of the
conditional modes and residual checks. Nothing is loaded from the network: the figures are
base64 PNG ``<img>`` elements and the style sheet is inline.
"""

from __future__ import annotations

import base64
import html
import io
import re
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from crossed.api import glmer, lmer
from crossed.design.frame import expression_variables
from crossed.fit import GlmerFit, LmerFit
from crossed.inference.emmeans import estimate_column
from crossed.tables import format_frame, note_text

__all__ = ["build_report", "focus_summary", "glmm_focus_summary", "write_report"]

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
pre { background: #f8f8f8; padding: 0.8em; overflow-x: auto; font-size: 0.8em;
      white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; } .note { color: #8a5a00; font-size: 0.9em; }
"""


def _table(df: pd.DataFrame) -> str:
    """A table formatted as R prints it (crossed.tables: R's column format, p-values as
    format.pval, or as emmeans in EMM and contrast tables)."""
    frame = pd.DataFrame(df)
    if not isinstance(frame.index, pd.RangeIndex):  # labels in the index (a GLMM's
        frame = frame.rename_axis(frame.index.name or "term").reset_index()  # coef_table)
    shown = format_frame(frame, getattr(df, "_pvalues", "r"), na="")
    return shown.to_html(index=False, escape=True, border=0, na_rep="")


def _figure_html(fig, fig_id: str, caption: str) -> str:
    from crossed.plots._mpl import literal_text, readable_ticks

    readable_ticks(fig)  # long level names wrapped or rotated, never overlapping
    literal_text(fig)    # level names with $, \, _ or ^ drawn as written, not as mathtext
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    from crossed.plots._mpl import plt

    plt().close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure class="crossed-figure" id="{fig_id}">'
            f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _fixed_factors(fit: LmerFit) -> list[str]:
    cols = set(fit.design.columns)
    used = expression_variables(fit.spec.fixed, cols)
    return [c for c in fit.design.columns if c in used and c in fit.design.levels]


def _crossed_pair(fit: LmerFit) -> tuple[str, str] | None:
    """The two data columns of the first ``(1 | a:b)`` term (a cross-classified design)."""
    for term in fit.design.random.terms:
        parts = term.group.split(":")
        if len(parts) == 2 and all(p in fit.design.columns for p in parts):
            return parts[0], parts[1]
    return None


def _section(title: str, body: str) -> str:
    return f"<section><h2>{html.escape(title)}</h2>\n{body}\n</section>"


def build_report(data: pd.DataFrame, formula: str, focus: str | None = None,
                 compare: Sequence[str] | None = None, title: str | None = None,
                 data_name: str = "data", ddf: str = "satterthwaite",
                 reference: dict[str, str] | None = None, reml: bool = True,
                 fit: LmerFit | GlmerFit | None = None, systems: str | None = None,
                 check: bool = True, glmm: dict | None = None) -> str:
    """The HTML text of a report on ``formula`` fitted to ``data``.

    Parameters
    ----------
    data : pandas.DataFrame
    formula : str
        The main specification.
    focus : str, optional
        Factor whose EMMs and pairwise contrasts are reported (default: the first factor
        of the fixed part, if any).
    compare : list of str, optional
        Other specifications compared with the main one (:func:`compare_specs`).
    title : str, optional
    data_name : str
        Name of the data shown in the report.
    ddf : {"satterthwaite", "kenward-roger", "none"}
    reference : dict, optional
        Reference levels, as :func:`crossed.lmer`.
    reml : bool
    fit : LmerFit, optional
        An existing fit of ``formula`` to report instead of fitting again.
    systems : str, optional
        A grouping factor with a random intercept (e.g. ``"model"`` in a cross-classified
        model) whose adjusted means (population mean + conditional mode) are reported, with
        the largest interaction effects of its ``(1 | systems:datasets)`` term if any.
    check : bool
        Run the simulated-residual (DHARMa-style) tests (250 simulations; on a random
        subsample of 50,000 observations for larger fits, which the report states, so
        that their memory stays within that of the fit). False leaves them out, also from
        the comparison of specifications.
    glmm : dict, optional
        Keyword arguments of :func:`crossed.glmer` (``family``, ``weights``, ``offset``,
        ``nAGQ``): report a generalised linear mixed model instead (also when ``fit`` is a
        :class:`~crossed.GlmerFit`). Its report has the glmer summary, Wald z table,
        likelihood-ratio tests of the fixed terms (``drop1``), Nakagawa R², EMMs on the
        response scale with odds/rate ratios, the random effects and DHARMa-style
        simulated residuals; ``ddf``, ``reml``, ``systems`` and ``compare`` do not apply
        (refused).

    Returns
    -------
    str
        A complete HTML document; every figure is a ``<figure class="crossed-figure">``
        holding a base64 PNG ``<img>``.
    """
    notes: list[str] = []
    if glmm is not None or isinstance(fit, GlmerFit):
        if compare or systems is not None:
            raise ValueError("--compare and --systems are for linear mixed models; a GLMM "
                             "report has neither")
        return _glmm_report(data, formula, focus, title, data_name, reference, fit,
                            check, glmm or {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fit is None:
            fit = lmer(formula, data, reml=reml, reference=reference, data_name=data_name)
        factors = _fixed_factors(fit)
        focus = _choose_focus(fit, factors, focus, notes)
        parts = _model_sections(fit, ddf, notes)
        frame = _observed_frame(fit)
        pair = _crossed_pair(fit)
        if pair is not None:
            parts.append(_design_section(frame, fit.spec.response, pair))
        if systems is not None:
            parts.append(_adjusted_means_section(fit, systems, pair))
        if focus is not None:
            parts += _focus_sections(fit, frame, focus, factors, ddf)
            parts.insert(0, _section("Summary", focus_summary(fit, focus, ddf)))
        parts.append(_random_effects_section(fit))
        parts.append(_residual_section(fit, check, notes))
        if compare:
            section = _comparison_section(data, formula, list(compare), fit, focus, ddf,
                                          reference, reml, check, notes)
            if section is not None:
                parts.append(section)
    notes += _warning_notes(caught)
    title = title or f"crossed report: {formula}"
    return _document(title, _header(fit, data_name, ddf, notes), parts)


def _p_text(p: float) -> str:
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.2g}" if p < 0.01 else f"p = {p:.3f}"


def focus_summary(fit: LmerFit, focus: str, ddf: str = "satterthwaite",
                  level: float = 0.95) -> str:
    """A plain-language paragraph on the main effect of ``focus``: its ANOVA test, the
    estimated marginal means and, for two levels, the difference with its interval (HTML).

    Only restates the ANOVA and EMM tables of the report; says when the focus factor is
    involved in interactions (its main effect then averages over the other factors)."""
    response = html.escape(fit.spec.response)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emm = fit.emmeans(focus, ddf=ddf, level=level)
        tab = emm.table()
        pairs = emm.pairs()
        an = fit.anova(type=3, ddf=ddf) if len(fit.fixef_names) > 1 else None
    f = html.escape(focus)
    others = [c for c in fit.design.columns if c in (fit.design.levels or {}) and c != focus]
    text = [_means_sentence(tab, focus, f"estimated marginal means of {response}",
                            bool(others and emm.messages))]
    if an is not None and focus in set(an["term"]):
        r = an.set_index("term").loc[focus]
        verdict = "is" if r["p_value"] < 0.05 else "is not"
        text.append(f"<p>The main effect of {f} {verdict} significant at the 5% level: "
                    f"F({r['num_df']:.3g}, {r['den_df']:.3g}) = {r['statistic']:.3g}, "
                    f"{_p_text(r['p_value'])} (Type III, {html.escape(ddf)} df).</p>")
    if len(pairs) == 1 and len(tab) == 2:
        r = pairs.iloc[0]
        # pairwise: the first level minus the second (not split from the label: a level
        # name may hold " - " itself)
        a, b = (str(v) for v in tab[focus])
        direction = "higher" if r["estimate"] > 0 else "lower"
        text.append(f"<p>{html.escape(a)} is {abs(r['estimate']):.3g} {direction} than "
                    f"{html.escape(b)} ({level:.0%} CI {r['conf_low']:.3g} to "
                    f"{r['conf_high']:.3g}, t({r['df']:.3g}) = {r['statistic']:.3g}, "
                    f"{_p_text(r['p_value'])}).</p>")
    elif len(pairs) > 1:
        sig = int((pairs["p_value"] < 0.05).sum())
        text.append(f"<p>{sig} of {len(pairs)} pairwise differences are significant at "
                    "the 5% level (Tukey-adjusted).</p>")
    return "".join(text)


def _means_sentence(tab: pd.DataFrame, focus: str, label: str, interacts: bool) -> str:
    """The summaries' first sentence: ``focus``'s EMMs (``tab``) as "level estimate" pairs
    after ``label``, and where ``interacts``, that they average over other factors."""
    f = html.escape(focus)
    est = estimate_column(tab)
    means = ", ".join(f"{html.escape(str(r[focus]))} {r[est]:.3g}"
                      for _, r in tab.iterrows())
    text = f"<p><b>{f}</b>: {label}: {means}"
    if interacts:
        text += (f" (averaged over the other factors; <b>{f}</b> is involved in "
                 "interactions, so its effect differs between their levels)")
    return text + ".</p>"


def glmm_focus_summary(fit: GlmerFit, focus: str, drop1: pd.DataFrame | None = None,
                       level: float = 0.95) -> str:
    """The GLMM report's plain-language paragraph on ``focus`` (HTML): its EMMs on the
    response scale (probabilities of a binomial model, rates of a Poisson one), the
    likelihood-ratio test of the model without it (``drop1``, where ``focus`` is a term of
    its own, not only inside an interaction) and its pairwise contrasts as odds or rate
    ratios (Tukey-adjusted; the ratio and its interval for two levels).

    Only restates the report's EMM, contrast and drop1 tables."""
    response = html.escape(fit.spec.response)
    link = fit.family.link.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emm = fit.emmeans(focus, type="response", level=level)
        tab = emm.table()
        pairs = emm.pairs()
    what = {"logit": "probabilities", "probit": "probabilities", "cloglog": "probabilities",
            "log": "rates"}.get(link, "means")
    f = html.escape(focus)
    text = [_means_sentence(tab, focus, f"estimated marginal {what} of {response} "
                            "(response scale)", bool(emm.emm.messages))]
    if drop1 is not None and focus in set(drop1["term"]):
        r = drop1.set_index("term").loc[focus]
        verdict = "is" if r["p_value"] < 0.05 else "is not"
        text.append(f"<p>The effect of {f} {verdict} significant at the 5% level: "
                    f"likelihood-ratio χ²({int(r['npar'])}) = {r['statistic']:.4g}, "
                    f"{html.escape(_p_text(r['p_value']))} (the model without {f}, drop1).</p>")
    ratio = {"logit": "odds", "log": "rate"}.get(link)
    if len(pairs) == 1 and len(tab) == 2:
        r = pairs.iloc[0]
        a, b = (html.escape(str(v)) for v in tab[focus])
        if ratio is not None:
            text.append(f"<p>{a} has {r[estimate_column(pairs)]:.3g} times the {ratio} of {b} "
                        f"({level:.0%} CI {r['conf_low']:.3g} to {r['conf_high']:.3g}, "
                        f"z = {r['statistic']:.3g}, {html.escape(_p_text(r['p_value']))}).</p>")
        else:
            text.append(f"<p>{a} minus {b} on the {html.escape(link)} scale: "
                        f"{r['estimate']:.3g} ({level:.0%} CI {r['conf_low']:.3g} to "
                        f"{r['conf_high']:.3g}, z = {r['statistic']:.3g}, "
                        f"{html.escape(_p_text(r['p_value']))}).</p>")
    elif len(pairs) > 1:
        sig = int((pairs["p_value"] < 0.05).sum())
        kind = f"{ratio} ratios" if ratio is not None else "differences"
        text.append(f"<p>{sig} of {len(pairs)} pairwise {kind} are significant at the 5% "
                    "level (Tukey-adjusted).</p>")
    return "".join(text)


# matplotlib >= 3.9: "... missing from font(s) DejaVu Sans."; 3.8: "... missing from
# current font."
_GLYPH = re.compile(r"Glyph (\d+) .*missing from (?:current )?font(?:\(s\))?(?: (.+?))?\.?$")


def _warning_notes(caught: Sequence[warnings.WarningMessage]) -> list[str]:
    """The warnings raised while the report was built, once each, sorted; matplotlib's
    one warning per character a font lacks (CJK level names, say) become one note."""
    messages = sorted({str(w.message) for w in caught})
    glyphs = [(m, _GLYPH.match(m)) for m in messages]
    missing = sorted({chr(int(g.group(1))) for _, g in glyphs if g is not None})
    notes = [m for m, g in glyphs if g is None]
    if missing:
        fonts = sorted({g.group(2) or "in use" for _, g in glyphs if g is not None})
        shown = " ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
        notes.append(f"the figures lack {len(missing)} character"
                     f"{'s' if len(missing) != 1 else ''} of the names ({shown}): the "
                     f"font{'s' if len(fonts) != 1 else ''} {', '.join(fonts)} "
                     f"{'do' if len(fonts) != 1 else 'does'} not have them (the tables "
                     "show the names in full)")
    return notes


def _choose_focus(fit: LmerFit, factors: list[str], focus: str | None,
                  notes: list[str] | None = None) -> str | None:
    """The factor whose EMMs and pairwise contrasts are reported: ``focus`` checked (a
    factor of the fixed part with two levels or more: a contrast needs two), else the
    first such factor (a one-level factor passed over is noted in ``notes``)."""
    levels = fit.design.levels or {}

    def one_level(f: str) -> bool:
        return len(levels.get(f, ())) < 2

    if focus is not None:
        if focus not in factors:
            raise ValueError(f"focus {focus!r} is not a factor of the fixed part of "
                             f"{fit.formula!r} (factors: {', '.join(factors) or 'none'})")
        if one_level(focus):
            only = ", ".join(repr(str(v)) for v in levels.get(focus, ())) or "none"
            raise ValueError(f"focus {focus!r} has a single level in the data ({only}): its "
                             "means have no pairwise contrast (a contrast needs two levels); "
                             "choose another focus factor")
        return focus
    for f in factors:
        if not one_level(f):
            return f
        if notes is not None:
            only = ", ".join(repr(str(v)) for v in levels.get(f, ()))
            notes.append(f"factor {f!r} has a single level in the data ({only}): not "
                         "chosen as the focus (a contrast needs two levels)")
    return None


def _model_sections(fit: LmerFit, ddf: str, notes: list[str]) -> list[str]:
    """Model summary, fixed effects, ANOVA with partial η², R² and variance components."""
    parts = [_section("Model", f"<pre>{html.escape(fit.summary(ddf=ddf))}</pre>"),
             _section("Fixed effects", _table(fit.coef_table(ddf=ddf)))]
    if len(fit.fixef_names) > 1:
        an = fit.anova(type=3, ddf=ddf)
        body = _table(an)
        try:
            body += ("<p>Partial η² (one-sided 95% interval [low, 1], effectsize's "
                     "default):</p>" + _table(fit.eta_squared()))
        except Exception as exc:  # an effect size that cannot be computed is reported
            notes.append(f"partial eta squared: {exc}")
        parts.append(_section("ANOVA (Type III)", body))
    parts.append(_section("Variance explained and variance components",
                          _table(fit.r2()) + _table(fit.variance_components(test=True))))
    return parts


def _observed_frame(fit: LmerFit) -> pd.DataFrame:
    """The model frame with the response as fitted (transformed, NA rows dropped)."""
    frame = fit.design.frame.copy()
    frame[fit.spec.response] = fit.design.y
    return frame


def _design_section(frame: pd.DataFrame, response: str, pair: tuple[str, str]) -> str:
    """The raw cell means of a cross-classified design, one line per level of the
    smaller factor."""
    from crossed.plots.design import interaction_plot

    a, b = sorted(pair, key=lambda c: frame[c].nunique())
    fig = interaction_plot(frame, response, b, trace=a, error=None)
    fig.set_size_inches(min(2.0 + 0.28 * frame[b].nunique(), 16), 4.2)
    for ax in fig.axes:
        ax.tick_params(axis="x", labelrotation=90)
    return _section("Design", _figure_html(
        fig, "fig-crossed-design", f"Mean {response} of each {a} on each {b} "
        f"(raw cell means): the {a} × {b} interaction of the design."))


def _adjusted_means_section(fit: LmerFit, systems: str, pair: tuple[str, str] | None) -> str:
    """Adjusted means of ``systems``, with its largest interaction effects when it is one
    of the crossed pair."""
    am = fit.adjusted_means(systems)
    body = ("<p>Population mean of the fixed part plus each level's conditional mode, "
            "with 95% intervals.</p>" + _table(am))
    partner = [g for g in (pair or ()) if g != systems]
    if partner and systems in (pair or ()):
        ie = fit.interaction_effects(systems, partner[0])
        top = ie.reindex(ie["estimate"].abs().sort_values(ascending=False).index)
        body += (f"<p>Largest {systems} × {partner[0]} interaction effects "
                 "(conditional modes):</p>" + _table(top.head(10)))
    return _section(f"Adjusted means: {systems}", body)


def _focus_sections(fit: LmerFit, frame: pd.DataFrame, focus: str, factors: list[str],
                    ddf: str) -> list[str]:
    """The raw means by the focus factor, and its EMMs with pairwise contrasts."""
    from crossed.plots.design import interaction_plot
    from crossed.plots.emmeans import plot_emmeans

    response = fit.spec.response
    others = [f for f in factors if f != focus]
    fig = interaction_plot(frame, response, focus, trace=others[0] if others else None,
                           panel=others[1] if len(others) > 1 else None)
    design = _section(f"Design by {focus}", _figure_html(
        fig, "fig-interaction", f"Mean {response} by {focus}"
        + (f" and {others[0]}" if others else "")
        + (f", panels by {others[1]}" if len(others) > 1 else "")
        + " (±1 SE of the cell mean; raw data, no model)."))
    emm = fit.emmeans(focus, ddf=ddf)
    tab = emm.table()
    body = _table(tab) + "<p>Pairwise contrasts (Tukey):</p>" + _table(emm.pairs())
    fig = plot_emmeans(tab, focus)
    body += _figure_html(fig, "fig-emmeans", f"Estimated marginal means of {response} by {focus}.")
    return [design, _section(f"Estimated marginal means: {focus}", body)]


CATERPILLAR_LEVELS = 30
"""The most levels a caterpillar plot of the report draws (the 15 lowest and 15 highest
conditional modes of a factor with more), so that a factor with thousands of levels (the
items of item-level data) gets a figure of the page's size."""


def _random_effects_section(fit: LmerFit) -> str:
    """Caterpillar plots of the random intercepts (at most :data:`CATERPILLAR_LEVELS`
    levels each: the most extreme ones, which the caption says)."""
    from crossed.plots.ranef import caterpillar

    body = ""
    ranef = fit.ranef()
    for g in dict.fromkeys(ranef["group"]):
        rows = (ranef["group"] == g) & (ranef["term"] == "(Intercept)")
        if not rows.any():
            continue
        n = int(rows.sum())
        fig = caterpillar(ranef, g, max_levels=CATERPILLAR_LEVELS)
        caption = f"Conditional modes of (1 | {g}) with 95% intervals"
        if n > CATERPILLAR_LEVELS:
            half = CATERPILLAR_LEVELS // 2
            caption += (f": the {half} lowest and {CATERPILLAR_LEVELS - half} highest of "
                        f"its {n:,} levels are shown")
        body += _figure_html(fig, f"fig-ranef-{len(body)}", caption + ".")
    return _section("Random effects", body)


def _residual_section(fit: LmerFit, check: bool, notes: list[str]) -> str:
    """The residual checks (with the simulated-residual tests when ``check``) and plots."""
    from crossed.evaluation.compare_specs import residual_checks
    from crossed.plots.residuals import residual_plots

    checks = residual_checks(fit)
    check_note = ""
    if check:
        diag = _simulated_checks(fit, notes)
        if diag is not None:
            p = diag.tests.set_index("test")["p_value"]
            checks.update({f"sim_{t}_p": float(p.get(t, float("nan")))
                           for t in ("uniformity", "dispersion", "outliers")})
            if diag.residuals.subsampled:
                check_note = (f"<p>Simulated-residual tests (sim_*, 250 simulations) on "
                              f"{html.escape(diag.residuals.describe_rows())}.</p>")
    else:
        check_note = "<p>Simulated-residual tests not run.</p>"
    return _section("Residual checks", _table(pd.DataFrame([checks])) + check_note + _figure_html(
        residual_plots(fit), "fig-residuals",
        "Conditional residuals against fitted values, and their normal Q-Q plot."))


def _simulated_checks(fit: Any, notes: list[str]) -> Any:
    """The fit's simulated-residual checks (250 simulations, seed 0), or None with a note
    where they failed: a failed diagnostic is reported, not fatal."""
    try:
        return fit.check(nsim=250, seed=0)
    except Exception as exc:
        notes.append(f"simulated residual checks failed: {exc}")
        return None


def _comparison_section(data: pd.DataFrame, formula: str, compare: list[str], fit: LmerFit,
                        focus: str | None, ddf: str, reference: dict[str, str] | None,
                        reml: bool, check: bool, notes: list[str]) -> str | None:
    """The other specifications side by side with the main one (None without a focus)."""
    from crossed.evaluation.compare_specs import compare_specs

    forms = [formula] + compare
    names = ["main"] + [f"alt_{i + 1}" for i in range(len(compare))]
    if focus is None:
        notes.append("no focus factor: specifications not compared")
        return None
    cmp = compare_specs(data, forms, focus=focus, names=names, ddf=ddf,
                        reference=reference, reml=reml, check=check,
                        fits=[fit] + [lmer(f, data, reml=reml, reference=reference)
                                      for f in compare])
    body = "<ul>" + "".join(f"<li><b>{html.escape(n)}</b>: "
                            f"<code>{html.escape(f)}</code></li>"
                            for n, f in zip(names, forms, strict=True)) + "</ul>"
    body += (f"<p>Pairwise differences of the {html.escape(focus)} EMMs in each "
             "specification:</p>" + _table(cmp.contrasts))
    specs = cmp.specs.drop(columns=["formula"])
    # two tables, so that each fits the page: the fit (R², criteria, flags), then the
    # residual checks (p-values of the normality, spread and simulated-residual tests)
    checks = [c for c in specs.columns if str(c).startswith(("resid_", "sim_"))]
    body += ("<p>Each specification (R², information criteria of the ML fit, flags):</p>"
             + _table(specs.drop(columns=checks)))
    if checks:
        body += ("<p>Residual checks of each specification:</p>"
                 + _table(specs[["spec", *checks]] if "spec" in specs.columns
                          else specs[checks]))
    if len(cmp.lrt):
        body += "<p>Likelihood-ratio tests (ML refits):</p>" + _table(cmp.lrt)
    return _section("Specifications compared", body)


def _header(fit: LmerFit, data_name: str, ddf: str, notes: list[str]) -> str:
    """The line under the title (model, data, sizes, fit, date) and the notes."""
    head = (f"<p><code>{html.escape(fit.formula)}</code> on <b>{html.escape(data_name)}</b>: "
            f"{fit.nobs} observations, "
            + ", ".join(f"{n} {html.escape(g)}" for g, n in fit.ngroups.items())
            + f". {'REML' if fit.reml else 'ML'} fit, {ddf} degrees of freedom; generated "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC by crossed.</p>")
    if notes:
        head += "".join(f'<p class="note">note: {html.escape(note_text(n))}</p>'
                        for n in notes)
    return head


def _document(title: str, head: str, parts: list[str]) -> str:
    """The complete HTML document."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{head}\n" + "\n".join(parts) + "</body></html>\n")


def _glmm_report(data: pd.DataFrame, formula: str, focus: str | None, title: str | None,
                 data_name: str, reference: dict[str, str] | None, fit: GlmerFit | None,
                 check: bool, glmm: dict) -> str:
    """The report of a GLMM (see :func:`build_report`'s ``glmm``)."""
    from crossed.plots.emmeans import plot_emmeans
    from crossed.plots.residuals import residual_plots

    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fit is None:
            fit = glmer(formula, data, reference=reference, data_name=data_name, **glmm)
        assert fit is not None
        factors = _fixed_factors(fit)  # type: ignore[arg-type]
        focus = _choose_focus(fit, factors, focus, notes)  # type: ignore[arg-type]
        parts = [_section("Model", f"<pre>{html.escape(fit.summary())}</pre>"),
                 _section("Fixed effects (Wald z tests, link scale)",
                          _table(fit.coef_table()))]
        d1 = None
        if len(fit.fixef_names) > 1:
            try:
                d1 = fit.drop1()
                parts.append(_section("Likelihood-ratio tests of the fixed terms (drop1)",
                                      _table(d1)))
            except Exception as exc:  # a reduced refit that fails is reported
                notes.append(f"drop1: {exc}")
        try:
            parts.append(_section("Variance explained (Nakagawa R²)", _table(fit.r2())))
        except Exception as exc:
            notes.append(f"R2: {exc}")
        frame = _observed_frame(fit)  # type: ignore[arg-type]
        pair = _crossed_pair(fit)  # type: ignore[arg-type]
        # item-level data: a design plot over thousands of items says nothing
        if pair is not None and max(frame[c].nunique() for c in pair) <= 60:
            parts.append(_design_section(frame, fit.spec.response, pair))
        if focus is not None:
            emm = fit.emmeans(focus, type="response")
            tab = emm.table()
            ratio = "odds ratios" if fit.family.link.name == "logit" else (
                "rate ratios" if fit.family.link.name == "log" else "differences (link)")
            body = (_table(tab) + f"<p>Pairwise contrasts as {ratio} (Tukey):</p>"
                    + _table(emm.pairs()))
            body += _figure_html(plot_emmeans(tab, focus), "fig-emmeans",
                                 f"Estimated marginal means of {fit.spec.response} by {focus} "
                                 "on the response scale.")
            parts.append(_section(f"Estimated marginal means: {focus}", body))
            parts.insert(0, _section("Summary", glmm_focus_summary(fit, focus, d1)))
        parts.append(_random_effects_section(fit))  # type: ignore[arg-type]
        body = ""
        if check:
            diag = _simulated_checks(fit, notes)
            if diag is not None:
                from crossed.plots.simulate import plot_residual_diagnostics

                body += _table(diag.tests[["test", "method", "statistic", "p_value"]])
                # the figure of the same simulations as the table (its p-values agree)
                figure = plot_residual_diagnostics(diag)
            else:
                figure = residual_plots(fit)
            body += _figure_html(figure, "fig-residuals",
                                 "Simulated (randomised quantile) residuals: QQ plot "
                                 "against Uniform(0, 1), and against the predictions.")
        else:
            body = "<p>Simulated-residual tests not run.</p>"
        parts.append(_section("Residual checks", body))
    notes += _warning_notes(caught)
    title = title or f"crossed report: {formula}"
    head = (f"<p><code>{html.escape(fit.formula)}</code> on <b>{html.escape(data_name)}</b>: "
            f"{fit.nobs} observations, "
            + ", ".join(f"{n} {html.escape(g)}" for g, n in fit.ngroups.items())
            + f". GLMM, {html.escape(fit.family.name)} family ({fit.family.link.name} link), "
            f"maximum likelihood ({'Laplace' if fit.nagq <= 1 else f'nAGQ = {fit.nagq}'}), "
            f"Wald z tests; generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by crossed.</p>")
    head += "".join(f'<p class="note">note: {html.escape(n)}</p>' for n in notes)
    return _document(title, head, parts)


def write_report(path: str | Path, data: pd.DataFrame, formula: str, **kwargs) -> Path:
    """Write :func:`build_report` to ``path`` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(build_report(data, formula, **kwargs), encoding="utf-8")
    return path
