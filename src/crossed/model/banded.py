"""The first random-effects block's per-level factors, kept as one banded matrix.

blockdiag_s(B_s), B_s = TᵀA_sT + I (q x q per level s), is a symmetric band matrix of
half-bandwidth q - 1 whose band has zeros between levels. Its Cholesky factor
blockdiag_s(L_s) is kept in LAPACK's band storage (lower): one banded triangular solve
(dtbtrs) applies every L_s⁻¹ to a stacked right-hand side. Each level's B_s, L_s, H_s =
L_s⁻¹Tᵀ and G_s = H_sᵀH_s are formed by the compiled kernels (``_core.banded_first``,
``_core.banded_half``), with the arithmetic of the compiled evaluation of small designs
(``_core.SmallDense``), so that both paths give the same numbers.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from crossed.model import _core

__all__ = ["BandedBlocks"]

_NO_G = np.zeros((0, 0))


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
        rows, cols = np.tril_indices(q)
        self._s = np.repeat(np.arange(m), len(rows))
        self._r = np.tile(rows, m)
        self._c = np.tile(cols, m)
        # band storage (lower): AB[r - c, s q + c] = B_s[r, c]
        self._band_row = self._r - self._c
        self._band_col = self._s * q + self._c
        # A_s's entries, row-major, as the rows of a (q², ℓ) array (the kernels' layout),
        # and T's θ positions, row-major (-1: a structural zero)
        self.entries = np.ascontiguousarray(A11.reshape(m, q * q).T)
        self.positions = theta_index.ravel()
        self._eye = np.eye(q).reshape(-1)

    def template(self, theta: np.ndarray) -> np.ndarray:
        T = np.zeros((self.q, self.q))
        mask = self.theta_index >= 0
        T[mask] = theta[self.theta_index[mask]]
        return T

    def _t_rows(self, theta: np.ndarray) -> np.ndarray:
        """T row-major, (q²,)."""
        T: np.ndarray = np.concatenate((np.asarray(theta, dtype=float), [0.0]))[self.positions]
        return T

    def factor(self, theta: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Banded Cholesky factor of blockdiag(B_s), log det and whether B is positive definite."""
        Lb = np.empty((self.q, self.m * self.q), order="F")
        ok, logdet = _core.banded_first(self.entries, self._t_rows(theta), Lb.T)
        return Lb, (float(logdet) if ok else np.inf), bool(ok)

    def solve(self, Lb: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """blockdiag(L_s)⁻¹ Y for a stacked (ℓ q, k) right-hand side."""
        X: np.ndarray
        X, info = lapack.dtbtrs(Lb, np.asfortranarray(Y), uplo="L")
        if info != 0:
            raise np.linalg.LinAlgError(f"singular banded factor (dtbtrs info={info})")
        return X

    def half(self, theta: np.ndarray, Lb: np.ndarray) -> np.ndarray:
        """H_s = L_s⁻¹ Tᵀ per level, (ℓ, q, q), so that T B_s⁻¹ Tᵀ = H_sᵀ H_s."""
        return self.half_and_g(theta, Lb, with_g=False)[0]

    def half_and_g(self, theta: np.ndarray, Lb: np.ndarray, with_g: bool = True
                   ) -> tuple[np.ndarray, np.ndarray]:
        """H_s = L_s⁻¹ Tᵀ and G_s = H_sᵀH_s = T B_s⁻¹ Tᵀ per level, each (ℓ, q, q) (G empty
        without ``with_g``), by forward substitution on the factor ``Lb``."""
        return self._halves(self._t_rows(theta), Lb, with_g)

    def inverse(self, Lb: np.ndarray) -> np.ndarray:
        """B_s⁻¹ = L_s⁻ᵀL_s⁻¹ per level, (ℓ, q, q): :meth:`half_and_g`'s steps with T = I."""
        return self._halves(self._eye, Lb, True)[1]

    def _halves(self, T: np.ndarray, Lb: np.ndarray, with_g: bool
                ) -> tuple[np.ndarray, np.ndarray]:
        q, m = self.q, self.m
        H = np.empty((m, q, q))
        G = np.empty((m, q, q)) if with_g else _NO_G
        _core.banded_half(Lb.T, T, H.reshape(m, q * q), G.reshape(m, q * q) if with_g
                          else _NO_G)
        return H, G

    def unpack(self, Lb: np.ndarray) -> np.ndarray:
        """The per-level lower Cholesky factors L_s as an (ℓ, q, q) array."""
        chol = np.zeros((self.m, self.q, self.q))
        chol[self._s, self._r, self._c] = Lb[self._band_row, self._band_col]
        return chol
