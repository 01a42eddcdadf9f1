"""The cross-products of a design (model/crossprod.py): sums over rows.

Cross-products computed on chunks of the rows and added give the criterion and β of the
whole data; PIRLS's reweighted problem is built by a constructor and equals the PLS problem
of the same weights given as prior weights.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from crossed.design import build_design
from crossed.formula.spec import parse
from crossed.model.crossprod import CrossProducts, RowMatrices
from crossed.model.pls import PLS


def _data(seed: int = 1) -> pd.DataFrame:
    """Crossed and nested factors, two covariates, a response far from zero."""
    rng = np.random.default_rng(seed)
    n = 240
    df = pd.DataFrame({
        "g": rng.integers(0, 18, n).astype(str),
        "h": rng.integers(0, 7, n).astype(str),
        "x1": rng.normal(size=n),
        "x2": rng.normal(size=n),
    })
    df["y"] = (100.0 + df["x1"] + rng.normal(size=n) + df["g"].astype(int) * 0.3
               + df["h"].astype(int) * 0.2)
    return df


FORMULAS = [
    "y ~ x1 + (1 | g)",
    "y ~ x1 + (1 + x1 | g) + (1 | h)",
    "y ~ x1 + x2 + (1 + x1 + x2 | g) + (1 + x1 | h)",
]


def _chunks(design, parts: int = 3, weights: np.ndarray | None = None):
    rows = np.array_split(np.random.default_rng(0).permutation(len(design.y)), parts)
    chunks = []
    for idx in rows:
        idx = np.sort(idx)
        blocks = tuple(replace(b, Z=b.Z[idx], codes=b.codes[idx])
                       for b in design.random.blocks)
        chunks.append((blocks, design.X[idx], design.y[idx]))
    ws = None if weights is None else [weights[np.sort(i)] for i in rows]
    return chunks, ws


def _thetas(pls: PLS, count: int = 4) -> list[np.ndarray]:
    k = 1 + max(int(b.theta_index.max()) for b in pls.blocks)
    rng = np.random.default_rng(3)
    return [np.abs(rng.normal(size=k)) + 0.1 for _ in range(count)]


@pytest.mark.parametrize("formula", FORMULAS)
@pytest.mark.parametrize("weighted", [False, True])
def test_chunks_add_up_to_the_whole(formula: str, weighted: bool) -> None:
    design = build_design(parse(formula), _data())
    w = np.random.default_rng(2).uniform(0.5, 2.0, len(design.y)) if weighted else None
    whole = PLS.weighted(design.random.blocks, design.X, design.y, w)
    chunks, ws = _chunks(design, 3, w)
    products = CrossProducts.from_chunks(chunks, ws)
    assert products.n == whole.n and products.ldW == pytest.approx(whole.ldW, rel=1e-13)
    summed = PLS.from_products(products, design.random.blocks)
    for theta in _thetas(whole):
        for reml in (True, False):
            assert summed.objective(theta, reml) == pytest.approx(
                whole.objective(theta, reml), rel=1e-12, abs=0)
        beta, u = summed.solve(summed.factor(theta))
        beta0, u0 = whole.solve(whole.factor(theta))
        np.testing.assert_allclose(beta, beta0, rtol=1e-12, atol=1e-12 * np.abs(beta0).max())
        for a, b in zip(u, u0, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12 * np.abs(b).max())


def test_products_are_read_only_and_add_only_with_one_centre() -> None:
    design = build_design(parse(FORMULAS[1]), _data())
    p = CrossProducts.of(design.random.blocks, design.X, design.y)
    for a in (*p.levels, p.Z1tD, p.DtD, p.xtx, p.centre):
        assert not a.flags.writeable
    with pytest.raises(ValueError):
        p.DtD[0, 0] = 1.0
    with pytest.raises(ValueError, match="centre"):
        _ = p + CrossProducts.of(design.random.blocks, design.X, design.y + 1.0)
    twice = p + p
    np.testing.assert_array_equal(twice.DtD, 2 * p.DtD)
    assert twice.n == 2 * p.n


def test_whole_data_products_are_the_pls_problems() -> None:
    """The constructor from a design gives the problem's products bitwise."""
    design = build_design(parse(FORMULAS[2]), _data())
    pls = PLS(design.random.blocks, design.X, design.y)
    p = CrossProducts.of(design.random.blocks, design.X, design.y)
    for a, b in [(p.Z1tD, pls.products.Z1tD), (p.DtD, pls.products.DtD),
                 (p.ZrtD, pls.products.ZrtD), (p.A11, pls.A11), (p.centre, pls.centre)]:
        np.testing.assert_array_equal(a, b)
    assert p.Z1tZr is not None and pls.products.Z1tZr is not None
    assert (p.Z1tZr != pls.products.Z1tZr).nnz == 0


