"""The penalised least squares problem of a design (model/pls.py, banded.py).

Every way of forming the Schur complement (dense rank-k updates over groups of levels, the
sparse map W, the banded first block for q1 > 2) must give the criterion of the dense
textbook formula: log det(ΛᵀZᵀZΛ + I) + log det(R_XᵀR_X) + (n - p)(1 + log(2π r²/(n - p))),
here computed with Z formed densely on small data, at several theta.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed._threads import single_blas_thread
from crossed.design import build_design
from crossed.formula.spec import parse
from crossed.model import _core, cholesky, sparse_map
from crossed.model import pls as pls_module
from crossed.model.banded import BandedBlocks
from crossed.model.factor import deviance_at
from crossed.model.pls import PLS, profiled_deviance
from crossed.model.sparse_schur import SparseFactor


def _data(seed: int = 0) -> pd.DataFrame:
    """Models nested in families, crossed with datasets; two numeric covariates."""
    rng = np.random.default_rng(seed)
    rows = []
    for fam in range(3):
        for m in range(6):
            for d in range(5):
                if rng.random() < 0.2:
                    continue  # unbalanced: some cells missing
                for _ in range(2):
                    rows.append((f"f{fam}", f"f{fam}m{m}", f"d{d}", rng.normal(), rng.normal()))
    df = pd.DataFrame(rows, columns=["family", "model", "dataset", "x1", "x2"])
    df["y"] = (df["x1"] + rng.normal(size=len(df)) + df["model"].str.len()
               + df.groupby("dataset")["x2"].transform("mean"))
    return df


FORMULAS = {
    "crossed intercepts": "y ~ x1 + (1 | model) + (1 | dataset) + (1 | family:dataset)",
    "correlated slope": "y ~ x1 + (1 + x1 | model) + (1 | dataset)",
    "q1 = 3 correlated": "y ~ x1 + (1 + x1 + x2 | model) + (1 | dataset)",
    "q1 = 3 uncorrelated": "y ~ x1 + (1 + x1 + x2 || model) + (1 | dataset)",
    "q1 = 3, slope on the rest": "y ~ x1 + (1 + x1 + x2 | model) + (1 + x1 | dataset)",
    "one factor": "y ~ x1 + x2 + (1 + x1 + x2 | model)",
}


def _design(formula: str):
    return build_design(parse(formula), _data())


def _dense_criterion(design, theta: np.ndarray, reml: bool = True) -> float:
    """The profiled criterion with Z and Λ formed densely."""
    blocks = design.random.blocks
    Zs, Ls = [], []
    for b in blocks:
        Z = np.zeros((len(design.y), b.nlevels * b.q))
        for j in range(b.q):
            Z[np.arange(len(design.y)), b.codes * b.q + j] = b.Z[:, j]
        Zs.append(Z)
        Ls.append(np.kron(np.eye(b.nlevels), b.template(theta)))
    Z = np.hstack(Zs)
    Lam = np.zeros((Z.shape[1], Z.shape[1]))
    pos = 0
    for L in Ls:
        Lam[pos:pos + L.shape[0], pos:pos + L.shape[0]] = L
        pos += L.shape[0]
    X, y = design.X, design.y
    n, p = X.shape
    ZL = Z @ Lam
    A = ZL.T @ ZL + np.eye(ZL.shape[1])
    LA = np.linalg.cholesky(A)
    # conditional on u: β and u by the full normal equations
    M = np.block([[A, ZL.T @ X], [X.T @ ZL, X.T @ X]])
    sol = np.linalg.solve(M, np.concatenate([ZL.T @ y, X.T @ y]))
    u, beta = sol[:ZL.shape[1]], sol[ZL.shape[1]:]
    pwrss = float(np.sum((y - ZL @ u - X @ beta) ** 2) + np.sum(u**2))
    RX2 = X.T @ X - X.T @ ZL @ np.linalg.solve(A, ZL.T @ X)
    ldL2 = 2 * np.sum(np.log(np.diag(LA)))
    ldRX2 = np.linalg.slogdet(RX2)[1]
    if reml:
        return ldL2 + ldRX2 + (n - p) * (1 + np.log(2 * np.pi * pwrss / (n - p)))
    return ldL2 + n * (1 + np.log(2 * np.pi * pwrss / n))


def _thetas(design, k: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    start = design.random.theta_start()
    lower = design.random.theta_lower
    out = [start]
    for _ in range(k):
        th = start + rng.normal(scale=0.4, size=len(start))
        out.append(np.where(np.isfinite(lower), np.abs(th), th))
    return out


@pytest.mark.parametrize("update", [None, "groups", "sparse"])
@pytest.mark.parametrize("name", list(FORMULAS))
def test_criterion_matches_dense_formula(name, update):
    design = _design(FORMULAS[name])
    pls = PLS(design.random.blocks, design.X, design.y, update=update)
    n, p = design.X.shape
    for theta in _thetas(design):
        for reml in (True, False):
            ours = profiled_deviance(pls.factor(theta), n, p, reml)
            assert ours == pytest.approx(_dense_criterion(design, theta, reml), rel=1e-10)


@pytest.mark.parametrize("name", list(FORMULAS))
def test_update_paths_give_the_same_solution(name):
    """β, u and the conditional variances do not depend on how the update is formed."""
    design = _design(FORMULAS[name])
    theta = _thetas(design)[1]
    fits = []
    for update in ("groups", "sparse"):
        pls = PLS(design.random.blocks, design.X, design.y, update=update)
        f = pls.factor(theta)
        beta, u = pls.solve(f)
        fits.append((beta, u, pls.conditional_inverse_blocks(f)))
    (b1, u1, v1), (b2, u2, v2) = fits
    np.testing.assert_allclose(b1, b2, rtol=1e-10)
    for a, b in zip(u1 + v1, u2 + v2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_groups_follow_nesting():
    """Models nested in families touch only their family's family:dataset columns, so with
    enough of them the first-factor levels fall into one group per family."""
    rng = np.random.default_rng(5)
    fam = np.repeat([f"f{i}" for i in range(4)], 60 * 40)
    model = np.repeat([f"m{i}" for i in range(240)], 40)
    dataset = np.tile([f"d{j}" for j in range(40)], 240)
    df = pd.DataFrame({"family": fam, "model": model, "dataset": dataset,
                       "y": rng.normal(size=len(fam))})
    design = build_design(parse("y ~ 1 + (1 | model) + (1 | family:dataset)"), df)
    assert design.random.blocks[0].group == "model"
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls._groups is not None  # cheaper than the sparse map here
    model_family = dict(zip(design.random.blocks[0].codes, fam, strict=True))
    groups = [{model_family[lev] for lev in levels} for levels, _ in pls._level_groups()[1]]
    assert sorted(len(g) for g in groups) == [1, 1, 1, 1]
    # each group's columns: its family's 40 family:dataset effects and the intercept and y
    assert sorted(len(cols) for _, cols in pls._level_groups()[1]) == [42, 42, 42, 42]


def test_unknown_update_is_refused():
    design = _design(FORMULAS["crossed intercepts"])
    with pytest.raises(ValueError, match="update must be"):
        PLS(design.random.blocks, design.X, design.y, update="dense")


@pytest.mark.parametrize("diagonal", [True, False])
def test_banded_blocks_match_per_level_factorisation(diagonal):
    rng = np.random.default_rng(3)
    m, q = 7, 4
    Zs = rng.normal(size=(m, 10, q))
    A11 = np.swapaxes(Zs, 1, 2) @ Zs
    idx = np.full((q, q), -1)
    if diagonal:
        idx[np.arange(q), np.arange(q)] = np.arange(q)
    else:
        rows, cols = np.tril_indices(q)
        idx[rows, cols] = np.arange(len(rows))
    theta = rng.uniform(0.2, 1.5, size=int(idx.max()) + 1)
    band = BandedBlocks(A11, idx)
    T = band.template(theta)
    B = T.T @ A11 @ T + np.eye(q)
    Lb, logdet, ok = band.factor(theta)
    assert ok
    chol = np.linalg.cholesky(B)
    np.testing.assert_allclose(band.unpack(Lb), chol, rtol=1e-12, atol=1e-14)
    assert logdet == pytest.approx(np.sum(np.linalg.slogdet(B)[1]), rel=1e-12)
    # the band's entries past each level are zeros: one banded solve is every level's
    Y = rng.normal(size=(m * q, 2))
    np.testing.assert_allclose(band.solve(Lb, Y).reshape(m, q, 2),
                               np.linalg.solve(chol, Y.reshape(m, q, 2)), rtol=1e-10)
    H, G = band.half_and_g(theta, Lb)
    np.testing.assert_array_equal(band.half(theta, Lb), H)
    np.testing.assert_allclose(H, np.linalg.solve(chol, np.broadcast_to(T.T, (m, q, q))),
                               rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(G, T @ np.linalg.inv(B) @ T.T, rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(G, np.swapaxes(G, 1, 2))  # (the same products)
    # not positive definite: reported, log det infinite
    bad = BandedBlocks(-A11, idx)
    assert bad.factor(theta)[1:] == (np.inf, False)


def test_fit_uses_each_path_to_the_same_optimum():
    """End to end: the criterion at the optimum does not depend on the update path."""
    df = _data()
    formula = FORMULAS["q1 = 3, slope on the rest"]
    fit = crossed.lmer(formula, df)
    design = fit.design
    n, p = design.X.shape
    for update in ("groups", "sparse"):
        pls = PLS(design.random.blocks, design.X, design.y, update=update)
        assert profiled_deviance(pls.factor(fit.theta), n, p, True) == pytest.approx(
            fit.deviance, rel=1e-12)


def _ratings(seed: int = 3) -> pd.DataFrame:
    """InstEval-like: students rate 2 to 5 of 120 lecturers (lecturers in 6 departments)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(300):
        for d in rng.choice(120, size=rng.integers(2, 6), replace=False):
            rows.append((f"s{s}", f"d{d}", f"dept{d % 6}", rng.normal()))
    df = pd.DataFrame(rows, columns=["s", "d", "dept", "x"])
    df["y"] = df["x"] + rng.normal(size=len(df)) + df["d"].str.len()
    df["z"] = rng.normal(size=len(df))
    return df


