"""The sparse Schur complement (model/sparse_schur.py) against the dense path.

The sparse path must give the dense path's criterion (to 1e-10 relative) at any θ, and
fits through it the dense fits' estimates within the conformance tolerances
(tests/engines/test_conformance.py: fixef 1e-6, SE 1e-4, theta 1e-3 relative + 1e-4).
The sparse path is forced with ``PLS(schur="sparse")``, or, for whole fits, by patching
the automatic choice (``SPARSE_FROM = 0``, ``FILL_FRACTION = 1``) or lowering ``MAX_DENSE``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import crossed
from _crowd import crowd
from crossed.design import build_design
from crossed.formula import parse
from crossed.model import pls as pls_module
from crossed.model import sparse_schur
from crossed.model.pls import PLS, profiled_deviance
from reference import load_case

CASES = ["penicillin_crossed", "pastes_nested", "ham_crossed", "blurb_ccmem", "ner_crossed",
         "exist_mono_nested", "blurb_ccmem_slopes"]
FIT_CASES = ["penicillin_crossed", "ham_crossed", "ner_crossed", "pastes_nested"]
FIXEF_RTOL, SE_RTOL, THETA_RTOL, THETA_ATOL = 1e-6, 1e-4, 1e-3, 1e-4


def _fit(name: str) -> crossed.LmerFit:
    case = load_case(name)
    return crossed.lmer(case.formula, case.data, reml=case.reml, reference=case.reference)


@pytest.mark.parametrize("name", CASES)
def test_sparse_criterion_and_solution_equal_dense(name):
    fit = _fit(name)
    d = fit.design
    dense = PLS(d.random.blocks, d.X, d.y, schur="dense")
    sparse = PLS(d.random.blocks, d.X, d.y, schur="sparse")
    assert sparse._sparse is not None and not hasattr(sparse, "Arr")
    rng = np.random.default_rng(0)
    thetas = [fit.theta] + [fit.theta * rng.uniform(0.5, 1.5, len(fit.theta)) + 0.05
                            for _ in range(1 if name == "ham_crossed" else 2)]
    for i, theta in enumerate(thetas):
        fd, fs = dense.factor(theta), sparse.factor(theta)
        for reml in (True, False):
            a = profiled_deviance(fd, dense.n, dense.p, reml)
            b = profiled_deviance(fs, sparse.n, sparse.p, reml)
            assert abs(b - a) <= 1e-10 * abs(a), (name, theta, a, b)
        beta_d, u_d = dense.solve(fd)
        beta_s, u_s = sparse.solve(fs)
        # (ner's criterion, ~1e4, has rounding noise ~5e-7 whose last digits the BLAS kernel
        # decides: there the solutions agree to ~1e-9 relative, kernel-dependent; the other
        # cases to 1e-12)
        rtol, atol = (1e-7, 1e-8) if name == "ner_crossed" else (1e-9, 1e-10)
        np.testing.assert_allclose(beta_s, beta_d, rtol=rtol, atol=atol)
        for x, y in zip(u_s, u_d, strict=True):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
        np.testing.assert_allclose(sparse.rx_inverse(fs), dense.rx_inverse(fd), rtol=rtol,
                                   atol=1e-12)
        if i == 0:  # (the dense path's conditional variances are slow on ham)
            for x, y in zip(sparse.conditional_inverse_blocks(fs),
                            dense.conditional_inverse_blocks(fd), strict=True):
                np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-12)


def _assert_same_fit(fs: crossed.LmerFit, fd: crossed.LmerFit) -> None:
    assert abs(fs.deviance - fd.deviance) <= 1e-9 * abs(fd.deviance)
    np.testing.assert_allclose(fs.theta, fd.theta, rtol=THETA_RTOL, atol=THETA_ATOL)
    np.testing.assert_allclose(fs.fixef, fd.fixef, rtol=FIXEF_RTOL)
    np.testing.assert_allclose(np.sqrt(np.diag(fs.vcov)), np.sqrt(np.diag(fd.vcov)),
                               rtol=SE_RTOL)


@pytest.mark.parametrize("name", FIT_CASES)
def test_sparse_fit_equals_dense_fit(name, monkeypatch):
    dense = _fit(name)
    monkeypatch.setattr(sparse_schur, "SPARSE_FROM", 0)
    monkeypatch.setattr(sparse_schur, "FILL_FRACTION", 1.0)
    fit = _fit(name)
    assert fit.pls._sparse is not None and dense.pls._sparse is None
    _assert_same_fit(fit, dense)
    # downstream readers of the factor: Satterthwaite df, conditional SDs
    np.testing.assert_allclose(fit.coef_table()["df"], dense.coef_table()["df"], rtol=1e-3)
    np.testing.assert_allclose(fit.ranef()["cond_sd"], dense.ranef()["cond_sd"], rtol=1e-4)


def test_pooled_crowd_design_past_a_lowered_limit(monkeypatch):
    data = crowd(items=600, pools=6, pool_size=30, raters=4)
    formula = "y ~ 1 + x + (1 | item) + (1 | annotator)"
    dense = crossed.lmer(formula, data)
    assert dense.pls._sparse is None and dense.pls.r_rand == 180
    monkeypatch.setattr(pls_module, "MAX_DENSE", 150)  # 180 annotators: past it
    fit = crossed.lmer(formula, data.copy())  # (a new design: its PLS is built anew)
    s = fit.pls._sparse
    assert s is not None
    # the annotators' Schur complement is block diagonal by pool: no fill beyond the pools
    assert s.nnz_factor <= 6 * 30 * 31 // 2
    _assert_same_fit(fit, dense)
    # conditional SDs by the selected inversion, its columns in many small chunks
    monkeypatch.setattr(sparse_schur._SelectedInverse, "CHUNK", 500)
    np.testing.assert_allclose(fit.ranef()["cond_sd"], dense.ranef()["cond_sd"], rtol=1e-4)
    with pytest.raises(ValueError, match="limited to 150"):
        PLS(fit.design.random.blocks, fit.design.X, fit.design.y, schur="dense")
    # simulation refits share the sparse structures (another response)
    other = fit.pls.with_response(fit.design.y[::-1].copy())
    assert other._sparse is not None and other._sparse.W is s.W
    f = other.factor(fit.theta)
    assert f.ok and np.isfinite(profiled_deviance(f, other.n, other.p, True))


def test_too_large_sparse_factor_is_refused_naming_the_factors(monkeypatch):
    data = crowd(items=200, pools=4, pool_size=10, raters=3)
    monkeypatch.setattr(sparse_schur, "MAX_SPARSE_NNZ", 50)
    d = crossed.lmer("y ~ x + (1 | item) + (1 | annotator)", data).design
    with pytest.raises(MemoryError, match=r"'item', 'annotator'.*too large"):
        PLS(d.random.blocks, d.X, d.y, schur="sparse")


def test_schur_argument_is_checked():
    data = crowd(items=50, pools=2, pool_size=5, raters=2)
    d = crossed.lmer("y ~ x + (1 | item) + (1 | annotator)", data).design
    with pytest.raises(ValueError, match="schur must be"):
        PLS(d.random.blocks, d.X, d.y, schur="cholmod")


def test_automatic_choice_keeps_dense_designs_dense(monkeypatch):
    """Below the dense limit the sparse path is taken only when C_RR's factor is sparse:
    fully crossed factors give a dense C_RR, pooled annotators a block diagonal one."""
    monkeypatch.setattr(sparse_schur, "SPARSE_FROM", 50)
    monkeypatch.setattr(sparse_schur, "FILL_FRACTION", 0.1)
    rng = np.random.default_rng(5)
    crossed_data = pd.DataFrame({"a": np.repeat([f"a{i}" for i in range(60)], 55),
                                 "b": np.tile([f"b{i}" for i in range(55)], 60)})
    crossed_data["y"] = rng.normal(size=len(crossed_data))
    d = crossed.lmer("y ~ 1 + (1 | a) + (1 | b)", crossed_data).design
    assert PLS(d.random.blocks, d.X, d.y)._sparse is None  # every a meets every b
    pooled = crowd(items=600, pools=12, pool_size=10, raters=3)
    d = crossed.lmer("y ~ x + (1 | item) + (1 | annotator)", pooled).design
    # 120 annotators in 12 pools: 12 blocks of 10 x 10, 660 of the 7260 entries
    assert PLS(d.random.blocks, d.X, d.y)._sparse is not None


def test_gradient_optimiser_on_the_sparse_path(monkeypatch):
    """The analytic gradient reads the dense factor: on the sparse path 'auto' takes BOBYQA
    (blurb slopes has 11 theta, where 'auto' takes L-BFGS-B on the dense path) and an
    explicit 'lbfgsb' is refused by name, never run without its gradient."""
    from crossed.engines.native import LmerControl

    case = load_case("blurb_ccmem_slopes")
    monkeypatch.setattr(sparse_schur, "SPARSE_FROM", 0)
    monkeypatch.setattr(sparse_schur, "FILL_FRACTION", 1.0)
    fit = crossed.lmer(case.formula, case.data, reml=case.reml, reference=case.reference)
    assert fit.pls.uses_sparse_schur and fit.opt.geval == 0
    with pytest.raises(ValueError, match="sparse Schur"):
        crossed.lmer(case.formula, case.data, reml=case.reml, reference=case.reference,
                     control=LmerControl(optimizer="lbfgsb"))


def _pairs_by_numpy(A1R, q: int, l1: int, upper: bool):
    """The pairs of nonzeros per level as the NumPy construction the kernel replaced."""
    counts = np.diff(A1R.indptr)
    row_of = np.repeat(np.arange(A1R.shape[0]), counts)
    level = row_of // q
    per_level = np.bincount(level, minlength=l1)
    start = np.concatenate([[0], np.cumsum(per_level)])[:-1]
    reps = per_level[level]
    e1 = np.repeat(np.arange(len(level)), reps)
    offs = np.arange(len(e1)) - np.repeat(np.cumsum(reps) - reps, reps)
    e2 = start[level[e1]] + offs
    cols = A1R.indices.astype(np.int64)
    if upper:
        keep = cols[e1] <= cols[e2]
        e1, e2 = e1[keep], e2[keep]
    g = level[e1].astype(np.int64) * q * q + (row_of[e1] % q) * q + row_of[e2] % q
    return cols[e1], cols[e2], g, A1R.data[e1] * A1R.data[e2]


@pytest.mark.parametrize("name", ["penicillin_crossed", "blurb_ccmem_slopes", "pastes_nested"])
@pytest.mark.parametrize("upper", [True, False])
def test_compiled_level_pairs_are_the_numpy_ones(name: str, upper: bool) -> None:
    d = _fit(name).design
    s = PLS(d.random.blocks, d.X, d.y, schur="sparse")._sparse
    assert s is not None
    got = s._pairs(s.A1R, upper=upper)
    want = _pairs_by_numpy(s.A1R, s.q1, s.l1, upper)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)


def test_compiled_level_pairs_with_two_columns_per_level() -> None:
    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame({"g": rng.choice([f"g{i}" for i in range(40)], n),
                          "h": rng.choice([f"h{i}" for i in range(12)], n),
                          "x": rng.normal(size=n), "y": rng.normal(size=n)})
    d = build_design(parse("y ~ x + (x | g) + (1 | h)"), frame)
    s = PLS(d.random.blocks, d.X, d.y, schur="sparse")._sparse
    assert s is not None and s.q1 == 2
    for upper in (True, False):
        got = s._pairs(s.A1R, upper=upper)
        for a, b in zip(got, _pairs_by_numpy(s.A1R, 2, s.l1, upper), strict=True):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("q", [1, 2])
def test_class_map_sums_each_class_in_level_order(q):
    """W's columns per class of levels: at each position, the products of the class's
    levels added in level order (bit for bit), by counting over the keys' range or, when
    that range is larger than the pairs, by sorting them; every level its own class: the
    pairs as they are."""
    rng = np.random.default_rng(7)
    nlev, npos, qq = 40, 30, q * q
    level = np.sort(rng.integers(0, nlev, 600))  # (the pairs come level by level)
    entry = rng.integers(0, qq, len(level))
    upos = rng.integers(0, npos, len(level))
    vals = rng.normal(size=len(level)) * 10.0 ** rng.integers(-8, 8, len(level))
    class_of = rng.integers(0, 3, nlev)
    expected = np.zeros((npos, 3 * qq))
    seen = np.zeros((npos, 3 * qq), dtype=bool)
    for p, s, e, v in zip(upos, level, entry, vals, strict=True):
        expected[p, class_of[s] * qq + e] += v
        seen[p, class_of[s] * qq + e] = True
    for npos_ in (npos, 10 * len(level)):  # (the second: the keys' range past the pairs)
        extra = npos_ - npos
        W = sparse_schur._class_map(upos, level * qq + entry, vals, class_of, 3, q, npos_)
        want = np.vstack([expected, np.zeros((extra, 3 * qq))])
        np.testing.assert_array_equal(W.toarray(), want)
        assert W.nnz == seen.sum() and W.has_canonical_format
    per_level = sparse_schur._class_map(upos, level * qq + entry, vals, np.arange(nlev), nlev,
                                        q, npos)
    dense = np.zeros((npos, nlev * qq))
    np.add.at(dense, (upos, level * qq + entry), vals)
    np.testing.assert_array_equal(per_level.toarray(), dense)


def test_pooled_design_merges_its_levels_into_classes(monkeypatch):
    """Items with the same number of ratings have equal A_s: one column of W per class
    (here one), C_RD's and C_DD's updates from the class's sums, and the criterion and the
    solution of W per level to rounding."""
    data = crowd(items=600, pools=6, pool_size=30, raters=4)
    d = crossed.lmer("y ~ 1 + x + (1 | item) + (1 | annotator)", data).design
    pls = PLS(d.random.blocks, d.X, d.y, schur="sparse")
    assert pls.sparse is not None and len(pls.sparse.rep) == 1 and pls.sparse.W.shape[1] == 1
    monkeypatch.setattr(sparse_schur, "level_classes",
                        lambda A11: (np.arange(len(A11)), np.arange(len(A11))))
    per_level = PLS(d.random.blocks, d.X, d.y, schur="sparse")
    assert per_level.sparse is not None and per_level.sparse.W.shape[1] == 600
    for theta in ([0.8, 0.5], [2.0, 0.05]):
        fa, fb = (p.factor(np.array(theta)) for p in (pls, per_level))
        assert profiled_deviance(fa, pls.n, pls.p, True) == pytest.approx(
            profiled_deviance(fb, pls.n, pls.p, True), rel=1e-12)
        (beta_a, u_a), (beta_b, u_b) = pls.solve(fa), per_level.solve(fb)
        np.testing.assert_allclose(beta_a, beta_b, rtol=1e-10)
        for x, y in zip(u_a, u_b, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)
