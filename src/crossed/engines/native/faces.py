"""Probes off a singular face of a correlated random-effects term.

The criterion (LMM or GLMM) depends on a term's θ only through its covariance
Σ = Λ Λᵀ. Where a diagonal element Λ_jj of a correlated term is 0, the rows below it are
not unique: column j below the diagonal can be traded with the later columns (rotated
among them) without changing Σ or the criterion. The optimiser sees that face as flat in
those directions and can stop on it at a point whose neighbours, along the one direction
it can try (Λ_jj off 0 with Λ's column j as it happens to be), all rise, while the same Σ
written with another column j descends.

Example (fuzzed against glmer, binomial ``y ~ f1 + x + (x | g)``, 99 rows): BOBYQA's first
stage stops at Λ = [[0, 0], [−0.036, 0.906]]: no random intercept, a slope of SD 0.907.
Moving Λ_00 off 0 there creates a covariance ≈ −0.036·Λ_00, which raises the criterion.
The same Σ written as [[0, 0], [+0.907, 0]] and then Λ_00 = 0.009 creates a covariance
of +0.907·0.009: the criterion falls, and BOBYQA continues to lme4's optimum, 0.50 lower
in −2 log L (correlation +1, intercept SD 0.19).

:func:`face_probes` writes, for each such Λ_jj < ``control.edge_tol`` in a fully
correlated (sub-)block, the rows below j in the form whose column j carries all it can
(an LQ factorisation, so the later diagonal elements become 0 and Σ is unchanged), with
either sign, and moves Λ_jj to :data:`FACE_PROBES` times the term's largest SD (four
evaluations per such element).

A term whose Σ is 0 altogether (every SD below ``control.edge_tol``) has no face to turn:
there the criterion is smooth in Σ, f(Σ) ≈ f(0) + tr(G Σ), and moving out along Σ = h² v vᵀ
descends exactly when vᵀGv < 0. G is estimated from probes along each axis and each pair
of axes with either sign (h = 0.01: m² evaluations for an m x m term), and a negative
eigenvalue's eigenvector is probed at every h of :data:`FACE_PROBES`. No single variance
need descend for that (fuzzed: ``y ~ x + I(x^2) + (1 + x + z | g)`` ended at Σ = 0 under
L-BFGS-B, 0.0015 above lme4's rank-one optimum along (0.024, 0.023, 0.042)).

The caller continues its optimiser from the best probe
when one lowers the criterion. Validated by ``tests/engines/test_native_faces.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from crossed.design.random import ReBlock
from crossed.model.control import LmerControl

__all__ = ["FACE_PROBES", "correlated_ranges", "face_probes", "lower_indices"]

FACE_PROBES = (1e-2, 1e-1)
"""Where :func:`face_probes` moves Λ_jj, as fractions of the term's largest SD."""
FACE_GAIN = 1e-10
"""A probe counts when it lowers the criterion by more than this, relative."""


def correlated_ranges(theta_index: np.ndarray) -> list[tuple[int, int]]:
    """The diagonal sub-blocks [a, b) of a block's template, of size ≥ 2, whose whole lower
    triangle is free (correlated terms; terms on one factor are merged block-diagonally).

    Found once per template (every fit and refit of a design asks again)."""
    index = np.asarray(theta_index, dtype=np.int64)
    return list(_correlated_ranges(index.shape[0], index.tobytes()))


@functools.lru_cache(maxsize=256)
def _correlated_ranges(q: int, template: bytes) -> tuple[tuple[int, int], ...]:
    """:func:`correlated_ranges` of the q x q template stored in ``template`` (int64)."""
    theta_index = np.frombuffer(template, dtype=np.int64).reshape(q, q)
    ranges: list[tuple[int, int]] = []
    a = 0
    for b in range(1, q + 1):
        if b < q and np.any(theta_index[b:, a:b] >= 0):
            continue  # rows from b on still reach the columns a..b-1
        sub = theta_index[a:b, a:b]
        if b - a >= 2 and np.all(sub[lower_indices(b - a)] >= 0):
            ranges.append((a, b))
        a = b
    return tuple(ranges)