@pytest.mark.parametrize("dense", [False, True], ids=["sparse products", "dense products"])
@pytest.mark.parametrize("classed", [False, True])
def test_sparse_support_assembly_matches_dense_formula(classed, dense, monkeypatch):
    """When A_rr and the update are sparse, C is assembled on their support alone (zero
    elsewhere): same criterion as the dense formula, through ``objective`` and ``factor``,
    at several theta in turn. ``classed``: W has one column per class of students with the
    same number of ratings (as for many levels); ``dense``: W formed from dense products
    (as for small designs), else from sparse products."""
    monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0 if classed else 10**9)
    monkeypatch.setattr(sparse_map, "MAX_DENSE_PRODUCTS", 10**12 if dense else 0)
    design = build_design(parse("y ~ x + (1 | s) + (1 | d) + (1 | dept)"), _ratings())
    pls = PLS(design.random.blocks, design.X, design.y, update="sparse")
    assert pls._map.arr is not None  # the support path is the one under test
    assert (pls._map.W.shape[1] < pls.l1) == classed
    n, p = design.X.shape
    for theta in _thetas(design) + [design.random.theta_start()]:
        for reml in (True, False):
            expected = _dense_criterion(design, theta, reml)
            assert pls.objective(theta, reml) == pytest.approx(expected, rel=1e-10)
            assert profiled_deviance(pls.factor(theta), n, p, reml) == pytest.approx(
                expected, rel=1e-10)


@pytest.mark.parametrize("classed", [False, True])
@pytest.mark.parametrize("name", list(FORMULAS))
def test_sparse_map_is_the_same_from_dense_and_sparse_products(name, classed, monkeypatch):
    """W formed from dense products (small designs) and from sparse products (larger ones)
    is bitwise the same: same updated entries, same sums in the same (level) order."""
    monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0 if classed else 10**9)
    design = _design(FORMULAS[name])
    pls = PLS(design.random.blocks, design.X, design.y, update="sparse")
    maps = []
    for limit in (10**12, 0):
        monkeypatch.setattr(sparse_map, "MAX_DENSE_PRODUCTS", limit)
        for support in (True, False):
            maps.append(sparse_map.build_sparse_map(pls.A1r, pls.A11, pls.Arr, support))
    for dense, sparse in zip(maps[:2], maps[2:], strict=True):
        np.testing.assert_array_equal(dense.rows, sparse.rows)
        assert (dense.arr is None) == (sparse.arr is None)
        W_dense, W_sparse = (m.W.toarray() if hasattr(m.W, "toarray") else m.W
                             for m in (dense, sparse))
        assert np.array_equal(W_dense, W_sparse)
        np.testing.assert_array_equal(dense.rep, sparse.rep)


@pytest.mark.parametrize("name", list(FORMULAS) + ["ratings"])
def test_new_response_reuses_the_y_free_products(name, monkeypatch):
    """``PLS.with_response`` forms only y's products of W and merges them into the kept
    y-free ones: W, its entries and C are bitwise those of a PLS built for the new y."""
    monkeypatch.setattr(sparse_map, "MAX_DENSE_PRODUCTS", 0)  # (small designs: dense)
    monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0)  # classes too
    if name == "ratings":
        design = build_design(parse("y ~ x + (1 | s) + (1 | d) + (1 | dept)"), _ratings())
    else:
        design = _design(FORMULAS[name])
    pls = PLS(design.random.blocks, design.X, design.y, update="sparse")
    y2 = np.random.default_rng(7).normal(size=len(design.y)) * 3.0
    for y in (y2, y2 + 1.0):  # (a second response: the kept products are not consumed)
        reused = pls.with_response(y)
        fresh = PLS(design.random.blocks, design.X, y, update="sparse")
        a, b = reused._map, fresh._map
        np.testing.assert_array_equal(a.rows, b.rows)
        W_a, W_b = (m.W.toarray() if hasattr(m.W, "toarray") else m.W for m in (a, b))
        assert np.array_equal(W_a, W_b)
        theta = design.random.theta_start()
        assert reused.objective(theta, True) == fresh.objective(theta, True)
    assert pls._free is not None


