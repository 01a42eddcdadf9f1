"""Memory of the simulated-residual diagnostics: simulations in chunks, large fits subsampled.

``crossed report`` on 1M rows used to peak at 6.2 GB (the fit: 0.43 GB) because ``check``
held dense nobs × nsim arrays. These tests pin the logic that prevents it on small data
(the 1M-row measurement itself is in the branch report, not in the suite).
"""

import numpy as np
import pytest
from _simdata import small_design
from scipy import stats

import crossed as cx
from crossed.simulate import diagnostics as dg


@pytest.fixture(scope="module")
def wide_truth():
    """A specified model on 3,000 observations (100 groups of 30)."""
    return cx.specify("y ~ x + (1 | g)", small_design(100, 30),
                      fixef={"(Intercept)": 1.0, "x": 0.5}, varcorr={"g": 0.8}, sigma=1.0)


def _recording(monkeypatch):
    calls = []
    real = dg.simulate_responses

    def spy(fit, nsim=1, seed=None, use_ranef=False):
        out = real(fit, nsim, seed, use_ranef=use_ranef)
        calls.append(out.shape)
        return out

    monkeypatch.setattr(dg, "simulate_responses", spy)
    return calls


def test_chunk_size_bounds_the_simulated_values():
    assert dg.chunk_size(1_000_000, 250) * 1_000_000 <= dg.CHUNK_ELEMENTS
    assert dg.chunk_size(10_000_000, 250) == 1        # never fewer than one simulation
    assert dg.chunk_size(100, 250) == 250              # small fits: one draw, as before
    assert dg.chunk_size(0, 10) == 10


def test_no_nobs_by_nsim_array_on_a_large_design(monkeypatch, wide_truth):
    # a "large" fit scaled down: 3,000 rows, chunks of 6,000 values, at most 500 rows kept
    monkeypatch.setattr(dg, "CHUNK_ELEMENTS", 6_000)
    calls = _recording(monkeypatch)
    y = wide_truth.simulate(1, seed=1)["sim_1"].to_numpy()
    model = wide_truth.refit(y)
    res = dg.simulate_residuals(model, nsim=250, seed=2, max_rows=500)
    assert calls and all(shape == (3_000, 2) for shape in calls)
    assert sum(shape[1] for shape in calls) == 250
    assert res.simulated.shape == (500, 250)          # rows kept × nsim, not nobs × nsim
    assert res.subsampled and res.nobs == 3_000
    assert np.all(np.diff(res.rows) > 0)               # sorted, no repeats
    np.testing.assert_array_equal(res.observed, y[res.rows])
    np.testing.assert_allclose(res.predicted, (model.design.X @ model.beta)[res.rows])
    assert "500 of the 3,000" in res.describe_rows()
    # identical seeds, identical residuals
    again = dg.simulate_residuals(model, nsim=250, seed=2, max_rows=500)
    np.testing.assert_array_equal(res.scaled, again.scaled)


def test_chunked_residuals_are_uniform_for_the_true_parameters(monkeypatch, wide_truth):
    # the residuals against the truth itself are an exact PIT, chunked or not
    monkeypatch.setattr(dg, "CHUNK_ELEMENTS", 9_000)
    y = wide_truth.simulate(1, seed=3)["sim_1"].to_numpy()
    res = dg.simulate_residuals(wide_truth.refit(y), nsim=99, seed=4, max_rows=None)
    assert res.rows is None and res.scaled.shape == (3_000,)
    assert stats.kstest(res.scaled, "uniform").pvalue > 1e-3


def test_check_states_the_subsample(monkeypatch, wide_truth):
    monkeypatch.setattr(dg, "CHUNK_ELEMENTS", 30_000)
    y = wide_truth.simulate(1, seed=5)["sim_1"].to_numpy()
    diag = dg.check(wide_truth.refit(y), nsim=50, seed=1, max_rows=1_000)
    assert all("random subsample of 1,000 of the 3,000" in m for m in diag.tests["method"])
    assert "random subsample of 1,000 of the 3,000 observations" in str(diag)
    assert np.all((diag.tests["p_value"] >= 0) & (diag.tests["p_value"] <= 1))


def test_small_fits_use_every_row_in_one_draw(monkeypatch, truth):
    calls = _recording(monkeypatch)
    res = dg.simulate_residuals(truth, nsim=99, seed=1)
    assert calls == [(truth.nobs, 99)] and res.rows is None
    assert "subsample" not in str(dg.check(truth, nsim=20, seed=1))
