"""R's number formatting for the text summaries: ``printCoefmat`` (the fixed-effects
table) and lme4's ``formatVC`` (the random-effects table).

One place for the digits rules, used by the LMM summary (:mod:`crossed.display.lmer`) and
the GLMM summary (:mod:`crossed.display.glmm`). Formatting only: the numbers come from
the inference layer. The rules are R 4.2.2's code (``printCoefmat``, ``format.pval``,
``formatReal``) and lme4 1.1-31's ``formatVC`` and ``.prt.resids``; tests/display/
test_rprint.py compares the text with R's on sleepstudy, the README's exist_multi model and
a cbpp GLMM.

``print(summary(fit))`` passes ``digits = max(3, getOption("digits") - 3) = 4`` to all
three blocks: ``formatVC``'s own default (5) is what ``print(VarCorr(fit))`` uses, not the
summary (R's text: sleepstudy's variances print ``612.10 / 35.07 / 654.94``; with 5 digits
they would be ``612.100 / 35.072 / 654.940``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

import numpy as np
import pandas as pd

from crossed._format import format_number_column, format_pvalues_r

__all__ = ["COEF_DIGITS", "VCBlock", "format_coefmat", "format_quantiles", "format_vc_table",
           "print_matrix", "print_named_vector", "vc_blocks"]

COEF_DIGITS = 4
"""``printCoefmat``'s ``digits`` in lme4's and lmerTest's summaries:
``max(3, getOption("digits") - 3)`` with R's default ``digits = 7``."""

_STARS = ((0.001, "***"), (0.01, "**"), (0.05, "*"), (0.1, "."), (1.0, " "))


def _round_half_even(x: np.ndarray, decimals: int) -> np.ndarray:
    """R's ``round(x, d)`` (R >= 4.0.0): the exact binary value rounded to ``d`` decimals,
    exact ties to even, so ``round(0.15, 1)`` is 0.1 (0.15 is stored as 0.1499...) and
    ``round(2.5)`` is 2, as R gives them (NumPy's ``round`` scales first: 0.2)."""
    out = np.array(x, dtype=float, copy=True)
    step = Decimal(1).scaleb(-decimals)
    with localcontext() as ctx:
        ctx.prec = 800
        for i, v in np.ndenumerate(out):
            if math.isfinite(v):
                out[i] = float(Decimal(float(v)).quantize(step, rounding=ROUND_HALF_EVEN))
    return out


def _stars(p: float) -> str:
    """R's ``symnum`` of a p-value with printCoefmat's cutpoints (intervals closed on the
    right: 0.05 is ``*``)."""
    for cut, star in _STARS:
        if p <= cut:
            return star
    return " "


