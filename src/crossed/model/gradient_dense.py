"""The analytic gradient of the profiled criterion on small designs, in few array operations.

The formula is ``gradient.py``'s (its module docstring): the envelope term of the penalised
residual sum of squares, and ∂ log det Ω/∂θ as

* first block: Σ_s K_s [A_s + W_s (G_s A_s − I)] at the template's positions, with
  K_s = D_s⁻¹T₁ᵀ, G_s = T₁K_s and W_s = V_s S⁻¹ V_sᵀ, V_s = A_1R[s] S_R;
* later blocks (scalar templates here): Σ_{i in block} (S⁻¹ S_R C₀)_ii with
  C₀ = A_RR − Σ_s A_1R[s]ᵀ G_s A_1R[s].

This module computes it where A_1r is kept dense and every later block is scalar (S_R
diagonal), which covers the designs whose evaluations are cheapest, and where the number
of NumPy calls, not their arithmetic, sets the cost (blurb_like with 8 slopes: ℓ₁ = 52,
q₁ = 9, R = 26). Everything that does not depend on θ (A_1r as dense arrays in the layouts
the products want, the template's positions, which θ scales each later random effect) is
formed once per PLS problem and kept (:func:`dense_arrays`). Per call:

* D_s⁻¹ from the first block's factor (L_s⁻¹ by one banded solve for q₁ > 2, then
  L_s⁻ᵀL_s⁻¹; closed forms for q₁ ≤ 2); for a diagonal template K_s and G_s are scalings;
* S⁻¹ (R x R) from the dense factor (dpotri), Q = S_R S⁻¹ and Y = A_1R Q (one product);
* the later blocks' trace as column sums: Σ_j Q_ji (A_RR)_ji − Σ_m Y_mi (G A_1R)_mi, so
  C₀ is never formed; W_s = (Y S_R)[s] A_1R[s]ᵀ by one stacked product.

No division by θ: exact on the boundary. Validated as ``gradient.py``'s path (finite
differences and a dense evaluation, tests/model/test_gradient.py), and against it to
1e-10 relative on every R reference case (``test_dense_path_matches_general_path``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
from scipy.linalg import lapack

from crossed.model.factor import Factor, tri_solve

if TYPE_CHECKING:
    from crossed.model.pls import PLS

__all__ = ["DenseArrays", "dense_arrays", "dense_gradient", "first_inverse"]


@dataclass(frozen=True)
class DenseArrays:
    """What the dense path reads that does not depend on θ (one PLS problem, one R)."""

    R: int
    """Columns after the first block in the log-determinant: r_rand (ML) or r_rand + p."""
    A1: np.ndarray
    """A_1r as (ℓ₁ q₁, r), C order."""
    A1rr_T: np.ndarray
    """A_1r's first r_rand columns transposed, (r_rand, ℓ₁ q₁), C order."""
    A1R: np.ndarray
    """A_1R as (ℓ₁, q₁, R)."""
    A1R_T: np.ndarray
    """Its per-level transpose, (ℓ₁, R, q₁)."""
    A_rest: np.ndarray
    """A_rr's first r_rand rows, (r_rand, r)."""
    A_Rrr: np.ndarray
    """A_RR's first r_rand columns, (R, r_rand)."""
    A11_A1rr: np.ndarray
    """[A_11 | A_1r's first r_rand columns] per level, (ℓ₁, q₁, q₁ + r_rand)."""
    rest_theta: np.ndarray
    """The θ that scales each later random effect, (r_rand,)."""
    t_diag: np.ndarray | None
    """For a diagonal first template, the θ of each diagonal entry (q₁,); else None."""
    t_pos: np.ndarray
    """The flat positions of the first template that hold a θ ..."""
    t_index: np.ndarray
    """... and their θ."""
    upper: tuple[np.ndarray, np.ndarray]
    """The strict upper triangle of an R x R matrix."""


_ARRAYS: weakref.WeakKeyDictionary[PLS, dict[int, DenseArrays]] = weakref.WeakKeyDictionary()


def dense_arrays(pls: PLS, dense: np.ndarray, R: int) -> DenseArrays:
    """The θ-independent arrays of ``pls`` for ``R`` (formed once, kept per PLS problem).

    ``dense``: A_1r as an (ℓ₁, q₁, r) array."""
    kept = _ARRAYS.get(pls)
    if kept is None:
        kept = _ARRAYS[pls] = {}
    got = kept.get(R)
    if got is not None:
        return got
    l1, q1, r, rr = pls.l1, pls.q1, pls.r, pls.r_rand
    A1 = np.ascontiguousarray(dense.reshape(l1 * q1, r))
    A1R = np.ascontiguousarray(dense[:, :, :R])
    idx = pls.blocks[0].theta_index
    off = ~np.eye(q1, dtype=bool)
    diagonal = bool(np.all(idx[off] < 0)) and bool(np.all(np.diagonal(idx) >= 0))
    flat = idx.reshape(-1)
    t_pos = np.flatnonzero(flat >= 0)
    got = kept[R] = DenseArrays(
        R=R, A1=A1, A1rr_T=np.ascontiguousarray(A1[:, :rr].T),
        A1R=A1R, A1R_T=np.ascontiguousarray(np.swapaxes(A1R, 1, 2)),
        A_rest=np.ascontiguousarray(pls.Arr[:rr]), A_Rrr=np.ascontiguousarray(pls.Arr[:R, :rr]),
        A11_A1rr=np.concatenate((pls.A11, dense[:, :, :rr]), axis=2),
        rest_theta=np.ascontiguousarray(pls.scale_index[:rr]),
        t_diag=np.diagonal(idx).copy() if diagonal else None,
        t_pos=t_pos, t_index=flat[t_pos], upper=np.triu_indices(R, 1))
    return got


