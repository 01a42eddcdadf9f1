"""Thread control (_threads.py): the native engine's helper thread and its uses."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from crossed import _threads
from crossed.engines.native.optimize import derivatives


@pytest.fixture
def helper_on():
    _threads.use_helper_thread(True)
    yield
    _threads.use_helper_thread(None)


def test_map_on_two_threads_keeps_order_and_does_not_nest(helper_on):
    seen = []

    def fn(x):
        seen.append((threading.current_thread().name, _threads.helper_thread()))
        return x * x

    assert _threads.map_on_two_threads(fn, list(range(7))) == [x * x for x in range(7)]
    names = {name for name, _ in seen}
    assert len(names) == 2  # the caller and the helper
    assert all(pool is None for _, pool in seen)  # neither hands work on inside fn
    assert _threads.helper_thread() is not None  # and the caller may use it again


def test_helper_can_be_turned_off():
    _threads.use_helper_thread(False)
    try:
        assert _threads.helper_thread() is None
        names = set()
        _threads.map_on_two_threads(lambda x: names.add(threading.current_thread().name),
                                    [1, 2, 3])
        assert names == {threading.current_thread().name}
    finally:
        _threads.use_helper_thread(None)


def test_derivatives_the_same_on_two_threads(helper_on):
    """lme4's deriv12 points evaluated two at a time: the same gradient and Hessian."""
    def fun(x):
        return float(np.sum(x**4) + x[0] * x[1] - np.prod(np.cos(x)))

    x = np.array([0.3, -0.2, 1.1])
    free = np.ones(3, dtype=bool)
    g1, H1 = derivatives(fun, x, free, fun(x))
    g2, H2 = derivatives(fun, x, free, fun(x),
                         evaluate=lambda pts: _threads.map_on_two_threads(fun, pts))
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(H1, H2)
    expected_g = 4 * x**3 + np.array([x[1], x[0], 0.0]) + np.sin(x) * np.prod(np.cos(x)) / np.cos(x)
    np.testing.assert_allclose(g1, expected_g, rtol=1e-6)
