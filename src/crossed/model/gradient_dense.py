"""The analytic gradient of the profiled criterion on small designs, in one compiled call.

The formula is ``gradient.py``'s (its module docstring): the envelope term of the penalised
residual sum of squares, and ∂ log det Ω/∂θ as

* first block: Σ_s K_s [A_s + W_s (G_s A_s − I)] at the template's positions, with
  K_s = D_s⁻¹T₁ᵀ, G_s = T₁K_s and W_s = V_s S⁻¹ V_sᵀ, V_s = A_1R[s] S_R;
* later blocks (scalar templates here): Σ_{i in block} (S⁻¹ S_R C₀)_ii with
  C₀ = A_RR − Σ_s A_1R[s]ᵀ G_s A_1R[s].

This module computes it where A_1r is kept dense and every later block is scalar (S_R
diagonal), which covers the designs whose evaluations are cheapest, and where the number
of NumPy calls, not their arithmetic, set the cost (blurb_like with 8 slopes: ℓ₁ = 52,
q₁ = 9, R = 26; a 3 x 3 covariance on sleepstudy: 270 µs a gradient in 25 NumPy calls).
What does not depend on θ (A_1r and A_s as contiguous arrays, the template's positions) is
formed once per PLS problem (:func:`dense_arrays`; ``gradient.py``'s plan of the problem
keeps them). Per call, D_s⁻¹ from the
first block's factor (:func:`first_inverse`: L_s⁻ᵀL_s⁻¹ by compiled substitution for
q₁ > 2, ``banded.py``; closed forms for q₁ ≤ 2), then the rest in one compiled call
(``_gradient.dense_gradient``): the PLS solution from the factor, the first block's terms
per level, S⁻¹ (R x R, dpotri), Q = S_R S⁻¹ and Y = A_1R Q (one dgemm), the later blocks'
trace as column sums Σ_j Q_ji (A_RR)_ji − Σ_m Y_mi (G A_1R)_mi (C₀ never formed) and W_s
per level.

No division by θ: exact on the boundary. Validated as ``gradient.py``'s path (finite
differences and a dense evaluation, tests/model/test_gradient.py), and against it to
1e-10 relative on every R reference case (``test_dense_path_matches_general_path``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from crossed.model import _gradient
from crossed.model.factor import Factor

if TYPE_CHECKING:
    from crossed.model.pls import PLS

__all__ = ["DenseArrays", "dense_arrays", "dense_gradient", "first_inverse"]


@dataclass(frozen=True)
class DenseArrays:
    """What the dense path reads that does not depend on θ (one PLS problem)."""

    A1: np.ndarray
    """A_1r as (ℓ₁ q₁, r), C order."""
    A1T: np.ndarray
    """A_1r per level transposed, (ℓ₁, r, q₁), C order."""
    A11: np.ndarray
    """A_s per level, (ℓ₁, q₁, q₁), C order."""
    Arr: np.ndarray
    """A_rr, (r, r), C order."""
    scale_index: np.ndarray
    """The θ that scales each column after the first block (-1: 1, X and y), (r,)."""
    t_pos: np.ndarray
    """The flat positions of the first template that hold a θ ..."""
    t_index: np.ndarray
    """... and their θ."""


def dense_arrays(pls: PLS, dense: np.ndarray, t_pos: np.ndarray, t_index: np.ndarray
                 ) -> DenseArrays:
    """The θ-independent arrays of ``pls``: ``dense`` is A_1r as an (ℓ₁, q₁, r) array,
    ``t_pos`` and ``t_index`` the flat positions of the first template that hold a θ and
    their θ."""
    return DenseArrays(
        A1=np.ascontiguousarray(dense.reshape(pls.l1 * pls.q1, pls.r), dtype=float),
        A1T=np.ascontiguousarray(np.swapaxes(dense, 1, 2), dtype=float),
        A11=np.ascontiguousarray(pls.A11, dtype=float),
        Arr=np.ascontiguousarray(pls.Arr, dtype=float),
        scale_index=np.ascontiguousarray(pls.scale_index, dtype=np.int64),
        t_pos=np.ascontiguousarray(t_pos, dtype=np.int64),
        t_index=np.ascontiguousarray(t_index, dtype=np.int64))


def dense_gradient(pls: PLS, f: Factor, reml: bool, d: DenseArrays) -> np.ndarray:
    """∂(criterion)/∂θ at an ok dense factorisation ``f`` (``d``: :func:`dense_arrays` of
    ``pls``; every later block scalar)."""
    assert f.ok and f.L is not None and pls.scalar_later_blocks
    rr = pls.r_rand
    R = rr + pls.p if reml else rr  # (the columns after the first block in log det Ω)
    theta = np.ascontiguousarray(f.theta, dtype=float)
    T1 = np.ascontiguousarray(pls.blocks[0].template(theta))
    c = -2.0 * (pls.n - pls.p if reml else pls.n) / f.pwrss  # (−u₁ and −b₁: the sign)
    grad = np.empty(len(theta))
    info = _gradient.dense_gradient(
        np.asfortranarray(f.L), theta, c, d.scale_index, rr, R, d.A1, d.A1T, d.A11,
        np.ascontiguousarray(first_inverse(pls, f)), T1, d.Arr, d.t_pos, d.t_index, grad)
    if info < 0:
        raise ValueError("the dense gradient's arrays do not fit the design")
    if info > 0:
        raise np.linalg.LinAlgError(f"the dense gradient's factor is singular (info={info})")
    return grad


def first_inverse(pls: PLS, f: Factor) -> np.ndarray:
    """D_s⁻¹ = (T₁ᵀA_sT₁ + I)⁻¹ per level, (ℓ₁, q₁, q₁), from the factorisation's first
    block (closed forms for q₁ ≤ 2, L_s⁻ᵀL_s⁻¹ from the banded factor for q₁ > 2)."""
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
    return band.inverse(first)
