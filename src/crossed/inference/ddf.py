"""The one place that picks the denominator-df method: Satterthwaite, Kenward–Roger or none.

Every test of fixed-effect contrasts (the coefficient table, EMMs and their contrasts,
ANOVA F tests, the tests applied to simulation refits) names its method with ``ddf=`` and
goes through this module:

- :func:`normalise_ddf` — validate and canonicalise the name (one clear ``ValueError``);
- :func:`contrast_t` — estimates, standard errors and df of the rows of ``L @ beta``;
- :func:`contrast_vcov` — the covariance of β̂ the method uses (Kenward–Roger's adjusted
  one, else the model's);
- :func:`contrast_f` — the F test of ``L beta = 0`` (lmerTest's ``contestMD`` for
  Satterthwaite, pbkrtest's ``KRmodcomp`` for Kenward–Roger, Wald with den_df = inf for
  none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["DDF_CHOICES", "contrast_f", "contrast_t", "contrast_vcov", "fstat_ddf",
           "normalise_ddf"]

DDF_CHOICES = ("satterthwaite", "kenward-roger", "none")
_ALIASES = {"satterthwaite": "satterthwaite", "none": "none", "asymptotic": "none",
            "kenward-roger": "kenward-roger", "kr": "kenward-roger"}


def normalise_ddf(ddf: str) -> str:
    """Canonical name of a denominator-df method (case and punctuation insensitive).

    Parameters
    ----------
    ddf : str
        ``"satterthwaite"``, ``"kenward-roger"`` (alias ``"kr"``) or ``"none"`` (alias
        ``"asymptotic"``); case, ``_`` and spaces are ignored.

    Returns
    -------
    str
        One of :data:`DDF_CHOICES`.

    Raises
    ------
    ValueError
        For any other name; the message lists the choices.
    """
    key = str(ddf).lower().replace("_", "-").replace(" ", "-")
    if key not in _ALIASES:
        raise ValueError(f"unknown ddf {ddf!r}; use 'satterthwaite', 'kenward-roger' or 'none'")
    return _ALIASES[key]


def contrast_t(fit: LmerFit, L: np.ndarray,
               ddf: str = "satterthwaite") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimates, standard errors and denominator df of the rows of ``L @ beta``.

    Parameters
    ----------
    fit : LmerFit
    L : array-like, shape (k, p)
        Contrast rows over the fit's fixed effects.
    ddf : {"satterthwaite", "kenward-roger", "none"}
        Satterthwaite (lmerTest), Kenward–Roger (adjusted covariance, pbkrtest's
        ``Lb_ddf``) or none (model covariance, df = inf).

    Returns
    -------
    tuple of numpy.ndarray
        ``(estimate, std_error, df)``, each of length k.
    """
    method = normalise_ddf(ddf)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if method == "satterthwaite":
        from crossed.inference.satterthwaite import satterthwaite_t

        return satterthwaite_t(fit, L)
    if method == "kenward-roger":
        from crossed.inference.kenward_roger import kr_t

        return kr_t(fit, L)
    est = L @ fit.beta
    se = np.sqrt(np.einsum("ij,jk,ik->i", L, fit.vcov_beta, L))
    return est, se, np.full(len(est), np.inf)


def contrast_vcov(fit: LmerFit, ddf: str = "satterthwaite") -> np.ndarray:
    """Covariance of β̂ used by the ``ddf`` method: Kenward–Roger's adjusted one, else the
    model's ``vcov_beta``."""
    if normalise_ddf(ddf) == "kenward-roger":
        from crossed.inference.kenward_roger import KRModel

        return KRModel.from_fit(fit).vcov_adj
    return np.asarray(fit.vcov_beta)


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


def contrast_f(fit: LmerFit, L: np.ndarray, ddf: str = "satterthwaite") -> dict | None:
    """F test of ``L beta = 0`` with the ``ddf`` method (the parts lmerTest's anova shows).

    Parameters
    ----------
    fit : LmerFit
    L : array-like, shape (k, p)
    ddf : {"satterthwaite", "kenward-roger", "none"}

    Returns
    -------
    dict or None
        ``F`` (unscaled Wald F per numerator df), ``num_df`` (rank), ``den_df`` and
        ``scale`` (Kenward–Roger's F scaling, else 1); None when L has rank 0 (nothing to
        test).
    """
    method = normalise_ddf(ddf)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if L.shape[0] == 0:
        return None
    if method == "kenward-roger":
        from crossed.inference.kenward_roger import kr_f_test

        r = kr_f_test(fit, L)
        return {"F": r["unscaled"], "num_df": r["num_df"], "den_df": r["den_df"],
                "scale": r["statistic"] / r["unscaled"] if r["unscaled"] else 1.0}
    C = np.asarray(fit.vcov_beta)
    if method == "none":
        q = int(np.linalg.matrix_rank(L @ C @ L.T))
        Lb = L @ fit.beta
        F = float(Lb @ np.linalg.pinv(L @ C @ L.T) @ Lb) / q
        return {"F": F, "num_df": q, "den_df": np.inf, "scale": 1.0}
    return _satterthwaite_f(fit, L, C)


def _satterthwaite_f(fit: LmerFit, L: np.ndarray, C: np.ndarray) -> dict | None:
    """lmerTest's ``contestMD``: F on the eigen-directions of L C Lᵀ, df by ``fstat_ddf``."""
    from crossed.inference.satterthwaite import SatterthwaiteModel

    sm = SatterthwaiteModel.from_fit(fit)
    if L.shape[0] == 1:
        return _one_row(fit, sm, L[0])
    d, P = np.linalg.eigh(L @ C @ L.T)
    d, P = d[::-1], P[:, ::-1]
    tol = max(np.sqrt(np.finfo(float).eps) * d[0], 0.0)
    q = int(np.sum(d > tol))
    if q <= 0:
        return None
    PtL = P.T @ L
    if q == 1:
        return _one_row(fit, sm, PtL[0])
    PtL, d = PtL[:q], d[:q]
    F = float(np.sum((PtL @ fit.beta) ** 2 / d) / q)
    g = np.einsum("mj,ajk,mk->ma", PtL, sm.jac, PtL)
    nu = 2.0 * d**2 / np.einsum("ma,ab,mb->m", g, sm.A, g)
    return {"F": F, "num_df": q, "den_df": fstat_ddf(nu), "scale": 1.0}


def _one_row(fit: LmerFit, sm, l: np.ndarray) -> dict:
    var = float(l @ sm.vcov @ l)
    t = float(l @ fit.beta) / np.sqrt(var)
    return {"F": t * t, "num_df": 1, "den_df": float(sm.df(l[None, :])[0]), "scale": 1.0}
