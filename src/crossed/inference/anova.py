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

from crossed.inference.coefs import normalise_ddf
from crossed.inference.hypotheses import hypotheses

if TYPE_CHECKING:
    from crossed.fit import LmerFit

ANOVA_COLUMNS = ["term", "sum_sq", "mean_sq", "num_df", "den_df", "statistic", "p_value"]


def fstat_ddf(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``: one denominator df from per-direction dfs."""
    nu = np.asarray(nu, dtype=float)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(np.mean(nu))
    if np.any(nu <= 2):
        return 2.0
    E = float(np.sum(nu / (nu - 2.0)))
    return 2.0 * E / (E - len(nu))


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
    method = normalise_ddf(ddf)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if L.shape[0] == 0:
        return _nan_row()
    if method == "kenward-roger":
        from crossed.inference.kenward_roger import kr_f_test

        r = kr_f_test(fit, L)
        return _row(r["unscaled"], r["num_df"], r["den_df"], fit.sigma,
                    scale=r["statistic"] / r["unscaled"] if r["unscaled"] else 1.0)
    C = np.asarray(fit.vcov_beta)
    if method == "none":
        q = int(np.linalg.matrix_rank(L @ C @ L.T))
        Lb = L @ fit.beta
        F = float(Lb @ np.linalg.pinv(L @ C @ L.T) @ Lb) / q
        return _row(F, q, np.inf, fit.sigma)
    from crossed.inference.satterthwaite import SatterthwaiteModel

    sm = SatterthwaiteModel.from_fit(fit)
    if L.shape[0] == 1:
        return _one_row(fit, sm, L[0])
    d, P = np.linalg.eigh(L @ C @ L.T)
    d, P = d[::-1], P[:, ::-1]
    tol = max(np.sqrt(np.finfo(float).eps) * d[0], 0.0)
    q = int(np.sum(d > tol))
    if q <= 0:
        return _nan_row()
    PtL = P.T @ L
    if q == 1:
        return _one_row(fit, sm, PtL[0])
    PtL, d = PtL[:q], d[:q]
    F = float(np.sum((PtL @ fit.beta) ** 2 / d) / q)
    g = np.einsum("mj,ajk,mk->ma", PtL, sm.jac, PtL)
    nu = 2.0 * d**2 / np.einsum("ma,ab,mb->m", g, sm.A, g)
    return _row(F, q, fstat_ddf(nu), fit.sigma)


def _one_row(fit: LmerFit, sm, l: np.ndarray) -> dict:
    var = float(l @ sm.vcov @ l)
    t = float(l @ fit.beta) / np.sqrt(var)
    return _row(t * t, 1, float(sm.df(l[None, :])[0]), fit.sigma)


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
