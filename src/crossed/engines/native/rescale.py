"""Random slopes on covariates far from zero: the optimiser runs on centred columns.

A correlated term ``(x | g)`` on a covariate whose values sit far from 0 relative to their
spread (a year, 2000 + N(0, 1)) has an intercept variance at x = 0 that is huge and
a correlation of almost exactly −1 with the slope: at the optimum Λ ≈ [[191, 0],
[−0.0957, 0.00018]] (fuzzed against lme4, ``y ~ x:f + (x | g) + (1 | h)``). The criterion
is then a narrow curved valley in θ, BOBYQA from lme4's start (Λ = I) stops far from its
floor, and lme4 too: its REML criterion there was −1085.3 with a convergence warning,
crossed's −939.9 with none, and the optimum is −1099.5.

The model is the same with the term's columns centred and scaled: Z = Z′T with Z′'s
column j = (x_j − m_j) / s_j and T upper triangular (T_jj = s_j, T_0j = m_j for the
intercept's column 0), so b′ = T b, Σ′ = T Σ Tᵀ and every covariance Σ of the original
term is some Σ′ of the centred one. The criterion in Σ′ is well scaled, and the
optimiser runs there; its optimum is written back as Λ = the lower-triangular factor of
T⁻¹Λ′(T⁻¹Λ′)ᵀ (an LQ factorisation, which also holds for a singular Σ).

Only fully correlated (sub-)blocks with an intercept column are centred (an
uncorrelated ``(x || g)`` term's family is not closed under T), and only columns whose
mean exceeds :data:`CENTRE_RATIO` times their standard deviation.

Scaling alone is closed for every term (T diagonal keeps Σ′ diagonal where Σ is), and the
optimiser needs it where a column's units are far from 1: lme4's start Λ = I assumes a
slope's SD per unit of the column is about the residual SD. ``y ~ 1 + (x || g) + (1 | h)``
with x a year (2000 ± 10) reaches the optimum (deviance 12307.09, θ_slope = 0.49); the
same model on x / 1000 has θ_slope = 490 there, and lme4 and crossed both stopped at a
singular fit with deviance 13478.34; crossed on x · 1000 at 12990.83. A non-constant
column not centred above whose SD is over :data:`SCALE_RATIO` or under its inverse is
therefore scaled to unit SD (T_jj = s_j), so that the optimiser sees the problem in the
units where lme4's start fits it; elsewhere it follows lme4's path (and where a θ still
ends far from that start, ``converge.py`` continues by L-BFGS-B: x / 100 had stopped at
12307.0989, 0.005 above the optimum).

The fixed effects have the same trouble on their own: ``y ~ x + I(x^2)`` with x ≈ 2000
has columns whose cross-products lose all but a few digits in the Cholesky factor of the
PLS system (the criterion was off by 46 units, and under one BLAS kernel not finite at the
optimum). Where the condition number of X's cross-product matrix, its columns scaled to
unit length, exceeds :data:`FIXED_CONDITION`, the PLS problem is solved with
X′ = X R⁻¹ (X = QR, so X′ = Q): the same column space, so the same fit, with β = R⁻¹β′,
cov(β) = R⁻¹ cov(β′) R⁻ᵀ and a REML criterion larger by 2 log|det R| (its log|R_X|²
term), which the optimiser's values include. :func:`fixed_preconditioner` gives R. GLMMs
(``glmer.py``) fit X′ the same way, and map β, its covariance and the (θ, β) derivatives
of the convergence check back.

Validated by ``tests/engines/test_native_rescale.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from crossed.design.random import FAR_FROM_ZERO, ReBlock
from crossed.engines.native.faces import correlated_ranges, lower_indices
from crossed.model.factor import basis_inverse

__all__ = ["CENTRE_RATIO", "FIXED_CONDITION", "FIXED_NOTE", "SCALE_RATIO", "ColumnRescaling",
           "Reparametrisation",
           "column_rescaling", "fixed_preconditioner", "lower_factor", "reparametrisation"]

CENTRE_RATIO = FAR_FROM_ZERO
"""A random-slope column is centred for the optimiser when |mean| > this × its SD."""
SCALE_RATIO = 20.0
"""A non-constant random-effects column (not centred) is scaled to unit SD for the
optimiser when its SD is over this or under 1 / this."""
FIXED_CONDITION = 1e8
"""X is orthogonalised for the PLS problem when the condition number of its scaled
cross-product matrix exceeds this (X's own condition number 1e4)."""
FIXED_NOTE = ("the fixed-effect columns are nearly collinear (condition number of their "
              f"scaled cross-products over {FIXED_CONDITION:.0e}): the penalised least "
              "squares were solved on orthogonalised columns (the same fit) and β and its "
              "covariance mapped back")
"""The fit's message where X was orthogonalised (LMM and GLMM)."""


def fixed_preconditioner(X: np.ndarray, xtx: np.ndarray | None = None) -> np.ndarray | None:
    """R of X = QR where X's columns are ill-conditioned (module docstring), else None.

    ``xtx``: XᵀX when the caller has it (the PLS problem keeps it)."""
    if X.shape[1] < 2 or X.shape[0] < X.shape[1]:
        return None
    gram = X.T @ X if xtx is None else xtx
    d = np.sqrt(gram.diagonal())  # (ndarray methods: np.diag's, np.all's, np.outer's values)
    if not np.isfinite(d).all() or (d == 0).any():
        return None  # (a zero column: the rank check's business)
    values = np.linalg.eigvalsh(gram / (d[:, None] * d[None, :]))
    if values[0] > values[-1] / FIXED_CONDITION:
        return None
    R = np.linalg.qr(X, mode="r")
    signs = np.where(np.diag(R) < 0, -1.0, 1.0)  # (a positive diagonal: R's convention)
    R = signs[:, None] * R
    return R if np.all(np.abs(np.diag(R)) > 0) else None


@dataclass(frozen=True)
class ColumnRescaling:
    """The centring and scaling of some blocks' columns for the optimiser.

    Attributes
    ----------
    transforms : tuple of (numpy.ndarray or None)
        Per block, T (q x q) with Z = Z′T; None where the block is unchanged.
    columns : tuple of (str, str)
        (grouping factor, column) of each centred column, for the fit's messages.
    theta_index : tuple of numpy.ndarray
        Each block's ``theta_index``.
    scaled : tuple of (str, str)
        (grouping factor, column) of each column scaled alone (far from unit SD).
    """

    transforms: tuple[np.ndarray | None, ...]
    columns: tuple[tuple[str, str], ...]
    theta_index: tuple[np.ndarray, ...]
    scaled: tuple[tuple[str, str], ...] = ()

    def apply(self, blocks: Sequence[ReBlock]) -> tuple[ReBlock, ...]:
        """The blocks with Z′ = Z T⁻¹ (``blocks``: the design's, or their √w-scaled copies
        in a weighted problem: the map commutes with scaling rows)."""
        out = []
        for blk, T in zip(blocks, self.transforms, strict=True):
            out.append(blk if T is None else replace(blk, Z=np.linalg.solve(T.T, blk.Z.T).T))
        return tuple(out)

    def to_original(self, theta: np.ndarray) -> np.ndarray:
        """θ of the formula's parametrisation from the optimiser's θ′ (Λ from T⁻¹Λ′)."""
        out = np.array(theta, dtype=float)
        for sub, lower, _, L, _ in self._factors(theta, inverse=True):
            out[sub[lower]] = L[lower]
        return out

    def from_original(self, theta: np.ndarray) -> np.ndarray:
        """θ′ of the centred columns from the formula's θ (Λ′ from TΛ)."""
        out = np.array(theta, dtype=float)
        for sub, lower, _, L, _ in self._factors(theta, inverse=False):
            out[sub[lower]] = L[lower]
        return out

    def spherical(self, theta: np.ndarray) -> tuple[np.ndarray | None, ...]:
        """Per block, the orthogonal U (q x q) with u = U u′ for the spherical random
        effects at the optimiser's θ′ (b = T⁻¹Λ′u′ = Λ u with Λ = :meth:`to_original`'s
        factor), or None where the block is unchanged."""
        maps: list[np.ndarray | None] = [
            None if T is None else np.eye(T.shape[0]) for T in self.transforms]
        for _, _, (k, a, b), _, U in self._factors(theta, inverse=True):
            maps[k][a:b, a:b] = U  # type: ignore[index]
        return tuple(maps)

    def effects(self, theta: np.ndarray, u: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """The spherical random effects for the formula's columns, per block (ℓ, q), from
        the optimiser's at its θ′ (``theta``)."""
        maps = self.spherical(theta)
        return tuple(ub if U is None else ub @ U.T for ub, U in zip(u, maps, strict=True))

    def variances(self, theta: np.ndarray, V: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """Their conditional covariances, per block (ℓ, q, q), from the optimiser's."""
        maps = self.spherical(theta)
        return tuple(v if U is None else U @ v @ U.T for v, U in zip(V, maps, strict=True))

    def describe(self) -> str:
        """One line for the fit's messages."""
        parts = []
        if self.columns:
            cols = ", ".join(f"{c!r} in the term on {g!r}" for g, c in self.columns)
            parts.append(f"{cols} centred and scaled (mean over {CENTRE_RATIO:g} SDs from 0)")
        if self.scaled:
            cols = ", ".join(f"{c!r} in the term on {g!r}" for g, c in self.scaled)
            parts.append(f"{cols} scaled to unit SD (SD over {SCALE_RATIO:g} or under "
                         f"{1 / SCALE_RATIO:g})")
        return (f"the optimiser ran with {' and '.join(parts)}: the same model, a "
                "better-scaled criterion; theta is reported for the formula's columns")

    def _factors(self, theta: np.ndarray, inverse: bool) -> Iterator[tuple[
            np.ndarray, tuple[np.ndarray, np.ndarray], tuple[int, int, int], np.ndarray,
            np.ndarray]]:
        """For each correlated range [a, b) of a changed block k (T is the identity outside
        them): its θ positions, their lower-triangle indices, (k, a, b), and L, U with
        L U = T⁻¹Λ (``inverse``) or TΛ (:func:`_lq`)."""
        theta = np.asarray(theta, dtype=float)
        for k, (idx, T) in enumerate(zip(self.theta_index, self.transforms, strict=True)):
            if T is None:
                continue
            for a, b in _changed_ranges(idx, T):
                sub, Ts = idx[a:b, a:b], T[a:b, a:b]
                lower = lower_indices(b - a)
                Lam = np.zeros(sub.shape)
                Lam[lower] = theta[sub[lower]]
                L, U = _lq(np.linalg.solve(Ts, Lam) if inverse else Ts @ Lam)
                yield sub, lower, (k, a, b), L, U


def _lq(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M = L U with L lower triangular, its diagonal non-negative, and U orthogonal (a QR
    factorisation of Mᵀ), defined also where M is singular."""
    Q, R = np.linalg.qr(M.T)
    signs = np.where(np.diag(R) < 0, -1.0, 1.0)
    return np.asarray(R.T * signs[None, :]), signs[:, None] * Q.T


def lower_factor(M: np.ndarray) -> np.ndarray:
    """The lower-triangular L with a non-negative diagonal and L Lᵀ = M Mᵀ (LQ of M),
    defined also where M M ᵀ is singular."""
    return _lq(M)[0]


def _changed_ranges(theta_index: np.ndarray, T: np.ndarray) -> list[tuple[int, int]]:
    """The diagonal blocks [a, b) of a template that T rewrites: the correlated ranges, and
    as 1 x 1 blocks the scaled columns outside them (uncorrelated ones, T_jj ≠ 1)."""
    ranges = correlated_ranges(theta_index)
    inside = {j for a, b in ranges for j in range(a, b)}
    return ranges + [(j, j + 1) for j in np.flatnonzero(np.diagonal(T) != 1.0).tolist()
                     if j not in inside]


def column_rescaling(blocks: Sequence[ReBlock]) -> ColumnRescaling | None:
    """The rescaling of the module docstring for the design's ``blocks``, or None where no
    correlated term has a column far from zero beside an intercept and no column is far
    from unit SD."""
    transforms: list[np.ndarray | None] = []
    columns: list[tuple[str, str]] = []
    scaled: list[tuple[str, str]] = []
    for blk in blocks:
        # (a block without rows, from partitioned data, has its statistics from the sums)
        known = len(blk.Z) >= 2 or "column_stats" in vars(blk)
        ones, mean, sd = blk.column_stats
        if not known or ones.all():  # (intercepts alone: nothing to rescale)
            transforms.append(None)
            continue
        T = np.eye(blk.q)
        changed = False
        ranges = correlated_ranges(blk.theta_index)
        for a, b in ranges:
            intercepts = ones[a:b].nonzero()[0] + a
            if len(intercepts) != 1:
                continue
            i0 = int(intercepts[0])
            for j in range(a, b):
                if j != i0 and blk.far_from_zero[j]:
                    T[i0, j], T[j, j] = mean[j], sd[j]
                    columns.append((blk.group, blk.column_names[j]))
                    changed = True
        free = [j for a, b in ranges for j in range(a, b)] + blk.singleton_columns.tolist()
        for j in free:
            if T[j, j] == 1.0 and sd[j] > 0 and not (1.0 / SCALE_RATIO <= sd[j] <= SCALE_RATIO):
                T[j, j] = sd[j]
                scaled.append((blk.group, blk.column_names[j]))
                changed = True
        transforms.append(T if changed else None)
    if not columns and not scaled:
        return None
    return ColumnRescaling(tuple(transforms), tuple(columns),
                           tuple(blk.theta_index for blk in blocks), tuple(scaled))


@dataclass(frozen=True)
class Reparametrisation:
    """The optimiser's problem where it differs from the formula's (module docstring):
    random-slope columns centred and scaled, X orthogonalised, or both.

    Attributes
    ----------
    columns : ColumnRescaling or None
        The random-effects columns' map (θ′ → θ, u′ → u).
    fixed : numpy.ndarray or None
        R with X = QR (β = R⁻¹β′).
    shift : float
        The formula's criterion less the reparametrised problem's (2 log|det R| for
        REML, else 0).
    """

    columns: ColumnRescaling | None
    fixed: np.ndarray | None
    shift: float

    def describe(self) -> str:
        """One line for the fit's messages."""
        parts = [] if self.columns is None else [self.columns.describe()]
        if self.fixed is not None:
            parts.append(FIXED_NOTE)
        return "; ".join(parts)

    def theta(self, theta: np.ndarray) -> np.ndarray:
        """The formula's θ from the optimiser's."""
        return theta.copy() if self.columns is None else self.columns.to_original(theta)

    def optimiser_theta(self, theta: np.ndarray) -> np.ndarray:
        """The optimiser's θ′ from the formula's (:meth:`theta`'s inverse: a refit starts
        from its fit's θ)."""
        return (np.array(theta, dtype=float) if self.columns is None
                else self.columns.from_original(theta))

    def u(self, theta: np.ndarray, u: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """The spherical random effects for the formula's columns, from the optimiser's
        (``theta``: the optimiser's θ′)."""
        return tuple(u) if self.columns is None else self.columns.effects(theta, u)

    def beta(self, beta: np.ndarray, vcov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """β and its covariance for the formula's X, from the orthogonalised columns'."""
        if self.fixed is None:
            return beta, vcov
        Ri = basis_inverse(self.fixed)
        return Ri @ beta, Ri @ vcov @ Ri.T


def reparametrisation(blocks: Sequence[ReBlock], X: np.ndarray, reml: bool,
                      xtx: np.ndarray | None = None) -> Reparametrisation | None:
    """The reparametrisation a design needs (``blocks``: the design's; ``X``: the PLS
    problem's, √w-scaled with prior weights; ``xtx``: its XᵀX when known), or None."""
    columns = column_rescaling(blocks)
    fixed = fixed_preconditioner(X, xtx)
    if columns is None and fixed is None:
        return None
    shift = 2.0 * float(np.sum(np.log(np.abs(np.diag(fixed))))) if (
        reml and fixed is not None) else 0.0
    return Reparametrisation(columns, fixed, shift)
