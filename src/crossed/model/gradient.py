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
  S⁻¹ is read only on each level's columns. Where the engine's update uses the sparse map
  (``sparse_map.py``), Σ_{s in class} W_s comes from the map's transpose applied to
  S_R S⁻¹ S_Rᵀ at its positions (the cost of one evaluation's update; levels with equal
  A_s share D_s and G_s); else from A_1R kept dense (small designs) or by sparse products;
* later blocks: the diagonal blocks of S⁻¹ S_Rᵀ C₀ with C₀ = A_RR − A_R1 G A_1R the
  unscaled Schur complement (assembled by :meth:`PLS.schur` at the identity template of
  the later blocks), a row-wise product, O(R² q). Where every later block is scalar
  with its θ at least ``LATER_SCALE_MIN``, S = S_R C₀ S_R + D (D: 1 on the random
  effects, 0 on X) gives (S⁻¹ S_R C₀)_ii = (1 − (S⁻¹)_ii) / s_i on a random effect i, so
  block k's term is 2 Σ_{i in k} (1 − (S⁻¹)_ii) / θ_k: the diagonal of S⁻¹ alone, no C₀
  (the division loses (1 − (S⁻¹)_ii)'s relative precision, ε/θ_k², which is why it is
  not used near the boundary).

No division by θ occurs, so the gradient is exact on the boundary (θ = 0, singular fits).
Never a dense inverse of the first block; S⁻¹ (r x r) is formed from its Cholesky factor
(dpotri), which with C₀ makes a gradient cost about 2-4 evaluations on small designs and
more where r is large (InstEval, r = 1,145: about 4-10). Validated against central finite
differences and a dense evaluation of the same formula on every R reference case, REML and
ML, at R's θ and at random θ (``tests/model/test_gradient.py``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import scipy.sparse as sp

from crossed.model.factor import Factor, profiled_deviance, tri_solve
from crossed.model.gradient_dense import (
    DenseArrays,
    dense_arrays,
    dense_gradient,
    first_inverse,
)
from crossed.model.inverse import inverse_lower

if TYPE_CHECKING:
    from crossed.model.pls import PLS

__all__ = ["DENSE_FRACTION", "DENSE_PRODUCTS", "LATER_SCALE_MIN", "blocked_gradient",
           "criterion_gradient", "value_and_gradient"]

DENSE_PRODUCTS = 2_000_000
"""Up to this many entries of A_1r (ℓ₁·q₁ x r), it is kept dense for the gradient and the
unscaled Schur complement is formed from it directly; above, sparse products (in chunks
of this many dense entries) and :meth:`PLS.schur`."""
DENSE_FRACTION = 0.25
"""... and when at least this fraction of its entries are nonzero."""
LATER_SCALE_MIN = 1e-2
"""Scalar later blocks whose θ are all at least this take their term from the diagonal of
S⁻¹ (module docstring); below, from C₀."""


@dataclass
class _Plan:
    """What the gradient reuses across evaluations of one PLS problem."""

    positions: list[tuple[np.ndarray, np.ndarray]]
    """Per block: the flat positions in its q x q template that hold a θ, and their θ."""
    dense: np.ndarray | None
    """A_1r as a dense (ℓ₁, q₁, r) array (small designs), else None."""
    sparse: dict[int, sp.csr_matrix] = field(default_factory=dict)
    """A_1r's first R columns (large or sparse designs), by R."""
    transposed: dict[str, np.ndarray | sp.csr_matrix] = field(default_factory=dict)
    """A_1r and the sparse map's W transposed (CSR), formed once."""
    map_rows: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """The sparse map's positions inside the first R rows and columns, and their weights."""
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    """The row of each stored entry of ``sparse[R]``, by R."""
    dense_cut: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """``dense[:, :, :R]`` and its per-level transpose, contiguous (stacked products on the
    strided slice cost twice as much), by R."""

    upper: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """The strict upper triangle's indices of an R x R matrix, by R."""
    arrays: DenseArrays | None = None
    """What ``gradient_dense.py``'s compiled gradient reads (formed at its first call)."""

    def dense_arrays(self, pls: PLS) -> DenseArrays:
        """``gradient_dense.dense_arrays`` of ``pls`` (of this plan), formed once."""
        if self.arrays is None:
            assert self.dense is not None
            self.arrays = dense_arrays(pls, self.dense, *self.positions[0])
        return self.arrays

    def cut(self, R: int) -> tuple[np.ndarray, np.ndarray]:
        """A_1R as a contiguous (ℓ₁, q₁, R) array and its (ℓ₁, R, q₁) transpose."""
        got = self.dense_cut.get(R)
        if got is None:
            assert self.dense is not None
            A1 = np.ascontiguousarray(self.dense[:, :, :R])
            got = self.dense_cut[R] = (A1, np.ascontiguousarray(np.swapaxes(A1, 1, 2)))
        return got


