"""Estimability of linear functions of the fixed effects on rank-deficient fits.

When the fixed-effects matrix X is rank deficient (an empty cell of an interaction), lme4
drops columns and only some linear functions ℓ of the full coefficient vector are
estimable: those in the row space of X, i.e. orthogonal to its null space. emmeans
(through the ``estimability`` package) reports the others as ``nonEst``. This module is
the one implementation crossed uses for EMMs, their contrasts and joint tests, adjusted
means and the simulation tests (power, ablation):

- :func:`nonest_basis`: an orthonormal basis of the null space of X from its singular
  value decomposition, as ``estimability::nonest.basis`` builds it for a matrix (the
  basis is not unique when the null space has several dimensions; only its span matters
  for estimability);
- :func:`is_estimable`: ``estimability::is.estble``: ℓ is estimable when
  ‖Nᵀℓ‖² < tol·‖ℓ‖² (tol = 1e-8, emmeans' ``estble.tol``);
- :func:`estimable_subspace`: ``estimability::estble.subspace``: the combinations of the
  rows of L that are estimable (what emmeans' joint F tests use);
- :func:`fit_null_basis`: the null basis of a fit's full (pre-drop) design, with the
  indices of the columns the fit kept, as emmeans' ``emm_basis.merMod`` sets it up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from crossed.design.fixed import MatrixSpec
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["ESTIMABLE_TOL", "NullBasis", "QR_TOL", "SVD_TOL", "estimable_subspace",
           "fit_null_basis", "is_estimable", "nonest_basis", "r_qr"]

ESTIMABLE_TOL = 1e-8
"""``estimability::is.estble``'s default tolerance (emmeans' ``estble.tol``)."""
QR_TOL = 1e-7
"""R's ``qr()`` tolerance (LINPACK ``dqrdc2``)."""
SVD_TOL = 5e-8
"""``estimability::nonest.basis.svd``'s tolerance on singular values (relative)."""


def r_qr(M: np.ndarray, tol: float = QR_TOL) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """QR decomposition with R's limited column pivoting (LINPACK ``dqrdc2``).

    Columns whose norm, after removing their projection on the columns already accepted,
    falls below ``tol`` times their original norm are moved to the end, in their order.

    Returns
    -------
    Q : numpy.ndarray, shape (n, min(n, p))
    R : numpy.ndarray, shape (min(n, p), p)
        ``M[:, pivot] = Q @ R``.
    rank : int
    pivot : numpy.ndarray of int
    """
    M = np.asarray(M, dtype=float)
    n, p = M.shape
    accepted: list[int] = []
    deferred: list[int] = []
    basis = np.zeros((n, 0))
    for j in range(p):
        col = M[:, j]
        norm = float(np.linalg.norm(col))
        resid = col - basis @ (basis.T @ col)
        resid = resid - basis @ (basis.T @ resid)
        rn = float(np.linalg.norm(resid))
        if len(accepted) < n and norm > 0 and rn >= tol * norm:
            accepted.append(j)
            basis = np.column_stack([basis, resid / rn])
        else:
            deferred.append(j)
    pivot = np.array(accepted + deferred, dtype=int)
    if n == 0 or p == 0:
        return np.zeros((n, 0)), np.zeros((0, p)), 0, pivot
    Q, R = np.linalg.qr(M[:, pivot])
    return Q, R, len(accepted), pivot


def nonest_basis(X: np.ndarray, tol: float = SVD_TOL) -> np.ndarray | None:
    """Orthonormal basis of the null space of X (``estimability::nonest.basis`` of a matrix).

    The right singular vectors whose singular value is below ``tol`` times the largest
    (columns beyond the number of rows count as zero singular values).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, p)

    Returns
    -------
    numpy.ndarray of shape (p, p - rank), or None when X has full column rank (every
    linear function is estimable).
    """
    X = np.asarray(X, dtype=float)
    p = X.shape[1]
    if p == 0:
        return None
    if X.shape[0] == 0:
        return np.eye(p)
    _, d, vt = np.linalg.svd(X, full_matrices=True)
    d = np.concatenate([d, np.zeros(p - len(d))])
    null = np.flatnonzero(d < d[0] * tol) if d[0] > 0 else np.arange(p)
    if len(null) == 0:
        return None
    return vt[null].T


