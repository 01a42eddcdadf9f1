"""Display of fits: the text ``summary(lmerTest::lmer(...))`` prints, and the notebook view.

Display only formats numbers the fit and the inference layer computed (number rules:
:mod:`crossed._format`; tables and summaries: :mod:`crossed.tables`).

A fit class shows itself in a notebook through :func:`fit_html`, which renders the
:class:`~crossed.tables.Summary` its ``summary()`` returns: a new fit class (a GLMM fit)
needs only a ``summary()`` that returns a ``Summary`` with its tables, and a
``_repr_html_`` that calls :func:`fit_html` (as ``LmerFit`` and ``GlmerFit`` do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from crossed._format import format_number_column, format_pvalues_r
from crossed.display.rprint import (
    format_coefmat,
    format_quantiles,
    format_vc_table,
    print_named_vector,
    vc_blocks,
)
from crossed.inference.coefs import coef_table, r_coefficients
from crossed.tables import Summary, result_table

SIGNIF_CODES = "Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1"
"""R's legend of the significance stars as R prints it in a UTF-8 locale (lme4's and
lmerTest's summaries, checked against R 4.2.2's text), under every summary of both fit
classes."""

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["fit_html", "format_cell", "format_correlation", "format_fixed_effects", "format_print",
           "format_pvalue", "format_random_effects", "format_summary", "r_abbreviate",
           "signif_stars", "summary_of"]

_VOWELS = set("aeiou")


def r_abbreviate(name: str, minlength: int = 6) -> str:
    """R's ``abbreviate()``: drop lower-case vowels, then lower-case letters, from the end."""
    chars = list(name)
    for drop in (lambda c: c in _VOWELS, lambda c: c.islower()):
        i = len(chars) - 1
        while len(chars) > minlength and i > 0:
            if drop(chars[i]):
                del chars[i]
            i -= 1
    return "".join(chars[: max(minlength, 0)]) if len(chars) > minlength else "".join(chars)


def format_cell(x) -> str:
    """One table cell for people: booleans as yes/no, floats to 4 significant digits
    (scientific below 1e-4), missing values empty."""
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    if isinstance(x, float | np.floating):
        if np.isnan(x):
            return ""
        return f"{x:.4g}" if abs(x) >= 1e-4 or x == 0 else f"{x:.2e}"
    return "" if x is None else str(x)


def format_pvalue(p: float) -> str:
    """R's ``format.pval`` as summary tables use it (``< 2e-16`` below machine eps)."""
    return format_pvalues_r([p])[0]


def signif_stars(p: float) -> str:
    if not np.isfinite(p):
        return ""
    for cut, star in ((0.001, "***"), (0.01, "**"), (0.05, "*"), (0.1, ".")):
        if p < cut:
            return star
    return ""


