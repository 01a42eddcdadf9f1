"""The compiled PIRLS of a scalar first term (``_scalar.ScalarDeviance``, what
``GlmmProblem.pirls`` runs when the first term is scalar: one, or several crossed or
nested, later terms of several columns too) against the general loop in NumPy
(``inline_scalar = False``: ``pirls_iterations`` with the family's NumPy functions and the
closed-form solve): the same iterations, states equal to rounding, and the same errors
where PIRLS fails; for every link, with and without β, lme4's stopping rule and the
η-settled one, near the optimum and far from it (step halvings)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.model.glmm.pirls import GlmmProblem, PirlsError

DATA = Path(__file__).resolve().parents[2] / "data" / "glmm"
RTOL = 1e-9


def _cbpp(link: str) -> cx.GlmerFit:
    d = pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                        family=cx.binomial(link))


def _poisson(term: str = "1") -> cx.GlmerFit:
    d = pd.read_csv(DATA / "pois_offset.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(f"count ~ x + offset(log(exposure)) + ({term} | site)", d,
                        family="poisson")


def _several(name: str) -> cx.GlmerFit:
    """Several terms: grouseticks' three scalar ones (INDEX one level per row, BROOD and
    LOCATION nested in it: the sparse lead), grouseticks' BROOD and a correlated slope
    on LOCATION (a later term of two columns), or a binary design's crossed two."""
    if name == "grouse_slope":
        d = pd.read_csv(DATA / "grouseticks.csv",
                        dtype={"INDEX": str, "BROOD": str, "LOCATION": str, "YEAR": str})
        formula, family = ("TICKS ~ YEAR + cHEIGHT + (1 + cHEIGHT | LOCATION) + "
                           "(1 | BROOD)"), "poisson"
    elif name == "grouse3":
        d = pd.read_csv(DATA / "grouseticks.csv",
                        dtype={"INDEX": str, "BROOD": str, "LOCATION": str, "YEAR": str})
        formula, family = ("TICKS ~ YEAR + cHEIGHT + (1 | BROOD) + (1 | INDEX) + "
                           "(1 | LOCATION)"), "poisson"
    else:
        d = pd.read_csv(DATA / "binary.csv")
        formula, family = "correct ~ sys + (1 | item) + (1 | grp)", "binomial"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(formula, d, family=family)


def _model(name: str) -> cx.GlmerFit:
    if name == "poisson":
        return _poisson()
    if name == "poisson_slope":  # a covariate in the term: z_c ≠ 1
        return _poisson("0 + x")
    if name == "binomial_corr":  # a first term of two columns with trials (weights)
        d = pd.read_csv(DATA / "cbpp.csv", dtype={"herd": str, "period": str})
        d["t"] = d["period"].astype(float) - 2.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cx.glmer("cbind(incidence, size - incidence) ~ t + (1 + t | herd)", d,
                            family="binomial")
    if name == "poisson_corr":  # a first term of two columns: no first factor
        d = pd.read_csv(DATA / "pois_offset.csv")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cx.glmer("count ~ x + (1 + x | site) + (1 | month)", d, family="poisson",
                            offset=np.log(d["exposure"]))
    if name in ("grouse3", "grouse_slope", "crossed2"):
        return _several(name)
    return _cbpp(name)


def _outcome(prob: GlmmProblem, x: np.ndarray, joint: bool, k: int = 1):
    try:
        with np.errstate(all="ignore"):  # (the NumPy loop's overflows far out)
            return prob.pirls(x[:k], None if joint else x[k:], joint=joint)
    except PirlsError as exc:
        return str(exc)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("model", ["logit", "probit", "cloglog", "poisson", "poisson_slope",
                                   "poisson_corr", "grouse3", "grouse_slope", "crossed2"])
