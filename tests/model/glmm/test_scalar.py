"""ScalarSolver: the weighted PLS solve of PIRLS with a scalar first random-effects term
and later terms of any columns (the compiled kernel), against a dense solve of the same
system; XᵀWX from X's nonzeros against BLAS's product; the diagonal leading block of a
nested factor; the conditional variances against the blocked-Cholesky PLS's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crossed.design import build_design
from crossed.formula import parse
from crossed.model.glmm.scalar import ScalarSolver
from crossed.model.pls import PLS


def _design(formula: str, seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    d = pd.DataFrame({
        "y": rng.normal(size=n),
        "sys": rng.choice([f"s{i}" for i in range(7)], n),
        "item": rng.choice([f"i{i}" for i in range(40)], n),
        "ds": rng.choice(["a", "b", "c"], n),
        "ann": rng.choice([f"r{i}" for i in range(9)], n),
        "x": rng.normal(size=n),
        "x2": rng.normal(size=n),
        "rater": rng.choice([f"t{i}" for i in range(30)], n),
        "unit": [f"u{i // 2}" for i in range(n)],      # two rows per unit ...
        "cls": [f"c{(i // 2) % 40}" for i in range(n)],  # ... nested in one of 40 classes
    })
    return build_design(parse(formula), d)


def _dense(design, theta, w, z, joint):
    """argmin ‖√w (z − ZΛu − Xβ)‖² + ‖u‖² from the full normal equations."""
    blocks = design.random.blocks
    Z = np.zeros((design.n, sum(b.nlevels * b.q for b in blocks)))
    off = 0
    for b in blocks:  # (Z Λ: a level's columns are its rows' z T)
        zt = b.Z @ b.template(theta)
        for j in range(b.q):
            Z[np.arange(design.n), off + b.codes * b.q + j] = zt[:, j]
        off += b.nlevels * b.q
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
    "y ~ sys + x + (1 | unit) + (1 | cls) + (1 | ds)",  # cls's columns sparse
    "y ~ x + (1 | item) + (1 | rater) + (1 | ds)",  # no sparse lead
    # later terms of several columns: their Λ in the columns' covariates
    "y ~ sys + x + (1 | item) + (1 + x | ds)",
    "y ~ x + (1 | unit) + (1 + x | cls) + (1 | ds)",  # cls's pairs of columns sparse
    "y ~ x + (1 | item) + (1 + x + x2 | ds) + (0 + x2 | ann)",
    "y ~ x + (1 | item) + (1 + x | rater)",  # no sparse lead
    "y ~ x + (1 | item) + (x || ds)",  # a diagonal T: its zeros (-1) take no θ
    # a first term of several columns: no first factor, every term a later one
    "y ~ x + (1 + x | cls)",
    "y ~ sys + (1 + x + x2 | rater) + (1 | ds)",
    "y ~ x + (1 + x | rater) + (1 + x | item)",
    "y ~ x + (x || cls)",
])
@pytest.mark.parametrize("joint", [True, False])
def test_solve_is_the_dense_solution(formula: str, joint: bool) -> None:
    design = _design(formula, seed=3)
    solver = ScalarSolver(design.random.blocks, design.X)
    rng = np.random.default_rng(4)
    theta = rng.uniform(0.3, 1.5, len(design.random.theta_lower))
    w, z = rng.uniform(0.05, 0.25, design.n), rng.normal(size=design.n)
    u, beta, ld, _ = solver.solve(theta, np.sqrt(w), z, joint)
    u0, b0, ld0 = _dense(design, theta, w, z, joint)
    np.testing.assert_allclose(u, u0, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(beta, b0 if joint else np.zeros(0), rtol=1e-9, atol=1e-11)
    assert ld == pytest.approx(ld0, rel=1e-11)


def test_csr_and_blas_cross_products_agree() -> None:
    design = _design("y ~ sys + x + (1 | item) + (1 | ann) + (1 | ds)", seed=5)
    blas = ScalarSolver(design.random.blocks, design.X)
    assert blas.swX.shape == design.X.shape  # 8 columns, about 3 nonzero per row
    pairs = ScalarSolver(design.random.blocks, design.X)
    pairs.swX = np.zeros((0, 0))
    rng = np.random.default_rng(6)
    theta = rng.uniform(0.3, 1.5, 3)
    sw, z = np.sqrt(rng.uniform(0.05, 0.25, design.n)), rng.normal(size=design.n)
    for _ in range(2):  # (the kernel rewrites √W X in place: a second call is the same)
        a, b = blas.solve(theta, sw, z, True), pairs.solve(theta, sw, z, True)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-11, atol=1e-13)
        assert a[2] == pytest.approx(b[2], rel=1e-13)


def test_narrow_or_sparse_x_uses_its_nonzeros() -> None:
    assert ScalarSolver(*_blocks_x("y ~ x + (1 | item) + (1 | ds)")).swX.size == 0
    assert ScalarSolver(*_blocks_x("y ~ sys + (1 | item) + (1 | ds)")).swX.size == 0


def _blocks_x(formula: str):
    design = _design(formula, seed=7)
    return design.random.blocks, design.X


@pytest.mark.parametrize(("formula", "lead"), [
    ("y ~ x + (1 | unit) + (1 | cls) + (1 | ds)", 40 + 3),  # unit in cls: one below each
    ("y ~ x + (1 | item) + (1 | ds)", 3),
    ("y ~ x + (1 | item) + (1 | ann) + (1 | ds)", 9 + 3),  # 12 columns: all sparse
    ("y ~ x + (1 | item) + (1 | rater)", 0),  # each rater meets most others through items
    ("y ~ x + (1 | unit) + (1 + x | cls) + (1 | ds)", 80 + 3),  # a class's pair of columns
    ("y ~ x + (1 + x | cls)", 80),  # no first factor: the rows' own pairs
    ("y ~ x + (1 + x | cls) + (1 | ds)", 80 + 3),
])
def test_sparse_lead_stops_at_the_first_dense_column(formula: str, lead: int) -> None:
    solver = ScalarSolver(*_blocks_x(formula))
    assert solver.lead == lead
    assert len(solver.lptr) == lead + 1


def test_zlu_is_the_terms_numpy_sum_bit_for_bit() -> None:
    design = _design("y ~ x + (1 | item) + (1 | ann) + (1 | ds)", seed=8)
    blocks = design.random.blocks
    solver = ScalarSolver(blocks, design.X)
    rng = np.random.default_rng(9)
    theta = rng.uniform(0.3, 1.5, 3)
    u = rng.normal(size=sum(b.nlevels for b in blocks))
    expected, pos = np.zeros(design.n), 0
    for b in blocks:  # (the general loop of GlmmProblem.zlu)
        ub = u[pos:pos + b.nlevels].reshape(-1, 1)
        expected += b.Z[:, 0] * (ub @ b.template(theta).T)[b.codes, 0]
        pos += b.nlevels
    assert np.array_equal(solver.zlu(theta, u), expected)


def test_no_sparse_lead_past_the_pairs_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from crossed.model.glmm import scalar

    monkeypatch.setattr(scalar, "LEAD_PAIRS", 10)
    assert ScalarSolver(*_blocks_x("y ~ x + (1 | unit) + (1 | cls) + (1 | ds)")).lead == 0


@pytest.mark.parametrize("formula", [
    "y ~ x + (1 | item) + (1 | ann) + (1 | ds)",
    "y ~ x + (1 | unit) + (1 + x | cls) + (1 | ds)",
    "y ~ x + (1 | item) + (1 + x + x2 | ds)",
    "y ~ x + (1 + x | cls) + (1 | ds)",  # no first factor
])
def test_zlu_and_conditional_variances_are_the_general_paths(formula: str) -> None:
    """Z Λθ u against the terms' NumPy sum, and the conditional variances of u per level
    (the blocks of (Λ'Z'WZΛ + I)⁻¹) against the blocked-Cholesky PLS's."""
    design = _design(formula, seed=10)
    blocks = design.random.blocks
    solver = ScalarSolver(blocks, design.X)
    rng = np.random.default_rng(11)
    theta = rng.uniform(0.3, 1.5, len(design.random.theta_lower))
    u = rng.normal(size=sum(b.nlevels * b.q for b in blocks))
    expected, pos = np.zeros(design.n), 0
    for b in blocks:
        ub = u[pos:pos + b.nlevels * b.q].reshape(b.nlevels, b.q)
        expected += np.einsum("ij,ij->i", b.Z, (ub @ b.template(theta).T)[b.codes])
        pos += b.nlevels * b.q
    np.testing.assert_allclose(solver.zlu(theta, u), expected, rtol=1e-12, atol=1e-12)
    sw = np.sqrt(rng.uniform(0.05, 0.25, design.n))
    _, _, _, sol = solver.solve(theta, sw, rng.normal(size=design.n), False)
    got = solver.cond_var(sol)
    pls = PLS(blocks, design.X[:, :0], design.y).reweighted(sw, design.y)
    want = pls.conditional_inverse_blocks(pls.factor(theta))
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-13)