@pytest.mark.parametrize("formula", FORMULAS)
def test_reweighted_is_the_weighted_problem(formula: str) -> None:
    """PIRLS's step (:meth:`PLS.reweighted`) is the PLS problem of the working weights as
    prior weights, less their log-determinant."""
    design = build_design(parse(formula), _data())
    base = PLS(design.random.blocks, design.X, design.y)
    w = np.random.default_rng(4).uniform(0.2, 3.0, len(design.y))
    z = design.y + np.random.default_rng(5).normal(size=len(design.y))
    step = base.reweighted(np.sqrt(w), z)
    again = step.reweighted(np.sqrt(w), z)  # (from the unweighted rows, not the step's)
    prior = PLS.weighted(design.random.blocks, design.X, z, w)
    assert step.residual_pwrss == "never" and step.blocks is base.blocks
    for theta in _thetas(base, 3):
        f, g, h = step.factor(theta), prior.factor(theta), again.factor(theta)
        assert f.ldL2 == pytest.approx(g.ldL2 + prior.ldW, rel=1e-12)
        assert f.pwrss == pytest.approx(g.pwrss, rel=1e-12)
        assert (h.ldL2, h.ldRX2, h.pwrss) == (f.ldL2, f.ldRX2, f.pwrss)
        np.testing.assert_allclose(step.solve(f)[0], prior.solve(g)[0], rtol=1e-10)


@pytest.mark.parametrize("formula", FORMULAS[1:])
def test_chunks_on_the_sparse_schur_path(formula: str) -> None:
    design = build_design(parse(formula), _data())
    whole = PLS(design.random.blocks, design.X, design.y, schur="sparse")
    chunks, _ = _chunks(design, 3)
    summed = PLS.from_products(CrossProducts.from_chunks(chunks), design.random.blocks,
                               schur="sparse")
    assert summed.uses_sparse_schur and whole.uses_sparse_schur
    for theta in _thetas(whole, 3):
        assert summed.objective(theta, True) == pytest.approx(
            whole.objective(theta, True), rel=1e-12, abs=0)
        np.testing.assert_allclose(summed.solve(summed.factor(theta))[0],
                                   whole.solve(whole.factor(theta))[0], rtol=1e-11)


def test_from_design_has_the_weights_and_offset() -> None:
    df = _data()
    df["w"] = np.random.default_rng(6).uniform(0.5, 2.0, len(df))
    df["o"] = np.random.default_rng(7).normal(size=len(df))
    design = replace(build_design(parse("y ~ x1 + (1 + x1 | g) + (1 | h)"), df),
                     weights=df["w"].to_numpy(), offset=df["o"].to_numpy())
    assert design.weights is not None and design.offset is not None
    p = CrossProducts.from_design(design)
    pls = PLS.of(design)
    assert p.ldW == pls.ldW != 0.0
    for a, b in [(p.Z1tD, pls.products.Z1tD), (p.DtD, pls.products.DtD), (p.A11, pls.A11)]:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("formula", [*FORMULAS, "y ~ x1 + (1 + x1 | g:h) + (1 | g) + (0 + x2 | h)"])
