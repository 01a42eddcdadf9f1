"""lme4's derivative check (model/convergence.py): deriv12's points, gradient and Hessian.

crossed evaluates the points of lme4 1.1-31's ``deriv12`` (``lme4:::deriv12``): for each
coordinate a, x ± δe_a, then for each earlier coordinate b the four corners
x ± δe_a ± δe_b. It combines them as central differences, g_a = (f₊ − f₋) / (2δ),
H_aa = (f₊ − 2f + f₋) / δ², H_ab = (f₊₊ − f₊₋ − f₋₊ + f₋₋) / (4δ²); lme4 divides each
term by δ² (or (2δ)²) before adding them: the gradients are the same, the Hessians differ
by about 1e-6 relative (sleepstudy, blurb_like). ``_deriv12`` below is that computation
point by point.
"""

from __future__ import annotations

import numpy as np
import pytest

from crossed.model.convergence import derivatives


def _deriv12(fun, x, free, fx, delta=1e-4):
    """The module docstring's derivatives, point by point over the free coordinates."""
    idx = np.flatnonzero(free).tolist()
    m = len(idx)
    g, H, seen = np.zeros(m), np.zeros((m, m)), []

    def at(point):
        seen.append(point.copy())
        return fun(point)

    for a, i in enumerate(idx):
        xadd, xsub = x.copy(), x.copy()
        xadd[i] += delta
        xsub[i] -= delta
        fadd, fsub = at(xadd), at(xsub)
        H[a, a] = (fadd - 2 * fx + fsub) / delta**2
        g[a] = (fadd - fsub) / (2 * delta)
        for b in range(a):
            j = idx[b]
            xaa, xas, xsa, xss = xadd.copy(), xadd.copy(), xadd.copy(), xadd.copy()
            xaa[j] = x[j] + delta
            xas[j] = x[j] - delta
            xsa[i], xsa[j] = x[i] - delta, x[j] + delta
            xss[i], xss[j] = x[i] - delta, x[j] - delta
            H[a, b] = H[b, a] = (at(xaa) - at(xas) - at(xsa) + at(xss)) / (4 * delta**2)
    return g, H, seen


def _fun(t):
    return float(np.sum(np.cos(3.0 * t)) + np.prod(t + 2.0) + 7.0 * t[0] * t[-1] ** 3)


@pytest.mark.parametrize("free", [[True] * 4, [True, False, True, True], [False, True, False,
                                                                          False], [False] * 4])
@pytest.mark.parametrize("batched", [False, True])
def test_derivatives_are_deriv12(free, batched):
    """The points (in the order of the module docstring: each corner as (a, b) signs
    (+, +), (+, −), (−, +), (−, −)), the gradient and the Hessian are those of the
    point-by-point computation, bit for bit, whether the points are evaluated one by one or
    in one batch."""
    x = np.array([0.7, -0.31, 1.9, 0.05])
    free = np.array(free)
    fx = _fun(x)
    g0, H0, points0 = _deriv12(_fun, x, free, fx)
    seen = []

    def one(point):
        seen.append(point.copy())
        return _fun(point)

    def many(points):
        seen.extend(p.copy() for p in points)
        return np.array([_fun(p) for p in points])

    g, H = derivatives(one, x, free, fx, fun_many=many if batched else None)
    np.testing.assert_array_equal(np.array(seen).reshape(-1, 4),
                                  np.array(points0).reshape(-1, 4))
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(H, H0)
    assert g.shape == (free.sum(),) and H.shape == (free.sum(),) * 2


def _small_criterion(fallback=None):
    """sleepstudy's REML criterion as a compiled function of θ (``SmallCriterion``)."""
    import crossed as cx
    from crossed.model.pls import PLS

    design = cx.lmer("Reaction ~ Days + (Days | Subject)",
                     cx.load_dataset("sleepstudy")).design
    pls = PLS.of(design)
    crit = pls.compiled_criterion(True, 0.25, fallback or (lambda t: pls.objective(t, True)))
    assert crit is not None
    return crit


@pytest.mark.parametrize("x", [[0.9667, 0.0152, 0.2309], [1.3, -0.4, 0.05], [0.2, 0.0, 0.0]])
def test_compiled_deriv12_is_deriv12_of_the_compiled_criterion(x):
    """``LoggedObjective.deriv12`` (the check's compiled call) evaluates deriv12's points
    and combines them as the point-by-point computation does, bit for bit, and logs none
    of them."""
    crit = _small_criterion()
    x = np.array(x)
    fx = crit(x)
    crit.take_log()
    g0, H0, _ = _deriv12(crit, x, np.ones(3, dtype=bool), fx)
    crit.take_log()
    g, H = np.full(3, np.nan), np.full((3, 3), np.nan)
    assert crit.deriv12(x, fx, 1e-4, g, H)
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(H, H0)
    assert crit.take_log() == []


def test_compiled_deriv12_reports_the_criterions_error():
    """An evaluation that fails (here the fallback at a θ that is not finite) ends the
    call with False and the error kept; ``assess`` raises it."""
    from crossed.model.control import LmerControl
    from crossed.model.convergence import assess

    class Broken(RuntimeError):
        pass

    def fallback(theta):
        raise Broken("no value here")

    crit = _small_criterion(fallback)
    x = np.array([1.0, np.inf, 0.2])
    g, H = np.empty(3), np.empty((3, 3))
    assert not crit.deriv12(x, 1.0, 1e-4, g, H)
    assert isinstance(crit.error, Broken)
    crit.error = None
    with pytest.raises(Broken, match="no value here"):
        assess(x, 1.0, np.array([0.0, -np.inf, 0.0]), LmerControl(), lambda t: 0.0,
               compiled=crit)
    assert crit.error is None
    with pytest.raises(ValueError, match="3 parameters"):
        crit.deriv12(np.zeros(2), 1.0, 1e-4, np.empty(2), np.empty((2, 2)))
