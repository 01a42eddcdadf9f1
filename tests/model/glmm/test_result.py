"""``GlmerFit`` as an immutable result: its arrays are read-only and the tables it returns
are copies the user may change (as ``LmerFit``'s, tests/test_fit_result.py)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx


@functools.cache
def _fit() -> cx.GlmerFit:
    rng = np.random.default_rng(3)
    n = 240
    d = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice([f"g{i}" for i in range(10)], n)})
    d["y"] = (rng.random(n) < 1 / (1 + np.exp(-0.5 * d["x"]))).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer("y ~ x + (1 | g)", d, family="binomial")


def _arrays(fit: cx.GlmerFit) -> dict[str, np.ndarray]:
    out = {name: getattr(fit, name) for name in
           ("theta", "beta", "vcov_beta", "linear_predictor", "eta")}
    out |= {f"u[{i}]": a for i, a in enumerate(fit.u)}
    out |= {f"cond_var_u[{i}]": a for i, a in enumerate(fit.cond_var_u)}
    return out


@pytest.mark.parametrize("how", ["fitted", "pickled", "copied", "replaced"])
def test_every_array_is_read_only(how: str) -> None:
    fit = _fit()
    if how == "pickled":
        fit = pickle.loads(pickle.dumps(fit))
    elif how == "copied":
        fit = copy.deepcopy(fit)
    elif how == "replaced":
        fit = dataclasses.replace(fit, beta=np.array(fit.beta))
    for name, arr in _arrays(fit).items():
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            arr.flat[0] = 99.0


def test_changing_beta_cannot_change_fixef() -> None:
    fit = _fit()
    before = fit.fixef.copy()
    with pytest.raises(ValueError):
        fit.beta[0] = 99.0
    pd.testing.assert_series_equal(fit.fixef, before)


def test_returned_tables_are_copies_the_user_may_change() -> None:
    fit = _fit()
    before = (fit.fixef.copy(), fit.vcov.copy(), fit.ranef(), fit.varcorr())
    fixef, vcov, re_, vc = fit.fixef, fit.vcov, fit.ranef(), fit.varcorr()
    # not views of the fit's arrays (pandas 2 wraps an array without copying it, and
    # then refuses the assignment: "assignment destination is read-only")
    assert not np.shares_memory(fixef.to_numpy(), fit.beta)
    assert not np.shares_memory(vcov.to_numpy(), fit.vcov_beta)
    fixef.iloc[0] = 0.0
    vcov.iloc[0, 0] = -1.0
    re_.loc[0, "estimate"] = -1.0
    vc.loc[0, "variance_or_cov"] = -1.0
    pd.testing.assert_series_equal(fit.fixef, before[0])
    pd.testing.assert_frame_equal(fit.vcov, before[1])
    pd.testing.assert_frame_equal(fit.ranef(), before[2])
    pd.testing.assert_frame_equal(fit.varcorr(), before[3])