@pytest.mark.parametrize("weighted", [False, True])
def test_rows_are_the_blocks_z(formula: str, weighted: bool) -> None:
    """``RowMatrices.of`` builds the later blocks' Z side by side directly: the matrix of
    each block's Z (``sparse_z``) stacked, array for array (explicit zeros of a slope
    kept), and Z₁ᵀ, with and without √w scaling."""

    from crossed.model.crossprod import RowMatrices, sparse_z

    df = _data().assign(x1=lambda d: d["x1"].where(d.index % 5 != 0, 0.0))
    design = build_design(parse(formula), df)
    blocks = design.random.blocks
    sw = (np.sqrt(np.random.default_rng(2).uniform(0.5, 2.0, len(df))) if weighted
          else None)
    values = [b.Z if sw is None else b.Z * sw[:, None] for b in blocks]
    rows = RowMatrices.of(blocks, design.X, sw)
    expected = [sparse_z(blocks[0], values[0]).T.tocsr()]
    got = [rows.Z1t]
    if len(blocks) > 1:
        expected.append(sp.hstack([sparse_z(b, v) for b, v in zip(blocks[1:], values[1:],
                                                                strict=True)], format="csr"))
        got.append(rows.Zr)
    else:
        assert rows.Zr is None
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and a.has_sorted_indices
        for name in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_stored_is_scipys_csr_of_a_dense_array():
    """``crossprod.stored``: the arrays ``sp.csr_matrix`` gives a dense array (its nonzeros
    row by row; a NaN is stored, an exact zero is not), with an empty row and no rows; as
    CSC, the matrix ``sp.csc_matrix`` gives a symmetric one."""

    from crossed.model.crossprod import stored

    rng = np.random.default_rng(8)
    A = np.round(rng.normal(size=(7, 5)))
    A[2] = 0.0
    A[4, 1] = np.nan
    for M in (A, np.zeros((0, 3)), np.zeros((3, 0))):
        a, b = stored(M), sp.csr_matrix(M)
        assert a.shape == b.shape
        for name in ("indptr", "indices"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            assert getattr(a, name).dtype == getattr(b, name).dtype  # (int32)
        np.testing.assert_array_equal(a.data, b.data)
        assert a.has_canonical_format and a.has_sorted_indices
        # each a matrix of its own (copies of one empty matrix of that shape, which stays
        # empty)
        c = stored(M)
        c.data[:] = 7.0
        np.testing.assert_array_equal(a.data, b.data)
        assert sp.csr_matrix(M.shape).nnz == stored(np.zeros(M.shape)).nnz == 0
    S = A[:5] + A[:5].T
    a, b = stored(S, sp.csc_matrix), sp.csc_matrix(S)
    assert a.format == "csc" and a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("formula", [
    *FORMULAS, "y ~ x1 + (1 + x1 | g:h) + (1 | g) + (0 + x2 | h)",
    "y ~ x2 + (1 | g:h) + (1 | g) + (1 | h)"])
@pytest.mark.parametrize("weighted", [False, True])
def test_dense_row_products_are_scipys_products(formula: str, weighted: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``RowMatrices.dense_products`` (one compiled pass over the rows) gives the values of
    SciPy's products of Z₁ᵀ and Z_rᵀ with Z_r and with [X y] bitwise, and the cross-products
    it gives a small design are those of the sparse products, array for array (explicit
    zeros of a slope, √w-scaled rows)."""

    from crossed.model import crossprod
    from crossed.model.crossprod import RowMatrices

    df = _data().assign(x1=lambda d: d["x1"].where(d.index % 5 != 0, 0.0))
    design = build_design(parse(formula), df)
    blocks = design.random.blocks
    sw = (np.sqrt(np.random.default_rng(2).uniform(0.5, 2.0, len(df))) if weighted
          else None)
    rows = RowMatrices.of(blocks, design.X, sw)
    D = np.column_stack([rows.X, design.y])
    z1r, zrr, z1d, zrd = rows.dense_products(D)
    np.testing.assert_array_equal(z1d, rows.Z1t @ D)
    if rows.Zr is None:
        assert z1r.shape[1] == zrr.size == zrd.size == 0
    else:
        np.testing.assert_array_equal(z1r, (rows.Z1t @ rows.Zr).toarray())
        np.testing.assert_array_equal(zrr, (rows.Zr.T @ rows.Zr).toarray())
        np.testing.assert_array_equal(zrd, rows.Zr.T @ D)
    y = design.y if sw is None else design.y * sw
    dense = CrossProducts.from_rows(rows, y)
    monkeypatch.setattr(crossprod, "MAX_DENSE_ROW_PRODUCTS", -1)
    sparse = CrossProducts.from_rows(RowMatrices.of(blocks, design.X, sw), y)
    for name in ("Z1tD", "ZrtD", "DtD", "xtx", "centre"):
        a, b = getattr(dense, name), getattr(sparse, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)
    assert dense.yc_ss == sparse.yc_ss
    for a, b in zip(dense.levels, sparse.levels, strict=True):
        np.testing.assert_array_equal(a, b)
    for name in ("Z1tZr", "ZrtZr"):
        a, b = getattr(dense, name), getattr(sparse, name)
        assert (a is None) == (b is None)
        if a is not None:
            assert a.format == b.format and a.has_canonical_format
            b = b.copy()
            b.sort_indices()
            for field in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert sp.issparse(a)


def test_reweighted_rows_share_their_entries_columns_only_with_the_same_blocks():
    """PIRLS's rows at new weights share the last ones' entries' columns (the weights do not
    change them) and have the values of rows formed afresh; rows of other blocks do not
    share them."""
    design = build_design(parse("y ~ x1 + (1 | g) + (1 + x1 | h)"), _data())
    blocks, X = design.random.blocks, design.X
    rng = np.random.default_rng(5)
    first = RowMatrices.of(blocks, X, np.sqrt(rng.uniform(0.5, 2.0, len(X))))
    columns = first.kernel_columns
    sw = np.sqrt(rng.uniform(0.5, 2.0, len(X)))
    second = RowMatrices.of(blocks, X, sw, like=first)
    fresh = RowMatrices.of(blocks, X, sw)
    assert second.kernel_columns is columns
    for a, b in zip(second.kernel_entries, fresh.kernel_entries, strict=True):
        np.testing.assert_array_equal(a, b)
    other = build_design(parse("y ~ x1 + (1 | g) + (1 | h)"), _data()).random.blocks
    assert "kernel_columns" not in RowMatrices.of(other, X, sw, like=first).__dict__


def test_a_small_design_forms_no_sparse_rows():
    """A small design's problem, and its problems with new responses, are built from the
    rows' entries alone (formed once): Z₁ᵀ and Z_r (SciPy matrices) are never formed."""
    design = build_design(parse("y ~ x1 + (1 | g) + (1 | h)"), _data())
    pls = PLS(design.random.blocks, design.X, design.y)
    entries = pls.rows.kernel_entries
    pls.with_response(design.y + 1.0)
    pls.with_response(design.y - 1.0)
    assert "Z1t" not in pls.rows.__dict__ and "Zr" not in pls.rows.__dict__
    assert pls.rows.kernel_entries is entries


@pytest.mark.parametrize("formula", [
    *FORMULAS, "y ~ x1 + (1 + x1 | g:h) + (1 | g) + (0 + x2 | h)"])
@pytest.mark.parametrize("weighted", [False, True])
def test_column_products_are_scipys_products(formula: str, weighted: bool) -> None:
    """``RowMatrices.column_products`` (a new response's column, one compiled pass over the
    rows) gives SciPy's ``Z1t @ v`` and ``Zr.T @ v`` bitwise (explicit zeros of a slope,
    √w-scaled rows)."""
    from crossed.model.crossprod import RowMatrices

    df = _data().assign(x1=lambda d: d["x1"].where(d.index % 5 != 0, 0.0))
    design = build_design(parse(formula), df)
    sw = (np.sqrt(np.random.default_rng(3).uniform(0.5, 2.0, len(df))) if weighted
          else None)
    rows = RowMatrices.of(design.random.blocks, design.X, sw)
    v = np.random.default_rng(4).normal(size=len(df)) * 1e3
    z1v, zrv = rows.column_products(v)
    np.testing.assert_array_equal(z1v, rows.Z1t @ v)
    if rows.Zr is None:
        assert zrv.size == 0
    else:
        np.testing.assert_array_equal(zrv, rows.Zr.T @ v)


def test_stored_like_shares_the_pattern_or_builds_its_own():
    """stored_like gives stored's arrays; with the same nonzeros it shares the index
    arrays of ``like`` (PIRLS's weighted A_1r), else it is stored's own matrix."""
    from crossed.model.crossprod import stored, stored_like

    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 9)) * (rng.random((6, 9)) < 0.4)
    like = stored(A)
    B = np.where(A != 0, rng.normal(size=A.shape), 0.0)
    got, want = stored_like(B, like), stored(B)
    for attr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(got, attr), getattr(want, attr))
    assert got.indices is like.indices and got.indptr is like.indptr
    assert got.data is not like.data and got.has_canonical_format
    C = B.copy()
    C[np.argwhere(B != 0)[0][0], np.argwhere(B != 0)[0][1]] = 0.0  # (one entry cancels)
    got = stored_like(C, like)
    assert got.indices is not like.indices and got.nnz == like.nnz - 1
    np.testing.assert_array_equal(got.toarray(), C)
    D = B.copy()
    D[np.argwhere(B == 0)[0][0], np.argwhere(B == 0)[0][1]] = 1.0  # (a new nonzero)
    np.testing.assert_array_equal(stored_like(D, like).toarray(), D)
    np.testing.assert_array_equal(stored_like(B, None).toarray(), B)


