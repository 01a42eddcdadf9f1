"""Numbers for people, formatted as R and emmeans format them.

One set of rules for every place crossed prints numbers: the text summary
(:mod:`crossed.display`), notebook tables (:class:`crossed.display.ResultTable`), the
command line (``crossed.cli._tables``) and the HTML report.

- A numeric column is formatted as R's ``format(x, digits = 4)`` formats a vector: every
  entry with the same number of decimals, enough for the entry that needs the most to show
  up to 4 significant digits (trailing zeros dropped when no entry needs them), in
  scientific notation when that is narrower (R's ``scipen = 0`` rule).
- p-values: R's ``format.pval`` (``< 2e-16`` below machine epsilon) in lme4/lmerTest-style
  tables, and emmeans' ``<.0001`` / four decimals in EMM and contrast tables, so that a
  Tukey-adjusted p of 0 prints ``<.0001``, never ``0``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["EPS_PVAL", "format_number_column", "format_pvalue_emmeans",
           "format_pvalue_r", "format_pvalues_r", "is_pvalue_column"]

EPS_PVAL = 2.220446049250313e-16  # R's .Machine$double.eps, format.pval's eps


def _sig_needed(x: float, digits: int) -> tuple[int, int]:
    """(significant digits needed, at most ``digits``; decimal exponent) of ``x`` rounded
    to ``digits`` significant digits: R's ``scientific()`` in formatReal."""
    full = f"{x:.{digits - 1}e}"
    mant, exp = full.split("e")
    kpower = int(exp)
    digits_str = mant.replace("-", "").replace(".", "").rstrip("0")
    return max(1, len(digits_str)), kpower


def format_number_column(values: Iterable[float], digits: int = 4, na: str = "NA") -> list[str]:
    """R's ``format(x, digits = digits)`` of a numeric vector, entry by entry.

    Parameters
    ----------
    values : iterable of float
    digits : int
        Significant digits of the entry that needs the most (R's ``digits``).
    na : str
        Text of a missing value (R prints ``NA``).

    Returns
    -------
    list of str
        Not padded (tables align them).
    """
    xs = [float(v) if v is not None else math.nan for v in values]
    finite = [x for x in xs if math.isfinite(x)]
    if not finite:
        return [na if math.isnan(x) else ("Inf" if x > 0 else "-Inf") for x in xs]
    neg = any(x < 0 for x in finite)
    rgt, left, mxsig, mxe, mne = 0, 1, 1, 0, 0
    for x in finite:
        if x == 0:
            continue
        sig, kp = _sig_needed(x, digits)
        rgt = max(rgt, sig - 1 - kp)
        left = max(left, kp + 1)
        mxsig = max(mxsig, sig)
        mxe, mne = max(mxe, kp), min(mne, kp)
    rgt = max(rgt, 0)
    fixed_width = neg + left + (rgt > 0) + rgt
    exp_digits = 3 if max(abs(mxe), abs(mne)) >= 100 else 2
    sci_width = neg + (mxsig > 1) + (mxsig - 1) + 1 + 2 + exp_digits
    out = []
    for x in xs:
        if math.isnan(x):
            out.append(na)
        elif math.isinf(x):
            out.append("Inf" if x > 0 else "-Inf")
        elif fixed_width <= sci_width:
            out.append(f"{x:.{rgt}f}")
        else:
            out.append(f"{x:.{mxsig - 1}e}")
    return out


def format_pvalue_r(p: float, digits: int = 3) -> str:
    """R's ``format.pval(p, digits)`` for one p-value: ``< 2e-16`` below machine epsilon,
    else ``digits`` significant digits (scientific below 1e-4, as R's format chooses)."""
    return format_pvalues_r([p], digits)[0]


def format_pvalues_r(pvalues: Iterable[float], digits: int = 3,
                     r_spacing: bool = False) -> list[str]:
    """R's ``format.pval(pv, digits)`` of a column (R 4.2.2's code): the values from 1e-4
    up (1e-3 up when ``digits`` is 1) formatted together as one column, the smaller ones
    together as another (R's ``fixp`` split), each as :func:`format_number_column`; below
    machine epsilon ``< 2e-16``.

    With ``r_spacing`` (the text summaries, :mod:`crossed.display.rprint`) that entry is
    written as R writes it: ``<2e-16`` when every other entry is at most 6 characters wide
    (or there is none). Result tables keep ``< 2e-16`` throughout."""
    ps = [float(p) if p is not None else math.nan for p in pvalues]
    out = ["NA"] * len(ps)
    tiny = [i for i, p in enumerate(ps) if math.isfinite(p) and p < EPS_PVAL]
    rest = [i for i, p in enumerate(ps) if math.isfinite(p) and p >= EPS_PVAL]
    expo = {i: math.floor(math.log10(ps[i])) for i in rest}
    fix = [i for i in rest if expo[i] >= -3 or (expo[i] == -4 and digits > 1)]
    sci = [i for i in rest if i not in fix]
    for group in (fix, sci):
        for i, text in zip(group, format_number_column([ps[i] for i in group], digits),
                           strict=True):
            out[i] = text
    if tiny:
        small_digits = max(1, digits - 2)
        if rest:
            nc = max(len(out[i]) for i in rest)
            if small_digits > 1 and small_digits + 6 > nc:
                small_digits = max(1, nc - 7)
            sep = "" if small_digits == 1 and nc <= 6 else " "
        else:
            sep = "" if small_digits == 1 else " "
        if not r_spacing:
            sep = " "
        text = "<" + sep + format_number_column([EPS_PVAL], small_digits)[0]
        for i in tiny:
            out[i] = text
    return out


def format_pvalue_emmeans(p: float) -> str:
    """emmeans' p-value: ``<.0001`` below 1e-4 (a Tukey p of 0 included), else 4 decimals."""
    if p is None or not math.isfinite(p):
        return "NA"
    if p < 1e-4:
        return "<.0001"
    return f"{p:.4f}"


def is_pvalue_column(name: str) -> bool:
    """Whether a column holds p-values (crossed's names: ``p_value``, ``*_p``, ``Pr(...)``)."""
    n = str(name)
    return n == "p_value" or n.endswith("_p") or n.startswith("p_") or n.startswith("Pr(") \
        or n == "p.value"

