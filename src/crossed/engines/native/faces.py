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
evaluations per such element). The caller continues its optimiser from the best probe
when one lowers the criterion. Validated by ``tests/engines/test_native_faces.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from crossed.design.random import ReBlock
from crossed.engines.native.optimize import LmerControl

__all__ = ["FACE_PROBES", "correlated_ranges", "face_probes"]

FACE_PROBES = (1e-2, 1e-1)
"""Where :func:`face_probes` moves Λ_jj, as fractions of the term's largest SD."""
FACE_GAIN = 1e-10
"""A probe counts when it lowers the criterion by more than this, relative."""


def correlated_ranges(theta_index: np.ndarray) -> list[tuple[int, int]]:
    """The diagonal sub-blocks [a, b) of a block's template, of size ≥ 2, whose whole lower
    triangle is free (correlated terms; terms on one factor are merged block-diagonally)."""
    q = theta_index.shape[0]
    ranges: list[tuple[int, int]] = []
    a = 0
    for b in range(1, q + 1):
        if b < q and np.any(theta_index[b:, a:b] >= 0):
            continue  # rows from b on still reach the columns a..b-1
        sub = theta_index[a:b, a:b]
        if b - a >= 2 and np.all(sub[np.tril_indices(b - a)] >= 0):
            ranges.append((a, b))
        a = b
    return ranges


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
    for blk in blocks:
        for a, b in correlated_ranges(blk.theta_index):
            idx = blk.theta_index[a:b, a:b]
            lower = np.tril_indices(b - a)
            L = np.zeros(idx.shape)
            L[lower] = x[idx[lower]]
            scale = float(np.sqrt(np.max(np.sum(L * L, axis=1))))
            if scale == 0.0:
                continue
            m = b - a
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
                        point = x.copy()
                        point[idx[lower]] = face[lower]
                        value = float(fun(point))
                        tried.append((point, value))
                        if np.isfinite(value) and value < best_value:
                            best_value, best = value, point
    return tried, best
