"""``specs.item_level`` (the crossed item-level GLMM specification), the IRT generator
``datasets.item_level_irt`` and ``compare_engines`` on GLMMs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed import specs
from crossed.datasets import item_level_irt
from crossed.evaluation.compare_engines import compare_engines, format_comparison


def test_formulas():
    s = specs.item_level("correct", systems="system", items="item")
    assert str(s) == "correct ~ system + (1 | item)"
    assert s.family == "binomial" and s.design == "item_level"
    g = specs.item_level("correct", systems="model", items="question", groups="dataset")
    assert str(g) == "correct ~ model + (1 | dataset/question)"
    assert [t for t, _ in g.terms] == ["model", "(1 | dataset)", "(1 | dataset:question)"]
    assert "odds ratios" in g.explain()


def test_by_name_and_resolve():
    s = specs.from_name("item_level", outcome="y", systems="sys", items="it", groups="ds")
    assert str(s) == "y ~ sys + (1 | ds/it)"
    assert specs.resolve_formula("item_level:outcome=y;systems=sys;items=it") == \
        "y ~ sys + (1 | it)"
    assert "item_level" in specs.list_named()


@pytest.mark.parametrize("kwargs, message", [
    ({"family": "gaussian"}, "family must be"),
    ({"items": "a/b"}, "one column name"),
    ({"systems": ""}, "systems must be a column name"),
])
def test_bad_fields(kwargs, message):
    with pytest.raises(ValueError, match=message):
        specs.item_level("correct", **kwargs)


def test_code_in_fields_refused():
    with pytest.raises(ValueError):
        specs.item_level("correct", systems="__import__('os').system('x')")


def test_generator_deterministic():
    a = item_level_irt(n_systems=3, n_items=20, n_datasets=2, seed=5)
    b = item_level_irt(n_systems=3, n_items=20, n_datasets=2, seed=5)
    pd.testing.assert_frame_equal(a, b)
    assert a.shape == (3 * 20 * 2, 4)
    assert set(a["correct"]) <= {0, 1}
    assert a.groupby(["system", "item"]).size().eq(1).all()   # fully crossed
    assert not a.equals(item_level_irt(n_systems=3, n_items=20, n_datasets=2, seed=6))
    with pytest.raises(ValueError, match="n_items"):
        item_level_irt(n_items=0)


def test_fit_recovers_abilities():
    d = item_level_irt(n_systems=4, n_items=150, n_datasets=2, seed=3,
                       discrimination_sd=0.0)
    spec = specs.item_level("correct", systems="system", items="item", groups="dataset")
    with warnings.catch_warnings():  # 2 datasets: the dataset SD may be estimated at 0
        warnings.simplefilter("ignore")
        fit = spec.fit(d)
    assert isinstance(fit, cx.GlmerFit) and fit.family.name == "binomial"
    truth = np.array(list(d.attrs["ability"].values()))
    est = np.r_[0.0, fit.beta[1:]]
    se = np.r_[0.0, np.sqrt(np.diag(fit.vcov_beta))[1:]]
    # system contrasts against the first: within 3.5 SE of the generating ones
    assert np.all(np.abs(est - (truth - truth[0])) < 3.5 * se + 1e-12)
    vc = fit.varcorr().set_index("group")["sd_or_cor"]
    assert 0.8 < vc["item:dataset"] < 1.6      # difficulty_sd = 1.2


def test_compare_engines_glmm():
    cb = pd.read_csv("tests/data/glmm/cbpp.csv", dtype={"herd": str, "period": str})
    tab = compare_engines("cbind(incidence, size - incidence) ~ period + (1 | herd)", cb,
                          engines=["native", "statsmodels"], family="binomial")
    assert "variational Bayes" in tab.attrs["errors"]["statsmodels"]
    assert "sigma" not in set(tab["quantity"])
    crit = tab[tab["quantity"] == "criterion"]
    assert crit["term"].iloc[0] == "-2 log-likelihood (Laplace)"
    # lme4 1.1-31 glmer on cbpp: -2 logLik = 184.0531 (tests/data/glmm/glmm_core.json)
    assert crit["native"].iloc[0] == pytest.approx(184.05313, abs=1e-4)
    assert "(GLMM, binomial)" in format_comparison(tab)