def test_stored_beside_is_stored_like_of_the_dense_rows_side_by_side():
    """``stored_beside(S, D, like)``: the arrays of ``stored_like(np.hstack([S.toarray(),
    D]), like)`` (A_1r of a small design) without forming the dense matrix: S's explicit
    zeros not stored, S's indices sorted first where they are not, empty rows, and
    ``like``'s index arrays shared where the pattern is its."""
    from crossed.model.crossprod import stored, stored_beside, stored_like

    rng = np.random.default_rng(4)
    S = sp.random(7, 10, density=0.3, format="csr", random_state=4)
    S.data[S.indptr[3]:S.indptr[4]] = 0.0  # (an empty row of S)
    S.eliminate_zeros()
    S.data[1] = 0.0  # (an explicit zero: a product that cancels)
    D = rng.normal(size=(7, 4)) * (rng.random((7, 4)) < 0.6)
    D[5] = 0.0
    dense = np.hstack([S.toarray(), D])
    like = stored(dense)
    for given_like in (None, like):
        got, want = stored_beside(S, D, given_like), stored_like(dense, given_like)
        for attr in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(got, attr), getattr(want, attr))
            assert getattr(got, attr).dtype == getattr(want, attr).dtype
        assert got.has_canonical_format and got.shape == want.shape
    shared = stored_beside(S, D, like)
    assert shared.indices is like.indices and shared.indptr is like.indptr
    unsorted = S.copy()  # (each row's entries reversed: SciPy's products may leave them so)
    for i in range(unsorted.shape[0]):
        lo, hi = unsorted.indptr[i], unsorted.indptr[i + 1]
        unsorted.indices[lo:hi] = unsorted.indices[lo:hi][::-1]
        unsorted.data[lo:hi] = unsorted.data[lo:hi][::-1]
    unsorted.has_sorted_indices = False
    got = stored_beside(unsorted, D, None)
    np.testing.assert_array_equal(got.indices, stored(dense).indices)
    np.testing.assert_array_equal(got.data, stored(dense).data)
    other = D.copy()
    other[5, 0] = 1.0  # (a new nonzero: its own pattern)
    assert stored_beside(S, other, like).indices is not like.indices
    with pytest.raises(ValueError, match="rows"):
        stored_beside(S, D[:3], None)