@pytest.mark.parametrize("classed", [False, True])
@pytest.mark.parametrize("name", list(FORMULAS))
def test_new_response_of_a_small_design_forms_only_y_columns(name, classed, monkeypatch):
    """A small design's new response (W from dense products): the products with [X y_c],
    A_1r, W, its entries and C are bitwise those of a PLS built for the new y, with the
    kept map's positions and X's products shared, W's rows at y's entries formed again."""
    if classed:
        monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0)
    design = _design(FORMULAS[name])
    pls = PLS(design.random.blocks, design.X, design.y)
    y2 = np.random.default_rng(5).normal(size=len(design.y)) * 40.0 + 7.0
    for y in (y2, y2 * 1e-3 - 2.0):  # (two responses: the kept problem is not changed)
        reused = pls.with_response(y)
        fresh = PLS(design.random.blocks, design.X, y)
        for name_ in ("Z1tD", "ZrtD", "DtD", "centre", "xtx"):
            a, b = getattr(reused.products, name_), getattr(fresh.products, name_)
            assert (a is None and b is None) or np.array_equal(a, b), name_
        assert reused.products.yc_ss == fresh.products.yc_ss
        for A in (reused.A1r, fresh.A1r):
            assert A.has_canonical_format
        np.testing.assert_array_equal(reused.A1r.indptr, fresh.A1r.indptr)
        np.testing.assert_array_equal(reused.A1r.indices, fresh.A1r.indices)
        assert np.array_equal(reused.A1r.data, fresh.A1r.data)
        assert np.array_equal(reused.Arr, fresh.Arr)
        a, b = reused._map, fresh._map
        assert (a is None) == (b is None)
        if a is not None:
            assert a.rows is pls._map.rows  # (the kept map's positions)
            np.testing.assert_array_equal(a.rows, b.rows)
            assert not hasattr(a.W, "toarray") and np.array_equal(a.W, b.W)
            assert (a.arr is None) == (b.arr is None)
            assert a.arr is None or np.array_equal(a.arr, b.arr)
            # the compiled evaluation of the kept problem with the new arrays, its classes
            assert reused._classes is pls._classes
            assert (reused._small is None) == (fresh._small is None)
            assert reused._small is None or reused._small is not pls._small
        theta = design.random.theta_start() * 0.7
        for reml in (True, False):
            assert reused.objective(theta, reml) == fresh.objective(theta, reml)


def test_a_new_response_with_other_zeros_builds_its_own_a1r():
    """Where Z₁ᵀy_c of the new response is zero at another level than the kept one's, A_1r
    has another pattern: it is formed from the products (None from ``_a1r_with``)."""
    design = _design(FORMULAS["correlated slope"])
    pls = PLS(design.random.blocks, design.X, design.y)
    column = pls.products.Z1tD[:, -1].copy()
    assert pls._a1r_with(column) is not None
    column[1] = 0.0
    assert pls._a1r_with(column) is None


