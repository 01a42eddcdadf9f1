"""numDeriv's Richardson scheme (``inference/numderiv.py``, compiled in ``_hessian.pyx``),
on functions with known derivatives (every point is evaluated in one call), and against
the interpreted scheme it replaced, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from crossed.inference.numderiv import ZERO_TOL, central_derivatives, mixed_second


def _f(points: np.ndarray) -> np.ndarray:
    """(exp(x₀) sin(x₁), x₀² x₁³ + x₂, x₀ x₁ x₂) at each row."""
    x0, x1, x2 = points.T
    return np.stack([np.exp(x0) * np.sin(x1), x0**2 * x1**3 + x2, x0 * x1 * x2], axis=1)


def test_derivatives_along_each_coordinate_are_exact_to_richardson_accuracy():
    x = np.array([0.3, -1.2, 0.0])  # (x₂ = 0: numDeriv's absolute step there)
    calls = []

    def counted(points):
        calls.append(len(points))
        return _f(points)

    f0, first, second = central_derivatives(counted, x)
    assert calls == [1 + 2 * 3 * 4]  # (x, then x ± h e_i at four steps: one call)
    np.testing.assert_allclose(f0, _f(x[None])[0], rtol=0, atol=0)
    x0, x1, x2 = x
    jac = np.array([[np.exp(x0) * np.sin(x1), np.exp(x0) * np.cos(x1), 0.0],
                    [2 * x0 * x1**3, 3 * x0**2 * x1**2, 1.0],
                    [x1 * x2, x0 * x2, x0 * x1]])
    pure = np.array([[np.exp(x0) * np.sin(x1), -np.exp(x0) * np.sin(x1), 0.0],
                     [2 * x1**3, 6 * x0**2 * x1, 0.0],
                     [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(first, jac, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(second, pure, rtol=1e-7, atol=1e-7)


def test_mixed_second_gives_the_full_hessian_in_one_call():
    x = np.array([0.3, -1.2, 0.5])
    _, _, second = central_derivatives(_f, x)
    calls = []

    def g(points):
        calls.append(len(points))
        return _f(points)[:, 1]  # x₀² x₁³ + x₂

    H = mixed_second(g, x, second[1], float(_f(x[None])[0, 1]))
    assert calls == [2 * 3 * 4]  # (three pairs, four steps, ±)
    x0, x1, _ = x
    expected = np.array([[2 * x1**3, 6 * x0 * x1**2, 0.0],
                         [6 * x0 * x1**2, 6 * x0**2 * x1, 0.0],
                         [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(H, expected, rtol=1e-7, atol=1e-7)
    assert np.array_equal(H, H.T)


def test_one_coordinate_has_no_mixed_terms():
    H = mixed_second(lambda p: p[:, 0] ** 3, np.array([2.0]), np.array([12.0]), 8.0)
    np.testing.assert_array_equal(H, [[12.0]])


# ---------------------------------------------------------------- the interpreted scheme
# numDeriv's genD, written out with NumPy (the code the compiled scheme replaced): the
# compiled differences must be its numbers to the last bit.

def _steps(x, d, eps):
    return np.abs(d * x) + eps * (np.abs(x) < ZERO_TOL)


def _richardson(a, v):
    r = a.shape[-1]
    for m in range(1, r):
        four = (v * v) ** m
        a = (a[..., 1: r - m + 1] * four - a[..., : r - m]) / (four - 1.0)
    return a[..., 0]


def _interpreted_central(fun, x, d, eps, r, v):
    n = len(x)
    steps = np.empty((n, r))
    steps[:, 0] = _steps(x, d, eps)
    for k in range(1, r):
        steps[:, k] = steps[:, k - 1] / v
    points = [x.copy()]
    for i in range(n):
        for k in range(r):
            for sign in (1.0, -1.0):
                point = x.copy()
                point[i] += sign * steps[i, k]
                points.append(point)
    values = np.asarray(fun(np.array(points)), dtype=float)
    f0 = values[0]
    rest = values[1:].reshape(n, r, 2, -1)
    fp, fm, h = rest[:, :, 0], rest[:, :, 1], steps[:, :, None]
    first = _richardson(((fp - fm) / (2 * h)).transpose(0, 2, 1), v).T
    second = _richardson(((fp - 2 * f0 + fm) / (h * h)).transpose(0, 2, 1), v).T
    return f0, first, second


def _interpreted_mixed(fun, x, diag, f0, d, eps, r, v):
    n = len(x)
    H = np.diag(diag)
    hs = _steps(x, d, eps)[None, :] / np.array([v**k for k in range(r)])[:, None]
    pairs = [(i, j) for i in range(n) for j in range(i)]
    points = []
    for i, j in pairs:
        for k in range(r):
            for sign in (1.0, -1.0):
                point = x.copy()
                point[i] += sign * hs[k, i]
                point[j] += sign * hs[k, j]
                points.append(point)
    if not pairs:
        return H
    values = np.asarray(fun(np.array(points)), dtype=float).reshape(len(pairs), r, 2)
    for p, (i, j) in enumerate(pairs):
        hi, hj = hs[:, i], hs[:, j]
        fp, fm = values[p, :, 0], values[p, :, 1]
        approx = (fp - 2 * f0 + fm - H[i, i] * hi * hi - H[j, j] * hj * hj) / (2 * hi * hj)
        H[i, j] = H[j, i] = _richardson(approx, v)
    return H


def _random_function(rng, n):
    """A smooth function of n coordinates with three outputs of unequal scales."""
    W = rng.normal(size=(n, 3)) * np.exp(rng.normal(0, 2, 3))
    c = rng.normal(size=3)

    def f(points):
        z = points @ W
        return np.stack([np.exp(0.1 * z[:, 0]) * c[0], np.sin(z[:, 1]) + z[:, 2] ** 3,
                         np.log1p(z[:, 0] ** 2) * 1e5], axis=1)
    return f


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_scheme_gives_the_interpreted_numbers_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    x = rng.normal(size=n) * np.exp(rng.normal(0, 3, n))
    x[rng.random(n) < 0.2] = 0.0  # (numDeriv's absolute step)
    d, eps, r, v = ((0.1, 1e-4, 4, 2.0) if seed % 2 else
                    (float(rng.uniform(0.01, 0.3)), 1e-3, int(rng.integers(1, 6)), 3.0))
    f = _random_function(rng, n)
    got = central_derivatives(f, x, d, eps, r, v)
    want = _interpreted_central(f, x, d, eps, r, v)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    diag, f0 = got[2][2], got[0][2]
    g = (lambda points: f(points)[:, 2])  # noqa: E731
    np.testing.assert_array_equal(mixed_second(g, x, diag, f0, d, eps, r, v),
                                  _interpreted_mixed(g, x, diag, f0, d, eps, r, v))


def test_a_function_giving_the_wrong_number_of_values_is_an_error():
    with pytest.raises(ValueError, match="for 25 points"):
        central_derivatives(lambda p: p[:3], np.zeros(3))
    with pytest.raises(ValueError, match="not one"):
        mixed_second(lambda p: p, np.zeros(2), np.ones(2), 0.0)
