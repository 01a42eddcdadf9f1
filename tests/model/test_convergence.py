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
