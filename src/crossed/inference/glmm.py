"""Tests and R² of generalised linear mixed models (``GlmerFit``), as R computes them.

- :func:`wald_anova`: χ² Wald tests per fixed term, ``fit.anova(type=2|3)``. The hypothesis
  matrix L of each term is lmerTest's (:mod:`crossed.inference.hypotheses`: Type II or
  Type III on the model's own contrasts, the intercept left out); the statistic is
  χ² = (Lβ̂)ᵀ (L V Lᵀ)⁻¹ (Lβ̂) with V = ``vcov(fit)`` and df = rank(L), p from χ²_df.
  Validated against the same quantity computed in base R from ``lmerTest:::
  get_contrasts_type2/3`` on lme4's ``glmer`` fits (``tests/data/reference/glmm/glmm.R``).
  For a term in no interaction, Type II = Type III = the joint Wald test of its columns.
- :func:`drop1`: R's ``drop1(fit, test = "Chisq")`` for a ``glmerMod``: each fixed term not
  contained in another is removed, the model refitted by the same engine, and
  LRT = −2ℓ(reduced) − (−2ℓ(full)) tested on χ² with the number of columns removed.
- :func:`r2_nakagawa_glmm`: ``performance::r2_nakagawa`` 0.10.2 (insight 0.19.0) for
  binomial and Poisson fits (see its docstring).
- Likelihood-ratio tests between fits: :func:`crossed.inference.lrt.compare`, which takes
  ``GlmerFit`` s (lme4's ``anova(m0, m1)``; no refit, a GLMM is fitted by ML).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from crossed.inference.hypotheses import TermInfo, hypotheses

if TYPE_CHECKING:
    from crossed.design import Design

__all__ = ["DROP1_COLUMNS", "WALD_COLUMNS", "distribution_variance", "drop1",
           "fixed_reduced_design", "glmm_anova", "r2_nakagawa_glmm", "refit_design",
           "wald_anova"]

WALD_COLUMNS = ["term", "statistic", "df", "p_value"]
DROP1_COLUMNS = ["term", "npar", "aic", "statistic", "p_value"]


def wald_chisq(beta: np.ndarray, V: np.ndarray, L: np.ndarray) -> tuple[float, int]:
    """χ² = (Lβ)ᵀ (L V Lᵀ)⁺ (Lβ) and rank(L) (a generalised inverse when L V Lᵀ is singular)."""
    L = np.atleast_2d(np.asarray(L, dtype=float))
    q = int(np.linalg.matrix_rank(L))
    if q == 0:
        return float("nan"), 0
    Lb = L @ beta
    M = L @ V @ L.T
    try:
        chisq = float(Lb @ np.linalg.solve(M, Lb))
    except np.linalg.LinAlgError:
        chisq = float(Lb @ np.linalg.pinv(M) @ Lb)
    return chisq, q


def wald_anova(fit: Any, type: int | str = 3) -> pd.DataFrame:
    """χ² Wald tests of the fixed-effects terms of a GLMM (``fit.anova(type=...)``).

    Parameters
    ----------
    fit : GlmerFit
    type : {2, 3}
        lmerTest's Type II (marginal to contained terms) or Type III hypotheses, on the
        model's own contrasts (treatment unless the data say otherwise). Type 1
        (sequential) is accepted too.

    Returns
    -------
    pandas.DataFrame
        One row per fixed term (intercept excluded), in the model's order: ``term``,
        ``statistic`` (Wald χ²), ``df`` (rank of the hypothesis), ``p_value`` (upper χ²
        tail). ``attrs``: ``type``, ``test`` (``"Wald chisq"``), ``hypotheses`` (term ->
        L). Validated at 1e-6 (relative) against the base-R computation in
        ``tests/data/reference/glmm/glmm.R`` on lme4 1.1-31 fits.
    """
    Ls = hypotheses(fit, type)
    beta = np.asarray(fit.beta, dtype=float)
    V = np.asarray(fit.vcov_beta, dtype=float)
    rows = []
    for term, L in Ls.items():
        chisq, q = wald_chisq(beta, V, L)
        rows.append({"term": term, "statistic": chisq, "df": q,
                     "p_value": float(stats.chi2.sf(chisq, q)) if q > 0 else np.nan})
    out = pd.DataFrame(rows, columns=WALD_COLUMNS)
    out.attrs.update(type=str(type), test="Wald chisq", hypotheses=Ls)
    return out


def glmm_anova(fit: Any, *others: Any, type: int | str = 3,
               names: list[str] | None = None) -> pd.DataFrame:
    """``fit.anova()``: Wald χ² tests per term (:func:`wald_anova`), or, given other fits,
    their likelihood-ratio comparison (lme4's ``anova(m0, m1)``,
    :func:`crossed.inference.lrt.compare`: ``npar``, ``aic``, ``bic``, ``loglik``,
    ``deviance`` (−2ℓ), ``statistic`` (χ²), ``df``, ``p_value``)."""
    if others:
        from crossed.inference.lrt import compare

        return compare(fit, *others, names=names)
    return wald_anova(fit, type=type)


# ---------------------------------------------------------------------- refits
def fixed_reduced_design(design: Design, drop_term: str | None) -> Design:
    """The design without the columns of one fixed term (``None``: intercept only).

    Only the model matrix, its names, term labels and assignment change: the reduced
    design is for refitting (likelihoods), not for predicting on new data.
    """
    fd = design.fixed
    labels = list(fd.term_labels)
    if drop_term is None:
        if "(Intercept)" not in labels:
            raise ValueError("the null model needs an intercept; the fit has none")
        j = labels.index("(Intercept)")
        keep = [c for c, a in enumerate(fd.assign) if a == j]
        new_labels = ["(Intercept)"]
        new_assign = [0] * len(keep)
    else:
        if drop_term not in labels:
            raise ValueError(f"no fixed term {drop_term!r}; the terms are {labels}")
        j = labels.index(drop_term)
        keep = [c for c, a in enumerate(fd.assign) if a != j]
        new_labels = [t for t in labels if t != drop_term]
        remap = {old: new_labels.index(t) for old, t in enumerate(labels) if t != drop_term}
        new_assign = [remap[fd.assign[c]] for c in keep]
    X = np.ascontiguousarray(fd.X[:, keep])
    fixed = replace(fd, X=X, names=tuple(fd.names[c] for c in keep),
                    term_labels=tuple(new_labels), assign=tuple(new_assign))
    return replace(design, fixed=fixed)


def refit_design(fit: Any, design: Design) -> Any:
    """``design`` fitted by the fit's engine with its family, nAGQ and optimiser settings
    (warnings muted)."""
    from crossed.engines import fit_glmm_with

    opt = getattr(fit, "opt", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_glmm_with(fit.engine, design, family=fit.family, nagq=fit.nagq,
                             control=getattr(opt, "control", None),
                             data_name=getattr(fit, "data_name", "data"))


def drop1(fit: Any) -> pd.DataFrame:
    """Likelihood-ratio test of dropping each fixed term (R's ``drop1(fit, test="Chisq")``).

    Terms contained in another term (a main effect inside an interaction) are not dropped,
    as R's ``drop.scope``. Each reduced model is refitted by the fit's engine.

    Returns
    -------
    pandas.DataFrame
        First row ``"<none>"`` (the fit itself), then one row per droppable term: ``term``,
        ``npar`` (columns removed; NaN on the first row, as R prints), ``aic`` (AIC of the
        model without the term), ``statistic`` (LRT = deviance difference, −2ℓ),
        ``p_value`` (χ² with ``npar`` df). Validated against R's ``drop1`` on lme4 1.1-31.
    """
    info = TermInfo(fit)
    droppable = [t for t in info.labels if not info.contained[t]]
    rows = [{"term": "<none>", "npar": np.nan, "aic": fit.aic, "statistic": np.nan,
             "p_value": np.nan}]
    dev = -2.0 * fit.loglik
    for term in droppable:
        red = refit_design(fit, fixed_reduced_design(fit.design, term))
        k = len(info.cols[term])
        lrt = -2.0 * red.loglik - dev
        rows.append({"term": term, "npar": k, "aic": red.aic, "statistic": lrt,
                     "p_value": float(stats.chi2.sf(lrt, k))})
    out = pd.DataFrame(rows, columns=DROP1_COLUMNS)
    out.attrs["test"] = "Chisq"
    return out


# ---------------------------------------------------------------------- Nakagawa R²
def distribution_variance(fit: Any, null_intercept: float | None = None) -> float:
    """insight 0.19's distribution-specific variance of a binomial or Poisson GLMM.

    Binomial: π²/3 (logit), 1 (probit), π²/6 (cloglog). Poisson (log): ln(1 + 1/μ) with
    μ = exp(β₀) of the null model ``y ~ 1 + (random terms)`` (same offset and weights),
    refitted by the fit's engine unless ``null_intercept`` (β₀) is given.
    """
    def null_intercept_of() -> float:
        if null_intercept is not None:
            return float(null_intercept)
        return float(refit_design(fit, fixed_reduced_design(fit.design, None)).beta[0])

    return fit.family.distribution_variance(null_intercept_of)


def _term_covariances(fit: Any) -> list[tuple[Any, np.ndarray]]:
    """(term, Σ) of every random term, Σ = Λ Λᵀ for that term (σ = 1 for a GLMM)."""
    out = []
    for term in fit.design.random.terms:
        blk = fit.design.random.blocks[term.block]
        k = len(term.columns)
        T = blk.template(np.asarray(fit.theta))[term.offset: term.offset + k,
                                                term.offset: term.offset + k]
        out.append((term, T @ T.T))
    return out


def r2_nakagawa_glmm(fit: Any, null_intercept: float | None = None,
                     tolerance: float = 1e-5) -> pd.DataFrame:
    """Nakagawa's marginal and conditional R² of a binomial or Poisson GLMM, as
    ``performance::r2_nakagawa`` 0.10.2 (insight 0.19.0) computes it.

    - σ²_f: sample variance (n − 1) of Xβ̂ (no offset, no random effects);
    - σ²_r: Σ over random terms of mean_i z_iᵀ Σ z_i (z_i: the term's columns taken from X,
      an intercept added when X has none), leaving out observation-level terms (as many
      levels as observations), which go to the dispersion variance instead;
    - σ²_ε = distribution variance (:func:`distribution_variance`) + dispersion variance;
    - when some variance parameter is below ``tolerance`` (a singular fit), insight reports
      no random variance: conditional R² is NaN and marginal = σ²_f / (σ²_f + σ²_ε).

    Marginal R² = σ²_f / (σ²_f + σ²_r + σ²_ε), conditional = (σ²_f + σ²_r) / (same).

    Parameters
    ----------
    fit : GlmerFit
    null_intercept : float, optional
        Poisson only: β₀ of the null model (refitted when not given).
    tolerance : float
        insight's singularity tolerance on the diagonal elements of θ.

    Returns
    -------
    pandas.DataFrame
        One row: ``marginal``, ``conditional``, ``var_fixed``, ``var_random``,
        ``var_residual`` (distribution + dispersion), ``var_distribution``,
        ``var_dispersion``. Validated against performance 0.10.2 on lme4 1.1-31 fits.
    """
    if (isinstance(tolerance, bool | np.bool_) or not isinstance(tolerance, numbers.Real)
            or not tolerance >= 0):
        raise TypeError(f"tolerance must be a number >= 0, got {tolerance!r}")
    if null_intercept is not None and (isinstance(null_intercept, bool | np.bool_) or not
                                       isinstance(null_intercept, numbers.Real)):
        raise TypeError(f"null_intercept must be a number (or None), got {null_intercept!r}")
    design = fit.design
    X = design.X
    names = list(design.fixed.names)
    var_fixed = float(np.var(X @ np.asarray(fit.beta), ddof=1))
    if "(Intercept)" not in names:
        X = np.column_stack([np.ones(len(X)), X])
        names = ["(Intercept)"] + names
    col = {nm: j for j, nm in enumerate(names)}
    n = design.n
    var_random = var_disp = 0.0
    for term, S in _term_covariances(fit):
        keep = [i for i, c in enumerate(term.columns) if c in col]
        if not keep:
            continue
        Z = X[:, [col[term.columns[i]] for i in keep]]
        v = float(np.sum((Z @ S[np.ix_(keep, keep)]) * Z) / n)
        if design.random.blocks[term.block].nlevels == n:
            var_disp += v
        else:
            var_random += v
    lower = np.asarray(design.random.theta_lower)
    theta = np.asarray(fit.theta)
    singular = bool(np.any(np.abs(theta[lower == 0]) < tolerance))
    var_dist = distribution_variance(fit, null_intercept)
    resid = var_dist + var_disp
    if singular:
        marginal = var_fixed / (var_fixed + resid)
        conditional = np.nan
    else:
        total = var_fixed + var_random + resid
        marginal = var_fixed / total
        conditional = (var_fixed + var_random) / total
    return pd.DataFrame([{
        "marginal": marginal, "conditional": conditional, "var_fixed": var_fixed,
        "var_random": np.nan if singular else var_random, "var_residual": resid,
        "var_distribution": var_dist, "var_dispersion": var_disp}])