_ONE = np.ones(1)
_MINUS_ONE = -_ONE


def dense_gradient(pls: PLS, f: Factor, reml: bool, dense: np.ndarray) -> np.ndarray:
    """∂(criterion)/∂θ at an ok dense factorisation ``f`` (A_1r kept dense as ``dense``,
    (ℓ₁, q₁, r); every later block scalar)."""
    assert f.ok and f.L is not None and pls.scalar_later_blocks
    rr, q1, l1, k = pls.r_rand, pls.q1, pls.l1, len(f.theta)
    R = rr + pls.p if reml else rr
    d = dense_arrays(pls, dense, R)
    theta, L = f.theta, f.L
    s = np.concatenate((theta, _ONE))[pls.scale_index]  # S's diagonal (1 on X and y)
    # the PLS solution [u_rest, β] and xs = [b_rest, β, −1]
    x = tri_solve(L[:-1, :-1], L[-1, :-1], trans=True)
    xs = np.concatenate((x, _MINUS_ONE))
    xs *= s
    rhs = (d.A1 @ xs).reshape(l1, q1)  # −Z₁ᵀ(y − Z_r b_r − Xβ), per level
    Dinv = first_inverse(pls, f)  # D_s⁻¹
    # K̃_s = T₁D_s⁻¹ (= K_sᵀ, K_s = D_s⁻¹T₁ᵀ) and G_s = K̃_sT₁ᵀ; u₁ = −K̃_sᵀ rhs_s, b₁ = T₁u₁
    if d.t_diag is not None:
        t = theta[d.t_diag]
        Kt = Dinv * t[:, None]
        G = Kt * t
    else:
        flat = np.zeros(q1 * q1)
        flat[d.t_pos] = theta[d.t_index]
        T1 = flat.reshape(q1, q1)
        Kt = T1 @ Dinv
        G = Kt @ T1.T
    u1 = (rhs[:, None, :] @ Kt)[:, 0, :]  # −u₁
    b1 = u1 * t if d.t_diag is not None else u1 @ T1.T  # −b₁
    z1 = rhs - (pls.A11 @ b1[:, :, None])[:, :, 0]  # −Z₁ᵀ(y − Xβ − ZΛu)
    c = -2.0 * (pls.n - pls.p if reml else pls.n) / f.pwrss  # (−u₁ and −b₁: the sign)
    first = c * (z1.T @ u1)  # [a, b]: Σ_s z[s, a] u[s, b] (of the residual sum of squares)
    rest = None
    if rr:
        z_rest = d.A_rest @ xs
        z_rest -= d.A1rr_T @ b1.reshape(-1)  # −Z_rᵀ(y − Xβ − ZΛu)
        z_rest *= x[:rr]
        rest = z_rest * -c
    # ---- ∂ log det Ω / ∂θ: first block Σ_s D_s⁻¹ T₁ᵀ F_s, F_s = A_s + W_s (G_s A_s − I)
    F = pls.A11
    if R:
        Sinv, info = lapack.dpotri(L[:R, :R], lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri failed (info={info})")
        Sinv[d.upper] = Sinv.T[d.upper]  # (dpotri leaves the input's upper triangle)
        Sinv = Sinv.T  # (C order)
        sR = s[:R]
        Q = Sinv * sR[:, None]  # S_R S⁻¹
        Y = d.A1R.reshape(-1, R) @ Q  # A_1R S_R S⁻¹
        GA = G @ d.A11_A1rr  # [G_s A_s | G_s A_1r[s]] per level
        if rest is not None:  # later blocks: Σ_j Q_ji C₀_ji, C₀ = A_RR − A_1Rᵀ G A_1R
            rest += 2.0 * np.einsum("ji,ji->i", Q[:, :rr], d.A_Rrr)
            rest -= 2.0 * np.einsum("mi,mi->i", Y[:, :rr], GA[:, :, q1:].reshape(-1, rr))
        Y *= sR
        W = Y.reshape(l1, q1, R) @ d.A1R_T  # W_s = V_s S⁻¹ V_sᵀ
        F = F + W @ GA[:, :, :q1] - W
    first += 2.0 * (F.reshape(-1, q1).T @ Kt.reshape(-1, q1))  # [a, b]: Σ_s (K_s F_s)[b, a]
    grad = np.bincount(d.rest_theta, weights=rest, minlength=k) if rest is not None else (
        np.zeros(k))
    grad[d.t_index] += first.reshape(-1)[d.t_pos]
    return grad


def first_inverse(pls: PLS, f: Factor) -> np.ndarray:
    """D_s⁻¹ = (T₁ᵀA_sT₁ + I)⁻¹ per level, (ℓ₁, q₁, q₁), from the factorisation's first
    block (closed forms for q₁ ≤ 2, the banded factor's inverse for q₁ > 2)."""
    first = f.first
    assert first is not None
    if pls.q1 == 1:
        root = pls.first_chol(f)  # (per level where the factor keeps one per class)
        return cast(np.ndarray, 1.0 / (root * root))
    if pls.q1 == 2:  # B_s's entries (b00, b10, b11)
        b00, b10, b11 = first
        det = b00 * b11 - b10 * b10
        inv: np.ndarray = np.stack([b11, -b10, -b10, b00], axis=1).reshape(-1, 2, 2)
        return cast(np.ndarray, inv / det[:, None, None])
    band = pls.band
    assert band is not None  # q1 > 2
    X = band.inverse(first).reshape(pls.l1, pls.q1, pls.q1)  # L_s⁻¹ (a view)
    return cast(np.ndarray, np.ascontiguousarray(np.swapaxes(X, 1, 2)) @ np.ascontiguousarray(X))
