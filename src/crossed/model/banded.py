"""The first random-effects block as one banded matrix (LAPACK dpbtrf / dtbtrs).

blockdiag_s(B_s), B_s = TᵀA_sT + I (q x q per level s), is a symmetric band matrix of
half-bandwidth q - 1 whose band has zeros between levels. One banded Cholesky factors every
level at once, and one banded triangular solve applies every L_s⁻¹ to a stacked right-hand
side: two LAPACK calls per evaluation instead of one small factorisation and solve per level
(what dominates random-slope models with many parameters, e.g. 9 slopes by model:dataset).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

__all__ = ["BandedBlocks"]


class BandedBlocks:
    """Per-level matrices B_s of one random-effects block, factored together.

    Parameters
    ----------
    A11 : numpy.ndarray
        (ℓ, q, q) cross-products Z_sᵀZ_s per level.
    theta_index : numpy.ndarray
        (q, q) template: the position in theta of each entry of T, -1 for a structural zero.
    """

    def __init__(self, A11: np.ndarray, theta_index: np.ndarray):
        self.m, self.q, _ = A11.shape
        q, m = self.q, self.m
        self.theta_index = theta_index
        self.diagonal = bool(np.all(theta_index[~np.eye(q, dtype=bool)] < 0))
        rows, cols = np.tril_indices(q)
        self._s = np.repeat(np.arange(m), len(rows))
        self._r = np.tile(rows, m)
        self._c = np.tile(cols, m)
        # band storage (lower): AB[r - c, s q + c] = B_s[r, c]
        self._band_row = self._r - self._c
        self._band_col = self._s * q + self._c
        self._A11 = A11
        if self.diagonal:
            self._t_pos = np.diagonal(theta_index).copy()
            band = np.zeros((q, m * q), order="F")
            band[self._band_row, self._band_col] = A11[self._s, self._r, self._c]
            self._A11_band = band
            local = np.arange(m * q) % q
            # the entry in band row k, column j pairs local rows c_j + k and c_j: its factor
            # is t[c_j + k] t[c_j], read from the flattened outer product t tᵀ
            pair_r = np.minimum(local[None, :] + np.arange(q)[:, None], q - 1)
            self._pair = np.asfortranarray(pair_r * q + local[None, :])
        self._eye_stack = np.asfortranarray(np.tile(np.eye(q), (m, 1)))
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # (Lb, inverse(Lb))

    def template(self, theta: np.ndarray) -> np.ndarray:
        T = np.zeros((self.q, self.q))
        mask = self.theta_index >= 0
        T[mask] = theta[self.theta_index[mask]]
        return T

    def factor(self, theta: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Banded Cholesky factor of blockdiag(B_s), log det and whether B is positive definite."""
        if self.diagonal:
            t = theta[self._t_pos]
            band = self._A11_band * np.outer(t, t).ravel()[self._pair]
        else:
            T = self.template(theta)
            B = T.T @ self._A11 @ T
            band = np.zeros((self.q, self.m * self.q), order="F")
            band[self._band_row, self._band_col] = B[self._s, self._r, self._c]
        band[0] += 1.0
        Lb, info = lapack.dpbtrf(band, lower=1, overwrite_ab=1)
        if info != 0:
            return Lb, np.inf, False
        return Lb, 2.0 * float(np.sum(np.log(Lb[0]))), True

    def solve(self, Lb: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """blockdiag(L_s)⁻¹ Y for a stacked (ℓ q, k) right-hand side."""
        X: np.ndarray
        X, info = lapack.dtbtrs(Lb, np.asfortranarray(Y), uplo="L")
        if info != 0:
            raise np.linalg.LinAlgError(f"singular banded factor (dtbtrs info={info})")
        return X

    def half(self, theta: np.ndarray, Lb: np.ndarray) -> np.ndarray:
        """H_s = L_s⁻¹ Tᵀ per level, (ℓ, q, q), so that T B_s⁻¹ Tᵀ = H_sᵀ H_s.

        Formed as (L_s⁻¹) Tᵀ from the stacked inverses, which are kept for
        :meth:`inverse` (the gradient reads them after the same evaluation)."""
        X = self.inverse(Lb)
        H: np.ndarray
        if self.diagonal:  # Tᵀ = diag(t) per level
            H = X * theta[self._t_pos][None, :]
        else:
            H = X @ self.template(theta).T
        return H.reshape(self.m, self.q, self.q)

    def inverse(self, Lb: np.ndarray) -> np.ndarray:
        """The stacked L_s⁻¹, (ℓ q, q) (rows s q ... s q + q - 1: level s's), by one banded
        solve; the last one is kept, and returned again for the same factor ``Lb`` (the
        same array object: one evaluation's factorisation, then its gradient)."""
        last = self._last
        if last is not None and last[0] is Lb:
            return last[1]
        X = self.solve(Lb, self._eye_stack)
        self._last = (Lb, X)  # (one assignment: a concurrent reader sees one pair or the other)
        return X

    def unpack(self, Lb: np.ndarray) -> np.ndarray:
        """The per-level lower Cholesky factors L_s as an (ℓ, q, q) array."""
        chol = np.zeros((self.m, self.q, self.q))
        chol[self._s, self._r, self._c] = Lb[self._band_row, self._band_col]
        return chol
