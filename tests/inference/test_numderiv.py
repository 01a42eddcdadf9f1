"""numDeriv's Richardson scheme (``inference/numderiv.py``), on functions with known
derivatives: every point is evaluated in one call."""

from __future__ import annotations

import numpy as np

from crossed.inference.numderiv import central_derivatives, mixed_second


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
