"""Internal state of a fit: caches never shared between results, caller's arrays untouched."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import warnings

import numpy as np
import pytest

import crossed as cx
from reference import fit_case


@pytest.fixture(scope="module")
def fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_case("sleepstudy_slopes")


def _fresh_factor(f: cx.LmerFit):
    """The factorisation at ``f.theta`` computed from scratch (no cache involved)."""
    from crossed.model.pls import PLS

    d = f.design
    return PLS(d.random.blocks, d.X, d.y).factor(f.theta)


def test_replace_starts_from_an_empty_cache(fit):
    assert fit.factor_at_optimum is not None  # fills the cache
    assert "factor" in fit._cache
    other = dataclasses.replace(fit, theta=fit.theta * 0.5)
    assert other._cache is not fit._cache
    assert "factor" not in other._cache
    # the factorisation of the new result is at its own theta, not the old one's
    assert other.factor_at_optimum.ldL2 == pytest.approx(_fresh_factor(other).ldL2, rel=1e-12)
    assert other.factor_at_optimum.ldL2 != pytest.approx(fit.factor_at_optimum.ldL2, rel=1e-6)


def test_replace_with_new_response_rebuilds_the_pls(fit):
    assert fit.pls is not None  # fills the cache
    y2 = fit.design.y + 100.0
    other = dataclasses.replace(fit, design=fit.design.with_response(y2))
    np.testing.assert_array_equal(other.pls.y, y2)
    np.testing.assert_array_equal(fit.pls.y, fit.design.y)


def test_cache_is_not_a_constructor_argument(fit):
    with pytest.raises((TypeError, ValueError), match="_cache"):
        dataclasses.replace(fit, _cache={})


@pytest.mark.parametrize("clone", [copy.copy, copy.deepcopy,
                                   lambda f: pickle.loads(pickle.dumps(f))],
                         ids=["copy", "deepcopy", "pickle"])
def test_copies_get_their_own_cache(fit, clone):
    assert fit.factor_at_optimum is not None
    other = clone(fit)
    assert other._cache is not fit._cache
    assert other._cache == {}
    other._cache["marker"] = 1
    assert "marker" not in fit._cache
    # the copy still works: same estimates, its own factorisation on demand
    np.testing.assert_array_equal(other.beta, fit.beta)
    assert other.factor_at_optimum.ldL2 == pytest.approx(fit.factor_at_optimum.ldL2, rel=1e-12)
    pd_ranef = other.ranef()
    assert np.isfinite(pd_ranef["cond_sd"]).all()


def test_the_cache_is_written_by_the_fit_alone(fit):
    """Derived quantities go through ``fit.memo`` (the fit's own method); the PLS problem
    is the design's (``PLS.of``), shared with the engine; the wall time is a field."""
    from crossed.model.pls import PLS

    assert fit.pls is PLS.of(fit.design)
    assert fit.fit_seconds is not None and fit.fit_seconds > 0
    fit.coef_table()
    assert "satterthwaite" in fit._cache
    calls = []
    assert fit.memo("x", lambda: calls.append(1) or 7) == 7
    assert fit.memo("x", lambda: calls.append(1) or 8) == 7 and calls == [1]
    with pytest.raises(TypeError):
        fit.engine_info["anything"] = 1  # read-only


def test_refit_leaves_the_callers_response_writeable(fit):
    y = np.array(fit.design.y, dtype=float) + 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        re = fit.refit(y=y)
    assert y.flags.writeable
    y[0] = -1.0  # the caller can still change its array ...
    assert re.design.y[0] != -1.0  # ... without changing the refit's data
    assert not re.design.y.flags.writeable


def test_refitter_leaves_the_callers_response_writeable(fit):
    from crossed.simulate import Refitter

    y = np.array(fit.design.y, dtype=float) + 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Refitter(fit).refit(y=y)
    assert y.flags.writeable