_PLANS: weakref.WeakKeyDictionary[PLS, _Plan] = weakref.WeakKeyDictionary()


def _plan(pls: PLS) -> _Plan:
    plan = _PLANS.get(pls)
    if plan is None:
        positions = []
        for blk in pls.blocks:
            flat = blk.theta_index.reshape(-1)
            pos = np.flatnonzero(flat >= 0)
            positions.append((pos, flat[pos]))
        dense = None
        size = pls.l1 * pls.q1 * pls.r
        if size <= DENSE_PRODUCTS and pls.A1r.nnz > DENSE_FRACTION * size:
            dense = pls.A1r.toarray().reshape(pls.l1, pls.q1, pls.r)
        plan = _Plan(positions, dense)
        _PLANS[pls] = plan
    return plan


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
    plan = _plan(pls)
    if plan.dense is not None and pls.scalar_later_blocks:  # (small designs: gradient_dense.py)
        return dense_gradient(pls, f, reml, plan.dense_arrays(pls))
    return blocked_gradient(pls, f, reml)


def blocked_gradient(pls: PLS, f: Factor, reml: bool) -> np.ndarray:
    """:func:`criterion_gradient` by the blocked algebra of every design (sparse products
    where A_1r is kept sparse, any later templates), without ``gradient_dense.py``'s
    shortcut."""
    assert f.ok and f.L is not None
    plan = _plan(pls)
    theta = f.theta
    L = f.L
    rr, q1, l1 = pls.r_rand, pls.q1, pls.l1
    templates = [blk.template(theta) for blk in pls.blocks]
    T1 = templates[0]
    # the PLS solution (as PLS.solve) and Zᵀ(y − Xβ − ZΛu) from the cross-products
    x = tri_solve(L[:-1, :-1], L[-1, :-1], trans=True)
    u_rest: list[np.ndarray] = []
    b_rest: list[np.ndarray] = []
    pos = 0
    for blk, T in zip(pls.blocks[1:], templates[1:], strict=True):
        size = blk.nlevels * blk.q
        ub = x[pos:pos + size].reshape(blk.nlevels, blk.q)
        u_rest.append(ub)
        b_rest.append((ub @ T.T).ravel())
        pos += size
    xs = np.concatenate(b_rest + [x[rr:], [-1.0]])  # [b_rest, β, −1]
    rhs = -(pls.A1r @ xs).reshape(l1, q1)  # Z₁ᵀ(y − Z_r b_r − Xβ)
    Dinv = first_inverse(pls, f)
    u1 = (Dinv @ (rhs @ T1)[:, :, None])[:, :, 0]
    b1 = u1 @ T1.T
    Ztr = [rhs - (pls.A11 @ b1[:, :, None])[:, :, 0]]
    if rr:
        if plan.dense is not None:
            rest = pls.Arr[:rr] @ xs + b1.reshape(-1) @ plan.cut(rr)[0].reshape(-1, rr)
        else:
            At = plan.transposed.get("A1r")
            if At is None:
                At = plan.transposed["A1r"] = pls.A1r[:, :rr].T.tocsr()
            rest = pls.Arr[:rr] @ xs + At @ b1.reshape(-1)
        pos = 0
        for blk in pls.blocks[1:]:
            size = blk.nlevels * blk.q
            Ztr.append(-rest[pos:pos + size].reshape(blk.nlevels, blk.q))
            pos += size
    grad = np.zeros(len(theta))
    for (where, index), z, ub in zip(plan.positions, Ztr, [u1] + u_rest, strict=True):
        grad[index] += -2.0 * (z.T @ ub).reshape(-1)[where]  # [a, b] = Σ_s z[s, a] u[s, b]
    m = pls.n - pls.p if reml else pls.n
    grad *= m / f.pwrss
    R = rr + pls.p if reml else rr
    grad += _logdet_gradient(pls, plan, f, templates, Dinv, R)
    return grad


