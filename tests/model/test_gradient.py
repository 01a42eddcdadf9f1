"""The analytic gradient of the profiled criterion (crossed.model.gradient).

Checked on every R reference case (tests/data/reference/cases.json), REML and ML, at R's θ
(lme4 1.1-31's optimum, from the case's JSON) and at two random interior θ:

* against finite differences: the five-point central difference at steps h and h/2
  (h = 1e-3·max(1, |θ_i|)), Richardson-extrapolated. Tolerance 1e-6 relative to
  max(1, max|∇|), plus twice the difference of the two difference quotients (their own
  error estimate: on a few ill-conditioned cases the criterion itself is noisy at 1e-9
  absolute, which the quotient amplifies);
* against a dense, independent evaluation of the same formula (Ω, Z and ∂Λ formed as
  dense matrices, tr(Ω⁻¹ ∂Ω) by a dense solve) to 1e-7 relative, on the cases small enough
  to form Z densely.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crossed
from crossed.model.gradient import criterion_gradient, value_and_gradient
from crossed.model.pls import PLS
from reference import as_array, case_names, load_case

FD_REL = 1e-6


@pytest.fixture(scope="module")
def fitted() -> dict:
    return {}


def _pls(name: str, cache: dict) -> tuple[PLS, np.ndarray]:
    if name not in cache:
        case = load_case(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = crossed.lmer(case.formula, case.data, reml=case.reml,
                               reference=case.reference, control=crossed.LmerControl(
                                   check_conv=False, restarts=0))
        cache[name] = (fit.pls, as_array(case.r["theta"]))
    return cache[name]


def _points(theta_r: np.ndarray, lower: np.ndarray) -> list[np.ndarray]:
    rng = np.random.default_rng(16)
    pts = [theta_r]
    for _ in range(2):
        t = theta_r + rng.uniform(0.05, 0.6, len(theta_r)) * np.where(
            rng.random(len(theta_r)) < 0.5, 1.0, -1.0)
        pts.append(np.where(np.isfinite(lower), np.maximum(t, 0.05), t))
    return pts


def _five_point(pls: PLS, theta: np.ndarray, reml: bool, h: np.ndarray) -> np.ndarray:
    out = np.empty(len(theta))
    for i in range(len(theta)):
        e = np.zeros_like(theta)
        e[i] = h[i]
        f = [pls.objective(theta + m * e, reml) for m in (2, 1, -1, -2)]
        out[i] = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h[i])
    return out


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
@pytest.mark.parametrize("name", case_names())
def test_gradient_matches_finite_differences(name: str, reml: bool, fitted: dict) -> None:
    pls, theta_r = _pls(name, fitted)
    lower = np.array([-np.inf if np.isinf(v) else v for v in
                      _lower(pls, len(theta_r))])
    for theta in _points(theta_r, lower):
        value, g, _ = value_and_gradient(pls, theta, reml)
        assert np.isfinite(value)
        h = 1e-3 * np.maximum(1.0, np.abs(theta))
        fd1 = _five_point(pls, theta, reml, h)
        fd2 = _five_point(pls, theta, reml, h / 2)
        fd = (16 * fd2 - fd1) / 15
        tol = FD_REL * max(1.0, float(np.max(np.abs(fd)))) + 2 * np.abs(fd2 - fd1)
        assert np.all(np.abs(g - fd) <= tol), (name, reml, theta, g, fd, tol)


def _lower(pls: PLS, k: int) -> np.ndarray:
    lower = np.full(k, -np.inf)
    for blk in pls.blocks:
        idx = blk.theta_index
        for a in range(blk.q):
            if idx[a, a] >= 0:
                lower[idx[a, a]] = 0.0
    return lower


def _dense_gradient(pls: PLS, theta: np.ndarray, reml: bool) -> np.ndarray:
    """The same formula from dense matrices (independent of the blocked algebra)."""
    n, p = pls.n, pls.p
    Zs, lams, dlams = [], [], []
    for blk in pls.blocks:
        Z = np.zeros((n, blk.nlevels * blk.q))
        for a in range(blk.q):
            Z[np.arange(n), blk.codes * blk.q + a] = blk.Z[:, a]
        Zs.append(Z)
        eye = np.eye(blk.nlevels)
        lams.append(np.kron(eye, blk.template(theta)))
        d = []
        for i in range(len(theta)):
            E = (blk.theta_index == i).astype(float)
            d.append(np.kron(eye, E))
        dlams.append(d)
    Z = np.hstack(Zs)
    q = Z.shape[1]

    def blockdiag(ms: list[np.ndarray]) -> np.ndarray:
        out = np.zeros((sum(m.shape[0] for m in ms),) * 2)
        o = 0
        for m in ms:
            out[o:o + m.shape[0], o:o + m.shape[0]] = m
            o += m.shape[0]
        return out

    Lam = blockdiag(lams)
    ZL = Z @ Lam
    Ofull = np.block([[ZL.T @ ZL + np.eye(q), ZL.T @ pls.X], [pls.X.T @ ZL, pls.X.T @ pls.X]])
    rhs = np.concatenate([ZL.T @ pls.y, pls.X.T @ pls.y])
    sol = np.linalg.solve(Ofull, rhs)
    u, beta = sol[:q], sol[q:]
    res = pls.y - pls.X @ beta - ZL @ u
    r2 = res @ res + u @ u
    m = q + p if reml else q
    Om = Ofull[:m, :m]
    A = np.hstack([Z, pls.X])[:, :m]
    grad = np.zeros(len(theta))
    for i in range(len(theta)):
        dLam = blockdiag([d[i] for d in dlams])
        dLt = np.zeros((m, m))
        dLt[:q, :q] = dLam
        Lt = np.eye(m)
        Lt[:q, :q] = Lam
        dO = dLt.T @ A.T @ A @ Lt
        dO = dO + dO.T
        dlog = np.trace(np.linalg.solve(Om, dO))
        dr2 = -2 * res @ (Z @ (dLam @ u))
        grad[i] = dlog + ((n - p) if reml else n) / r2 * dr2
    return grad


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
@pytest.mark.parametrize("name", case_names())
def test_gradient_matches_dense_formula(name: str, reml: bool, fitted: dict) -> None:
    pls, theta_r = _pls(name, fitted)
    q = sum(b.nlevels * b.q for b in pls.blocks)
    if pls.n * q > 3_000_000:
        pytest.skip("too large to form Z densely")
    for theta in _points(theta_r, _lower(pls, len(theta_r))):
        g = criterion_gradient(pls, pls.factor(theta), reml)
        d = _dense_gradient(pls, theta, reml)
        assert np.allclose(g, d, rtol=1e-7, atol=1e-7 * max(1.0, np.max(np.abs(d)))), (
            name, reml, theta, g, d)


def test_gradient_on_the_boundary_is_one_sided_exact() -> None:
    """At θ = 0 (a singular fit) the criterion is even in θ: the gradient is 0 there and the
    one-sided difference quotient tends to it."""
    case = load_case("dyestuff2_singular")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(case.formula, case.data, reml=True)
    g = criterion_gradient(fit.pls, fit.pls.factor(np.zeros(1)), True)
    assert abs(g[0]) < 1e-12


@pytest.mark.parametrize("name", ["sleepstudy_slopes", "carrots_slopes", "blurb_ccmem_slopes",
                                  "ner_crossed", "ham_crossed", "pastes_nested"])
def test_sparse_and_dense_paths_agree(name: str, fitted: dict, monkeypatch) -> None:
    """The gradient from A_1r kept dense equals the one from sparse products and
    :meth:`PLS.schur` (the path of large designs)."""
    from crossed.model import gradient

    pls, theta_r = _pls(name, fitted)
    theta = _points(theta_r, _lower(pls, len(theta_r)))[1]
    f = pls.factor(theta)
    results = []
    for fraction in (-1.0, 2.0):  # every design dense; none
        monkeypatch.setattr(gradient, "DENSE_FRACTION", fraction)
        gradient._PLANS.pop(pls, None)
        results.append([criterion_gradient(pls, f, reml) for reml in (True, False)])
    gradient._PLANS.pop(pls, None)
    for dense, sparse in zip(*results, strict=True):
        np.testing.assert_allclose(sparse, dense, rtol=1e-9, atol=1e-9 * np.max(np.abs(dense)))


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
@pytest.mark.parametrize("name", case_names())
def test_dense_path_matches_blocked_path(name: str, reml: bool, fitted: dict) -> None:
    """gradient_dense.py (A_1r dense, scalar later blocks: few array operations) gives the
    blocked algebra's gradient to 1e-10 relative to max(1, max|∇|) at R's θ and at two
    random θ (at R's θ the gradient is ~0: what is left is the rounding of its terms)."""
    from crossed.model.gradient import _plan, blocked_gradient
    from crossed.model.gradient_dense import dense_gradient

    pls, theta_r = _pls(name, fitted)
    plan = _plan(pls)
    if plan.dense is None or not pls._rest_scalar:
        pytest.skip("the blocked path serves this design")
    for theta in _points(theta_r, _lower(pls, len(theta_r))):
        f = pls.factor(theta)
        g = blocked_gradient(pls, f, reml)
        fast = dense_gradient(pls, f, reml, plan.dense_arrays(pls))
        np.testing.assert_allclose(fast, g, rtol=0,
                                   atol=1e-10 * max(1.0, float(np.max(np.abs(g)))))


def test_banded_inverse_is_each_levels_inverse_for_its_factor(fitted: dict) -> None:
    """The first block's B_s⁻¹ = L_s⁻ᵀL_s⁻¹ (banded.py), which the gradient reads, is
    formed from the factor it is given: the inverse of that factorisation's B_s."""
    pls, theta_r = _pls("blurb_ccmem_slopes", fitted)
    band = pls._band
    assert band is not None
    for theta in (theta_r, theta_r * 1.1):
        f = pls.factor(theta)
        chol = pls.first_chol(f)
        B = chol @ np.swapaxes(chol, 1, 2)
        inverse = band.inverse(f.first)
        np.testing.assert_allclose(inverse @ B, np.broadcast_to(np.eye(pls.q1), B.shape),
                                   atol=1e-12)
        np.testing.assert_array_equal(inverse, np.swapaxes(inverse, 1, 2))


def test_compiled_dense_gradient_refuses_what_does_not_fit(fitted: dict) -> None:
    """``_gradient.dense_gradient`` reads only arrays of the design's shapes and θ positions
    within θ (else -1, a ValueError from the caller), and reports a singular factor
    (LAPACK's info, a LinAlgError) without writing the gradient."""
    from crossed.model import _gradient
    from crossed.model.gradient import _plan
    from crossed.model.gradient_dense import dense_gradient, first_inverse

    pls, theta = _pls("blurb_ccmem_slopes", fitted)
    f = pls.factor(theta)
    d = _plan(pls).dense_arrays(pls)
    R = pls.r_rand + pls.p
    T1 = np.ascontiguousarray(pls.blocks[0].template(theta))
    Dinv = np.ascontiguousarray(first_inverse(pls, f))

    def call(L=f.L, scale_index=d.scale_index, A1=d.A1, t_index=d.t_index, rr=pls.r_rand):
        grad = np.full(len(theta), 7.0)
        info = _gradient.dense_gradient(L, theta, -2.0 * (pls.n - pls.p) / f.pwrss,
                                        scale_index, rr, R, A1, d.A1T, d.A11, Dinv, T1,
                                        d.Arr, d.t_pos, t_index, grad)
        return info, grad

    info, grad = call()
    assert info == 0
    np.testing.assert_array_equal(grad, dense_gradient(pls, f, True, d))
    assert call(A1=d.A1[1:])[0] == -1
    assert call(t_index=d.t_index + len(theta))[0] == -1
    assert call(scale_index=np.full_like(d.scale_index, -1))[0] == -1  # (a later effect)
    assert call(rr=R + 1)[0] == -1
    singular = np.array(f.L, order="F")
    singular[1, 1] = 0.0
    info, grad = call(L=singular)
    assert info > 0 and np.all(grad == 7.0)


@pytest.mark.parametrize("reml", [True, False], ids=["REML", "ML"])
def test_correlated_first_block_on_the_dense_path(reml: bool) -> None:
    """A correlated 3 x 3 first template (banded factor, not diagonal) with scalar later
    blocks: the dense path equals the blocked path (1e-10) and the dense formula (1e-7)."""
    from crossed.model.gradient import _plan, blocked_gradient

    df = crossed.load_dataset("blurb_like")
    df["s20"] = (df["seed"].astype(str) == "20").astype(float)
    df["lr1"] = (df["lr"].astype(str) == "1e-05").astype(float) + (
        df["lr"].astype(str) == "1e-5").astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("score ~ num_epochs + s20 + lr1 + (1 | model) + (1 | dataset)"
                           " + (1 + s20 + lr1 | model:dataset)", df, reml=reml)
    pls = fit.pls
    assert pls.q1 == 3 and pls._band is not None
    assert np.any(pls._band.theta_index[~np.eye(3, dtype=bool)] >= 0)  # (correlated)
    assert _plan(pls).dense is not None and pls._rest_scalar
    rng = np.random.default_rng(3)
    for theta in (fit.theta, fit.theta + rng.uniform(-0.3, 0.3, len(fit.theta))):
        theta = np.where(np.isfinite(fit.design.random.theta_lower),
                         np.maximum(theta, 0.05), theta)
        f = pls.factor(theta)
        g = criterion_gradient(pls, f, reml)
        np.testing.assert_allclose(g, blocked_gradient(pls, f, reml), rtol=0,
                                   atol=1e-10 * max(1.0, float(np.max(np.abs(g)))))
        d = _dense_gradient(pls, theta, reml)
        assert np.allclose(g, d, rtol=1e-7, atol=1e-7 * max(1.0, np.max(np.abs(d))))


@pytest.mark.parametrize("name", ["blurb_ccmem_slopes", "ner_crossed", "ham_crossed",
                                  "pastes_nested", "penicillin_crossed"])
def test_later_blocks_from_the_diagonal_agree_with_c0(name: str, fitted: dict,
                                                      monkeypatch) -> None:
    """On the blocked path, scalar later blocks away from the boundary take their term
    from diag(S⁻¹) (S = S_R C₀ S_R + D); it equals the term from C₀, at R's θ and at
    random θ, and near the boundary (θ below LATER_SCALE_MIN) the C₀ path runs."""
    from crossed.model import gradient

    pls, theta_r = _pls(name, fitted)
    assert pls.r_rand and pls._rest_scalar
    for theta in _points(theta_r, _lower(pls, len(theta_r))):
        f = pls.factor(theta)
        results = []
        for limit in (gradient.LATER_SCALE_MIN, np.inf):  # the diagonal; C₀ always
            monkeypatch.setattr(gradient, "LATER_SCALE_MIN", limit)
            results.append([gradient.blocked_gradient(pls, f, reml)
                            for reml in (True, False)])
        for diag, c0 in zip(*results, strict=True):
            np.testing.assert_allclose(diag, c0, rtol=1e-10,
                                       atol=1e-10 * max(1.0, np.max(np.abs(c0))))
    monkeypatch.setattr(gradient, "LATER_SCALE_MIN", 1e-2)
    near = theta_r.copy()  # every later block's θ below the limit: the C₀ path
    for blk in pls.blocks[1:]:
        near[blk.theta_index[0, 0]] = 5e-3
    if pls.n * sum(b.nlevels * b.q for b in pls.blocks) <= 3_000_000:
        for reml in (True, False):
            g = gradient.blocked_gradient(pls, pls.factor(near), reml)
            d = _dense_gradient(pls, near, reml)
            np.testing.assert_allclose(g, d, rtol=1e-7, atol=1e-7 * max(1.0, np.max(np.abs(d))))