@functools.lru_cache(maxsize=64)
def lower_indices(m: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.tril_indices(m)``, formed once per m (read-only arrays)."""
    rows, cols = np.tril_indices(m)
    rows.flags.writeable = False
    cols.flags.writeable = False
    return rows, cols


def _pivot(v: np.ndarray) -> int:
    """The position of v's first nonzero entry (Λ's pivot in the column of v)."""
    return int(np.flatnonzero(np.abs(v) > 1e-12)[0])


def _pivot_first(v: np.ndarray) -> np.ndarray:
    """v with its first nonzero entry positive."""
    return v if v[_pivot(v)] > 0 else -v


def _rank_one_directions(m: int) -> list[np.ndarray]:
    """Unit vectors v for Σ = h² v vᵀ out of a zero covariance: each axis, then each pair
    of axes with either sign (the first nonzero entry positive: Λ's pivot)."""
    eye = np.eye(m)
    pairs = [(eye[i] + sign * eye[j]) / np.sqrt(2.0)
             for i in range(m) for j in range(i + 1, m) for sign in (1.0, -1.0)]
    return [eye[i] for i in range(m)] + pairs


def _curvature(rises: list[float], m: int) -> np.ndarray:
    """G with f(h v) ≈ f(0) + h² vᵀGv, from the rises along :func:`_rank_one_directions`
    (axes: G_ii; a pair: (G_ii + G_jj ± 2 G_ij) / 2, so G_ij = (rise₊ − rise₋) / 2)."""
    G = np.diag(rises[:m])
    pos = m
    for i in range(m):
        for j in range(i + 1, m):
            G[i, j] = G[j, i] = (rises[pos] - rises[pos + 1]) / 2.0
            pos += 2
    return G


def face_probes(fun: Callable[[np.ndarray], float], x: np.ndarray, fmin: float,
                blocks: Sequence[ReBlock], control: LmerControl
                ) -> tuple[list[tuple[np.ndarray, float]], np.ndarray | None]:
    """The probes of the module docstring around ``x`` (θ first, then any other
    parameters, as the optimiser's vector).

    Returns
    -------
    list of (x, criterion)
        The probes, for the optimisation log.
    numpy.ndarray or None
        The best probe when it lowers the criterion by more than :data:`FACE_GAIN`
        (relative) below ``fmin``, else None.
    """
    x = np.asarray(x, dtype=float)
    tried: list[tuple[np.ndarray, float]] = []
    best_value, best = fmin - FACE_GAIN * max(1.0, abs(fmin)), None

    def probe(idx: np.ndarray, lower: tuple[np.ndarray, np.ndarray], face: np.ndarray
              ) -> float:
        nonlocal best_value, best
        point = x.copy()
        point[idx[lower]] = face[lower]
        value = float(fun(point))
        tried.append((point, value))
        if np.isfinite(value) and value < best_value:
            best_value, best = value, point
        return value

    def column(m: int, v: np.ndarray, h: float) -> np.ndarray:
        """Λ (m x m) with Σ = h² v vᵀ: h v in the column of v's first nonzero entry."""
        face = np.zeros((m, m))
        k = _pivot(v)
        face[k:, k] = h * v[k:]
        return face

    for blk in blocks:
        for a, b in correlated_ranges(blk.theta_index):
            idx = blk.theta_index[a:b, a:b]
            m = b - a
            if m > 1 and all(x[idx[j, j]] >= control.edge_tol for j in range(m - 1)):
                continue  # (every diagonal θ but the last off its bound: no probe below)
            lower = lower_indices(m)
            L = np.zeros(idx.shape)
            L[lower] = x[idx[lower]]
            scale = float(np.sqrt(np.max(np.sum(L * L, axis=1))))
            if scale < control.edge_tol:
                # Σ ≈ 0: the curvature G of f in Σ from rank-one probes; a negative
                # eigenvalue is a descent direction that no single variance may show
                h0 = FACE_PROBES[0]
                rises = [(probe(idx, lower, column(m, v, h0)) - fmin) / h0 ** 2
                         for v in _rank_one_directions(m)]
                G = _curvature(rises, m)
                if np.all(np.isfinite(G)):
                    values, vectors = np.linalg.eigh(G)
                    if values[0] < 0:
                        v = _pivot_first(vectors[:, 0])
                        for h in FACE_PROBES:
                            probe(idx, lower, column(m, v, h))
                continue
            for j in range(m - 1):
                below = L[j + 1:, j:]
                if L[j, j] >= control.edge_tol or not np.any(below):
                    continue
                # below = R Qᵀ with R lower triangular: the same rows of Σ, column j first
                _, R = np.linalg.qr(below.T)
                for sign in (1.0, -1.0):
                    face = L.copy()
                    face[j + 1:, j:m - 1] = R.T
                    face[j + 1:, m - 1] = 0.0
                    face[j + 1:, j] *= sign
                    for h in FACE_PROBES:
                        face[j, j] = h * scale
                        probe(idx, lower, face)
    return tried, best
