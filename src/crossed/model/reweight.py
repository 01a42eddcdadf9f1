"""Re-weighting a PLS problem for PIRLS (GLMMs): the working weights change at every
iteration, the pattern of the cross-products does not, so the structure (levels, grouping,
the update's plan) is kept and only the products are recomputed."""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp

from crossed.model.banded import BandedBlocks
from crossed.model.pls import PLS, sparse_z
from crossed.model.pwrss import level_products

__all__ = ["reweighted"]


def reweighted(pls: PLS, sqrt_w: np.ndarray, y: np.ndarray) -> PLS:
    """``pls``'s structure with the rows of ``[Z X y]`` scaled by ``sqrt_w`` (and the
    response ``y``, unscaled): the cross-products are recomputed, the plan of the
    update (how levels are grouped) is kept. For PIRLS, whose working weights change
    at every iteration while the pattern of the products does not."""
    src = pls.__dict__.get("_source") or (pls.blocks, pls.X)
    blocks, X = src
    new = copy.copy(pls)
    new._source = src  # type: ignore[attr-defined]
    first, rest = blocks[0], blocks[1:]
    z1 = first.Z * sqrt_w[:, None]
    A11 = level_products(first, z1)
    new.A11 = A11
    if pls.q1 > 2:
        new._band = BandedBlocks(A11, first.theta_index)
    if pls.q1 == 2:
        new._a_2x2 = np.stack([A11[:, 0, 0], A11[:, 1, 0], A11[:, 1, 1]])
    Z1 = sparse_z(first, z1)
    new._Z1t = Z1.T.tocsr()
    if rest:
        Zr = sp.hstack([sparse_z(b, b.Z * sqrt_w[:, None]) for b in rest], format="csr")
        new._Zr = Zr
        new._Z1tZr = (new._Z1t @ Zr).tocsr()
        new._ZrtZr = (Zr.T @ Zr).toarray()
    new.X = X * sqrt_w[:, None]
    new._free = None
    # (its blocks keep the unweighted Z: the factor's own pwrss, not the residuals')
    new.residual_pwrss = "never"
    new._set_response(np.asarray(y, dtype=float) * sqrt_w)
    return new
