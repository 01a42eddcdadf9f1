"""R's ``summary(glmer fit)`` as text (formatting only): GlmerFit.summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed.display.lmer import SIGNIF_CODES, r_abbreviate, scaled_residual_table
from crossed.display.rprint import format_coefmat, format_quantiles, format_vc_table, vc_blocks
from crossed.inference.coefs import r_coefficients
from crossed.inference.glmm_wald import glmm_coef_table
from crossed.tables import Summary, result_table

if TYPE_CHECKING:
    from crossed.model.glmm.result import GlmerResult as GlmerFit

__all__ = ["format_glmer_summary"]

_OPTIMIZER_NAMES = {"NLOPT_LN_BOBYQA": "bobyqa", "NLOPT_LN_NELDERMEAD": "nelder_mead"}
"""The line "optimizer (...) convergence code" names the native engine's NLopt algorithm
by ``LmerControl.optimizer``'s name."""


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
    # (a fit on partitioned data holds no rows: its residuals stayed on the cluster)
    scaled = fit.residuals("pearson") if fit.design.holds_rows else None
    if scaled is None:
        lines += [" (not computed: the rows of a fit on partitioned data stay on the "
                  "cluster)"]
    else:
        lines += format_quantiles(np.quantile(scaled, [0, 0.25, 0.5, 0.75, 1]))
    lines += ["", "Random effects:"]
    vc = fit.varcorr()
    terms = [(t.group, list(t.columns)) for t in fit.design.random.terms]
    lines += format_vc_table(vc_blocks(vc, terms, residual=False))
    groups = "; ".join(f"{g}, {n}" for g, n in fit.ngroups.items())
    lines.append(f"Number of obs: {fit.nobs}, groups:  {groups}")
    lines += ["", "Fixed effects:"]
    ct = glmm_coef_table(fit)
    names = list(ct["term"])
    coefmat, stars = format_coefmat(r_coefficients(ct, test="z"))
    lines += coefmat
    if stars:
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
        name = "bobyqa" if fit.opt is None else _OPTIMIZER_NAMES.get(fit.opt.optimizer,
                                                                      fit.opt.optimizer)
        # lme4's nloptwrap: NLopt's status where it is negative or 5 (maxeval), else 0
        shown = code if code < 0 or code == 5 else 0
        lines.append(f"optimizer ({name}) convergence code: {shown} "
                     f"({'OK' if shown == 0 else fit.opt.message if fit.opt else ''})")
        lines += list(fit.messages)
    tables = {"Scaled residuals": scaled_residual_table(
                  np.full(1, np.nan) if scaled is None else scaled),
              "Random effects": result_table(fit.varcorr()),
              "Fixed effects": result_table(glmm_coef_table(fit))}
    # the notebook view's heading: family, formula, data, the criteria and the counts
    header = lines[1:lines.index("Scaled residuals: ")] + [
        next(line for line in lines if line.startswith("Number of obs:"))]
    return Summary("\n".join(lines), tables, title=lines[0], header=header,
                   notes=list(fit.messages))
