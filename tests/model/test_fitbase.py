"""What ``FitBase`` gives every fit: tables that are copies, never views of the fit's
read-only arrays (pandas 2 wraps an ndarray without copying it, pandas 3 copies)."""

from __future__ import annotations

import pickle

import numpy as np

from reference import fit_case


def test_fixef_and_vcov_do_not_share_the_fits_arrays():
    fit = fit_case("dyestuff")
    fixef, vcov = fit.fixef, fit.vcov
    assert not np.shares_memory(fixef.to_numpy(), fit.beta)
    assert not np.shares_memory(vcov.to_numpy(), fit.vcov_beta)
    fixef.iloc[0] = 0.0
    vcov.iloc[0, 0] = 0.0
    assert fit.fixef.iloc[0] != 0.0 and fit.vcov.iloc[0, 0] != 0.0


def test_an_unpickled_lmer_fit_is_read_only_too():
    fit = pickle.loads(pickle.dumps(fit_case("dyestuff")))
    for arr in (fit.theta, fit.beta, fit.vcov_beta, *fit.u):
        assert not arr.flags.writeable


def test_read_only_walks_tuples_and_skips_other_values():
    from crossed.model.fitbase import read_only

    a, b = np.zeros(2), np.ones(3)
    read_only((a, (b,)), None, 1.0)
    assert not a.flags.writeable and not b.flags.writeable