@pytest.mark.parametrize("case", ["ratings", "slope on the rest"])
def test_blocked_cholesky_matches_dense_formula(case, monkeypatch):
    """The dense part factored by the blocked Cholesky (small panels, the helper thread
    taking part of each update; the last panels hold X and y and are solved by dtrsm): the
    dense formula's criterion, and the solution of one LAPACK dpotrf call. "slope on the
    rest": a correlated slope on the later factor (C is assembled as a full matrix)."""
    if case == "ratings":
        design = build_design(parse("y ~ x + (1 | s) + (1 | d) + (1 | dept)"), _ratings())
        panel, min_split = 16, 64
    else:
        design = _design(FORMULAS["q1 = 3, slope on the rest"])
        panel, min_split = 3, 2
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls.r >= 4 * panel
    n, p = design.X.shape
    thetas = _thetas(design)
    lapack_solutions = [pls.solve(pls.factor(th)) for th in thetas]
    monkeypatch.setattr(cholesky, "MIN_BLOCKED", 0)
    monkeypatch.setattr(cholesky, "PANEL", panel)
    monkeypatch.setattr(cholesky, "MIN_SPLIT", min_split)
    for theta, (beta, u) in zip(thetas, lapack_solutions, strict=True):
        f = pls.factor(theta)
        assert profiled_deviance(f, n, p, True) == pytest.approx(
            _dense_criterion(design, theta), rel=1e-10)
        beta_b, u_b = pls.solve(f)
        np.testing.assert_allclose(beta_b, beta, rtol=1e-10)
        for a, b in zip(u_b, u, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("compiled", [False, True])
def test_fit_factors_each_theta_once(compiled, monkeypatch):
    """The optimiser's best factorisation is the fit's: PLS.factor runs once per BOBYQA
    evaluation and each point of the derivative check (2k + 2k(k - 1) for k theta) is
    factored once (in one compiled loop, ``PLS.factor_batch``, for this small design),
    and the result is the one a fresh factorisation gives. Through NLopt's C interface
    (``compiled``) neither BOBYQA's evaluations nor the check's points (the compiled
    criterion's ``deriv12``) form a factorisation: the optimum's is formed once at the
    end."""
    from crossed.engines.native import optimize

    monkeypatch.setattr(optimize, "_USE_COMPILED", compiled)
    calls = []
    factor, factor_batch = PLS.factor, PLS.factor_batch

    def counting(self, theta):
        calls.append(np.array(theta))
        return factor(self, theta)

    def counting_batch(self, thetas):
        calls.extend(np.array(thetas))
        return factor_batch(self, thetas)

    monkeypatch.setattr(PLS, "factor", counting)
    monkeypatch.setattr(PLS, "factor_batch", counting_batch)
    formula = "y ~ x + (1 | d) + (1 | s)"
    design = build_design(parse(formula), _ratings())
    fit = crossed.lmer(formula, _ratings())
    assert not fit.is_singular  # (singular fits skip the derivative check)
    k = len(fit.theta)
    expected = 1 if compiled else fit.opt.feval + 2 * k + 2 * k * (k - 1)
    assert len(calls) == expected
    with single_blas_thread():  # (as the engine factors: BLAS on one thread, whose
        # sums can differ in the last bits from several threads')
        fresh = factor(PLS(design.random.blocks, design.X, design.y), fit.theta)
    n, p = design.X.shape
    assert fit.deviance == profiled_deviance(fresh, n, p, True)


def test_a_fit_keeps_the_factorisation_its_estimates_came_from():
    """finish_fit memoises its factorisation on the fit; another fit of the same design
    (a refit sharing the design's PLS problem) does not replace it."""
    import warnings

    import crossed as cx

    df = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("Reaction ~ Days + (Days | Subject)", df)
        ml = fit.refit(reml=False)
    assert ml.pls is fit.pls  # one PLS problem per design
    f = fit.factor_at_optimum
    np.testing.assert_array_equal(f.theta, fit.theta)
    beta, _ = fit.pls.solve(f)
    np.testing.assert_array_equal(beta, fit.beta)
    np.testing.assert_array_equal(ml.factor_at_optimum.theta, ml.theta)


def test_first_block_2x2_is_bitwise_the_closed_forms():
    from crossed.model.closed_forms import _first_block_2x2_general
    from crossed.model.closed_forms import first_block_2x2 as _first_block_2x2

    rng = np.random.default_rng(3)
    a = np.abs(rng.normal(size=(3, 25))) * 10
    a[1] = rng.normal(size=25)  # (a10 of either sign; B stays positive definite)
    for _ in range(300):
        t = (rng.normal(size=3) * 10.0 ** rng.integers(-4, 4, size=3)).tolist()
        fast, general = _first_block_2x2(a, *t), _first_block_2x2_general(a, *t)
        assert fast[3] == general[3] and fast[4] == general[4]
        np.testing.assert_array_equal(fast[0], general[0])
        np.testing.assert_array_equal(fast[1], general[1])


def test_level_classes_of_a_scalar_block_match_the_row_wise_unique():
    from crossed.model.sparse_map import level_classes

    rng = np.random.default_rng(4)
    for scale in (1.0, 0.37):
        A11 = (rng.integers(1, 40, size=3000) * scale).reshape(-1, 1, 1)
        rep, class_of = level_classes(A11)
        _, r_ref, c_ref = np.unique(A11.reshape(-1, 1), axis=0, return_index=True,
                                    return_inverse=True)
        np.testing.assert_array_equal(rep, r_ref)
        np.testing.assert_array_equal(class_of, c_ref.reshape(-1))


DIAGONAL_LEAD = {
    # the first block an interaction, the second one of its factors (CCMEM); nesting;
    # a slope on the first block (q1 = 2)
    "CCMEM": ("y ~ x1 + (1 | model:dataset) + (1 | model) + (1 | dataset)", "model"),
    "nested": ("y ~ x1 + x2 + (1 | family/model)", "family"),
    "q1 = 2": ("y ~ x1 + (1 + x1 | family:dataset) + (1 | family)", "family"),
}


def _without(pls: PLS, lead: bool = False, diagonal: bool = False) -> PLS:
    """``pls`` factored without its components (``lead``) and/or without its diagonal
    lead (``diagonal``), its compiled evaluation built again without them."""
    if lead:
        pls._lead = None
    if diagonal:
        pls._diagonal = 0
    if pls._small is not None:
        pls._small = pls._small_dense()
    return pls


def _assert_dense_results(design, pls: PLS, plain: PLS, rtol_L: float | None = None) -> None:
    """At several θ, ``pls``'s criterion is the dense formula's, and its β and u (and, with
    ``rtol_L``, L's lower triangle and the criterion to 1e-13) those of ``plain``, the same
    problem factored densely."""
    n, p = design.X.shape
    for theta in _thetas(design):
        f, g = pls.factor(theta), plain.factor(theta)
        for reml in (True, False):
            assert profiled_deviance(f, n, p, reml) == pytest.approx(
                _dense_criterion(design, theta, reml), rel=1e-10)
            if rtol_L is not None:
                assert profiled_deviance(f, n, p, reml) == pytest.approx(
                    profiled_deviance(g, n, p, reml), rel=1e-13)
        if rtol_L is not None:
            low = np.tril_indices(pls.r)
            np.testing.assert_allclose(f.L[low], g.L[low], rtol=rtol_L,
                                       atol=1e-13 * np.abs(g.L).max())
        for a, b in zip(pls.solve(f)[1] + [pls.solve(f)[0]],
                        plain.solve(g)[1] + [plain.solve(g)[0]], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("update", [None, "groups", "sparse"])
@pytest.mark.parametrize("name", list(DIAGONAL_LEAD))
def test_diagonal_lead_of_the_schur_complement(name, update, monkeypatch):
    """When each level of the first factor meets one level of the second block, C's
    second-block part is diagonal and factored as such (without the components where
    they apply: ``LEAD_BLOCKS``): the criterion is the dense formula's and β, u those of
    the dense factorisation."""
    monkeypatch.setattr(cholesky, "MIN_DIAGONAL", 1)  # (used from r = 200 on otherwise)
    formula, second = DIAGONAL_LEAD[name]
    design = _design(formula)
    pls = _without(PLS(design.random.blocks, design.X, design.y, update=update), lead=True)
    assert pls._diagonal == _data()[second].nunique() == pls.blocks[1].nlevels
    plain = _without(PLS(design.random.blocks, design.X, design.y, update=update),
                     lead=True, diagonal=True)
    _assert_dense_results(design, pls, plain)


def test_no_diagonal_lead_where_a_level_meets_two():
    """A model meets several datasets: the second block's part of C is not diagonal."""
    design = _design(FORMULAS["crossed intercepts"])
    assert PLS(design.random.blocks, design.X, design.y)._diagonal == 0



LEAD_BLOCKS = {
    # a later factor nested in the first: components of one row; ham's design (a factor
    # and its interactions with another, the first block their finest): one component per
    # family, the family and its five family:dataset levels; a later block of two columns
    # per level (C scaled by its T on both sides): one component per family
    "nested": ("y ~ x1 + x2 + (1 | family/model)", [1, 1, 1]),
    "ham-like": ("y ~ x1 + (1 | model:dataset) + (1 | family:dataset) + (1 | family)",
                 [6, 6, 6]),
    "slope on the later": ("y ~ x1 + (1 | model:dataset) + (1 + x1 | family)", [2, 2, 2]),
}


@pytest.mark.parametrize("update", [None, "groups", "sparse"])
@pytest.mark.parametrize("name", list(LEAD_BLOCKS))
def test_lead_blocks_of_the_schur_complement(name, update):
    """Where the later random effects fall into independent components, C is factored
    component by component (``update_plan.lead_blocks``, ``_core.lead_blocks_lower``), in
    the compiled evaluation and on the general path: the criterion is the dense formula's
    and β, u those of the dense factorisation."""
    formula, sizes = LEAD_BLOCKS[name]
    design = _design(formula)
    pls = PLS(design.random.blocks, design.X, design.y, update=update)
    lead = pls._lead
    assert lead is not None and sorted(np.diff(lead.lead_start)) == sizes
    np.testing.assert_array_equal(np.sort(lead.lead_rows), np.arange(pls.r_rand))
    assert pls.dense_order == pls.r - pls.r_rand
    plain = _without(PLS(design.random.blocks, design.X, design.y, update=update),
                     lead=True, diagonal=True)
    _assert_dense_results(design, pls, plain, rtol_L=1e-11)


@pytest.mark.parametrize("name", ["crossed intercepts", "correlated slope", "one factor"])
def test_no_lead_blocks_where_the_later_effects_are_one_component(name):
    """Crossed later factors (models and datasets meet through the first block's levels)
    form one component; without later blocks there is none."""
    design = _design(FORMULAS[name])
    assert PLS(design.random.blocks, design.X, design.y)._lead is None


def _offset_table(offset: float) -> pd.DataFrame:
    """A small spread on a large mean: y = offset + 0.01 (b_g / 2 + x + e)."""
    rng = np.random.default_rng(1)
    g = rng.integers(0, 10, 200)
    df = pd.DataFrame({"g": [f"G{i:02d}" for i in g], "x": rng.normal(size=200)})
    df["y"] = offset + 0.01 * (rng.normal(size=10)[g] * 0.5 + df["x"] + rng.normal(size=200))
    return df


@pytest.mark.parametrize("offset", [1e3, 1e5, 1e7])
def test_a_large_mean_does_not_move_the_fit(offset):
    """y's part in X's span is taken out of the cross-products (PLS._centred): before, the
    rounding of yᵀy (2e12 at 1e5) against a pwrss of 0.02 moved the REML criterion by 22
    and θ from 0.46 to 0.73, with only convergence warnings. lme4 (1.1-31) on this table:
    REMLcrit -1268.034195, theta 0.458644 at offset 1e4 (0.458656 at 1e5: its own drift).
    Here every offset must give the offset-free fit, and β its intercept + offset."""
    base = crossed.lmer("y ~ x + (1 | g)", _offset_table(0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no convergence warning either
        fit = crossed.lmer("y ~ x + (1 | g)", _offset_table(offset))
    assert fit.opt.fmin == pytest.approx(base.opt.fmin, abs=1e-6)
    np.testing.assert_allclose(fit.theta, base.theta, rtol=1e-5)
    assert fit.sigma == pytest.approx(base.sigma, rel=1e-6)
    np.testing.assert_allclose(fit.beta - [offset, 0.0], base.beta, atol=1e-9 * offset)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov_beta)),
                               np.sqrt(np.diag(base.vcov_beta)), rtol=1e-5)


def test_the_centred_response_gives_the_same_system():
    """Any b in y - Xb is the same problem: criterion and u equal, β shifted back."""
    d = build_design(parse("y ~ x1 + x2 + (1 | model) + (1 | dataset)"), _data())
    plain = PLS(d.random.blocks, d.X, d.y)
    theta = np.array([0.7, 1.3])
    f = plain.factor(theta)
    beta, u = plain.solve(f)
    shifted = plain.with_response(d.y + d.X @ np.array([5.0, -2.0, 3.0]))
    g = shifted.factor(theta)
    assert g.pwrss == pytest.approx(f.pwrss, rel=1e-10)
    beta2, u2 = shifted.solve(g)
    np.testing.assert_allclose(beta2, beta + [5.0, -2.0, 3.0], rtol=1e-10)
    for a, b in zip(u, u2, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("formula", ["y ~ x + (1 | s) + (1 | d) + (1 | dept)",
                                     "y ~ x + (1 | s)"])
def test_first_block_per_class_is_the_per_level_one(formula, monkeypatch):
    """Where the sparse map merges a one-column first block's levels into classes of equal
    A_s (``LevelClasses``), the closed forms run once per class. The criterion, β, u, the
    conditional variances and the gradient are those of the per-level evaluation (the log
    determinant summed per class: rounding), and the batched criterion is ``objective``'s
    to rounding."""
    from crossed.model import batched
    from crossed.model.gradient import criterion_gradient

    monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0)
    design = build_design(parse(formula), _ratings())
    per_class = PLS(design.random.blocks, design.X, design.y, update="sparse")
    assert per_class._classes is not None and len(per_class._classes.a) < 10
    per_level = PLS(design.random.blocks, design.X, design.y, update="sparse")
    per_level._classes = None
    per_level._small = per_level._small_dense()  # (the compiled evaluation's, per
    # level)
    thetas = _thetas(design)
    for theta in thetas:
        fc, fl = per_class.factor(theta), per_level.factor(theta)
        assert fc.first.shape[0] == len(per_class._classes.a)
        for reml in (True, False):
            assert profiled_deviance(fc, *design.X.shape, reml) == pytest.approx(
                profiled_deviance(fl, *design.X.shape, reml), rel=1e-13)
            np.testing.assert_allclose(criterion_gradient(per_class, fc, reml),
                                       criterion_gradient(per_level, fl, reml), rtol=1e-9)
        (bc, uc), (bl, ul) = per_class.solve(fc), per_level.solve(fl)
        np.testing.assert_allclose(bc, bl, rtol=1e-11)
        for a, b in zip(uc + per_class.conditional_inverse_blocks(fc),
                        ul + per_level.conditional_inverse_blocks(fl), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)
    assert batched.batchable(per_class) == (per_class.r_rand == 0)
    if batched.batchable(per_class):  # (the one-factor model; its Schur update is a
        # matrix product where objective's is a matrix-vector one: batched.py)
        np.testing.assert_allclose(batched.objectives(per_class, thetas, True),
                                   [per_class.objective(t, True) for t in thetas], rtol=1e-12)


SMALL_DESIGNS = [
    ("y ~ x + (1 | s)", False, False),
    ("y ~ x + (1 | s)", True, False),  # (levels merged into classes of equal A_s)
    ("y ~ x + (1 | d)", False, True),  # (prior weights: ldW)
    ("y ~ x + (1 + x | s)", False, False),
    ("y ~ x + (1 + x || d)", False, False),
    ("y ~ 1 + (0 + x | d)", False, True),
    ("y ~ x + (1 | s) + (1 | d)", False, False),  # (C on its support: arr)
    ("y ~ x + (1 | s) + (1 | d)", False, True),
    ("y ~ x + (1 | d) + (1 | dept)", False, False),  # (C from A_rr whole)
    ("y ~ x + (1 + x | d) + (1 | dept)", False, True),
    ("y ~ x + (1 + x | d) + (1 + x | dept)", False, False),  # (later blocks of several
    ("y ~ x + (1 | s) + (1 | d) + (1 + x | dept)", False, True),  # columns: S C Sᵀ,
    ("y ~ x + (1 | s) + (1 | d) + (1 + x | dept)", True, False),  # scale_both_sides)
    ("y ~ x + (1 + x + z | d) + (1 | dept)", False, False),  # (q₁ = 3: the factors in
    ("y ~ x + (1 + x + z | d)", False, True),  # band storage, banded.py)
    ("y ~ x + (1 + x + z | d) + (1 + x | dept)", False, False),
]
"""Small designs on the dense path, evaluated in one compiled call."""


def _small_problem(formula: str, classed: bool, weighted: bool, monkeypatch):
    """A design of :data:`SMALL_DESIGNS` on the ratings (levels merged into classes when
    ``classed``, prior weights when ``weighted``): (design, its PLS problem, the same
    problem on the general path, θ at interior points and on the boundary)."""
    monkeypatch.setattr(sparse_map, "MIN_CLASSED_LEVELS", 0 if classed else 10**9)
    df = _ratings()
    design = build_design(parse(formula), df)
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(df)) if weighted else None
    pls = PLS.weighted(design.random.blocks, design.X, design.y, w)
    general = PLS.weighted(design.random.blocks, design.X, design.y, w)
    general._small = None
    lower = design.random.theta_lower
    thetas = _thetas(design, 6) + [np.where(np.isfinite(lower), 0.0, 1.0)]
    return design, pls, general, thetas


