"""Leverage and influence (lme4 1.1-31's ``hatvalues``, ``cooks.distance`` and
``influence`` methods for ``merMod``).

- hat values: the diagonal of the hat matrix H of the conditional fitted values
  ŷ = Xβ̂ + Zb̂ = H y. With W = [ZΛ  X] and M = WᵀW + diag(1 (random), 0 (fixed)),
  H = W M⁻¹ Wᵀ (lme4 writes it with its Cholesky factors L and R_X: the same matrix);
- Cook's distance per observation: (r_i/(1 − h_i))²·h_i/(σ̂²·p), r the Pearson residuals,
  p = rank(X);
- case deletion (``influence(fit, groups)``): the model refitted without each level of a
  grouping variable (or each observation), with the fit's criterion; the changes of the
  fixed effects (``dfbeta``), scaled by the deleted fit's standard errors (``dfbetas``),
  and Cook's distance of lme4's ``cooks.distance(influence(...))``:
  D_i = Δβ_iᵀ V⁻¹ Δβ_i · (m − p)/(m·p), V the full fit's covariance of β̂ and m the number
  of deletions (lme4's formula).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from crossed.design.frame import DataError
from crossed.engines.refit import refit_lmer
from crossed.inference.profile import var_params

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["InfluenceWarning", "cooks_distance", "hatvalues", "influence"]

DENSE_LIMIT = 4000


def _zlambda(fit: LmerFit) -> sp.csr_matrix:
    """ZΛ (n × q), blocks side by side, each level's q columns together."""
    mats = []
    for blk in fit.design.random.blocks:
        n, q = blk.Z.shape
        ZT = blk.Z @ blk.template(fit.theta)
        cols = (blk.codes[:, None] * q + np.arange(q)[None, :]).ravel()
        mats.append(sp.csr_matrix((ZT.ravel(), cols, np.arange(0, n * q + 1, q)),
                                  shape=(n, blk.nlevels * q)))
    return sp.hstack(mats, format="csr")


def hatvalues(fit: LmerFit) -> np.ndarray:
    """Diagonal of the hat matrix of the conditional fitted values (lme4's ``hatvalues``).

    Returns
    -------
    numpy.ndarray
        One leverage per observation (rows used in the fit): of the √w-scaled system
        with prior weights w, as lme4. Validated against lme4 1.1-31 to 1e-8 (with
        weights: ``tests/data/reference/weights/audit.R``).
    """
    def compute() -> np.ndarray:
        ZL = _zlambda(fit)
        q = ZL.shape[1]
        X = fit.design.X
        W = sp.hstack([ZL, sp.csr_matrix(X)], format="csc")
        if fit.design.weights is not None:  # lme4: rows of [ZΛ X] scaled by √w
            W = (sp.diags(np.sqrt(fit.design.weights)) @ W).tocsc()
        pen = sp.diags(np.concatenate([np.ones(q), np.zeros(X.shape[1])]))
        M = (W.T @ W + pen).tocsc()
        if M.shape[0] <= DENSE_LIMIT:
            Wd = W.toarray()
            S = np.linalg.solve(M.toarray(), Wd.T)
            return np.einsum("ij,ji->i", Wd, S)
        lu = spla.splu(M)
        Wt = W.T.tocsc()
        out = np.empty(W.shape[0])
        for s in range(0, W.shape[0], 512):
            blk = Wt[:, s: s + 512].toarray()
            out[s: s + 512] = np.einsum("ij,ij->j", blk, lu.solve(blk))
        return out
    out: np.ndarray = fit.memo("hatvalues", compute)
    return out.copy()


def cooks_distance(fit: LmerFit) -> np.ndarray:
    """Cook's distance per observation (lme4's ``cooks.distance(fit)``).

    Returns
    -------
    numpy.ndarray
        (r_i/(1 − h_i))²·h_i/(σ̂²·p) with Pearson residuals r, hat values h, p = rank(X);
        NaN where h_i = 1. Validated against lme4 1.1-31 to 1e-6.
    """
    h = hatvalues(fit)
    p = int(np.linalg.matrix_rank(fit.design.X)) if fit.design.X.shape[1] else 0
    r = fit.residuals(type="pearson")
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (r / (1.0 - h)) ** 2 * h / (fit.sigma**2 * p)
    d[~np.isfinite(d)] = np.nan
    return np.asarray(d)


def _varcov_parts(fit: LmerFit) -> tuple[list[str], np.ndarray]:
    """lme4's ``var.cov.comps``: ``sigma^2``, then per term the lower triangle of its
    covariance matrix column by column, ``<g>:v[<col>]`` / ``<g>:C[<row>,<col>]`` (no
    ``<g>:`` prefix with a single term)."""
    params = var_params(fit)
    terms = fit.design.random.terms
    single = len({p.term for p in params}) == 1
    names, values = ["sigma^2"], [fit.sigma**2]
    cov: dict[int, np.ndarray] = {}
    for p in params:
        term = terms[p.term]
        if p.term not in cov:
            blk = fit.design.random.blocks[term.block]
            k = len(term.columns)
            T = blk.template(fit.theta)[term.offset: term.offset + k,
                                        term.offset: term.offset + k]
            cov[p.term] = fit.sigma**2 * T @ T.T
        pre = "" if single else f"{term.group}:"
        ci, cj = term.columns[p.i], term.columns[p.j]
        names.append(f"{pre}v[{ci}]" if p.is_sd else f"{pre}C[{ci},{cj}]")
        values.append(float(cov[p.term][p.i, p.j]))
    return names, np.array(values)


