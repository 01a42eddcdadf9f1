"""R's ``summary(glmer fit)`` as text (formatting only; registered as GlmerFit.summary)."""

from __future__ import annotations

import numpy as np

from crossed.display import format_pvalue, r_abbreviate, signif_stars
from crossed.model.glmm.result import GlmerFit, provide

__all__ = ["format_glmer_summary"]


def _g(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def format_glmer_summary(fit: GlmerFit) -> str:
    """The text of lme4's ``print(summary(fit))`` for a glmer fit."""
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
    for _, r in vc.iterrows():
        rows.append([r["group"] if r["group"] != last else "", str(r["term1"]),
                     _g(r["variance_or_cov"]), _g(r["sd_or_cor"])])
        last = r["group"]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        lines.append(" " + " ".join(c.ljust(widths[i]) for i, c in enumerate(r)))
    groups = ", ".join(f"{g}, {n}" for g, n in fit.ngroups.items())
    lines.append(f"Number of obs: {fit.nobs}, groups:  {groups}")
    lines += ["", "Fixed effects:"]
    ct = fit.coef_table()
    names = list(ct.index)
    est = [f"{v:.4f}" for v in ct["Estimate"]]
    se = [f"{v:.4f}" for v in ct["Std. Error"]]
    zv = [f"{v:.3f}" for v in ct["z value"]]
    pv = [format_pvalue(p) for p in ct["Pr(>|z|)"]]
    st = [signif_stars(p) for p in ct["Pr(>|z|)"]]
    cols = [("Estimate", est), ("Std. Error", se), ("z value", zv), ("Pr(>|z|)", pv)]
    nw = max(len(n) for n in names)
    widths2 = [max(len(h), *(len(x) for x in c)) for h, c in cols]
    lines.append(" " * nw + " " + " ".join(h.rjust(k) for (h, _), k in
                                           zip(cols, widths2, strict=True)) + "    ")
    for i, n in enumerate(names):
        lines.append(n.ljust(nw) + " " + " ".join(c[i].rjust(k) for (_, c), k in
                                                  zip(cols, widths2, strict=True))
                     + " " + st[i].ljust(3))
    lines += ["---", "Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1"]
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
    if fit.messages:
        lines += [""] + [f"({m})" for m in fit.messages]
    return "\n".join(lines)


provide("summary", format_glmer_summary)
