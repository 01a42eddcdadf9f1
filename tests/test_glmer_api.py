"""cx.glmer's inputs: response kinds, weights/offset, bad input refused naming the column,
engines without GLMMs refused."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.design.frame import DataError
from crossed.engines import UnsupportedModelError, fit_glmm_with
from crossed.formula import parse
from crossed.formula.grammar import FormulaError


def _binary(n: int = 240, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    item = rng.integers(0, 12, n)
    x = rng.normal(size=n)
    b = rng.normal(0, 0.7, 12)
    y = rng.random(n) < 1 / (1 + np.exp(-(0.2 + 0.8 * x + b[item])))
    return pd.DataFrame({"y": y.astype(int), "x": x, "item": [f"i{k:02d}" for k in item]})


def _fit(*args: object, **kw: object) -> cx.GlmerFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer(*args, **kw)  # type: ignore[arg-type]


def test_boolean_and_factor_responses_equal_0_1() -> None:
    d = _binary()
    base = _fit("y ~ x + (1 | item)", d)
    as_bool = _fit("y ~ x + (1 | item)", d.assign(y=d["y"] == 1))
    as_factor = _fit("y ~ x + (1 | item)", d.assign(y=np.where(d["y"] == 1, "yes", "no")))
    for f in (as_bool, as_factor):
        np.testing.assert_allclose(f.beta, base.beta, rtol=1e-10)
        assert f.criterion == pytest.approx(base.criterion, rel=1e-12)


def test_cbind_equals_proportion_with_weights_and_sums_of_rows() -> None:
    d = _binary(600)
    agg = d.assign(xr=d["x"].round(0)).groupby(["item", "xr"], as_index=False).agg(
        s=("y", "sum"), n=("y", "size"))
    agg["f"] = agg["n"] - agg["s"]
    agg["p"] = agg["s"] / agg["n"]
    a = _fit("cbind(s, f) ~ xr + (1 | item)", agg)
    b = _fit("p ~ xr + (1 | item)", agg, weights="n")
    c = _fit("cbind(s, n - s) ~ xr + (1 | item)", agg)
    np.testing.assert_allclose(a.beta, b.beta, rtol=1e-10)
    np.testing.assert_allclose(a.beta, c.beta, rtol=1e-10)
    assert a.design.weights is not None and np.all(a.design.weights == agg["n"].to_numpy())


def test_bad_binomial_responses_name_the_column() -> None:
    d = _binary()
    with pytest.raises(DataError, match="'z'.*outside"):
        _fit("z ~ x + (1 | item)", d.assign(z=d["y"] * 2))
    with pytest.raises(DataError, match="proportions but no"):
        _fit("z ~ x + (1 | item)", d.assign(z=d["y"] * 0.5))
    with pytest.raises(DataError, match="3 levels"):
        _fit("z ~ x + (1 | item)", d.assign(z=np.array(["a", "b", "c"] * 80)))
    with pytest.warns(UserWarning, match="non-integer #successes"):
        cx.glmer("z ~ x + (1 | item)", d.assign(z=d["y"] * 0.5, w=3.0), weights="w")


def test_poisson_negative_counts_refused() -> None:
    d = _binary().assign(c=lambda t: t["y"] * 3 - 1)
    with pytest.raises(DataError, match="negative values.*'c'"):
        cx.glmer("c ~ x + (1 | item)", d, family="poisson")


def test_weights_negative_refused_missing_dropped_and_counted() -> None:
    d = _binary().assign(w=1.0)
    with pytest.raises(DataError, match="negative weights.*'w'"):
        cx.glmer("y ~ x + (1 | item)", d.assign(w=-1.0), weights="w")
    d.loc[[0, 5, 7], "w"] = np.nan
    with pytest.warns(UserWarning, match="3 of 240 rows dropped.*w"):
        f = cx.glmer("y ~ x + (1 | item)", d, weights="w")
    assert f.nobs == 237 and f.n_dropped == 3
    with pytest.raises(DataError, match="missing"):
        cx.glmer("y ~ x + (1 | item)", d, weights="w", na_action="raise")


def test_offset_argument_equals_offset_term() -> None:
    rng = np.random.default_rng(3)
    d = pd.DataFrame({"g": rng.integers(0, 10, 300).astype(str), "x": rng.normal(size=300),
                      "t": rng.uniform(0.5, 2, 300)})
    d["c"] = rng.poisson(d["t"] * np.exp(0.3 * d["x"]))
    a = _fit("c ~ x + (1 | g)", d, family="poisson", offset=np.log(d["t"]))
    b = _fit("c ~ x + offset(log(t)) + (1 | g)", d, family="poisson")
    np.testing.assert_allclose(a.beta, b.beta, rtol=1e-10)
    assert b.design.offset is not None


def test_the_spec_holds_cbind_and_offsets() -> None:
    g = parse("cbind(s, n - s) ~ a + offset(log(t)) + (1 | g)")
    assert g.cbind == ("s", "n - s") and g.offsets == ("log(t)",)
    assert g.fixed == "a" and g.successes == "s"
    assert g.to_formula() == "cbind(s, n - s) ~ a + offset(log(t)) + (1 | g)"
    with pytest.raises(FormulaError):
        parse("y ~ a - offset(t) + (1 | g)")
    with pytest.raises(FormulaError):
        parse("cbind(s) ~ a + (1 | g)")
    with pytest.raises(FormulaError):
        parse("y ~ a + offset(__import__('os').getcwd()) + (1 | g)")


def test_engines_without_glmms_refuse() -> None:
    d = _binary()
    f = _fit("y ~ x + (1 | item)", d)
    with pytest.raises(UnsupportedModelError, match="variational Bayes"):
        fit_glmm_with("statsmodels", f.design, family="binomial")


def test_agq_needs_one_scalar_term() -> None:
    d = _binary().assign(h=lambda t: (t.index % 5).astype(str))
    with pytest.raises(ValueError, match="single, scalar"):
        cx.glmer("y ~ x + (1 | item) + (1 | h)", d, nAGQ=5)


def test_predict_link_and_response() -> None:
    d = _binary()
    f = _fit("y ~ x + (1 | item)", d)
    np.testing.assert_allclose(f.predict(), f.eta)
    np.testing.assert_allclose(f.predict(d, type="response"), f.fitted())
    pop = f.predict(d, include_random=False)
    np.testing.assert_allclose(pop, f.beta[0] + f.beta[1] * d["x"].to_numpy())
    assert list(f.coef_table().columns) == ["term", "estimate", "std_error", "statistic",
                                            "p_value", "conf_low", "conf_high"]
    assert "z value" in f.coef_table(r_names=True).columns
    assert f.varcorr().shape[0] == 1


def _pois_offset() -> pd.DataFrame:
    from pathlib import Path

    return pd.read_csv(Path(__file__).resolve().parent / "data" / "glmm" / "pois_offset.csv")


def test_predict_newdata_with_an_offset_term() -> None:
    """An ``offset(x)`` term is evaluated on the new rows (lme4's predict.merMod)."""
    d = _pois_offset()
    f = _fit("count ~ x + offset(log(exposure)) + (1 | site)", d, family="poisson")
    np.testing.assert_allclose(f.predict(d), f.eta, rtol=1e-12)
    np.testing.assert_allclose(f.predict(d, type="response"), f.fitted(), rtol=1e-12)
    pop = f.predict(d, include_random=False)
    np.testing.assert_allclose(pop, f.beta[0] + f.beta[1] * d["x"] + np.log(d["exposure"]),
                               rtol=1e-12)
    doubled = d.assign(exposure=2 * d["exposure"])
    np.testing.assert_allclose(f.predict(doubled, type="response"), 2 * f.fitted(),
                               rtol=1e-12)
    with pytest.raises(DataError, match="exposure"):
        f.predict(d.drop(columns="exposure"))


def test_predict_newdata_asks_for_an_offset_argument() -> None:
    """An ``offset=`` argument cannot be re-evaluated: lme4 predicts without it, silently;
    crossed asks for it (``offset=0`` is lme4's prediction)."""
    d = _pois_offset().assign(logexp=lambda t: np.log(t["exposure"]))
    f = _fit("count ~ x + (1 | site)", d, family="poisson", offset="logexp")
    with pytest.raises(DataError, match="offset= argument"):
        f.predict(d)
    np.testing.assert_allclose(f.predict(d, offset="logexp"), f.eta, rtol=1e-12)
    np.testing.assert_allclose(f.predict(d, offset=d["logexp"].to_numpy()), f.eta,
                               rtol=1e-12)
    np.testing.assert_allclose(f.predict(d, offset=0), f.eta - d["logexp"], rtol=1e-12)
    with pytest.raises(DataError, match="offset has 3 values"):
        f.predict(d, offset=[0.0, 1.0, 2.0])


def test_summary_is_text_with_tables_and_a_notebook_view() -> None:
    fit = _fit("y ~ x + (1 | item)", _binary(), family="binomial")
    summary = fit.summary()
    assert str(summary).startswith("Generalized linear mixed model fit by maximum likelihood")
    assert list(summary.tables) == ["Scaled residuals", "Random effects", "Fixed effects"]
    assert list(summary.tables["Fixed effects"]["term"]) == list(fit.fixef.index)
    html = fit._repr_html_()
    assert "<table" in html and "(Intercept)" in html
    # the notebook view has what the text has: criteria, counts, scaled residuals
    for piece in ("AIC", "BIC", "logLik", "deviance", f"Number of obs: {fit.nobs}",
                  "Scaled residuals", "Signif. codes:  0 ‘***’"):
        assert piece in html or piece in str(summary), piece
    assert all(p in html for p in ("AIC", "logLik", "deviance", "Number of obs",
                                   "Scaled residuals"))
    assert fit.describe().startswith("GlmerFit(") and len(fit.describe()) < 200
    assert repr(fit).startswith("Generalized linear mixed model fit by maximum likelihood")


def test_a_first_pirls_that_fails_says_so_as_lme4() -> None:
    """``cbind(s, s)`` with rows of zero trials: lme4 stops with "pwrssUpdate did not
    converge in (maxit) iterations"; crossed failed an internal assertion."""
    from crossed.model.glmm.pirls import PirlsError

    d = pd.DataFrame({"x": np.arange(1.0, 13.0), "g": list("pqrs") * 3,
                      "s": np.arange(12) % 4})
    with pytest.raises(PirlsError, match="did not converge"):
        cx.glmer("cbind(s, s) ~ x + (1 | g)", d, family="binomial")