def influence(fit: LmerFit, groups: str | None = None) -> pd.DataFrame:
    """Case-deletion influence: the model refitted without each group or observation
    (lme4's ``influence(fit, groups)``).

    Parameters
    ----------
    fit : LmerFit
    groups : str, optional
        A column of the data the model was fitted to (usually a grouping factor, e.g.
        ``"Subject"``): each of its values is deleted in turn. None: each observation
        (lme4's default, one refit per row).

    Returns
    -------
    pandas.DataFrame
        One row per deleted unit (``deleted``: the level, or the row position), in order of
        first appearance (lme4's ``unique``): ``cooks_distance`` (lme4's
        ``cooks.distance(influence(...))``), then per fixed effect ``<name>`` (the refitted
        estimate), ``dfbeta_<name>`` (change from the full fit) and ``dfbetas_<name>`` (the
        change over the refit's standard error, lme4's ``dfbetas``), then the variance
        components of the refit under lme4's names (``sigma^2``, ``v[...]``, ``C[...]``),
        ``converged`` and ``n_deleted`` (rows left out). ``attrs["fixed"]``: the full
        fit's estimates. Validated against lme4 1.1-31 (groups ``"Subject"`` of
        sleepstudy, ``"plate"`` of Penicillin, and 4 subjects of sleepstudy with 6 fixed
        effects, where the Cook's distances are negative).

    Warns
    -----
    InfluenceWarning
        With no more deleted units than fixed effects (m ≤ p, e.g. 4 groups and 6
        coefficients) lme4's factor (m − p)/(m·p) makes every Cook's distance negative
        (zero at m = p); lme4 says nothing. The same text is in ``attrs["messages"]``
        (shown below the table).
    """
    design = fit.design
    if groups is None:
        keys = np.arange(design.n)
        labels: list[object] = list(range(design.n))
    else:
        if design.frame is None or groups not in design.frame.columns:
            have = [] if design.frame is None else list(design.frame.columns)
            raise DataError(f"influence(): no column {groups!r} in the fitted data"
                            + (f"; columns: {', '.join(map(str, have))}" if have else ""))
        col = design.frame[groups]
        if col.isna().any():
            raise DataError(f"influence(): column {groups!r} has missing values in the rows "
                            "used by the fit")
        codes, uniq = pd.factorize(col, sort=False)
        keys = codes
        labels = list(uniq)
    fe = list(fit.fixef_names)
    beta0 = np.asarray(fit.beta)
    rows = []
    for k, lab in enumerate(labels):
        keep = keys != k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = refit_lmer(fit, rows=np.flatnonzero(keep))
        vnames, vc = _varcov_parts(ref)
        row: dict[str, object] = {"deleted": lab}
        db = np.asarray(ref.beta) - beta0
        se = np.sqrt(np.diag(ref.vcov_beta))
        for j, nm in enumerate(fe):
            row[nm] = float(ref.beta[j])
        for j, nm in enumerate(fe):
            row[f"dfbeta_{nm}"] = float(db[j])
        for j, nm in enumerate(fe):
            row[f"dfbetas_{nm}"] = float(db[j] / se[j])
        for nm, v in zip(vnames, vc, strict=True):
            row[nm] = float(v)
        row["converged"] = bool(ref.converged)
        row["n_deleted"] = int((~keep).sum())
        rows.append(row)
    out = pd.DataFrame(rows)
    m, p = len(labels), len(fe)
    Vinv = np.linalg.inv(np.asarray(fit.vcov_beta))
    D = out[[f"dfbeta_{nm}" for nm in fe]].to_numpy(dtype=float)
    cooks = np.einsum("ij,jk,ik->i", D, Vinv, D) * (m - p) / (m * p)
    out.insert(1, "cooks_distance", cooks)
    out.attrs["fixed"] = fit.fixef
    out.attrs["groups"] = groups if groups is not None else "case"
    out.attrs["messages"] = []
    if m <= p:
        note = _few_deletions_note(groups, labels, m, p)
        out.attrs["messages"].append(note)
        warnings.warn(note, InfluenceWarning, stacklevel=3)
    return out


class InfluenceWarning(UserWarning):
    """Case-deletion influence whose Cook's distances mean nothing as such: fewer deleted
    units than fixed effects, where lme4's formula makes them negative (or zero)."""


def _few_deletions_note(groups: str | None, labels: list[object], m: int, p: int) -> str:
    """Why the Cook's distances of ``influence`` are not usable with m deletions and p
    fixed effects (m <= p)."""
    what = f"the {m} levels of {groups!r}" if groups is not None else f"the {m} observations"
    shown = ", ".join(map(str, labels[:10])) + (", ..." if m > 10 else "")
    sign = "negative" if m < p else "zero"
    return (f"influence(): Cook's distances are {sign} for every deleted unit ({what}: "
            f"{shown}): lme4's formula D = Δβᵀ V⁻¹ Δβ · (m − p)/(m·p) assumes more "
            f"deletions than fixed effects, and here m = {m} ≤ p = {p}. The factor "
            f"(m − p)/(m·p) = {(m - p) / (m * p):.3g} is the only cause (Δβᵀ V⁻¹ Δβ ≥ 0); "
            "lme4 gives the same numbers without a word. Rank the units by the dfbetas "
            "columns (or by Δβᵀ V⁻¹ Δβ / p) instead.")