def format_coefmat(coefs: pd.DataFrame, digits: int = COEF_DIGITS,
                   has_pvalue: bool | None = None) -> tuple[list[str], bool]:
    """R's ``printCoefmat(coefs, digits = 4)``: the formatted cells of each column.

    Parameters
    ----------
    coefs : pandas.DataFrame
        The coefficient matrix with R's names (``coef(summary(fit))``, as
        :func:`crossed.inference.coefs.r_coefficients` gives it): the estimate-like
        columns, then the test statistic, then the p-value if any; indexed by the terms.
    digits : int
        printCoefmat's ``digits``.
    has_pvalue : bool, optional
        Whether the last column holds p-values (default: its name starts with ``Pr(``).

    Returns
    -------
    (list of str, bool)
        The printed lines (header, one per term) and whether stars were printed (R
        prints the significance legend below only then). The columns before the
        statistic (``Estimate``, ``Std. Error`` and lmerTest's ``df``) are rounded to the
        decimals of the smallest entry's ``digits`` significant digits and formatted
        together with ``format(, digits)``; the statistic ``format(round(x, 3),
        digits)``; p-values ``format.pval(p, 3)``; stars only when a p-value is below 0.1.
    """
    names = [str(c) for c in coefs.columns]
    nc = len(names)
    if has_pvalue is None:
        has_pvalue = names[-1].startswith("Pr(")
    xm = coefs.to_numpy(dtype=float)
    nr = xm.shape[0]
    k = nc - int(has_pvalue) - 1
    cs = list(range(k))
    tst = k
    dig_tst = max(1, min(5, digits - 1))
    cells = [[""] * nc for _ in range(nr)]
    if cs:
        block = xm[:, cs]
        acs = np.abs(block[np.isfinite(block)])
        acs = acs[acs != 0]
        if np.isfinite(block).any():
            digmin = 1 + (np.floor(np.log10(acs.min())) if acs.size else 0)
            dec = max(1, int(digits - digmin))
            rounded = _round_half_even(block, dec)
            flat = format_number_column(rounded.T.ravel(), digits)  # R: the matrix as one
            wc = max(len(t) for t in flat)  # format() pads to one width
            flat = [t.rjust(wc) for t in flat]
            for j, col in enumerate(cs):
                for i in range(nr):
                    cells[i][col] = flat[j * nr + i]
    tvals = _round_half_even(xm[:, tst], dig_tst)
    for i, text in enumerate(format_number_column(tvals, digits)):
        cells[i][tst] = text
    # an entry that is not 0 but prints as 0 (or the reverse): format(x, digits - 1)
    fix = [(i, j) for i in range(nr) for j in cs
           if np.isfinite(xm[i, j]) and (xm[i, j] == 0) != (_as_float(cells[i][j]) == 0)]
    if fix:
        redo = format_number_column([xm[i, j] for i, j in fix], max(1, digits - 1))
        for (i, j), text in zip(fix, redo, strict=True):
            cells[i][j] = text
    for i in range(nr):
        for j in range(nc):
            if math.isnan(xm[i, j]):
                cells[i][j] = "NA"
    stars: list[str] = []
    if has_pvalue:
        pv = xm[:, nc - 1]
        ok = ~np.isnan(pv)
        texts = format_pvalues_r(pv[ok], dig_tst, r_spacing=True)
        for i, text in zip(np.flatnonzero(ok), texts, strict=True):
            cells[i][nc - 1] = text
        if ok.any() and bool(np.any(pv[ok] < 0.1)):
            stars = ["" if np.isnan(p) else _stars(p) for p in pv]
            w = max(len(s) for s in stars)
            stars = [s.ljust(w) for s in stars]
    header = names + ([""] if stars else [])
    rows = [c + ([stars[i]] if stars else []) for i, c in enumerate(cells)]
    return print_matrix(rows, header, [str(t) for t in coefs.index]), bool(stars)


def _as_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def print_matrix(rows: list[list[str]], header: list[str], row_names: list[str]) -> list[str]:
    """R's ``print.default`` of a character matrix with ``quote = FALSE, right = TRUE``:
    row names left-justified, each column right-justified to its widest entry or header,
    one space between columns (trailing spaces kept, as R prints them)."""
    nw = max((len(n) for n in row_names), default=0)
    widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(header)]
    out = [" " * nw + "".join(" " + h.rjust(w) for h, w in zip(header, widths, strict=True))]
    for name, r in zip(row_names, rows, strict=True):
        out.append(name.ljust(nw) + "".join(" " + c.rjust(w)
                                            for c, w in zip(r, widths, strict=True)))
    return out


def print_named_vector(names: Sequence[str], cells: Sequence[str]) -> list[str]:
    """R's ``print`` of a named vector whose entries are already formatted: every entry
    and name right-justified to one common width, a space between (and after) them."""
    w = max(len(s) for s in [*names, *cells])
    return [" ".join(n.rjust(w) for n in names) + " ",
            " ".join(c.rjust(w) for c in cells) + " "]


def format_quantiles(values: Sequence[float], digits: int = COEF_DIGITS) -> list[str]:
    """The ``Scaled residuals:`` block of lme4's summary (``.prt.resids``): the quantiles
    (Min, 1Q, Median, 3Q, Max) through ``zapsmall(q, digits + 1)`` (rounded to
    ``digits + 1 - log10(max|q|)`` decimals, that count rounded to an integer as R's
    ``round`` takes it), then formatted together with ``format(, digits)`` and printed as
    a named vector."""
    q = np.asarray([float(v) for v in values])
    mx = float(np.max(np.abs(q))) if q.size else 0.0
    zap = digits + 1 if mx <= 0 else max(0, int(np.floor(digits + 1 - math.log10(mx) + 0.5)))
    cells = format_number_column(_round_half_even(q, zap), digits)
    return print_named_vector(["Min", "1Q", "Median", "3Q", "Max"], cells)