def _assert_same_evaluation(pls: PLS, general: PLS, theta: np.ndarray) -> None:
    """``pls`` (evaluated in one compiled call) and ``general`` (the same problem on the
    interpreted path) give the same factor (L's lower triangle, the first block's
    matrices, log determinants, pwrss), criterion, β and u at ``theta``, to rounding."""
    f, g = pls.factor(theta), general.factor(theta)
    assert f.ok and g.ok
    low = np.tril_indices(pls.r)
    np.testing.assert_allclose(f.L[low], g.L[low], rtol=1e-12, atol=1e-12 * np.abs(
        g.L).max())
    np.testing.assert_allclose(f.first, g.first, rtol=1e-14,
                               atol=1e-15 * np.abs(g.first).max())
    for name in ("ldL2", "ldRX2", "pwrss"):
        assert getattr(f, name) == pytest.approx(getattr(g, name), rel=1e-12, abs=1e-12)
    for reml in (True, False):
        assert pls.objective(theta, reml) == pytest.approx(
            general.objective(theta, reml), rel=1e-13)
    (bf, uf), (bg, ug) = pls.solve(f), general.solve(g)
    np.testing.assert_allclose(bf, bg, rtol=1e-10)
    np.testing.assert_allclose(uf[0], ug[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
def test_compiled_small_evaluation_is_the_general_one(formula, classed, weighted,
                                                     monkeypatch):
    """A small design on the dense path (a first block of one or two columns, the update
    by the sparse map, one dpotrf) is evaluated in one compiled
    call (``_core.SmallDense``): the factor (L's lower triangle, the first block's
    matrices, log determinants, pwrss) and so the criterion, β and u are the general
    path's to rounding, at interior and boundary θ; a θ that is not finite takes the
    general path (the kernel's failures: ``tests/model/test_core.py``)."""
    design, pls, general, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    assert pls._small is not None and (pls.level_classes is not None) == classed
    for theta in thetas:
        _assert_same_evaluation(pls, general, theta)
    # θ not finite: the general path's value (inf or nan), whatever it is
    inf_theta = thetas[0].copy()
    inf_theta[0] = np.inf
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(pls.objective(inf_theta, True),
                                      general.objective(inf_theta, True))


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
def test_small_design_products_formed_densely_are_the_sparse_ones(formula, classed, weighted,
                                                                  monkeypatch):
    """A small design's cross-products formed in one pass over the rows and A_1r formed from
    the dense rows (``crossprod.MAX_DENSE_ROW_PRODUCTS``) give the problem of SciPy's sparse
    products and hstack array for array: A_1r, A_rr, W and its positions, and so the
    factor, bitwise."""
    from crossed.model import crossprod

    design, pls, _, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    monkeypatch.setattr(crossprod, "MAX_DENSE_ROW_PRODUCTS", -1)
    monkeypatch.setattr(pls_module, "MAX_DENSE_ROW_PRODUCTS", -1)
    w = None if pls.ldW == 0.0 else np.random.default_rng(5).uniform(0.5, 2.0, len(design.y))
    sparse = PLS.weighted(design.random.blocks, design.X, design.y, w)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(pls.A1r, name), getattr(sparse.A1r, name))
    np.testing.assert_array_equal(pls.Arr, sparse.Arr)
    m, ms = pls.sparse_map, sparse.sparse_map
    assert m is not None and ms is not None
    np.testing.assert_array_equal(m.rows, ms.rows)
    assert type(m.W) is type(ms.W)
    for a, b in [(m.W, ms.W)] if isinstance(m.W, np.ndarray) else [
            (getattr(m.W, name), getattr(ms.W, name)) for name in ("indptr", "indices", "data")]:
        np.testing.assert_array_equal(a, b)
    for theta in thetas:
        f, g = pls.factor(theta), sparse.factor(theta)
        np.testing.assert_array_equal(f.L, g.L)
        assert (f.ldL2, f.ldRX2, f.pwrss) == (g.ldL2, g.ldRX2, g.pwrss)


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
def test_compiled_criterion_is_the_objective(formula, classed, weighted, monkeypatch):
    """The compiled criterion of a small design (``PLS.compiled_criterion``: what NLopt's
    C loop evaluates) is ``objective`` + shift to rounding (its log of one value is libm's,
    NumPy's may differ in the last bit), REML and ML, at interior and boundary θ, and logs
    each evaluation; where θ is not finite, or the pivot is to be recomputed from the
    residuals, the value is the fallback's; an error of the fallback gives NaN and is
    kept."""
    _, pls, _, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    called = []
    for reml in (True, False):

        def fallback(theta, reml=reml):
            called.append(theta)
            return pls.objective(theta, reml) + 0.25

        crit = pls.compiled_criterion(reml, 0.25, fallback)
        assert crit is not None
        values = [crit(t) for t in thetas]
        assert values == pytest.approx([pls.objective(t, reml) + 0.25 for t in thetas],
                                       rel=1e-14)
        assert not called
        logged = crit.take_log()
        assert [v for _, v in logged] == values
        for (x, _), t in zip(logged, thetas, strict=True):
            np.testing.assert_array_equal(x, t)
        assert crit.take_log() == []
    # θ not finite: the fallback's value (the general path's inf or nan)
    inf_theta = thetas[0].copy()
    inf_theta[0] = np.inf
    called.clear()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(crit(inf_theta), pls.objective(inf_theta, False) + 0.25)
    assert len(called) == 1
    # the pivot to be recomputed at every θ (limits 0 to inf): the fallback's values
    every = _core.SmallCriterion(pls._small, pls.n, pls.p, True, pls.ldW, 0.0, pls.yc_ss,
                                 True, (0.0, np.inf), lambda t: -1.0)
    assert [every(t) for t in thetas] == [-1.0] * len(thetas)

    def broken(theta):
        raise ArithmeticError("fallback failed")

    failing = pls.compiled_criterion(True, 0.0, broken)
    assert np.isnan(failing(inf_theta))
    assert isinstance(failing.error, ArithmeticError)


def test_compiled_criterion_reads_a_fixed_entry_of_t_as_zero():
    """A 2 x 2 template entry fixed at 0 (θ position -1) is read as 0 by the compiled
    criterion, as by ``factor`` (the list θ + [0] there): the off-diagonal θ of a
    correlated term at 0 gives the same value through a template without it."""
    df = _ratings()
    design = build_design(parse("y ~ x + (1 + x | s)"), df)
    pls = PLS(design.random.blocks, design.X, design.y)
    assert pls.q1 == 2 and pls._small is not None
    i0, i1, i2 = pls._t_2x2
    small = _core.SmallDense(*pls._small_dense_inputs(), pls.scale_index, pls.r_rand,
                             (i0, -1, i2), 3)
    fixed = _core.SmallCriterion(small, pls.n, pls.p, True, pls.ldW, 0.0, pls.yc_ss, True,
                                 (1e4, 1e12), lambda t: np.nan)
    for theta in ([0.7, 0.4, 0.3], [1.2, -0.5, 0.05]):
        at_zero = np.array(theta)
        at_zero[i1] = 0.0
        assert fixed(np.array(theta)) == pytest.approx(pls.objective(at_zero, True),
                                                       rel=1e-14)


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
def test_factor_batch_is_factor(formula, classed, weighted, monkeypatch):
    """``PLS.factor_batch`` (the derivative check's points in one compiled loop) gives at
    each θ bitwise what ``factor`` gives, REML's ldRX2 included; a θ that is not finite,
    or one whose pwrss is to be taken from the residuals, is left to the caller (not
    ``own``); a design not evaluated in one call has no batch."""
    _, pls, general, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    not_finite = thetas[0].copy()
    not_finite[0] = np.nan
    batch = pls.factor_batch(np.array(thetas + [not_finite]))
    assert batch is not None
    assert batch.own.tolist() == [True] * len(thetas) + [False]
    for k, theta in enumerate(thetas):
        f = pls.factor(theta)
        assert batch.ok[k] == f.ok
        assert (batch.ldL2[k], batch.ldRX2[k], batch.pwrss[k]) == (f.ldL2, f.ldRX2, f.pwrss)
    assert general.factor_batch(np.array(thetas)) is None


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
@pytest.mark.parametrize("reml", [True, False])
def test_deviance_batch_is_factor_rx_inverse_and_deviance_at(formula, classed, weighted,
                                                            reml, monkeypatch):
    """``PLS.deviance_batch`` (Satterthwaite's ~50 θ in one compiled loop) gives at each θ
    bitwise the deviance at σ (``deviance_at``), the pwrss and (R_XᵀR_X)⁻¹ that
    ``factor`` and ``rx_inverse`` give, in a basis ``back`` maps to as NumPy's products
    form it; the deviance alone without ``vcov``; θ not finite left to the caller; no
    batch for a design not evaluated in one call."""
    _, pls, general, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    not_finite = thetas[0].copy()
    not_finite[0] = np.nan
    points = np.array(thetas + [not_finite])
    sigma, p = 0.83, pls.p
    back = np.linalg.solve(np.triu(np.random.default_rng(2).normal(size=(p, p)))
                           + 3 * np.eye(p), np.eye(p))
    for basis in (None, back):
        values, own = pls.deviance_batch(points, sigma, reml, back=basis)
        alone, own_alone = pls.deviance_batch(points, sigma, reml, vcov=False)
        assert values.shape == (len(points), 2 + p * p) and alone.shape == (len(points), 1)
        assert own.tolist() == own_alone.tolist() == [True] * len(thetas) + [False]
        for k, theta in enumerate(thetas):
            f = pls.factor(theta)
            assert f.ok
            Ri = pls.rx_inverse(f)
            if basis is not None:
                Ri = Ri @ basis.T
            want = np.concatenate([[deviance_at(f, sigma, pls.n, p, reml), f.pwrss],
                                   (np.swapaxes(Ri[None], 1, 2) @ Ri[None]).ravel()])
            np.testing.assert_array_equal(values[k], want)
            assert alone[k, 0] == want[0]
    assert general.deviance_batch(points, sigma, reml) is None


def test_deviance_batch_leaves_the_residual_pwrss_to_the_caller(monkeypatch):
    """Where the pwrss is to be taken from the residuals (always, or where the pivot
    cancels), the row is the caller's."""
    design = build_design(parse("y ~ x + (1 + x | s)"), _ratings())
    pls = PLS(design.random.blocks, design.X, design.y)
    thetas = np.array(_thetas(design, 3))
    assert pls.deviance_batch(thetas, 1.0, True)[1].all()
    pls.residual_pwrss = "always"
    assert not pls.deviance_batch(thetas, 1.0, True)[1].any()
    pls.residual_pwrss = "auto"
    monkeypatch.setattr(pls_module, "CANCELLATION_LIMIT", 0.0)
    assert not pls.deviance_batch(thetas, 1.0, True)[1].any()


def test_factor_batch_leaves_a_cancelling_pivot_to_the_caller(monkeypatch):
    """Where ρ times the ratio reaches the repair range (``pivot_cancels``), the row is not
    the batch's: ``factor`` recomputes that pwrss from the residuals."""
    from crossed.model import pwrss

    design = build_design(parse("y ~ x + (1 + x | s)"), _ratings())
    pls = PLS(design.random.blocks, design.X, design.y)
    thetas = np.array(_thetas(design, 3))
    assert pls.factor_batch(thetas).own.all()
    monkeypatch.setattr(pwrss, "CANCELLATION_LIMIT", 0.0)
    assert not pls.factor_batch(thetas).own.any()


@pytest.mark.parametrize("formula", [
    "y ~ x1 + (1 | model) + (1 + x1 | dataset)",
    "y ~ x1 + (1 | model) + (1 | family:dataset) + (1 + x1 + x2 | dataset)",
])
def test_scaling_of_later_blocks_is_the_sparse_product_bit_for_bit(formula):
    """S M Sᵀ from M's lower triangle (``_core.scale_both_sides``, at every θ of a
    non-scalar later block) is SciPy's products S (S M)ᵀ with the sparse S
    (``scale_matrix``), bit for bit, with zeros in T_k (a singular θ) and without; the
    strict upper triangle is not read (NaN there), in either memory order."""
    design = _design(formula)
    pls = PLS.of(design)
    assert not pls.scalar_later_blocks
    rng = np.random.default_rng(3)
    M = rng.normal(size=(pls.r, pls.r))
    M = M + M.T
    lower = np.where(np.tril(np.ones_like(M)) > 0, M, np.nan)
    for theta in _thetas(design) + [np.where(np.isfinite(design.random.theta_lower), 0.0,
                                             0.5)]:
        np.testing.assert_array_equal(pls._later_templates(theta), np.concatenate(
            [b.template(theta).T.reshape(-1) for b in design.random.blocks[1:]]))
        S = pls.scale_matrix(theta)
        expected = np.asarray(S @ np.asarray(S @ M).T)
        for C in (np.asfortranarray(lower), np.ascontiguousarray(lower)):
            out = np.empty_like(M, order="F")
            _core.scale_both_sides(C, pls._s_blocks[0], pls._later_templates(theta), out)
            np.testing.assert_array_equal(out, expected)


def _items_by_systems() -> tuple[str, pd.DataFrame, dict | None]:
    """Many items with few scores each and (1 + x | system): a later block of two columns."""
    rng = np.random.default_rng(11)
    item, system = np.repeat(np.arange(400), 8), np.tile(np.arange(8), 400)
    x = rng.normal(size=400)[item]
    df = pd.DataFrame({"item": item.astype(str), "system": system.astype(str), "x": x,
                       "y": x + rng.normal(size=400)[item] + rng.normal(size=len(item))})
    return "y ~ x + (1 | item) + (1 + x | system)", df, None


def _ccmem_with_an_interaction() -> tuple[str, pd.DataFrame, dict | None]:
    """blurb's CCMEM with seed * lr: scalar later blocks and 17 fixed-effect columns."""
    return ("score ~ seed * lr + batch_size + num_epochs + (1 | model) + (1 | dataset)"
            " + (1 | model:dataset)", crossed.load_dataset("blurb_like"),
            {"seed": "59", "lr": "5e-5", "batch_size": "32"})


@pytest.mark.parametrize("case", [_items_by_systems, _ccmem_with_an_interaction])
def test_a_small_design_takes_the_compiled_map_where_groups_cost_less(case):
    """A small design takes the sparse map and its compiled evaluation even where the
    planner costs groups lower (the groups' update is Python's): a later factor with a
    correlated slope, or scalar later blocks beside many fixed-effect columns (blurb's
    CCMEM with seed * lr: 115 → 26 µs an evaluation, 15 µs compiled). The criterion is the
    groups path's to rounding; PIRLS's weighted problems keep the planner's choice."""
    formula, df, reference = case()
    design = build_design(parse(formula, reference=reference), df)
    pls = PLS.of(design)
    grouped = PLS(design.random.blocks, design.X, design.y, update="groups")
    assert pls._level_groups()[0] <= pls._w_cost  # (the planner's costs favour the groups)
    assert pls._small is not None and grouped._groups is not None
    for theta in _thetas(design, 4):
        for reml in (True, False):
            assert pls.objective(theta, reml) == pytest.approx(grouped.objective(theta, reml),
                                                               rel=1e-12)
    rng = np.random.default_rng(12)
    weighted = pls.reweighted(np.sqrt(rng.uniform(0.5, 2.0, len(df))), design.y)
    assert weighted._groups is not None and weighted._small is None


@pytest.mark.parametrize(("formula", "classed", "weighted"), SMALL_DESIGNS)
@pytest.mark.parametrize("update", [None, "sparse"])
def test_the_compiled_solve_is_the_steps_bit_for_bit(formula, classed, weighted, update,
                                                      monkeypatch):
    """``PLS.solve`` in one compiled call (``_core.dense_solve``: a first block of one or
    two columns per level, every later block of one) gives the interpreted steps' β and u
    bit for bit, at interior θ and on the boundary; the other designs keep the steps."""
    design, pls, _, thetas = _small_problem(formula, classed, weighted, monkeypatch)
    if update is not None:
        pls = PLS(design.random.blocks, design.X, design.y, update=update)
    applies = pls.q1 <= 2 and all(b.q == 1 for b in pls.blocks[1:])
    compiled = PLS._dense_solve
    for theta in thetas:
        f = pls.factor(theta)
        assert f.ok
        got = compiled(pls, f)
        assert (got is not None) == (applies and not isinstance(f, SparseFactor))
        monkeypatch.setattr(PLS, "_dense_solve", lambda self, f: None)
        beta, u = pls.solve(f)
        monkeypatch.setattr(PLS, "_dense_solve", compiled)
        if got is None:
            continue
        np.testing.assert_array_equal(got[0], beta)
        assert [a.shape for a in got[1]] == [b.shape for b in u]
        for a, b in zip(got[1], u, strict=True):
            np.testing.assert_array_equal(a, b)
        beta2, u2 = pls.solve(f)  # (the public call takes the compiled path)
        np.testing.assert_array_equal(beta2, beta)


GROUPS_DESIGNS = [("y ~ x + (1 + x + z | d) + (1 | dept)", False),
                  ("y ~ x + (1 + x + z | d)", True),
                  ("y ~ x + (1 + x + z | d) + (1 + x | dept)", False)]
"""Designs whose first block has three columns, taken through the groups' update."""


def _groups_problem(formula: str, weighted: bool, monkeypatch):
    """A design of :data:`GROUPS_DESIGNS` as :func:`_small_problem` gives it, with the
    groups' update chosen (the planner made to find them cheaper than W): its PLS
    problem, evaluated in one compiled call with the groups (``SmallDense``'s groups), the
    same problem on the interpreted groups' path, and θ."""
    real = pls_module.plan_update

    def groups_cheaper(*args, **kwargs):
        w_cost, _, groups = real(*args, **{**kwargs, "groups": True})
        return w_cost, 0.0, groups

    monkeypatch.setattr(pls_module, "plan_update", groups_cheaper)
    monkeypatch.setattr(pls_module, "GROUPS_OVERHEAD", -np.inf)
    return _small_problem(formula, False, weighted, monkeypatch)[1:]


@pytest.mark.parametrize(("formula", "weighted"), GROUPS_DESIGNS)
def test_compiled_groups_update_is_the_interpreted_one(formula, weighted, monkeypatch):
    """A first block of three or more columns whose update goes by groups of levels is
    evaluated in one compiled call (``SmallDense``'s groups: each level's H_s times its
    rows of A_1r, one dsyrk per group): the factor, the criterion, β and u are the
    interpreted groups' path's to rounding; the batches and the compiled criterion read
    the same evaluation; it pickles as its arrays and is built again for a new
    response."""
    import pickle

    pls, general, thetas = _groups_problem(formula, weighted, monkeypatch)
    assert pls._groups is not None and pls._small is not None and pls.sparse_map is None
    for theta in thetas:
        _assert_same_evaluation(pls, general, theta)
    batch = pls.factor_batch(np.array(thetas))
    assert batch is not None and batch.own.all() and batch.ok.all()
    for k, theta in enumerate(thetas):
        f = pls.factor(theta)
        assert (batch.ldL2[k], batch.ldRX2[k], batch.pwrss[k]) == (f.ldL2, f.ldRX2, f.pwrss)
    crit = pls.compiled_criterion(True, 0.0, lambda t: np.nan)
    assert [crit(t) for t in thetas] == pytest.approx(
        [pls.objective(t, True) for t in thetas], rel=1e-14)
    copy = pickle.loads(pickle.dumps(pls._small))
    first, L = np.empty(copy.first_shape), np.empty((pls.r, pls.r), order="F")
    assert copy.factor(thetas[1], first, L)[1:] == pls._small.factor(
        thetas[1], np.empty(copy.first_shape), np.empty((pls.r, pls.r), order="F"))[1:]
    with pytest.raises(ValueError, match="built again"):
        pls._small.with_response(np.zeros((0, 0)), np.zeros(0), pls.Arr)
    if not weighted:  # (a new response: the groups' update built on its A_1r)
        y = np.random.default_rng(7).normal(size=pls.n)
        fresh = PLS(pls.blocks, pls.X, y)
        new = pls.with_response(y)
        assert new._small is not None and new._small is not pls._small
        for theta in thetas[:3]:
            assert new.objective(theta, True) == pytest.approx(fresh.objective(theta, True),
                                                               rel=1e-12)