def _logdet_gradient(pls: PLS, plan: _Plan, f: Factor, templates: list[np.ndarray],
                     Dinv: np.ndarray, R: int) -> np.ndarray:
    """∂ log det Ω / ∂θ for the system of the random effects and the first R - r_rand
    columns after them (R = r_rand: the random effects alone; + p: and X)."""
    theta = f.theta
    assert f.L is not None
    grad = np.zeros(len(theta))
    rr, q1, l1 = pls.r_rand, pls.q1, pls.l1
    # S_R = blockdiag(Λ_rest, I): a vector when the later blocks are scalar
    scale: np.ndarray | None = None
    SR: sp.csr_matrix | None = None
    if pls.scalar_later_blocks:
        scale = pls.scale_vector(theta)[:R]
    else:
        SR = sp.csr_matrix(pls.scale_matrix(theta)[:R, :R].T)
    # the later blocks' term from S⁻¹'s diagonal (module docstring), and then S⁻¹'s lower
    # triangle is all the sparse map reads
    from_diagonal = bool(rr) and scale is not None and bool(
        np.all(scale[:rr] >= LATER_SCALE_MIN))
    lower_only = from_diagonal and pls.sparse_map is not None
    if R:
        Sinv = inverse_lower(f.L, R)
        if not lower_only:
            upper = plan.upper.get(R)
            if upper is None:
                upper = plan.upper[R] = np.triu_indices(R, 1)
            Sinv[upper] = Sinv.T[upper]  # (dpotri leaves the input's upper triangle)
    else:
        Sinv = np.zeros((0, 0))
    # ---- first block: D_s⁻¹ T₁ᵀ [A_s + W_s (G_s A_s − I)] per level
    T1 = templates[0]
    A = pls.A11
    K = (Dinv.reshape(-1, q1) @ T1.T).reshape(l1, q1, q1)  # D_s⁻¹ T₁ᵀ
    G = (np.swapaxes(K, 1, 2).reshape(-1, q1) @ T1.T).reshape(l1, q1, q1)  # T₁ D_s⁻¹ T₁ᵀ
    # Σ_s K_s A_s + Σ_s K_s W_s (G_s A_s − I) (sums over one level per class of equal A_s
    # when the update uses the sparse map: there W_s is summed over the class)
    per_level = K.transpose(1, 0, 2).reshape(q1, -1) @ A.reshape(-1, q1)
    if R:
        m = pls.sparse_map
        if m is not None:
            W, rep = _class_w(pls, plan, Sinv, scale, SR, R), m.rep
            K, G, A = K[rep], G[rep], A[rep]
        else:
            W = _first_w(pls, plan, Sinv, scale, SR, R)
        per_level += K.transpose(1, 0, 2).reshape(q1, -1) @ (W @ (G @ A) - W).reshape(-1, q1)
    where, index = plan.positions[0]
    grad[index] += 2.0 * per_level.T.reshape(-1)[where]  # [b, a]: (s, b), (s, a) entries
    # ---- later blocks: the diagonal blocks of S⁻¹ S_Rᵀ C₀
    if from_diagonal:
        assert scale is not None  # scalar later blocks
        off = 1.0 - np.diagonal(Sinv)[:rr]
        pos = 0
        for blk, (_, index) in zip(pls.blocks[1:], plan.positions[1:], strict=True):
            grad[index] += 2.0 * float(off[pos:pos + blk.nlevels].sum()) / scale[pos]
            pos += blk.nlevels
    elif rr:
        if plan.dense is not None:
            A1 = plan.cut(R)[0]
            GA = A1 * G[:, :, :1] if q1 == 1 else G @ A1
            C0 = pls.Arr[:R, :R] - A1.reshape(-1, R).T @ GA.reshape(-1, R)
        else:
            C0 = _unscaled_schur(pls, theta)[:R, :R]
        if scale is not None:
            P = Sinv * scale[None, :]
        else:
            assert SR is not None
            P = np.asarray((SR @ Sinv).T)  # S⁻¹ S_Rᵀ = (S_R S⁻¹)ᵀ
        pos = 0
        for blk, (where, index) in zip(pls.blocks[1:], plan.positions[1:], strict=True):
            size = blk.nlevels * blk.q
            Pk = P[pos:pos + size].reshape(blk.nlevels, blk.q, R)
            Ck = C0[pos:pos + size].reshape(blk.nlevels, blk.q, R)
            if blk.q == 1:
                grad[index] += 2.0 * float(np.vdot(Pk, Ck))
            else:  # Σ_s [(s, b), (s, a)] at [a, b]
                grad[index] += 2.0 * np.einsum("lbm,lam->ab", Pk, Ck).reshape(-1)[where]
            pos += size
    return grad