VCBlock = tuple[str, list[str], Sequence[float], Sequence[float], np.ndarray | None]
"""One random-effects term of :func:`format_vc_table`: (group, names, variances, SDs,
correlation matrix or None)."""


def vc_blocks(vc: pd.DataFrame, terms: Sequence[tuple[str, Sequence[str]]],
              residual: bool) -> list[VCBlock]:
    """The :func:`format_vc_table` blocks of a fit's ``varcorr()`` table (columns
    ``group``, ``term1``, ``term2``, ``variance_or_cov``, ``sd_or_cor``).

    Parameters
    ----------
    vc : pandas.DataFrame
        ``fit.varcorr()``.
    terms : sequence of (group, columns)
        The random-effects terms in the order lme4 prints them.
    residual : bool
        Add the ``Residual`` row (an LMM's).
    """
    blocks: list[VCBlock] = []
    for group, columns in terms:
        cols = [str(c) for c in columns]
        sub = vc[(vc["group"] == group) & vc["term1"].isin(cols)]
        var = sub[sub["term2"].isna()].set_index("term1")
        variances = [float(var.loc[c, "variance_or_cov"]) for c in cols]
        sds = [float(var.loc[c, "sd_or_cor"]) for c in cols]
        corr = None
        if len(cols) > 1:
            corr = np.eye(len(cols))
            for r in sub[sub["term2"].notna()].itertuples():
                if r.term1 in cols and r.term2 in cols:
                    i, j = cols.index(r.term1), cols.index(r.term2)
                    corr[i, j] = corr[j, i] = float(r.sd_or_cor)
        blocks.append((str(group), cols, variances, sds, corr))
    if residual:
        res = vc[vc["group"] == "Residual"].iloc[0]
        blocks.append(("Residual", [""], [float(res["variance_or_cov"])],
                       [float(res["sd_or_cor"])], None))
    return blocks


def format_vc_table(blocks: Sequence[VCBlock], digits: int = COEF_DIGITS) -> list[str]:
    """lme4's ``formatVC`` table as ``print(summary(fit))`` prints it.

    Parameters
    ----------
    blocks : sequence of (group, names, variances, sds, correlation)
        One per random-effects term, in lme4's order, then the residual's
        (``("Residual", [""], [σ²], [σ], None)``) for an LMM; ``correlation`` is the
        term's correlation matrix (None for a single column).
    digits : int
        ``format``'s digits of the Variance and Std.Dev. columns: 4, what
        ``print(summary(fit))`` passes (``max(3, getOption("digits") - 3)``; checked
        against R 4.2.2's text, e.g. sleepstudy's ``612.10 / 35.07 / 654.94``).

    Returns
    -------
    list of str
        The header and one line per row: every column left-justified (R's
        ``print.default`` of a character matrix), numbers formatted together per column
        (and so right-aligned among themselves), correlations ``format(round(r, 2),
        nsmall = 2)`` per term, lower triangle only.
    """
    var = format_number_column([float(v) for b in blocks for v in b[2]], digits)
    sd = format_number_column([float(v) for b in blocks for v in b[3]], digits)
    wv, ws = max(len(s) for s in var), max(len(s) for s in sd)
    maxlen = max(len(b[1]) for b in blocks)
    rows: list[list[str]] = []
    k = 0
    for group, names, _, _, corr in blocks:
        n = len(names)
        cc = [[""] * max(maxlen - 1, 0) for _ in range(n)]
        if corr is not None and n > 1:
            text = [[f"{round(float(corr[i, j]), 2):.2f}" for j in range(n)] for i in range(n)]
            w = max(len(t) for r in text for t in r)
            for i in range(n):
                for j in range(min(i, maxlen - 1)):
                    cc[i][j] = text[i][j].rjust(w)
        for i, name in enumerate(names):
            rows.append([group if i == 0 else "", name, var[k].rjust(wv), sd[k].rjust(ws)]
                        + cc[i])
            k += 1
    header = ["Groups", "Name", "Variance", "Std.Dev."]
    if maxlen > 1:
        header += ["Corr"] + [""] * (maxlen - 2)
    widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(header)]
    return ["".join(" " + c.ljust(w) for c, w in zip(r, widths, strict=True))
            for r in [header, *rows]]