def test_compiled_pirls_is_the_general_loop(model: str, joint: bool, exact: bool) -> None:
    fit = _model(model)
    k = len(fit.theta)
    compiled, general = (GlmmProblem(fit.design, fit.family) for _ in range(2))
    general.inline_scalar = False
    rng = np.random.default_rng(3)
    x0 = np.concatenate([fit.theta, fit.beta])
    points = [x0] + [x0 + rng.normal(0, s, len(x0)) for s in (1e-4, 0.3, 2.0, 6.0)]
    points += [x0 + np.r_[40.0, np.zeros(len(x0) - 1)], np.zeros(len(x0)),
               x0 + np.r_[0.0, 800.0, np.zeros(len(x0) - 2)]]  # (Poisson: maxit)
    for pr in (compiled, general):
        pr.exact = exact
        start = pr.pirls(x0[:k], None, joint=True)
        pr.set_lp0(start, joint=True)
        pr.set_lp0(start, joint=False)
    for x in points:
        a, b = _outcome(compiled, x, joint, k), _outcome(general, x, joint, k)
        if isinstance(b, str):
            assert a == b
            continue
        assert not isinstance(a, str), a
        # one term: the same iterations and states to 1e-9. Several: the loops' sums
        # differ in rounding (Xβ by rows there, by BLAS here; exp and log libm's there,
        # NumPy's here) and lme4's stopping test (a relative change of the penalised
        # deviance below 1e-7) leaves the state short of the mode, where such differences
        # carry further: states to 1e-7, and one iteration apart where the change is at
        # the threshold (then that iteration's difference, 1e-6)
        rtol = RTOL if k == 1 else 1e-7
        if k > 1 and a.iterations != b.iterations:
            assert abs(a.iterations - b.iterations) == 1
            rtol = 1e-6
        else:
            assert a.iterations == b.iterations
        for name in ("u", "beta", "eta", "mu", "sqrt_w", "diag"):
            want = getattr(b, name)
            if want is None:  # (diag: one term's alone)
                assert getattr(a, name) is None
                continue
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            np.testing.assert_allclose(getattr(a, name), want, rtol=rtol,
                                       atol=rtol * scale, err_msg=name)
        assert a.ldL2 == pytest.approx(b.ldL2, rel=rtol)
        assert compiled.laplace_of(a) == pytest.approx(general.laplace_of(b),
                                                       rel=1e-12 if rtol == RTOL else 1e-9)


@pytest.mark.parametrize("model", ["logit", "poisson"])
def test_compiled_pirls_stops_at_maxit_with_lme4s_error(model: str) -> None:
    fit = _model(model)
    prob = GlmmProblem(fit.design, fit.family)
    prob.maxit = 1
    x0 = np.concatenate([fit.theta, fit.beta])
    with pytest.raises(PirlsError, match=r"pwrssUpdate did not converge in \(maxit\)"):
        prob.pirls(x0[:1], x0[1:], joint=False)


@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("model", ["grouse_slope", "poisson_corr", "binomial_corr"])
def test_a_term_of_several_columns_is_the_blocked_cholesky_loops(model: str, joint: bool
                                                                 ) -> None:
    """The compiled loop with a term's Λθ in its columns' covariates (a later term, or
    the first, without a first factor) against the general loop on the blocked-Cholesky
    PLS (``PLS.reweighted``, no compiled structure): the states to 1e-6 (the sums'
    rounding differs, as for several scalar terms) and the conditional variances of u,
    (ℓ, 2, 2) for the slope's term, to 1e-8."""
    fit = _model(model)
    k = len(fit.theta)
    compiled, blocked = (GlmmProblem(fit.design, fit.family) for _ in range(2))
    assert compiled._kernel is not None
    blocked._scalar = blocked._kernel = None  # (the structure of terms of any columns)
    x0 = np.concatenate([fit.theta, fit.beta])
    rng = np.random.default_rng(8)
    for pr in (compiled, blocked):
        start = pr.pirls(x0[:k], None, joint=True)
        pr.set_lp0(start, joint=True)
        pr.set_lp0(start, joint=False)
    for x in [x0] + [x0 + rng.normal(0, s, len(x0)) for s in (1e-3, 0.1)]:
        a, b = _outcome(compiled, x, joint, k), _outcome(blocked, x, joint, k)
        assert not isinstance(a, str) and not isinstance(b, str)
        assert abs(a.iterations - b.iterations) <= 1
        for name in ("u", "beta", "eta", "mu"):
            want = getattr(b, name)
            np.testing.assert_allclose(getattr(a, name), want, rtol=1e-6,
                                       atol=1e-6 * float(np.max(np.abs(want))), err_msg=name)
        assert compiled.laplace_of(a) == pytest.approx(blocked.laplace_of(b), rel=1e-9)
        va, vb = compiled.cond_var(x[:k], a), blocked.cond_var(x[:k], a)
        assert [v.shape for v in va] == [v.shape for v in vb]
        assert [v.shape[1] for v in va] == [b.q for b in fit.design.random.blocks]
        for v, w in zip(va, vb, strict=True):
            np.testing.assert_allclose(v, w, rtol=1e-8)
        if joint:
            np.testing.assert_allclose(compiled.unscaled_vcov(x[:k], a),
                                       blocked.unscaled_vcov(x[:k], a), rtol=1e-8)


