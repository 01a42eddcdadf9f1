"""F tests of linear hypotheses and ANOVA tables, as lmerTest 3.1-3 computes them.

A hypothesis L β = 0 (L: k x p) is tested with lmerTest's ``contestMD``:

- Satterthwaite: L C Lᵀ = P D Pᵀ (C = vcov(β̂)); eigenvalues above √ε·d₁ give the rank q;
  F = Σ_m (P_mᵀ L β̂)² / d_m / q; each eigen-direction m has its own Satterthwaite df
  ν_m = 2 d_m² / (g_mᵀ A g_m) with g_m,i = P_mᵀ L (∂C/∂φ_i) Lᵀ P_m, combined into the
  denominator df as ``get_Fstat_ddf`` does: 2E/(E − q) with E = Σ ν_m/(ν_m − 2), 2 when
  some ν_m ≤ 2, their mean when all are equal (within 1e-8). One-row hypotheses are t²
  tests with the usual Satterthwaite df.
- Kenward–Roger: pbkrtest's ``KRmodcomp`` (scaled F and its df).

Sum and mean squares are lmerTest's: MS = F·σ̂² (unscaled F for Kenward–Roger), SS = MS·q.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from crossed.inference.ddf import contrast_f, normalise_ddf
from crossed.inference.hypotheses import hypotheses

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["ANOVA_COLUMNS", "anova", "f_test"]

ANOVA_COLUMNS = ["term", "sum_sq", "mean_sq", "num_df", "den_df", "statistic", "p_value"]


def _row(F: float, q: int, df2: float, sigma: float, scale: float = 1.0) -> dict:
    ms = F * sigma**2
    Fs = F * scale
    return {"sum_sq": ms * q, "mean_sq": ms, "num_df": q, "den_df": df2, "statistic": Fs,
            "p_value": float(stats.f.sf(Fs, q, df2)) if q > 0 else np.nan}


def _nan_row() -> dict:
    return dict.fromkeys(ANOVA_COLUMNS[1:], np.nan)


def f_test(fit: LmerFit, L: np.ndarray, ddf: str = "satterthwaite") -> dict:
    """F test of L β = 0 (lmerTest's ``contestMD``).

    Parameters
    ----------
    fit : LmerFit
    L : array-like, shape (k, p)
    ddf : {"satterthwaite", "kenward-roger", "none"}

    Returns
    -------
    dict
        ``sum_sq``, ``mean_sq``, ``num_df``, ``den_df``, ``statistic`` (F), ``p_value``.
    """
    r = contrast_f(fit, L, ddf)
    if r is None:
        return _nan_row()
    return _row(r["F"], r["num_df"], r["den_df"], fit.sigma, scale=r["scale"])


def anova(fit: LmerFit, type: int | str = 3, ddf: str = "satterthwaite") -> pd.DataFrame:
    """ANOVA table of the fixed-effects terms (lmerTest's ``anova(fit, type, ddf)``).

    Parameters
    ----------
    fit : LmerFit
    type : {1, 2, 3}
        Sequential (1), lmerTest's Type II (2) or Type III (3, the default) hypotheses
        (see :mod:`crossed.inference.hypotheses`).
    ddf : {"satterthwaite", "kenward-roger", "none"}
        Denominator df: Satterthwaite (lmerTest), Kenward–Roger (pbkrtest, REML fits only)
        or none (asymptotic F, den_df = inf).

    Returns
    -------
    pandas.DataFrame
        One row per fixed term (intercept excluded), in the model's order: ``term``,
        ``sum_sq`` and ``mean_sq`` (lmerTest's: MS = F·σ̂², SS = MS·num_df), ``num_df``
        (rank of the hypothesis), ``den_df``, ``statistic`` (F value; the scaled F for
        Kenward–Roger), ``p_value``. ``attrs``: ``type``, ``ddf``, ``hypotheses`` (term ->
        contrast matrix). Validated against lmerTest 3.1-3 (Type I and III, Satterthwaite
        and Kenward–Roger) on the reference cases.
    """
    method = normalise_ddf(ddf)
    Ls = hypotheses(fit, type)
    rows = []
    for term, L in Ls.items():
        r = f_test(fit, L, ddf=method)
        rows.append({"term": term, **r})
    out = pd.DataFrame(rows, columns=ANOVA_COLUMNS)
    if len(out):
        out["num_df"] = out["num_df"].astype(float)
    out.attrs["type"] = str(type)
    out.attrs["ddf"] = method
    out.attrs["hypotheses"] = Ls
    return out
