"""R's ``summary(glmer fit)`` as text (formatting only): GlmerFit.summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed.display.lmer import (
    SIGNIF_CODES,
    r_abbreviate,
    scaled_residual_table,
    signif_stars,
)
from crossed.inference.glmm_wald import glmm_coef_table
from crossed.tables import Summary, result_table

if TYPE_CHECKING:
    from crossed.model.glmm.result import GlmerResult as GlmerFit

__all__ = ["format_glmer_summary"]


def _r_format(values: list[float], digits: int = 4) -> list[str]:
    """R's ``format(x, digits=4)`` on a column, approximately: one number of decimals for
    all, enough for each value's ``digits`` significant digits (trailing zeros dropped
    where no value needs them); values below 1e-4 of the largest print as zeros."""
    finite = [abs(v) for v in values if np.isfinite(v) and v != 0]
    if not finite:
        return [f"{v:.0f}" if np.isfinite(v) else "NA" for v in values]
    top = max(finite)
    dec = 0
    for v in finite:
        if v < 1e-4 * top:
            continue
        need = digits - 1 - int(np.floor(np.log10(v)))
        text = f"{v:.{max(need, 0)}f}"
        while need > 0 and text.endswith("0"):  # fewer digits represent it already
            text = text[:-1]
            need -= 1
        dec = max(dec, need)
    return [f"{v:.{dec}f}" for v in values]


def _coef_decimals(values: np.ndarray, digits: int = 4) -> int:
    """printCoefmat's decimals for the Estimate and Std. Error columns: enough for the
    smallest value's ``digits`` significant digits."""
    finite = np.abs(values[np.isfinite(values) & (values != 0)])
    if finite.size == 0:
        return digits
    return int(max(0, digits - 1 - np.floor(np.log10(finite.min()))))


