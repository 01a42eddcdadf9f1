"""Conditional variances of the spherical random effects: the diagonal blocks of
(ΛᵀZᵀZΛ + I)⁻¹ from a PLS factorisation (dense blocked or sparse Schur path)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import scipy.sparse as sp

from crossed.model.factor import Factor, tri_inverse, tri_solve
from crossed.model.sparse_schur import SparseFactor

if TYPE_CHECKING:
    from crossed.design.random import ReBlock
    from crossed.model.sparse_schur import SparseSchur

__all__ = ["ConditionalInverse", "conditional_inverse_blocks"]


class ConditionalInverse(Protocol):
    """What :func:`conditional_inverse_blocks` reads of a PLS problem: the public attributes
    of :class:`crossed.model.pls.PLS` it uses (a protocol, so that this module, which
    ``pls.py`` imports, does not import it back)."""

    @property
    def q1(self) -> int: ...
    @property
    def l1(self) -> int: ...
    @property
    def r_rand(self) -> int: ...
    @property
    def blocks(self) -> tuple[ReBlock, ...]: ...
    @property
    def A1r(self) -> Any: ...  # (a scipy.sparse CSR matrix)
    @property
    def sparse(self) -> SparseSchur | None: ...

    def first_chol(self, f: Factor) -> np.ndarray: ...
    def scale_matrix(self, theta: np.ndarray) -> Any: ...


def conditional_inverse_blocks(pls: ConditionalInverse, f: Factor) -> list[np.ndarray]:
    """Diagonal blocks of (ΛᵀZᵀZΛ + I)⁻¹ per level, one (ℓ, q, q) array per block.

    The first block's: B_s⁻¹ + K_s K_sᵀ with K_s = B_s⁻¹ Ã_1R[s] L_RR⁻ᵀ (its coupling to
    the later random effects through the factor); the later blocks': the diagonal blocks of
    L_RR⁻ᵀ L_RR⁻¹. On the sparse path by the sparse factor's selected inversion. What
    lme4's ``condVar`` reports (scaled by σ² T · Tᵀ); tested in ``tests/model/test_pls.py``
    and ``tests/model/test_sparse_schur.py``."""
    if isinstance(f, SparseFactor):  # by a selected inversion (sparse_schur.py)
        sparse = pls.sparse
        assert sparse is not None  # its factorisations
        half = np.linalg.solve(pls.first_chol(f), np.broadcast_to(
            np.eye(pls.q1), (pls.l1, pls.q1, pls.q1)))
        return sparse.conditional_inverse_blocks(
            f, np.swapaxes(half, 1, 2) @ half, f.theta)
    L = f.L
    assert L is not None  # an ok factorisation
    rr = pls.r_rand
    theta = f.theta
    Lrr = L[:rr, :rr]
    out_rest: list[np.ndarray] = []
    if rr:
        Linv = tri_inverse(Lrr)
        pos = 0
        for blk in pls.blocks[1:]:
            size = blk.nlevels * blk.q
            sub = Linv[:, pos: pos + size].reshape(rr, blk.nlevels, blk.q)
            out_rest.append(np.einsum("ila,ilb->lab", sub, sub))
            pos += size
    chol = pls.first_chol(f)
    eye = np.broadcast_to(np.eye(pls.q1), chol.shape)
    Binv_half = np.linalg.solve(chol, eye)  # chol^{-1}
    Binv = np.swapaxes(Binv_half, 1, 2) @ Binv_half
    V1 = Binv.copy()
    if rr:
        T1 = pls.blocks[0].template(theta)
        Srand = pls.scale_matrix(theta)[:rr, :rr]
        A1R = pls.A1r[:, :rr]
        step = max(1, 2_000_000 // max(rr, 1))
        for s0 in range(0, pls.l1, step):
            s1 = min(pls.l1, s0 + step)
            rows = slice(s0 * pls.q1, s1 * pls.q1)
            # Ã_1R[s] = T1' A_1R[s] S_R'  -> (levels*q1, rr)
            blockT = sp.kron(sp.identity(s1 - s0), T1.T, format="csr")
            At = (blockT @ (A1R[rows] @ Srand.T)).toarray()
            At = At.reshape(s1 - s0, pls.q1, rr)
            BA = Binv[s0:s1] @ At  # (ls, q1, rr)
            K = tri_solve(Lrr, np.ascontiguousarray(BA.reshape(-1, rr).T))
            K = K.T.reshape(s1 - s0, pls.q1, rr)
            V1[s0:s1] += K @ np.swapaxes(K, 1, 2)
    return [V1] + out_rest
