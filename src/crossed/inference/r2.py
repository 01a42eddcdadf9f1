"""Nakagawa's marginal and conditional R², as performance 0.10.2 (insight 0.19) computes them.

- fixed-effects variance σ²_f: the sample variance (n − 1) of the fixed predictions Xβ̂;
- random-effects variance σ²_r: for every random term with covariance Σ (VarCorr), the mean
  over observations of z_iᵀ Σ z_i, where z_i holds the term's columns taken from the
  fixed-effects model matrix (an intercept column added when X has none; columns of Σ
  absent from X are dropped, as insight does) — Johnson's (2014) extension to random
  slopes; for random intercepts this is the variance itself;
- residual variance σ²_ε = σ̂².

Marginal R² = σ²_f / (σ²_f + σ²_r + σ²_ε); conditional R² = (σ²_f + σ²_r) / (same).
Every random term is counted (insight looks terms up by grouping-factor name, which with
``||`` keeps only the first term of a factor; crossed counts them all).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["r2_nakagawa", "variance_parts"]


def variance_parts(fit: LmerFit) -> dict[str, float]:
    """σ²_f, σ²_r and σ²_ε of Nakagawa's R² (see the module docstring)."""
    from crossed.model.partitioned import RowlessDesign

    if isinstance(fit.design, RowlessDesign):
        return _variance_parts_rowless(fit)
    X = fit.design.X
    names = list(fit.fixef_names)
    var_fixed = float(np.var(X @ fit.beta, ddof=1))
    if "(Intercept)" not in names:
        X = np.column_stack([np.ones(len(X)), X])
        names = ["(Intercept)"] + names
    var_random = 0.0
    for idx, Sk in _term_covariances(fit, names):
        Z = X[:, idx]
        var_random += float(np.sum((Z @ Sk) * Z) / len(Z))
    return {"fixed": var_fixed, "random": var_random, "residual": fit.sigma**2}


def _term_covariances(fit: LmerFit, names: list[str]) -> Iterator[tuple[list[int], np.ndarray]]:
    """Per random term with columns among the fixed effects' (``names``): those columns'
    positions in ``names`` and the term's covariance σ²TTᵀ on them (the columns z of
    E[zᵀSz] in σ²_r)."""
    col = {nm: j for j, nm in enumerate(names)}
    s2 = fit.sigma**2
    for term in fit.design.random.terms:
        blk = fit.design.random.blocks[term.block]
        k = len(term.columns)
        T = blk.template(fit.theta)[term.offset: term.offset + k, term.offset: term.offset + k]
        S = s2 * T @ T.T
        keep = [i for i, c in enumerate(term.columns) if c in col]
        if keep:
            yield [col[term.columns[i]] for i in keep], S[np.ix_(keep, keep)]


def _variance_parts_rowless(fit: LmerFit) -> dict[str, float]:
    """:func:`variance_parts` from XᵀX alone (a fit on partitioned data): var(Xβ) is
    (βᵀXᵀXβ − (1ᵀXβ)²/n)/(n − 1), and the mean of zᵀSz over the rows is tr(S ZᵀZ)/n,
    with 1ᵀX and ZᵀZ read from XᵀX (the intercept's row and the term's columns)."""
    from crossed.model.partitioned import RowsNotHeldError

    names = list(fit.fixef_names)
    if "(Intercept)" not in names:
        raise RowsNotHeldError("R² and the ICC of a model without an intercept need the "
                               "rows' column sums: fit in memory")
    G = np.asarray(fit.pls.xtx)
    n = fit.design.n
    i0 = names.index("(Intercept)")
    b = np.asarray(fit.beta)
    total = float(G[i0] @ b)
    var_fixed = (float(b @ G @ b) - total ** 2 / n) / (n - 1)
    var_random = 0.0
    for idx, Sk in _term_covariances(fit, names):
        var_random += float(np.sum(Sk * G[np.ix_(idx, idx)]) / n)
    return {"fixed": var_fixed, "random": var_random, "residual": fit.sigma**2}


def r2_nakagawa(fit: LmerFit) -> pd.DataFrame:
    """Marginal and conditional R² of a linear mixed model (Nakagawa et al. 2017).

    Returns
    -------
    pandas.DataFrame
        One row: ``marginal`` (variance explained by the fixed effects), ``conditional``
        (by fixed and random effects), and the three variance parts ``var_fixed``,
        ``var_random``, ``var_residual``. Validated against performance 0.10.2
        ``r2_nakagawa`` on the reference cases (random intercepts and slopes).
    """
    v = variance_parts(fit)
    total = v["fixed"] + v["random"] + v["residual"]
    out = pd.DataFrame([{
        "marginal": v["fixed"] / total,
        "conditional": (v["fixed"] + v["random"]) / total,
        "var_fixed": v["fixed"], "var_random": v["random"], "var_residual": v["residual"],
    }])
    return out