def _table(rows: list[list[str]], header: list[str], align_left: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    out = []
    for r in [header] + rows:
        cells = [r[i].ljust(widths[i]) if i in align_left else r[i].rjust(widths[i])
                 for i in range(len(header))]
        out.append(" ".join(cells).rstrip())
    return out


def format_random_effects(fit: LmerFit) -> list[str]:
    """The ``Random effects:`` block: lme4's ``formatVC`` table (variances, SDs and
    correlations, :func:`crossed.display.rprint.format_vc_table`) and the counts."""
    terms = [(t.group, list(t.columns)) for t in fit.design.random.terms]
    lines = format_vc_table(vc_blocks(fit.varcorr(), terms, residual=True))
    groups = "; ".join(f"{g}, {n}" for g, n in fit.ngroups.items())
    return lines + [f"Number of obs: {fit.nobs}, groups:  {groups}"]


def format_fixed_effects(fit: LmerFit, ddf: str) -> list[str]:
    """The ``Fixed effects:`` block: R's ``printCoefmat`` of ``coef(summary(fit))``
    (:func:`crossed.display.rprint.format_coefmat`) and, when stars are printed, the
    significance legend :data:`SIGNIF_CODES`."""
    tab = coef_table(fit, ddf=ddf)
    if len(tab) == 0:
        return ["(none)"]
    lines, stars = format_coefmat(r_coefficients(tab, test="t"))
    if stars:
        lines += ["---", SIGNIF_CODES]
    return lines


def format_correlation(fit: LmerFit) -> list[str]:
    """``Correlation of Fixed Effects`` (lower triangle, abbreviated names), or a note."""
    p = len(fit.beta)
    if p <= 1:
        return []
    if p > 12:
        return [f"Correlation matrix not shown by default, as p = {p} > 12."]
    sd = np.sqrt(np.diag(fit.vcov_beta))
    corr = fit.vcov_beta / np.outer(sd, sd)
    names = list(fit.fixef_names)
    abbr = [r_abbreviate(n) for n in names]
    rows = [[names[i]] + [f"{corr[i, j]:.3f}" for j in range(i)] + [""] * (p - 1 - i)
            for i in range(1, p)]
    header = [""] + abbr[:-1]
    return _table(rows, header, {0})


def format_summary(fit: LmerFit, ddf: str = "satterthwaite") -> str:
    """The full summary text (see :meth:`crossed.fit.LmerFit.summary`)."""
    return str(summary_of(fit, ddf))


def summary_of(fit: LmerFit, ddf: str = "satterthwaite") -> Summary:
    """The summary of a fit: R's text, plus its tables (``random_effects``: the variance
    components of ``fit.varcorr()``; ``fixed_effects``: ``fit.coef_table(ddf)``) and the
    notebook view."""
    method = {"satterthwaite": "Satterthwaite's method",
              "kenward-roger": "Kenward-Roger's method"}.get(ddf)
    kind = "REML" if fit.reml else "maximum likelihood"
    head = f"Linear mixed model fit by {kind}"
    if method:
        head += f". t-tests use {method}"
    lines = [head + f" [{fit.engine} engine]", f"Formula: {fit.formula}",
             f"   Data: {fit.data_name}"]
    if fit.n_dropped:
        lines.append(f"   ({fit.n_dropped} rows dropped for missing values)")
    lines.append("")
    if fit.reml:
        lines.append(f"REML criterion at convergence: {fit.deviance:.1f}")
    else:
        vals = [fit.aic, fit.bic, fit.loglik, fit.deviance, fit.df_residual]
        head_cells = ["AIC", "BIC", "logLik", "deviance", "df.resid"]
        cells = [f"{v:.1f}" for v in vals[:4]] + [str(int(vals[4]))]
        lines += print_named_vector(head_cells, cells)
    lines += ["", "Scaled residuals: "]
    # (a fit on partitioned data holds no rows: its residuals stayed on the cluster)
    scaled = fit.residuals(type="pearson", scaled=True) if fit.design.holds_rows else None
    if scaled is None:
        lines += [" (not computed: the rows of a fit on partitioned data stay on the "
                  "cluster)"]
    else:
        lines += format_quantiles(np.quantile(scaled, [0, 0.25, 0.5, 0.75, 1.0]))
    lines += ["", "Random effects:"] + format_random_effects(fit)
    lines += ["", "Fixed effects:"] + format_fixed_effects(fit, ddf)
    corr = format_correlation(fit)
    if corr:
        lines += ["", "Correlation of Fixed Effects:" if len(corr) > 1 else ""] + corr
    notes = [m for m in fit.messages]
    if notes:
        lines += [""] + [f"note: {m}" for m in notes]
    fixed = coef_table(fit, ddf=ddf)
    if ddf == "none":
        fixed = fixed.drop(columns=[c for c in ("df", "p_value") if c in fixed.columns])
    header_end = lines.index("Scaled residuals: ") - 1
    tables = {"Scaled residuals": scaled_residual_table(
                  np.full(1, np.nan) if scaled is None else scaled),
              "Random effects": result_table(fit.varcorr()),
              "Fixed effects": result_table(fixed)}
    # the notebook view's heading: formula, data, the criterion and the counts
    header = lines[1:header_end] + [
        next(line for line in lines if line.startswith("Number of obs:"))]
    return Summary("\n".join(lines), tables, title=lines[0], header=header, notes=notes)


def scaled_residual_table(residuals: np.ndarray) -> pd.DataFrame:
    """The summary's ``Scaled residuals`` quantiles (Min, 1Q, Median, 3Q, Max) as a
    one-row table, for the notebook view."""
    q = np.quantile(np.asarray(residuals, dtype=float), [0, 0.25, 0.5, 0.75, 1.0])
    return pd.DataFrame([q], columns=["Min", "1Q", "Median", "3Q", "Max"])


def fit_html(fit) -> str:
    """The notebook view of a fit: its summary's heading, criteria and tables (any fit
    whose ``summary()`` returns a :class:`~crossed.tables.Summary`)."""
    summary = fit.summary()
    if isinstance(summary, Summary):
        return summary._repr_html_()
    return Summary(str(summary))._repr_html_()



def _r_named_vector(names: list[str], values: list[str], gap: int, width: int = 80) -> list[str]:
    """R's print of a named character vector (``quote = FALSE``): one common field width,
    each entry right justified and followed by ``gap`` blanks, as many a line as fit in
    ``width`` columns (R's default ``width = 80``)."""
    w = max(len(s) for s in names + values)
    per = max(1, width // (w + gap))
    lines = []
    for i in range(0, len(names), per):
        lines.append("".join(s.rjust(w) + " " * gap for s in names[i:i + per]))
        lines.append("".join(s.rjust(w) + " " * gap for s in values[i:i + per]))
    return lines


def _r_format7(x: float) -> str:
    """R's ``format(round(x, 4))`` of one number (7 significant digits)."""
    return format_number_column([round(float(x), 4)], 7)[0]


def format_print(fit) -> str:
    """What lme4's ``print(fit)`` shows for an lmer or a glmer fit: the title, formula and
    data, the criterion (REML) or the AIC/BIC/logLik/deviance/df.resid line, the random
    effects' standard deviations and correlations, the numbers of observations and groups,
    and the fixed-effect estimates (lme4 1.1-31's ``print.merMod``: ``digits = 4``,
    checked against R 4.2.2 on sleepstudy and cbpp), then the fit's messages (where lme4
    counts its warnings)."""
    glmm = hasattr(fit, "family")
    if glmm:
        lines = str(fit.summary()).splitlines()[:5]  # title (two lines), family, formula, data
    else:
        kind = "REML" if fit.reml else "maximum likelihood"
        lines = [f"Linear mixed model fit by {kind} [{fit.engine} engine]",
                 f"Formula: {fit.formula}", f"   Data: {fit.data_name}"]
    if not glmm and fit.reml:
        lines.append(f"REML criterion at convergence: {_r_format7(fit.deviance)}")
    else:
        deviance = -2 * fit.loglik if glmm else fit.deviance
        # lme4's .prt.aictab: format(round(x, 4), nsmall = 4); df.resid (nobs minus every
        # parameter, as lme4's df.residual) an integer
        lines += _r_named_vector(["AIC", "BIC", "logLik", "deviance", "df.resid"],
                                 [f"{round(float(v), 4):.4f}" for v in
                                  (fit.aic, fit.bic, fit.loglik, deviance)]
                                 + [str(int(fit.nobs - fit.npar))], 1)
    lines += ["Random effects:"] + _print_random_effects(fit)
    groups = "; ".join(f"{g}, {n}" for g, n in fit.ngroups.items())
    lines.append(f"Number of obs: {fit.nobs}, groups:  {groups}")
    lines.append("Fixed Effects:")
    names = [str(n) for n in fit.fixef_names]
    lines += _r_named_vector(names, format_number_column(np.asarray(fit.beta, float), 4), 2)
    # lme4 closes with the optimizer's warnings (a singular fit's "boundary (singular)"):
    # the fit's messages, each on its line
    lines += [str(m) for m in fit.messages]
    return "\n".join(lines)


def _print_random_effects(fit) -> list[str]:
    """print.merMod's random-effects block: standard deviations (formatted together to 4
    significant digits) and the correlations (2 decimals), cells left aligned."""
    vc = fit.varcorr()
    sd_rows = vc[vc["term2"].isna()]
    sds = format_number_column(sd_rows["sd_or_cor"].to_numpy(float), 4)
    sds = [s.rjust(max(len(t) for t in sds)) for s in sds]  # R's format: one common width
    sd_of = dict(zip(zip(sd_rows["group"], sd_rows["term1"].fillna(""), strict=True), sds,
                     strict=True))
    rows: list[list[str]] = []
    ncor = 0
    for term in fit.design.random.terms:
        for i, col in enumerate(term.columns):
            cors = []
            for j in range(i):
                c = vc[(vc.group == term.group) & (vc.term1 == term.columns[j])
                       & (vc.term2 == col)]
                cors.append(f"{c.sd_or_cor.iloc[0]:.2f}" if len(c) else "")
            ncor = max(ncor, len(cors))
            rows.append([term.group if i == 0 else "", col, sd_of[(term.group, col)]] + cors)
    if "Residual" in set(vc["group"]):
        rows.append(["Residual", "", sd_of[("Residual", "")]])
    header = ["Groups", "Name", "Std.Dev."] + (["Corr"] + [""] * (ncor - 1) if ncor else [])
    rows = [r + [""] * (len(header) - len(r)) for r in rows]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return [" " + " ".join(c.ljust(widths[i]) for i, c in enumerate(r))
            for r in [header] + rows]
