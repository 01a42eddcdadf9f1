"""Symmetric positive definite matrices shaped like the PLS system's dense part, for the
tests of its dense factorisations (model/cholesky.py, model/inverse.py)."""

from __future__ import annotations

import numpy as np


def spd(n: int, seed: int = 0, p: int = 3) -> np.ndarray:
    """I + BBᵀ on the first n - p rows and columns, then p columns of a larger scale
    (fixed-effect-like), in Fortran order."""
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n // 3)) * rng.uniform(0.1, 3.0, size=n)[:, None]
    B[n - p:] *= 40.0
    A = B @ B.T
    A[np.diag_indices(n - p)] += 1.0
    A[n - p:, n - p:] += np.eye(p)
    return np.asfortranarray(A)
