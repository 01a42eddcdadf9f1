"""The scales of a GLMM's EMMs as emmeans gives them (issue 34): the link scale by default,
``type="response"`` (probabilities / rates, odds / rate ratios) and ``regrid()``
(differences of probabilities / rates).

References: ``tests/data/reference/glmm/emm_scales.json``, written by ``emm_scales.R`` next
to it (R 4.2.2, lme4 1.1-31, emmeans 1.8.4-1): ``summary(x, infer = TRUE)`` and the printed
text of ``emmeans(m, ~ f)``, ``pairs()`` of it, the same with ``type = "response"``, and
``regrid()`` with its ``pairs()``, for cbpp (``cbind(incidence, size - incidence) ~ period +
(1 | herd)``, binomial), grouseticks (Poisson, three random intercepts) and the bundled
item-level binary data (``correct ~ system + (1 | item) + (1 | dataset)``, 50,000 rows; its
grid rebuilt in R with ``qdrg()`` from lme4's β and vcov).

Two kinds of check:

- on R's own estimates (the stand-in fits of ``glmm_reference``: crossed's design, lme4's β
  and vcov) every number must match emmeans to rounding, 1e-8 relative (p values 1e-6);
- on crossed's native fit of cbpp, to 1e-4 relative: the fit itself agrees with lme4 to
  ~1e-5 in β on cbpp (a flat likelihood in θ), which the differences of probabilities
  inherit.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.inference.glmm_emmeans import RegridEMMeans, glmm_emmeans
from glmm_reference import r_estimates_fit

REF = json.loads((Path(__file__).resolve().parents[1] / "data" / "reference" / "glmm"
                  / "emm_scales.json").read_text())
CASES = ["cbpp", "grouseticks", "items_systems"]
RTOL = 1e-8
PTOL = 1e-6
NOTE_STARTS = ("Results are given", "Intervals are back-transformed", "Tests are performed",
               "Note: contrasts", "Confidence level used")


@functools.cache
def _stand_in(name: str):
    fit = r_estimates_fit(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return glmm_emmeans(fit, REF[name]["spec"])


def _r(name: str, block: str) -> pd.DataFrame:
    return pd.DataFrame(REF[name][block])


def _close(got, want, rtol: float = RTOL) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=rtol, atol=1e-300)


def _close_p(got, want) -> None:
    """p values: 1e-6 relative, or 1e-12 absolute (a Tukey p value of 1e-12 is one minus a
    probability, exact to ~1e-16 absolute only)."""
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=PTOL, atol=1e-12)


def _close_ci(got: pd.DataFrame, r: pd.DataFrame, column: str = "estimate") -> None:
    """Adjusted interval limits: the Tukey quantile (ptukey's numerical accuracy, ~1e-7)
    times the SE, so compared to 1e-6 of the interval's half-width (a relative check
    fails at limits near 0)."""
    half = np.abs(r["asymp.UCL"].to_numpy() - r["asymp.LCL"].to_numpy()) / 2
    for c, rc in (("conf_low", "asymp.LCL"), ("conf_high", "asymp.UCL")):
        np.testing.assert_allclose(got[c].to_numpy(dtype=float), r[rc].to_numpy(dtype=float),
                                   rtol=0, atol=float(np.max(half)) * 1e-6)


def _scale_notes(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith(NOTE_STARTS)]


@pytest.mark.parametrize("name", CASES)
def test_default_is_the_link_scale(name):
    """``emmeans(m, ~ f)``: logits (logs), emmeans' ``emmean``, asymptotic intervals."""
    emm = _stand_in(name)
    assert emm.type == "link"
    got, r = emm.table(tests=True), _r(name, "link")
    assert list(got.columns[-7:]) == ["estimate", "std_error", "df", "conf_low", "conf_high",
                                      "statistic", "p_value"]
    assert got.attrs["estimate_name"] == "emmean"
    _close(got["estimate"], r["emmean"])
    _close(got["std_error"], r["SE"])
    assert np.all(np.isinf(got["df"]))
    _close(got["conf_low"], r["asymp.LCL"])
    _close(got["conf_high"], r["asymp.UCL"])
    _close(got["statistic"], r["z.ratio"])
    _close_p(got["p_value"], r["p.value"])
    # the default summary has emmeans' default columns: no tests
    assert list(emm.table().columns[-5:]) == ["estimate", "std_error", "df", "conf_low",
                                              "conf_high"]


@pytest.mark.parametrize("name", CASES)
def test_default_pairs_are_link_scale_differences(name):
    """``pairs(emmeans(m, ~ f))``: log odds ratios (log rate ratios), Tukey."""
    got, r = _stand_in(name).pairs(), _r(name, "link_pairs")
    assert list(got["contrast"]) == list(r["contrast"])
    assert "estimate" in got.columns
    _close(got["estimate"], r["estimate"])
    _close(got["std_error"], r["SE"])
    _close(got["statistic"], r["z.ratio"])
    _close_p(got["p_value"], r["p.value"])
    _close_ci(got, r)


