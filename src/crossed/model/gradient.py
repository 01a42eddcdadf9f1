"""The analytic gradient of the profiled REML / ML criterion with respect to θ.

Notation as in ``pls.py``: A = [Z X y]ᵀ[Z X y], Λ̃ = blockdiag(Λθ, I) and the system
Ω = Λ̃ᵀ A_Ω Λ̃ + diag(I, 0) over the random effects and, for REML, the fixed effects
(ML: the random effects alone). The criteria are

    REML: log det Ω + (n − p)(1 + log(2π r² / (n − p))),
    ML:   log det Ω + n (1 + log(2π r² / n)),

with r² the penalised residual sum of squares. Both are profiled over β and u, so by the
envelope theorem ∂r²/∂θ_i = −2 (y − Xβ − ZΛu)ᵀ Z (∂Λ/∂θ_i) u, and

    ∂ log det Ω / ∂θ_i = 2 tr(Ω⁻¹ Λ̃ᵀ A (∂Λ̃/∂θ_i)) = 2 Σ_s (Ω⁻¹ U)_{(s, b), (s, a)}

for θ_i at entry (a, b) of its block's template, U = Λ̃ᵀ A (its random-effect columns) and
s over the block's levels: only the per-level diagonal blocks of Ω⁻¹U are needed. With the
first block D = blockdiag_s D_s (D_s = T₁ᵀA_sT₁ + I), the rest R (later random blocks,
and X for REML) and the Schur complement S = L_R L_Rᵀ (the dense factor the engine has):

* first block, level s: ``D_s⁻¹ T₁ᵀ [A_s + W_s (G_s A_s − I)]`` with G_s = T₁D_s⁻¹T₁ᵀ
  and W_s = V_s S⁻¹ V_sᵀ, V_s = level s's rows of A_1R S_R (S_R = blockdiag(Λ_rest, I)):
  S⁻¹ is read only on each level's sparse columns (one sparse-times-dense product);
* later blocks: the diagonal blocks of S⁻¹ S_Rᵀ C₀ with C₀ = A_RR − A_R1 G A_1R the
  unscaled Schur complement (assembled by :meth:`PLS.schur` at the identity template of
  the later blocks), a row-wise product, O(R² q).

No division by θ occurs, so the gradient is exact on the boundary (θ = 0, singular fits).
Never a dense inverse of the first block. Validated against central finite differences on
every R reference case, REML and ML, at R's θ and at random θ
(``tests/model/test_gradient.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from crossed.model.factor import Factor, profiled_deviance

if TYPE_CHECKING:
    from crossed.model.pls import PLS

__all__ = ["criterion_gradient", "value_and_gradient"]

_CHUNK = 4_000_000
"""Entries of the dense (levels·q₁ x R) product formed at a time."""


def value_and_gradient(pls: PLS, theta: np.ndarray, reml: bool) -> tuple[float, np.ndarray,
                                                                          Factor]:
    """The criterion, its gradient and the factorisation at ``theta`` (gradient NaN when the
    criterion is not finite)."""
    f = pls.factor(np.asarray(theta, dtype=float))
    value = profiled_deviance(f, pls.n, pls.p, reml)
    if not np.isfinite(value):
        return value, np.full(len(theta), np.nan), f
    return value, criterion_gradient(pls, f, reml), f


def criterion_gradient(pls: PLS, f: Factor, reml: bool) -> np.ndarray:
    """∂(criterion)/∂θ at an ok factorisation ``f`` of ``pls`` (module docstring).

    Parameters
    ----------
    pls : PLS
    f : Factor
        ``pls.factor(theta)``, positive definite.
    reml : bool
        REML criterion (else the ML deviance).

    Returns
    -------
    numpy.ndarray
        One entry per θ.
    """
    assert f.ok and f.L is not None
    theta = f.theta
    beta, u = pls.solve(f)
    grad = np.zeros(len(theta))
    # ∂r²: −2 Σ_s (Zᵀres)[s, a] u_s[b] per template entry (a, b)
    res = pls.y - pls.X @ beta
    for blk, ub in zip(pls.blocks, u, strict=True):
        b = ub @ blk.template(theta).T
        res = res - np.einsum("ij,ij->i", blk.Z, b[blk.codes])
    dr2 = np.zeros_like(grad)
    for blk, ub in zip(pls.blocks, u, strict=True):
        Ztr = np.stack([np.bincount(blk.codes, weights=blk.Z[:, a] * res,
                                    minlength=blk.nlevels) for a in range(blk.q)], axis=1)
        _accumulate(dr2, blk.theta_index, -2.0 * Ztr.T @ ub)  # [a, b] = Σ_s Ztr[s,a] u[s,b]
    R = pls.r_rand + pls.p if reml else pls.r_rand
    dlog = _logdet_gradient(pls, f, R, len(grad))
    m = pls.n - pls.p if reml else pls.n
    return dlog + (m / f.pwrss) * dr2


def _accumulate(grad: np.ndarray, index: np.ndarray, M: np.ndarray) -> None:
    """grad[index[a, b]] += M[a, b] for each template entry (a, b) holding a θ."""
    mask = index >= 0
    np.add.at(grad, index[mask], M[mask])


def _logdet_gradient(pls: PLS, f: Factor, R: int, k: int) -> np.ndarray:
    """∂ log det Ω / ∂θ for the system of the random effects and the first R - r_rand
    columns of X (R = r_rand: the random effects alone)."""
    theta = f.theta
    assert f.L is not None
    grad = np.zeros(k)
    rr = pls.r_rand
    if R:
        Sinv, info = lapack.dpotri(f.L[:R, :R], lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri failed (info={info})")
        Sinv = np.tril(Sinv) + np.tril(Sinv, -1).T
    else:
        Sinv = np.zeros((0, 0))
    # S_R's scale (later random blocks' Λ, identity on X) as a sparse matrix, or a vector
    if pls._rest_scalar:
        scale = pls._scale_vector(theta)[:R]
        SR: sp.csr_matrix | None = None
    else:
        scale = None
        SR = pls._scale_matrix(theta)[:R, :R].T.tocsr()  # blockdiag(Λ_rest, I)
    # ---- first block
    first = pls.blocks[0]
    q1, l1 = pls.q1, pls.l1
    T1 = first.template(theta)
    A = pls.A11
    D = T1.T @ A @ T1 + np.eye(q1)
    Dinv = np.linalg.inv(D)
    G = T1 @ Dinv @ T1.T
    W = np.zeros((l1, q1, q1))
    if R:
        V = pls.A1r[:, :R]
        V = V @ sp.diags(scale) if scale is not None else V @ SR
        V = sp.csr_matrix(V)
        step = max(1, _CHUNK // max(R * q1, 1))
        for s0 in range(0, l1, step):
            s1 = min(l1, s0 + step)
            Vc = V[s0 * q1:s1 * q1]
            Y = np.asarray(Vc @ Sinv)  # (levels·q1, R)
            for b in range(q1):
                rows = Vc[b::q1] if q1 > 1 else Vc
                for a in range(q1):
                    Ya = Y[a::q1] if q1 > 1 else Y
                    W[s0:s1, a, b] = np.asarray(rows.multiply(Ya).sum(axis=1)).ravel()
    M = A + W @ (G @ A - np.eye(q1))
    per_level = Dinv @ (T1.T @ M)  # (l1, q1, q1): [b, a] is the (s, b), (s, a) entry
    _accumulate(grad, first.theta_index, 2.0 * per_level.sum(axis=0).T)
    # ---- later blocks: diagonal blocks of S⁻¹ S_Rᵀ C₀
    if rr:
        C0 = _unscaled_schur(pls, theta)[:R, :R]
        if scale is not None:
            P = Sinv * scale[None, :]
        else:
            assert SR is not None
            P = np.asarray((SR @ Sinv).T)  # S⁻¹ S_Rᵀ = (S_R S⁻¹)ᵀ
        pos = 0
        for blk in pls.blocks[1:]:
            size = blk.nlevels * blk.q
            Pk = P[pos:pos + size].reshape(blk.nlevels, blk.q, R)
            Ck = C0[pos:pos + size].reshape(blk.nlevels, blk.q, R)
            blockwise = np.einsum("lbm,lam->ab", Pk, Ck)  # Σ_s [(s, b), (s, a)] at [a, b]
            _accumulate(grad, blk.theta_index, 2.0 * blockwise)
            pos += size
    return grad


def _unscaled_schur(pls: PLS, theta: np.ndarray) -> np.ndarray:
    """C₀ = A_RR − A_R1 G A_1R (symmetric, r x r) at ``theta``'s first block."""
    ident = np.array(theta, dtype=float)
    for blk in pls.blocks[1:]:
        idx = blk.theta_index
        for a in range(blk.q):
            for b in range(a + 1):
                if idx[a, b] >= 0:
                    ident[idx[a, b]] = 1.0 if a == b else 0.0
    chol, G, H, _, ok = pls.first_block(theta)
    assert ok and chol is not None
    C = np.array(pls.schur(ident, chol, G, H))
    C = np.tril(C) + np.tril(C, -1).T
    d = np.arange(pls.r_rand)
    C[d, d] -= 1.0
    return C