def test_past_later_columns_each_iteration_reweights_the_blocked_pls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Designs with more later columns than ``LATER_COLUMNS`` (grouseticks' slope term
    has 126 after BROOD) take the general loop on the blocked-Cholesky PLS, and fit to
    the compiled path's criterion."""
    from crossed.model.glmm import pirls

    fit = _model("grouse_slope")
    assert GlmmProblem(fit.design, fit.family)._kernel is not None
    monkeypatch.setattr(pirls, "LATER_COLUMNS", 125)
    prob = GlmmProblem(fit.design, fit.family)
    assert prob._scalar is None and prob._kernel is None
    assert prob.compiled_deviance(joint=True) is None
    d = pd.read_csv(DATA / "grouseticks.csv",
                    dtype={"INDEX": str, "BROOD": str, "LOCATION": str, "YEAR": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blocked = cx.glmer("TICKS ~ YEAR + cHEIGHT + (1 + cHEIGHT | LOCATION) + (1 | BROOD)",
                           d, family="poisson")
    assert blocked.criterion == pytest.approx(fit.criterion, rel=1e-9)


@pytest.mark.parametrize(("crossed_h", "compiled"), [(True, False), (False, True)])
def test_without_a_first_factor_the_first_terms_columns_must_be_sparse(
        crossed_h: bool, compiled: bool) -> None:
    """A first term of several columns is compiled only where its columns are all in the
    sparse lead: crossed with a factor each of its levels meets 25 times over, they
    would join the dense part, which the blocked PLS keeps to the later term; nested,
    they are eliminated sparsely."""
    from crossed.design import build_design
    from crossed.formula import parse

    rng = np.random.default_rng(12)
    n = 3000
    g = rng.integers(0, 100, n)
    h = rng.integers(0, 80, n) if crossed_h else g // 5
    d = pd.DataFrame({"g": [f"g{v}" for v in g], "h": [f"h{v}" for v in h],
                      "x": rng.normal(size=n), "y": rng.integers(0, 2, n)})
    design = build_design(parse("y ~ x + (1 + x | g) + (1 | h)"), d)
    prob = GlmmProblem(design, cx.binomial())
    assert design.random.blocks[0].q == 2
    assert (prob._kernel is not None) == compiled


def test_a_family_the_kernel_does_not_know_takes_the_general_loop() -> None:
    import dataclasses

    fit = _cbpp("logit")
    unknown = dataclasses.replace(fit.family.link, kernel=-1)
    family = dataclasses.replace(fit.family, link=unknown)
    prob, known = GlmmProblem(fit.design, family), GlmmProblem(fit.design, fit.family)
    assert prob._kernel is None and known._kernel is not None
    x0 = np.concatenate([fit.theta, fit.beta])
    a, b = prob.pirls(x0[:1], x0[1:], joint=False), known.pirls(x0[:1], x0[1:], joint=False)
    np.testing.assert_allclose(a.u, b.u, rtol=RTOL, atol=RTOL * float(np.max(np.abs(b.u))))


# ------------------------------------------------------------------ the compiled criterion
# A GLMM stage's compiled criterion (``GlmmProblem.compiled_deviance``: what NLopt's C loop
# evaluates for scalar terms) against the Python criterion it stands for
# (``deviance0``, ``deviance`` and the second stage's ``to_x``): the same numbers, bit for
# bit, for every link, near the optimum and far from it (failed PIRLS: +inf), each
# evaluation logged; the derivative check's batch and the mapped log points too.


def _problem(model: str) -> tuple[GlmmProblem, np.ndarray, np.ndarray]:
    fit = _model(model)
    prob = GlmmProblem(fit.design, fit.family)
    start = prob.pirls(fit.theta, None, joint=True)
    prob.set_lp0(start, joint=True)
    prob.set_lp0(start, joint=False)
    return prob, fit.theta.copy(), fit.beta.copy()


def _points(x0: np.ndarray, seed: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    points = [x0] + [x0 + rng.normal(0, s, len(x0)) for s in (1e-4, 0.3, 2.0, 6.0)]
    return points + [x0 + np.r_[40.0, np.zeros(len(x0) - 1)],
                     x0 + np.r_[0.0, 800.0, np.zeros(len(x0) - 2)]]  # (Poisson: maxit)


def _same(a: float, b: float) -> bool:
    return a == b or (np.isnan(a) and np.isnan(b))


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("model", ["logit", "probit", "cloglog", "poisson", "poisson_slope",
                                   "poisson_corr", "grouse3", "grouse_slope", "crossed2"])
def test_compiled_deviance_is_the_python_criterion(model: str, exact: bool) -> None:
    prob, theta, beta = _problem(model)
    prob.exact = exact
    k, p = len(theta), len(beta)
    first, second = prob.compiled_deviance(joint=True), prob.compiled_deviance(joint=False)
    assert first is not None and second is not None
    rng = np.random.default_rng(2)
    B, scale = rng.normal(size=(p, k)), rng.random(k) + 0.5
    R = np.ascontiguousarray(np.linalg.cholesky(np.eye(p) + 0.2))
    mapped = prob.compiled_deviance(joint=False, mapping=(theta, beta, scale, B, R))
    assert mapped is not None

    def to_x(g: np.ndarray) -> np.ndarray:  # (glmer's second-stage coordinates)
        t = scale * g[:k]
        return np.concatenate([theta + t, beta + B @ t + R @ g[k:]])

    points = _points(np.concatenate([theta, beta]))
    # (a second stage's mapped point far out, where a term of several columns' system
    # is not positive definite in floating point (μ overflows): an error on both paths,
    # as in test_a_singular_first_stage_is_linalgs_error_and_stops_nlopt; such points
    # are left out of the comparisons below)
    kept = []
    for x in points:
        g = x - points[0]
        try:
            with np.errstate(all="ignore"):
                prob.deviance(to_x(g))
        except np.linalg.LinAlgError:
            with np.errstate(all="ignore"):
                assert np.isnan(mapped(g))
            assert isinstance(mapped.error, np.linalg.LinAlgError)
            mapped.error = None
            continue
        kept.append(x)
    assert len(kept) >= len(points) - 2
    assert len(kept) == len(points) or any(b.q > 1 for b in prob.blocks)
    points = kept
    mapped.take_log()
    before = prob.evaluations
    seen = []
    with np.errstate(all="ignore"):
        for x in points:
            assert _same(first(np.ascontiguousarray(x[:k])), prob.deviance0(x[:k]))
            seen.append(second(x))
            assert _same(seen[-1], prob.deviance(x))
            g = x - points[0]
            assert _same(mapped(g), prob.deviance(to_x(g)))
        values = second.values(np.array(points))
        mapped_points = mapped.mapped(np.array(points))
        assert all(_same(v, prob.deviance(x)) for v, x in zip(values, points, strict=True))
    if model in ("poisson", "poisson_slope"):  # (PIRLS fails at maxit: the Python
        # criterion's inf)
        assert np.isinf(values[-1])
    for row, g in zip(mapped_points, points, strict=True):
        np.testing.assert_array_equal(row, to_x(g))
    # each evaluation logged, the batch not; every PIRLS counted
    logged = second.take_log()
    assert len(logged) == len(points)
    for (x, v), point, value in zip(logged, points, seen, strict=True):
        np.testing.assert_array_equal(x, point)
        assert _same(v, value)
    assert prob.evaluations - before == 3 * len(points) + 3 * len(points) + 2 * len(points)


def test_no_compiled_deviance_off_the_compiled_kernel() -> None:
    prob, _, _ = _problem("logit")
    prob.inline_scalar = False
    assert prob.compiled_deviance(joint=True) is None


def test_a_singular_first_stage_is_linalgs_error_and_stops_nlopt() -> None:
    """Where the first stage's Schur complement is not positive definite (here X with a
    repeated column), the compiled criterion keeps numpy.linalg.LinAlgError, as the
    Python path raises it: a call gives NaN and the error, NLopt's C run raises it."""
    from crossed.engines.native.optimize import Criterion, LmerControl, run_bobyqa
    from crossed.model.glmm import _scalar
    from crossed.model.glmm.scalar import ScalarSolver

    prob, theta, _ = _problem("logit")
    X = np.column_stack([prob.X, prob.X[:, 0]])
    k = prob._kernel
    crit = _scalar.ScalarDeviance(
        ScalarSolver(prob.blocks, X), prob.y, prob.wt, prob.offset, prob.lp0_joint, 1, True,
        k.link, k.thresh, k.variance, k.dev_a, k.dev_b, k.dev_c, k.dev_const,
        prob._aic_const, prob.tol, prob.maxit, False, 6, 1e-9)
    assert np.isnan(crit(np.ascontiguousarray(theta)))
    assert isinstance(crit.error, np.linalg.LinAlgError)
    crit.error = None
    with pytest.raises(np.linalg.LinAlgError):
        run_bobyqa(Criterion(lambda t: 0.0, crit), theta, np.zeros(1), LmerControl(),
                   xtol_abs=1e-8, ftol_abs=1e-8, xtol_rel=1e-4)