@pytest.mark.parametrize("name", CASES)
def test_response_scale_means_and_ratios(name):
    emm = _stand_in(name)
    est = "prob" if name != "grouseticks" else "rate"
    got, r = emm.table(type="response"), _r(name, "response")
    assert est in got.columns and "estimate" not in got.columns
    # (R's name of the qdrg() grid's column, which knows no family, is "response")
    _close(got[est], r[est if name != "items_systems" else "response"])
    _close(got["std_error"], r["SE"])
    _close(got["conf_low"], r["asymp.LCL"])
    _close(got["conf_high"], r["asymp.UCL"])
    ratio, rname = ("odds_ratio", "odds.ratio") if est == "prob" else ("ratio", "ratio")
    got, r = emm.pairs(type="response"), _r(name, "response_pairs")
    assert list(got["contrast"]) == list(r["contrast"])  # "period1 / period2"
    assert got.attrs["estimate_name"] == rname
    _close(got[ratio], r[rname])
    _close(got["std_error"], r["SE"])
    _close(got["statistic"], r["z.ratio"])
    _close_p(got["p_value"], r["p.value"])
    _close_ci(got, r)


@pytest.mark.parametrize("name", CASES)
def test_regrid_gives_differences_of_probabilities(name):
    """``pairs(regrid(emmeans(m, ~ f)))``: delta-method SEs, z tests, Tukey."""
    rg = _stand_in(name).regrid()
    assert isinstance(rg, RegridEMMeans)
    est = "prob" if name != "grouseticks" else "rate"
    got, r = rg.table(), _r(name, "regrid")
    _close(got[est], r[est if name != "items_systems" else "response"])
    _close(got["std_error"], r["SE"])
    _close(got["conf_low"], r["asymp.LCL"])  # symmetric: μ ± z·SE, not back-transformed
    _close(got["conf_high"], r["asymp.UCL"])
    got, r = rg.pairs(), _r(name, "regrid_pairs")
    assert list(got["contrast"]) == list(r["contrast"])
    _close(got["estimate"], r["estimate"])
    _close(got["std_error"], r["SE"])
    _close(got["statistic"], r["z.ratio"])
    _close_p(got["p_value"], r["p.value"])
    _close_ci(got, r)
    assert got.attrs["adjust"] == "tukey"
    # other contrast methods and adjustments work on the new grid
    trt = rg.contrast("trt.vs.ctrl", adjust="none")
    means = rg.table()[est].to_numpy()
    _close(trt["estimate"], means[1:] - means[0], 1e-12)


PRINTED = [("link", lambda e: e.table()), ("link_pairs", lambda e: e.pairs()),
           ("response", lambda e: e.table(type="response")),
           ("response_pairs", lambda e: e.pairs(type="response")),
           ("regrid", lambda e: e.regrid().table()),
           ("regrid_pairs", lambda e: e.regrid().pairs())]


@pytest.mark.parametrize("name", ["cbpp", "grouseticks"])
@pytest.mark.parametrize(("block", "call"), PRINTED, ids=[b for b, _ in PRINTED])
def test_notes_say_the_scale_as_emmeans(name, block, call):
    """The text and HTML views carry emmeans' notes on the scale (and never "Degrees-of-
    freedom method: none")."""
    tab = call(_stand_in(name))
    text = str(tab)
    assert _scale_notes(text) == _scale_notes(REF[name]["printed"][block]), text
    assert "Degrees-of-freedom method" not in text
    html = tab._repr_html_()
    for note in _scale_notes(text):
        assert note in html
    assert "Degrees-of-freedom method" not in html


@pytest.fixture(scope="module")
def cbpp_fit():
    d = cx.load_dataset("cbpp")
    return cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                    family="binomial")


def test_native_fit_defaults_and_regrid_match_r(cbpp_fit):
    """The public method on crossed's own fit: link scale by default, and the regridded
    pairs within the tolerance the fits agree to (module docstring)."""
    emm = cbpp_fit.emmeans("period")
    assert emm.type == "link"
    _close(emm.table()["estimate"], _r("cbpp", "link")["emmean"], 1e-4)
    pairs = emm.pairs()
    _close(pairs["estimate"], _r("cbpp", "link_pairs")["estimate"], 1e-4)
    rp = emm.regrid().pairs()
    r = _r("cbpp", "regrid_pairs")
    _close(rp["estimate"], r["estimate"], 1e-4)
    _close(rp["std_error"], r["SE"], 1e-4)
    _close(rp["p_value"], r["p.value"], 1e-3)
    resp = cbpp_fit.emmeans("period", type="response")
    assert "prob" in resp.table().columns and "odds_ratio" in resp.pairs().columns


def test_regrid_refuses_non_estimable_means():
    """A rank-deficient fit: the empty cell is named, nothing silently dropped."""
    rng = np.random.default_rng(3)
    d = pd.DataFrame({"a": np.repeat(["x", "y"], 60), "b": np.tile(np.repeat(["u", "v"], 30), 2),
                      "g": np.tile([f"g{i}" for i in range(10)], 12)})
    d = d[~((d["a"] == "y") & (d["b"] == "v"))].reset_index(drop=True)
    d["y"] = rng.binomial(1, 0.4, len(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("y ~ a * b + (1 | g)", d, family="binomial")
        emm = fit.emmeans("a:b")
    with pytest.raises(ValueError, match="y v"):
        emm.regrid()