def format_glmer_summary(fit: GlmerFit) -> Summary:
    """lme4's ``print(summary(fit))`` for a glmer fit: the text, with the random- and
    fixed-effects tables (``.tables``) and a notebook view (:class:`~crossed.tables.Summary`)."""
    how = ("(Laplace\n  Approximation)" if fit.nagq == 1
           else "(Adaptive\n  Gauss-Hermite Quadrature, nAGQ = 0)" if fit.nagq == 0
           else f"(Adaptive\n  Gauss-Hermite Quadrature, nAGQ = {fit.nagq})")
    lines = ["Generalized linear mixed model fit by maximum likelihood " + how + " [glmerMod]",
             f" Family: {fit.family.name}  ( {fit.family.link.name} )",
             f"Formula: {fit.formula}", f"   Data: {fit.data_name}", ""]
    head = ["AIC", "BIC", "logLik", "deviance", "df.resid"]
    vals = [f"{fit.aic:.1f}", f"{fit.bic:.1f}", f"{fit.loglik:.1f}",
            f"{-2 * fit.loglik:.1f}", str(fit.df_residual)]
    wd = max(len(x) for x in head + vals)  # R prints a named vector: one common width
    lines.append(" ".join(h.rjust(wd) for h in head) + " ")
    lines.append(" ".join(v.rjust(wd) for v in vals) + " ")
    lines += ["", "Scaled residuals: "]
    q = np.quantile(fit.residuals("pearson"), [0, 0.25, 0.5, 0.75, 1])
    qs = [f"{v:.4f}" for v in q]
    wq = max(len(s) for s in qs)
    lines.append(" ".join(h.rjust(wq) for h in ["Min", "1Q", "Median", "3Q", "Max"]) + " ")
    lines.append(" ".join(s.rjust(wq) for s in qs) + " ")
    lines += ["", "Random effects:"]
    vc = fit.varcorr()
    vc = vc[vc["term2"].isna()]
    rows = [["Groups", "Name", "Variance", "Std.Dev."]]
    last = None
    variances = _r_format(list(vc["variance_or_cov"]))
    sds = _r_format(list(vc["sd_or_cor"]))
    for i, (_, r) in enumerate(vc.iterrows()):
        rows.append([r["group"] if r["group"] != last else "", str(r["term1"]),
                     variances[i], sds[i]])
        last = r["group"]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        lines.append(" " + " ".join(c.ljust(widths[i]) for i, c in enumerate(r)))
    groups = "; ".join(f"{g}, {n}" for g, n in fit.ngroups.items())
    lines.append(f"Number of obs: {fit.nobs}, groups:  {groups}")
    lines += ["", "Fixed effects:"]
    ct = glmm_coef_table(fit)
    names = list(ct.index)
    dec = _coef_decimals(np.concatenate([ct["Estimate"].to_numpy(),
                                         ct["Std. Error"].to_numpy()]))
    est = [f"{v:.{dec}f}" for v in ct["Estimate"]]
    se = [f"{v:.{dec}f}" for v in ct["Std. Error"]]
    zv = [f"{v:.3f}" for v in ct["z value"]]
    pv = _format_pvalues(ct["Pr(>|z|)"].to_numpy())
    st = [signif_stars(p) for p in ct["Pr(>|z|)"]]
    sw = max(len(x) for x in st)
    cols = [("Estimate", est), ("Std. Error", se), ("z value", zv), ("Pr(>|z|)", pv)]
    nw = max(len(n) for n in names)
    widths2 = [max(len(h), *(len(x) for x in c)) for h, c in cols]
    lines.append(" " * nw + " " + " ".join(h.rjust(k) for (h, _), k in
                                           zip(cols, widths2, strict=True)) + " " * (sw + 1))
    for i, n in enumerate(names):
        lines.append(n.ljust(nw) + " " + " ".join(c[i].rjust(k) for (_, c), k in
                                                  zip(cols, widths2, strict=True))
                     + " " + st[i].ljust(sw))
    lines += ["---", SIGNIF_CODES]
    p = len(names)
    if 1 < p <= 12:
        V = fit.vcov_beta
        d = np.sqrt(np.diag(V))
        C = V / np.outer(d, d)
        ab = [r_abbreviate(n) for n in names]
        lines += ["", "Correlation of Fixed Effects:"]
        cw = max(6, *(len(a) for a in ab[:-1]))
        nw = max(len(n) for n in names[1:])
        lines.append(" " * nw + " " + " ".join(a.ljust(cw) for a in ab[:-1]))
        for i in range(1, p):
            cells = [f"{C[i, j]:.3f}".replace("0.", ".", 0).rjust(cw) for j in range(i)]
            cells += [" " * cw] * (p - 1 - i)
            lines.append(names[i].ljust(nw) + " " + " ".join(cells))
    if fit.messages:  # (lme4 prints the optimizer's code only beside messages)
        code = 0 if fit.opt is None else fit.opt.return_code
        lines.append(f"optimizer (bobyqa) convergence code: {0 if code > 0 else code} "
                     f"({'OK' if code > 0 else fit.opt.message if fit.opt else ''})")
        lines += list(fit.messages)
    tables = {"Scaled residuals": scaled_residual_table(fit.residuals("pearson")),
              "Random effects": result_table(fit.varcorr()),
              "Fixed effects": result_table(glmm_coef_table(fit))}
    # the notebook view's heading: family, formula, data, the criteria and the counts
    header = lines[1:lines.index("Scaled residuals: ")] + [
        next(line for line in lines if line.startswith("Number of obs:"))]
    return Summary("\n".join(lines), tables, title=lines[0], header=header,
                   notes=list(fit.messages))


def _format_pvalues(p: np.ndarray) -> list[str]:
    """R's p-value column of printCoefmat (approximately): values from 1e-4 up in fixed
    notation with one number of decimals (3 significant digits for the smallest), smaller
    ones as ``1.47e-09``, below machine precision ``< 2e-16``."""
    fixed = p[np.isfinite(p) & (p >= 1e-4)]
    dec = 0
    if fixed.size:
        dec = int(max(0, 2 - np.floor(np.log10(fixed.min()))))
    out = []
    for v in p:
        if not np.isfinite(v):
            out.append("NA")
        elif v < 2.2e-16:
            out.append("< 2e-16")
        elif v < 1e-4:
            out.append(f"{v:.2e}")
        else:
            out.append(f"{v:.{dec}f}")
    return out

