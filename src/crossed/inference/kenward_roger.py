"""Kenward–Roger adjusted covariance of β̂ and denominator df, as pbkrtest 0.5.2 computes them.

pbkrtest parameterises the marginal covariance of y as

    Σ = Σ_i γ_i G_i,   γ = (the lower triangle of each term's VarCorr matrix, σ²),

with G_i = Z_t E_i Z_tᵀ for a covariance element of random term t (E_i the symmetric unit
matrix of that element, repeated over the term's levels) and G = I for σ². With
P_i = −Xᵀ Σ⁻¹ G_i Σ⁻¹ X, Q_ij = Xᵀ Σ⁻¹ G_i Σ⁻¹ G_j Σ⁻¹ X, K_ij = tr(G_i Σ⁻¹ G_j Σ⁻¹) and
the expected information I_ij = K_ij − 2 tr(Φ Q_ij) + tr(Φ P_i Φ P_j) (Φ = vcov(β̂)),
W = 2 I⁻¹ and

    Φ_A = Φ + 2 Φ (Σ_ij W_ij (Q_ij − P_i Φ P_j)) Φ.

pbkrtest forms Σ densely (n x n). Here every quantity is reduced to the random-effects
space with Woodbury's identity, Σ⁻¹ = σ⁻² (I − ZΛ (ΛᵀZᵀZΛ + I)⁻¹ ΛᵀZᵀ), so the cost is
O(n q + q³) and memory O(q²) for q random effects in total (never n²). Size limit: q up to a
few thousand (dense q x q matrices per variance parameter); :data:`MAX_Q` guards it.

Validated against pbkrtest 0.5.2 (through lmerTest's ``summary(ddf = "Kenward-Roger")``
and ``anova(type = 3, ddf = "Kenward-Roger")``) on the reference cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from crossed.inference.reparam import optimiser_random
from crossed.model.partitioned import RowsNotHeldError
from crossed.model.prior import refuse_prior

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["KRModel", "MAX_Q", "kr_f_test", "kr_t", "lb_ddf"]

MAX_Q = 6000
"""Largest total number of random effects for which Kenward–Roger is computed."""


@dataclass(frozen=True)
class KRModel:
    """Kenward–Roger ingredients of a REML fit.

    Attributes
    ----------
    vcov : numpy.ndarray
        Unadjusted vcov(β̂), Φ.
    vcov_adj : numpy.ndarray
        Adjusted covariance Φ_A (pbkrtest's ``vcovAdj``).
    P : list of numpy.ndarray
        P_i (p x p) per variance parameter.
    W : numpy.ndarray
        2 I⁻¹, the asymptotic covariance of the variance parameters γ.
    """

    vcov: np.ndarray
    vcov_adj: np.ndarray
    P: list
    W: np.ndarray

    @classmethod
    def from_fit(cls, fit: LmerFit) -> KRModel:
        """Compute (or fetch from the fit's cache) the adjusted covariance of ``fit``."""
        if not fit.reml:
            raise ValueError("Kenward-Roger's method is only available for REML fits "
                             "(refit with reml=True)")
        return fit.memo("kenward_roger", lambda: _compute(fit))


def _term_matrices(fit: LmerFit):
    """Z (sparse, lme4's term order), Λ (dense template blocks) and the D_i of each γ_i.

    In the optimiser's parametrisation (``reparam.py``): Φ_A and the df do not depend on a
    linear map of the random-effects columns (γ′ is linear in γ), but on a random slope
    over a year (x ≈ 2000) the formula's γ span 1e4 σ² to 1e-9 σ², and the information
    matrix lost every digit of its inverse (df 3448 where the model's are 53.4)."""
    blocks, theta, _ = optimiser_random(fit)
    Zs, lam_blocks, Ds = [], [], []
    offset = 0
    blocks_meta = []
    for term in fit.design.random.terms:
        blk = blocks[term.block]
        k = len(term.columns)
        cols = slice(term.offset, term.offset + k)
        zt = blk.Z[:, cols]
        n, nl = len(blk.codes), blk.nlevels
        rows = np.repeat(np.arange(n), k)
        cidx = (blk.codes[:, None] * k + np.arange(k)[None, :]).ravel()
        Zs.append(sp.csr_matrix((zt.ravel(), (rows, cidx)), shape=(n, nl * k)))
        T = blk.template(theta)[cols, cols]
        lam_blocks.append(sp.kron(sp.identity(nl), sp.csr_matrix(T)))
        blocks_meta.append((offset, nl, k))
        offset += nl * k
    Q = offset
    for (off, nl, k) in blocks_meta:
        # pbkrtest's order: lower triangle of VarCorr, column-major ((1,1), (2,1), (2,2))
        for c in range(k):
            for r in range(c, k):
                E = np.zeros((k, k))
                E[r, c] = E[c, r] = 1.0
                D = sp.kron(sp.identity(nl), sp.csr_matrix(E), format="csr")
                Ds.append((off, off + nl * k, D))
    Z = sp.hstack(Zs, format="csr")
    Lam = sp.block_diag(lam_blocks, format="csr")
    return Z, Lam, Ds, Q


def _compute(fit: LmerFit) -> KRModel:
    refuse_prior(fit, "Kenward-Roger (ddf='kenward-roger')", offset=False,
                 why="pbkrtest ignores prior weights (its denominator df then exceed the "
                 "number of observations); use ddf='satterthwaite'")
    if not fit.design.holds_rows:
        raise RowsNotHeldError(
            "Kenward-Roger (ddf='kenward-roger') is computed from the rows' Z and X, which "
            "a fit on partitioned data does not hold: use ddf='satterthwaite', or fit in "
            "memory (cx.lmer(formula, ddf.compute())) for Kenward-Roger")
    X = fit.design.X
    n, p = X.shape
    Z, Lam, Ds, Q = _term_matrices(fit)
    if Q > MAX_Q:
        raise ValueError(f"Kenward-Roger is limited to {MAX_Q} random effects in total; this "
                         f"model has {Q} (use ddf='satterthwaite')")
    s2 = fit.sigma**2
    K = (Z.T @ Z).toarray()                 # ZᵀZ
    ZX = np.asarray(Z.T @ X)                # ZᵀX
    XX = X.T @ X
    Ld = Lam.toarray()
    LKL = Ld.T @ K @ Ld
    C = LKL + np.eye(Q)
    cf = linalg.cho_factor(C, lower=True)
    # Σ⁻¹Z = Z N,  N = σ⁻² (I − Λ C⁻¹ Λᵀ K)
    N = (np.eye(Q) - Ld @ linalg.cho_solve(cf, Ld.T @ K)) / s2
    M = K @ N                               # ZᵀΣ⁻¹Z
    U = N.T @ ZX                            # ZᵀΣ⁻¹X
    # Σ⁻¹X = σ⁻² (X − Z R),  R = Λ C⁻¹ Λᵀ ZᵀX
    R = Ld @ linalg.cho_solve(cf, Ld.T @ ZX)
    XSX2 = (XX - ZX.T @ R - R.T @ ZX + R.T @ K @ R) / s2**2     # XᵀΣ⁻²X
    ZSX2 = (N @ N).T @ ZX                   # ZᵀΣ⁻²X = (Σ⁻²Z)ᵀX, Σ⁻²Z = Z N N
    ZSZ2 = K @ N @ N                        # ZᵀΣ⁻²Z
    CL = linalg.cho_solve(cf, LKL)
    trS2 = (n - 2.0 * np.trace(CL) + np.sum(CL * CL.T)) / s2**2  # tr(Σ⁻²)
    Phi = np.asarray(fit.vcov_beta)

    # per-parameter pieces; D_i restricted to its term's rows/cols (a, b)
    ng = len(Ds) + 1
    P = []
    for (a, b, D) in Ds:
        Ui = U[a:b]
        P.append(-(Ui.T @ (D @ Ui)))
    P.append(-XSX2)

    def q_rand(i, j):
        ai, bi, Di = Ds[i]
        aj, bj, Dj = Ds[j]
        left = (Di @ U[ai:bi]).T            # (p, nt_i): Uᵀ D_i
        mid = M[ai:bi, aj:bj]
        right = Dj @ U[aj:bj]
        return left @ mid @ right

    def k_rand(i, j):
        ai, bi, Di = Ds[i]
        aj, bj, Dj = Ds[j]
        A1 = (Di @ M[ai:bi, aj:bj])         # D_i M_ij
        A2 = (Dj @ M[aj:bj, ai:bi])         # D_j M_ji
        return float(np.sum(A1 * A2.T))

    Qm: dict[tuple[int, int], np.ndarray] = {}
    Kt = np.zeros((ng, ng))
    r = ng - 1
    for i in range(ng):
        for j in range(i, ng):
            if i < r and j < r:
                Qm[i, j] = q_rand(i, j)
                Kt[i, j] = k_rand(i, j)
            elif i < r and j == r:
                ai, bi, Di = Ds[i]
                Qm[i, j] = (Di @ U[ai:bi]).T @ ZSX2[ai:bi]
                Kt[i, j] = float(np.sum((Di @ ZSZ2[ai:bi, ai:bi]).diagonal()))
            else:
                Qm[i, j] = _resid_q(X, ZX, K, N, R, s2)
                Kt[i, j] = trS2
            Kt[j, i] = Kt[i, j]
    IE2 = np.zeros((ng, ng))
    for i in range(ng):
        PhiPi = Phi @ P[i]
        for j in range(i, ng):
            IE2[i, j] = IE2[j, i] = (Kt[i, j] - 2.0 * np.sum(Phi * Qm[i, j])
                                     + np.sum(PhiPi * (P[j] @ Phi)))
    ev = np.linalg.eigvalsh(0.5 * (IE2 + IE2.T))
    W = 2.0 * (np.linalg.inv(IE2) if np.min(np.abs(ev)) > 1e-10 else np.linalg.pinv(IE2))
    W = 0.5 * (W + W.T)
    UU = np.zeros((p, p))
    for i in range(ng - 1):
        for j in range(i + 1, ng):
            UU += W[i, j] * (Qm[i, j] - P[i] @ Phi @ P[j])
    UU = UU + UU.T
    for i in range(ng):
        UU += W[i, i] * (Qm[i, i] - P[i] @ Phi @ P[i])
    PhiA = Phi + 2.0 * Phi @ UU @ Phi
    return KRModel(vcov=Phi, vcov_adj=PhiA, P=P, W=W)


def _resid_q(X, ZX, K, N, R, s2) -> np.ndarray:
    """XᵀΣ⁻³X for the residual-residual pair: (Σ⁻¹X)ᵀ Σ⁻¹ (Σ⁻¹X)."""
    # Σ⁻¹X = σ⁻²(X − Z R); Σ⁻¹(Σ⁻¹X) = σ⁻² (Σ⁻¹X − Σ⁻¹Z R) = σ⁻² (Σ⁻¹X − Z N R)
    # XᵀΣ⁻³X = (Σ⁻¹X)ᵀ Σ⁻¹ (Σ⁻¹X) = σ⁻⁴ (X − ZR)ᵀ Σ⁻¹ (X − ZR)
    # (X − ZR)ᵀ Σ⁻¹ (X − ZR) = XᵀΣ⁻¹X − 2 sym(RᵀZᵀΣ⁻¹X) + RᵀZᵀΣ⁻¹ZR
    XSX = (X.T @ X - ZX.T @ R) / s2                 # XᵀΣ⁻¹X
    ZSX = N.T @ ZX                                  # ZᵀΣ⁻¹X
    ZSZ = K @ N                                     # ZᵀΣ⁻¹Z
    RZ = R.T @ ZSX
    return (XSX - RZ - RZ.T + R.T @ ZSZ @ R) / s2**2


def _a1_a2(L: np.ndarray, V0: np.ndarray, kr: KRModel) -> tuple[float, float]:
    Theta = L.T @ np.linalg.solve(L @ V0 @ L.T, L)
    TV = Theta @ V0
    ng = len(kr.P)
    us = [TV @ Pi @ V0 for Pi in kr.P]
    tr = [np.trace(u) for u in us]
    A1 = A2 = 0.0
    for i in range(ng):
        for j in range(i, ng):
            e = 1.0 if i == j else 2.0
            A1 += e * kr.W[i, j] * tr[i] * tr[j]
            A2 += e * kr.W[i, j] * np.sum(us[i] * us[j].T)
    return A1, A2


def _kr_df(A1: float, A2: float, q: int) -> tuple[float, float]:
    """pbkrtest's denominator df and F scaling from A1, A2 and the rank q."""
    B = (A1 + 6.0 * A2) / (2.0 * q)
    g = ((q + 1) * A1 - (q + 4) * A2) / ((q + 2) * A2)
    den = 3 * q + 2 * (1 - g)
    c1, c2, c3 = g / den, (q - g) / den, (q + 2 - g) / den
    V0 = 1 + c1 * B
    V1 = 1 - c2 * B
    V2 = 1 - c3 * B
    if abs(V0) < 1e-10:
        V0 = 0.0
    x = 1 - A2 / q
    ratio = 1.0 if (abs(x) < 1e-14 and abs(V1) < 1e-14) else x / V1
    rho = ratio**2 * V0 / V2 / q
    df2 = 4 + (q + 2) / (q * rho - 1)
    scaling = 1.0 if abs(df2 - 2) < 0.01 else df2 * (1 - A2 / q) / (df2 - 2)
    return float(df2), float(scaling)


def lb_ddf(fit: LmerFit, L: np.ndarray) -> float:
    """pbkrtest's ``Lb_ddf``: KR df for the hypothesis L β = 0 (rows of L independent)."""
    kr = KRModel.from_fit(fit)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    A1, A2 = _a1_a2(L, kr.vcov, kr)
    return _kr_df(A1, A2, L.shape[0])[0]


def kr_t(fit: LmerFit, L: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimates, adjusted SEs and KR df of each row of ``L @ beta`` (lmerTest's get_KR1D)."""
    kr = KRModel.from_fit(fit)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    est = L @ fit.beta
    se = np.sqrt(np.einsum("ij,jk,ik->i", L, kr.vcov_adj, L))
    df = np.array([lb_ddf(fit, row) for row in L])
    return est, se, df


def _full_rank_rows(L: np.ndarray) -> np.ndarray:
    """pbkrtest's ``force_full_rank``: an orthonormal basis of L's row space if rank < rows."""
    q = np.linalg.matrix_rank(L)
    if q < L.shape[0]:
        Qm, _ = np.linalg.qr(L.T)
        return Qm[:, :q].T
    return L


def kr_f_test(fit: LmerFit, L: np.ndarray) -> dict:
    """pbkrtest's ``KRmodcomp(fit, L)`` as lmerTest's anova reports it.

    Returns
    -------
    dict
        ``num_df`` (rank of L), ``den_df`` (KR df), ``statistic`` (scaled F),
        ``unscaled`` (Wald F with Φ_A) and ``p_value`` (of the scaled F).
    """
    from scipy import stats

    kr = KRModel.from_fit(fit)
    L = _full_rank_rows(np.atleast_2d(np.asarray(L, dtype=float)))
    q = int(np.linalg.matrix_rank(L))
    A1, A2 = _a1_a2(L, kr.vcov, kr)
    df2, scaling = _kr_df(A1, A2, q)
    Lb = L @ fit.beta
    wald = float(Lb @ np.linalg.solve(L @ kr.vcov_adj @ L.T, Lb))
    FU = wald / q
    F = scaling * FU
    return {"num_df": q, "den_df": df2, "statistic": F, "unscaled": FU,
            "p_value": float(stats.f.sf(F, q, df2))}
