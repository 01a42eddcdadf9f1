"""lme4's ``rePCA``: principal components of each grouping factor's random effects.

For each grouping factor the relative covariance factor Λ_g (the lower-triangular block of
θ over all the factor's terms: ``(x || g)``'s terms together, as lme4's ``bdiag`` of
``getME(m, "Tlist")``) is decomposed by its singular values d_1 >= ... >= d_q. They are the
standard deviations of the random effects' principal components in units of the residual
standard deviation (LMM; a GLMM's are on the scale of θ itself), as lme4's ``rePCA`` gives
them (``svd(Λ)$d``). A component with d ≈ 0 is a direction of the random effects with no
variance: the covariance matrix is singular, the term over-parametrised (Bates et al. 2015,
"Parsimonious mixed models").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["REPCA_COLUMNS", "R_ROWS", "deficient_groups", "r_importance", "re_pca"]

R_ROWS = ["Standard deviation", "Proportion of Variance", "Cumulative Proportion"]

REPCA_COLUMNS = ["group", "component", "sd", "proportion", "cumulative"]


def re_pca(fit: Any) -> pd.DataFrame:
    """Principal components of the random effects per grouping factor (lme4's ``rePCA``).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
        A fitted mixed model.

    Returns
    -------
    pandas.DataFrame
        One row per (grouping factor, component), the factors in lme4's order (most levels
        first), components by decreasing SD:

        * ``group``: the grouping factor (``"Subject"``, ``"model:dataset"``);
        * ``component``: 1, 2, ... (R's ``PC1``, ``PC2``, ...);
        * ``sd``: the component's standard deviation relative to the residual SD (a singular
          value of Λ_g; R's "Standard deviation");
        * ``proportion``: sd² / Σ sd² over the factor's components (R's "Proportion of
          Variance", here unrounded; NaN where every sd is 0);
        * ``cumulative``: the running sum of ``proportion`` (R's "Cumulative Proportion").

        Validated against ``summary(lme4::rePCA(m))`` (lme4 1.1-31) on sleepstudy
        ``(Days | Subject)``, a singular ``(1 + x | g)``, carrots with two grouping factors
        and cbpp's binomial GLMM (tests/inference/test_repca.py; sd to 1e-5 absolute,
        as θ agrees).
    """
    theta = np.asarray(fit.theta, dtype=float)
    rows = []
    for block in fit.design.random.blocks:
        d = np.linalg.svd(block.template(theta), compute_uv=False)
        total = float(np.sum(d**2))
        prop = d**2 / total if total > 0 else np.full(len(d), np.nan)
        cum = np.cumsum(prop)
        for k, (s, p, c) in enumerate(zip(d, prop, cum, strict=True)):
            rows.append({"group": block.group, "component": k + 1, "sd": float(s),
                         "proportion": float(p), "cumulative": float(c)})
    out = pd.DataFrame(rows, columns=REPCA_COLUMNS)
    unit = "θ (a GLMM)" if hasattr(fit, "family") else "the residual SD"
    out.attrs["messages"] = [f"sd: singular values of each grouping factor's relative "
                             f"covariance factor (lme4's rePCA), in units of {unit}"]
    return out


def r_importance(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """R's layout of a :func:`re_pca` table: ``summary(rePCA(m))[[g]]$importance`` per
    grouping factor, rows ``"Standard deviation"``, ``"Proportion of Variance"``,
    ``"Cumulative Proportion"``, columns ``PC1``, ``PC2``, ... (unrounded; R rounds the
    proportions to 5 digits)."""
    out = {}
    for group, rows in table.groupby("group", sort=False):
        values = rows[["sd", "proportion", "cumulative"]].to_numpy().T
        out[str(group)] = pd.DataFrame(values, index=R_ROWS,
                                       columns=[f"PC{k}" for k in rows.component])
    return out


def deficient_groups(table: pd.DataFrame, tol: float = 1e-4) -> list[str]:
    """Grouping factors whose random effects span fewer dimensions than they have columns:
    the cumulative proportion reaches 1 − ``tol`` before the last component, or every
    component's sd is 0 (a zero variance), in a table of :func:`re_pca`."""
    out = []
    for group, rows in table.groupby("group", sort=False):
        cum = rows["cumulative"].to_numpy()
        if not np.isfinite(cum).all() or (len(cum) > 1 and np.any(cum[:-1] >= 1.0 - tol)):
            out.append(str(group))
    return out