def is_estimable(L: np.ndarray, nbasis: np.ndarray | None,
                 tol: float = ESTIMABLE_TOL) -> np.ndarray:
    """Whether each row of L is estimable (``estimability::is.estble``).

    Parameters
    ----------
    L : numpy.ndarray, shape (k, p) or (p,)
        Linear functions over the full coefficient vector.
    nbasis : numpy.ndarray or None
        From :func:`nonest_basis` (None: everything is estimable).

    Returns
    -------
    numpy.ndarray of bool, one per row.
    """
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if nbasis is None:
        return np.ones(L.shape[0], dtype=bool)
    L = np.where(np.isnan(L), 0.0, L)
    chk = L @ nbasis
    ssq = np.sum(L * L, axis=1)
    ssq = np.where(ssq < tol, 1.0, ssq)
    return np.sum(chk * chk, axis=1) < tol * ssq


def estimable_subspace(L: np.ndarray, nbasis: np.ndarray | None,
                       tol: float = ESTIMABLE_TOL) -> np.ndarray:
    """Rows spanning the estimable combinations of the rows of L (``estble.subspace``).

    Returns L itself when all its rows are estimable, else B·L where the rows of B span
    {b : bᵀ L N = 0}; zero rows when no combination is estimable.
    """
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if nbasis is None or np.all(is_estimable(L, nbasis, tol)):
        return L
    LN = L @ nbasis
    LN[np.abs(LN) <= tol] = 0.0
    B = nonest_basis(LN.T)
    if B is None:
        return np.zeros((0, L.shape[1]))
    return B.T @ L


def _all_columns(spec: MatrixSpec) -> MatrixSpec:
    """The matrix spec that builds every column, including those dropped for rank."""
    return replace(spec, keep=tuple(range(spec.width)))


@dataclass(frozen=True)
class NullBasis:
    """The estimability set-up of a fit (emmeans' ``nbasis`` of ``emm_basis.merMod``).

    Attributes
    ----------
    spec : MatrixSpec or None
        Builds the full (pre-drop) fixed-effects matrix on new rows (a reference grid);
        None when the basis was built from a given matrix (simulation refits).
    kept : numpy.ndarray of int
        Columns of the full matrix the fit kept (its coefficients, in order).
    basis : numpy.ndarray
        Null basis of the full matrix of the fit's data.
    """

    spec: MatrixSpec | None
    kept: np.ndarray
    basis: np.ndarray


def fit_null_basis(fit: LmerFit) -> NullBasis | None:
    """The null basis of a fit's full design, or None when no column was dropped.

    Raises
    ------
    ValueError
        When columns were dropped and the fit keeps no data columns to rebuild them.
    """
    fixed = fit.design.fixed
    if not fixed.dropped:
        return None
    frame = fit.design.frame
    if frame is None:
        raise ValueError("the fit dropped rank-deficient columns and keeps no data columns; "
                         "estimability cannot be checked (refit with keep_frame)")
    spec = _all_columns(fixed.spec)
    X_full = spec.build(frame)
    basis = nonest_basis(X_full)
    kept = np.asarray(fixed.spec.keep, dtype=int)
    if basis is None:  # dependent only within our tolerance: project out the dropped ones
        dropped = np.setdiff1d(np.arange(X_full.shape[1]), kept)
        coef, *_ = np.linalg.lstsq(X_full[:, kept], X_full[:, dropped], rcond=None)
        basis = np.zeros((X_full.shape[1], len(dropped)))
        basis[kept] = coef
        basis[dropped, np.arange(len(dropped))] = -1.0
        basis, _ = np.linalg.qr(basis)
    return NullBasis(spec=spec, kept=kept, basis=basis)