def _class_w(pls: PLS, plan: _Plan, Sinv: np.ndarray, scale: np.ndarray | None,
              SR: sp.csr_matrix | None, R: int) -> np.ndarray:
    """Σ_{s in c} W_s per class c of levels with equal A_s, from the sparse map (its
    transpose applied to S_R S⁻¹ S_Rᵀ at the updated positions: as one evaluation's update).

    The map's column (a, b, c) at position (i, j), i <= j, is Σ_{s in c} A_1r[(s, a), ·]
    A_1r[(s, b), ·] at (i, j) in one order or the other; W_s is symmetric, so each
    off-diagonal position counts for both orders and a diagonal one for half of each."""
    m = pls.sparse_map
    assert m is not None
    q1 = pls.q1
    got = plan.map_rows.get(R)
    if got is None:
        keep = np.flatnonzero((m.i < R) & (m.j < R))
        half = np.where(m.i[keep] == m.j[keep], 0.5, 1.0)
        got = plan.map_rows[R] = (keep, half)
    keep, half = got
    i, j = m.i[keep], m.j[keep]
    if scale is not None:  # (i <= j: S⁻¹'s lower triangle, which dpotri fills)
        x = Sinv[j, i] * scale[i] * scale[j]
    else:
        assert SR is not None
        X = np.asarray(SR @ np.asarray(SR @ Sinv).T)  # S_R S⁻¹ S_Rᵀ (symmetric)
        x = X[i, j]
    xvec = np.zeros(m.W.shape[0])
    xvec[keep] = x * half
    WT = plan.transposed.get("W")
    if WT is None:
        W = m.W
        WT = plan.transposed["W"] = sp.csr_matrix(W.T) if sp.issparse(W) else np.asarray(W).T
    t = np.asarray(WT @ xvec).reshape(q1, q1, -1).transpose(2, 0, 1)
    return t + np.swapaxes(t, 1, 2)


def _first_w(pls: PLS, plan: _Plan, Sinv: np.ndarray, scale: np.ndarray | None,
              SR: sp.csr_matrix | None, R: int) -> np.ndarray:
    """W_s = V_s S⁻¹ V_sᵀ per level, V = A_1R S_R (dense, or sparse by chunks of levels)."""
    q1, l1 = pls.q1, pls.l1
    if plan.dense is not None:
        A1, A1T = plan.cut(R)
        if scale is not None:  # V S⁻¹ Vᵀ = A_1R (S_R S⁻¹ S_R) A_1Rᵀ, S_R diagonal
            V, VT = A1, A1T
            Y = (A1.reshape(-1, R) @ (Sinv * scale * scale[:, None])).reshape(l1, q1, R)
        else:
            V = (A1.reshape(-1, R) @ SR).reshape(l1, q1, R)
            VT = np.swapaxes(V, 1, 2)
            Y = (V.reshape(-1, R) @ Sinv).reshape(l1, q1, R)
        if q1 == 1:
            return cast(np.ndarray, np.einsum("sij,sij->s", Y, V).reshape(l1, 1, 1))
        return cast(np.ndarray, Y @ VT)
    W = np.empty((l1, q1, q1))
    Vs = plan.sparse.get(R)
    if Vs is None:
        Vs = plan.sparse[R] = sp.csr_matrix(pls.A1r[:, :R])
    if scale is not None:  # the columns scaled, same structure
        Vs = sp.csr_matrix((Vs.data * scale[Vs.indices], Vs.indices, Vs.indptr), shape=Vs.shape)
    else:
        Vs = sp.csr_matrix(Vs @ SR)
    rows = plan.rows.get(R)
    if rows is None:
        rows = plan.rows[R] = np.repeat(np.arange(l1 * q1), np.diff(Vs.indptr))
    level, b = np.divmod(rows, q1)
    step = max(1, DENSE_PRODUCTS // max(R * q1, 1))
    for s0 in range(0, l1, step):  # W[s, a, b] = Σ_j (V S⁻¹)[(s, a), j] V[(s, b), j]
        s1 = min(l1, s0 + step)
        lo, hi = Vs.indptr[s0 * q1], Vs.indptr[s1 * q1]
        Y = np.asarray(Vs[s0 * q1:s1 * q1] @ Sinv)  # rows of V S⁻¹
        lev, bb, cols, data = level[lo:hi] - s0, b[lo:hi], Vs.indices[lo:hi], Vs.data[lo:hi]
        for a in range(q1):
            vals = data * Y[lev * q1 + a, cols]
            W[s0:s1, a, :] = np.bincount(lev * q1 + bb, weights=vals,
                                         minlength=(s1 - s0) * q1).reshape(s1 - s0, q1)
    return W


def _unscaled_schur(pls: PLS, theta: np.ndarray) -> np.ndarray:
    """C₀ = A_RR − A_R1 G A_1R (symmetric, r x r) at ``theta``'s first block, by
    :meth:`PLS.schur` with the later blocks' templates at the identity."""
    ident = np.array(theta, dtype=float)
    for blk in pls.blocks[1:]:
        idx = blk.theta_index
        for a in range(blk.q):
            for b in range(a + 1):
                if idx[a, b] >= 0:
                    ident[idx[a, b]] = 1.0 if a == b else 0.0
    chol, G, H, _, ok = pls.first_block(theta)
    assert ok and chol is not None
    C = np.tril(pls.schur(ident, chol, G, H))
    C += np.tril(C, -1).T
    d = np.arange(pls.r_rand)
    C[d, d] -= 1.0
    return C
