"""ScalarSolver: the weighted PLS solve of PIRLS with scalar random-effects terms, against
a dense solve of the same system; the sparse-X sums (a mostly-zero X) against the dense
products."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crossed.design import build_design
from crossed.formula import parse
from crossed.model.glmm.scalar import ScalarSolver


def _design(formula: str, seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    d = pd.DataFrame({
        "y": rng.normal(size=n),
        "sys": rng.choice([f"s{i}" for i in range(7)], n),
        "item": rng.choice([f"i{i}" for i in range(40)], n),
        "ds": rng.choice(["a", "b", "c"], n),
        "ann": rng.choice([f"r{i}" for i in range(9)], n),
        "x": rng.normal(size=n),
    })
    return build_design(parse(formula), d)


def _dense(design, theta, w, z, joint):
    """argmin ‖√w (z − ZΛu − Xβ)‖² + ‖u‖² from the full normal equations."""
    blocks = design.random.blocks
    Z = np.zeros((design.n, sum(b.nlevels for b in blocks)))
    off = 0
    for b in blocks:
        Z[np.arange(design.n), off + b.codes] = b.Z[:, 0] * theta[int(b.theta_index[0, 0])]
        off += b.nlevels
    A = np.hstack([Z, design.X]) if joint else Z
    q = Z.shape[1]
    M = A.T @ (A * w[:, None])
    M[np.arange(q), np.arange(q)] += 1.0
    sol = np.linalg.solve(M, A.T @ (w * z))
    ld = np.linalg.slogdet(Z.T @ (Z * w[:, None]) + np.eye(q))[1]
    return sol[:q], sol[q:], ld


@pytest.mark.parametrize("formula", [
    "y ~ sys + (1 | item) + (1 | ds)",              # dummy X: the sparse sums
    "y ~ sys + x + (1 | item) + (1 | ann) + (1 | ds)",
    "y ~ x + (1 | item) + (1 | ds)",                # dense X
])
@pytest.mark.parametrize("joint", [True, False])
def test_solve_is_the_dense_solution(formula: str, joint: bool) -> None:
    design = _design(formula, seed=3)
    solver = ScalarSolver(design.random.blocks, design.X)
    rng = np.random.default_rng(4)
    theta = rng.uniform(0.3, 1.5, len(design.random.theta_lower))
    w, z = rng.uniform(0.05, 0.25, design.n), rng.normal(size=design.n)
    u, beta, ld, _ = solver.solve(theta, w, z, joint)
    u0, b0, ld0 = _dense(design, theta, w, z, joint)
    np.testing.assert_allclose(u, u0, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(beta, b0 if joint else np.zeros(0), rtol=1e-9, atol=1e-11)
    assert ld == pytest.approx(ld0, rel=1e-11)


def test_sparse_x_products_are_the_dense_ones() -> None:
    design = _design("y ~ sys + (1 | item) + (1 | ann) + (1 | ds)", seed=5)
    solver = ScalarSolver(design.random.blocks, design.X)
    dense = ScalarSolver(design.random.blocks, design.X)
    dense.xs = None
    assert solver.xs is not None  # 6 dummies and the intercept: about 1/4 nonzero
    rng = np.random.default_rng(6)
    theta = rng.uniform(0.3, 1.5, 3)
    w, z = rng.uniform(0.05, 0.25, design.n), rng.normal(size=design.n)
    a, b = solver.solve(theta, w, z, True), dense.solve(theta, w, z, True)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-11, atol=1e-13)
    assert a[2] == pytest.approx(b[2], rel=1e-13)


def test_dense_x_stays_dense() -> None:
    design = _design("y ~ x + (1 | item) + (1 | ds)", seed=7)
    assert ScalarSolver(design.random.blocks, design.X).xs is None
