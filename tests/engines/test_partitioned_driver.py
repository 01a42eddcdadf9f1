"""The driver's side of fits on partitioned data (crossed.engines.partitioned) that needs
no cluster: PIRLS's stopping rule applied to the summed iterations of local PIRLS.
(Fits on a cluster: tests/engines/test_dask_fit.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from crossed.engines.partitioned import stopping_iteration
from crossed.model.glmm.pirls import ETA_TOL
from crossed.model.partitioned import LocalPirlsSums


def sums(pdev: list[float], step: list[float]) -> LocalPirlsSums:
    k = len(pdev)
    return LocalPirlsSums(np.array(pdev, dtype=float), np.zeros(k), np.zeros(k),
                          np.array(step, dtype=float), np.ones(k))


def test_lme4_s_rule_stops_at_the_first_small_relative_change():
    s = sums([100.0, 90.0, 89.99, 89.99 - 1e-6, 89.99 - 1e-6 - 1e-12],
             [1.0, 0.1, 1e-3, 1e-7, 1e-13])
    assert stopping_iteration(s, 1e-7, 100, exact=False) == 4
    # exact: on until η has settled (its step below ETA_TOL)
    assert stopping_iteration(s, 1e-7, 100, exact=True) == 5
    assert 1e-13 <= ETA_TOL * 2


def test_a_settled_series_is_carried_on():
    """Where the partitions settled before the rule stops, their last values stand for
    the iterations after (they would repeat them)."""
    s = sums([100.0, 90.0], [1.0, 0.5])
    assert stopping_iteration(s, 1e-7, 100, exact=False) == 3


@pytest.mark.parametrize("pdev", [[100.0, 90.0, 95.0, 94.0], [100.0, np.nan, 90.0]])
def test_a_step_the_rule_would_halve_asks_for_the_general_loop(pdev):
    s = sums(pdev, [1.0] * len(pdev))
    assert stopping_iteration(s, 1e-7, 100, exact=False) is None


def test_no_convergence_within_maxit_asks_for_the_general_loop():
    s = sums([100.0, 90.0, 80.0, 70.0], [1.0] * 4)
    assert stopping_iteration(s, 1e-7, 3, exact=False) is None
