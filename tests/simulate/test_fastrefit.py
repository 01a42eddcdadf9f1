"""Refitter gives the numbers of LmerFit.refit (identical arrays), only faster."""

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.simulate import Refitter

BLURB = ("score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) "
         "+ (1 | model:dataset)")
REF = {"batch_size": "32", "lr": "5e-5", "seed": "59"}


@pytest.fixture(scope="module")
def fits():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exist = cx.lmer("delta ~ language * task * mode + (1 | architecture)",
                        cx.load_dataset("exist_multi"))
        blurb = cx.lmer(BLURB, cx.load_dataset("blurb_like"), reference=REF)
        sleep = cx.lmer("Reaction ~ Days + (Days | Subject)", _sleepstudy())
    return {"exist": exist, "blurb": blurb, "sleep": sleep}


def _sleepstudy():
    return pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv",
                       dtype={"Subject": str})


def _same(a, b):
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.beta, b.beta)
    np.testing.assert_array_equal(a.vcov_beta, b.vcov_beta)
    assert a.sigma == b.sigma and a.deviance == b.deviance
    assert a.fixef_names == b.fixef_names


@pytest.mark.parametrize("name", ["exist", "blurb", "sleep"])
@pytest.mark.parametrize("check_conv", [True, False])
def test_new_response_identical_to_refit(fits, name, check_conv):
    """Without the check, the reference is a fit with the same control (check_conv=False)
    from the fit's θ, as a refit starts: a failed check is what continues the optimiser
    (engines/native/converge.py)."""
    from crossed.engines.native.engine import fit_native

    fit = fits[name]
    ys = fit.simulate(3, seed=5).to_numpy()
    fast = Refitter(fit, check_conv=check_conv)

    def reference(y=None, reml=None):
        if check_conv:
            return fit.refit(y, reml=reml)
        design = fit.design if y is None else fit.design.with_response(y)
        return fit_native(design, fit.reml if reml is None else reml, fast.control,
                          warm=fit.theta)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(ys.shape[1]):
            _same(reference(ys[:, i]), fast.refit(ys[:, i]))
        _same(reference(reml=False), fast.refit(reml=False))


@pytest.mark.parametrize("name", ["exist", "blurb"])
def test_row_subsets_identical_to_refit(fits, name):
    fit = fits[name]
    rng = np.random.default_rng(3)
    fast = Refitter(fit, check_conv=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            keep = rng.random(fit.nobs) > 0.2
            y = rng.normal(size=int(keep.sum()))
            _same(fit.refit(rows=keep), fast.refit(rows=keep))
            _same(fit.refit(y=y, rows=keep), fast.refit(y=y, rows=keep))


def test_refitter_skips_only_the_check(fits):
    fit = fits["blurb"]
    y = fit.simulate(1, seed=1)["sim_1"].to_numpy()
    plain = Refitter(fit, check_conv=False).refit(y)
    checked = Refitter(fit, check_conv=True).refit(y)
    assert plain.opt.gradient is None and checked.opt.gradient is not None
    if checked.opt.restarts:  # the failed check continued the optimiser: never worse
        assert checked.deviance <= plain.deviance
    else:
        _same(plain, checked)


def test_new_responses_share_the_reparametrisation(monkeypatch):
    """A slope far from zero: the optimiser's problem is reparametrised (rescale.py). The
    refits with new responses read it from the fit's rows (``PLS.rows_memo``) instead of
    computing it again, with the numbers of a refit that computes it."""
    from crossed.engines.native import engine

    data = _sleepstudy().assign(Days=lambda d: d["Days"] + 50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("Reaction ~ Days + (Days | Subject)", data)
    assert fit.opt.rescaled is not None
    calls = []
    real = engine.reparametrisation
    monkeypatch.setattr(engine, "reparametrisation",
                        lambda *args: calls.append(1) or real(*args))
    fast = Refitter(fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for y in fit.simulate(3, seed=2).to_numpy().T:
            _same(fast.refit(y=y), fit.refit(y))
    assert len(calls) == 3  # fit.refit's fresh problems alone
