"""One set of table conventions for LmerFit and GlmerFit (issue 34, item 2).

Every table method is read with the SAME code on an LMM and a GLMM of the same data
(cbpp: ``incidence ~ period + (1 | herd)`` and its binomial GLMM): snake_case column names
(or the data's own variable names, as the key columns of an EMM table), a RangeIndex (no
meaningful labels hidden in the index; a notebook's first header is a column's name,
never "index"), an identifying label column first (``term``, ``group``, ``contrast``,
``parameter``, ``model`` or the factor's name) in tables of several rows, and, where the
LMM's and the GLMM's tables are the same kind, the columns they share in the same order.

R's names, on request (``coef_table(r_names=True)``, the same keyword on both classes),
are ``colnames(coef(summary(m)))`` as R 4.2.2 gives them::

    suppressMessages({library(lmerTest); library(lme4)})
    colnames(coef(summary(lmer(Reaction ~ Days + (Days | Subject), sleepstudy))))
    #> "Estimate" "Std. Error" "df" "t value" "Pr(>|t|)"
    colnames(coef(summary(lme4::lmer(Reaction ~ Days + (Days | Subject), sleepstudy))))
    #> "Estimate" "Std. Error" "t value"
    colnames(coef(summary(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd),
                                cbpp, family = binomial))))
    #> "Estimate" "Std. Error" "z value" "Pr(>|z|)"
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import crossed as cx

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
ID_COLUMNS = {"term", "group", "contrast", "parameter", "model"}

# (name, method, kwargs): applied with the same code to the LMM and to the GLMM
BOTH: list[tuple[str, str, dict[str, Any]]] = [
    ("coef_table", "coef_table", {}),
    ("coef_table_level", "coef_table", {"level": 0.9}),
    ("anova", "anova", {}),
    ("drop1", "drop1", {}),
    ("varcorr", "varcorr", {}),
    ("ranef", "ranef", {}),
    ("confint_wald", "confint", {"method": "Wald"}),
    ("r2", "r2", {}),
    ("rePCA", "rePCA", {}),
]
# tables reached through a result object, the same calls on both
CHAINED: list[tuple[str, Callable[[Any], pd.DataFrame]]] = [
    ("emmeans_table", lambda f: f.emmeans("period").table()),
    ("emmeans_pairs", lambda f: f.emmeans("period").pairs()),
    ("emmeans_contrast", lambda f: f.emmeans("period").contrast("trt.vs.ctrl")),
    ("compare", lambda f: cx.compare(f.refit_null, f)),
]
# the LMM's own tables (no GLMM counterpart), held to the same conventions
LMM_ONLY: list[tuple[str, Callable[[Any], pd.DataFrame]]] = [
    ("ranova", lambda f: f.ranova()),
    ("icc", lambda f: f.icc()),
    ("variance_components", lambda f: f.variance_components()),
    ("eta_squared", lambda f: f.eta_squared()),
    ("joint_tests", lambda f: f.emmeans("period").joint_tests()),
]


class _Fits:
    """The two fits, with a null model for ``compare`` (ML, as lme4's anova refits)."""

    def __init__(self) -> None:
        d = cx.load_dataset("cbpp")
        self.data = d
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lmm = cx.lmer("incidence ~ period + (1 | herd)", d, reml=False)
            glmm = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)", d,
                            family="binomial")
            lmm0 = cx.lmer("incidence ~ 1 + (1 | herd)", d, reml=False)
            glmm0 = cx.glmer("cbind(incidence, size - incidence) ~ 1 + (1 | herd)", d,
                             family="binomial")
        self.fits = {"lmm": lmm, "glmm": glmm}
        self.nulls = {"lmm": lmm0, "glmm": glmm0}


@pytest.fixture(scope="module")
def fits() -> _Fits:
    return _Fits()


class _WithNull:
    """A fit with its null model reachable as ``refit_null`` (for ``compare``)."""

    def __init__(self, fit: Any, null: Any) -> None:
        self._fit, self.refit_null = fit, null

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fit, name)


def _table(fits: _Fits, kind: str, name: str) -> pd.DataFrame:
    fit = fits.fits[kind]
    for n, method, kwargs in BOTH:
        if n == name:
            return getattr(fit, method)(**kwargs)
    for n, call in CHAINED + LMM_ONLY:
        if n == name:
            if n == "compare":
                return call(_WithNull(fit, fits.nulls[kind]))
            return call(fit)
    raise KeyError(name)


def _assert_conventions(table: pd.DataFrame, data: pd.DataFrame, what: str) -> None:
    assert isinstance(table, pd.DataFrame), what
    assert isinstance(table.index, pd.RangeIndex), f"{what}: index {type(table.index)}"
    assert table.index.equals(pd.RangeIndex(len(table))), what
    for c in table.columns:
        assert isinstance(c, str) and (SNAKE.match(c) or c in data.columns), \
            f"{what}: column {c!r} is neither snake_case nor a variable of the data"
    assert len(set(table.columns)) == table.shape[1], f"{what}: repeated column names"
    if len(table) > 1:
        first = table.columns[0]
        assert first in ID_COLUMNS or first in data.columns, f"{what}: first column {first!r}"
        assert not pd.api.types.is_numeric_dtype(table[first]), \
            f"{what}: the identifying column {first!r} holds numbers"


def _shared_order(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    common = set(a) & set(b)
    return [c for c in a if c in common], [c for c in b if c in common]


@pytest.mark.parametrize("name", [n for n, _, _ in BOTH] + [n for n, _ in CHAINED])
def test_both_fit_classes_follow_the_conventions(fits: _Fits, name: str) -> None:
    tables = {kind: _table(fits, kind, name) for kind in ("lmm", "glmm")}
    for kind, table in tables.items():
        _assert_conventions(table, fits.data, f"{kind}.{name}")
    # the same kind of table: the columns both have, in the same order
    lmm_cols, glmm_cols = _shared_order(list(tables["lmm"].columns),
                                        list(tables["glmm"].columns))
    assert lmm_cols == glmm_cols, name
    assert tables["lmm"].columns[0] == tables["glmm"].columns[0], name


@pytest.mark.parametrize("name", [n for n, _ in LMM_ONLY])
def test_lmm_only_tables_follow_the_conventions(fits: _Fits, name: str) -> None:
    _assert_conventions(_table(fits, "lmm", name), fits.data, f"lmm.{name}")


def test_coef_tables_have_the_same_columns_but_df(fits: _Fits) -> None:
    """Before: the GLMM's table had R's names (Estimate, Std. Error, z value, Pr(>|z|),
    lower, upper) and the terms in the index."""
    lmm = fits.fits["lmm"].coef_table()
    glmm = fits.fits["glmm"].coef_table()
    assert list(lmm.columns) == ["term", "estimate", "std_error", "df", "statistic",
                                 "p_value", "conf_low", "conf_high"]
    assert list(glmm.columns) == [c for c in lmm.columns if c != "df"]
    assert list(glmm["term"]) == list(fits.fits["glmm"].fixef.index)
    np.testing.assert_allclose(glmm["estimate"], fits.fits["glmm"].beta)
    np.testing.assert_allclose(glmm["statistic"], glmm["estimate"] / glmm["std_error"])
    assert glmm.attrs["conf_level"] == lmm.attrs["conf_level"] == 0.95


def test_r_names_on_both_classes(fits: _Fits) -> None:
    """``r_names=True``: R's coef(summary(m)), terms as row names (the R code above)."""
    lmm, glmm = fits.fits["lmm"], fits.fits["glmm"]
    r = lmm.coef_table(r_names=True)
    assert list(r.columns) == ["Estimate", "Std. Error", "df", "t value", "Pr(>|t|)"]
    assert list(r.index) == list(lmm.fixef.index)
    np.testing.assert_allclose(r["Pr(>|t|)"], lmm.coef_table()["p_value"])
    z = lmm.coef_table(ddf="none", r_names=True)
    assert list(z.columns) == ["Estimate", "Std. Error", "t value"]  # lme4's, no df
    g = glmm.coef_table(r_names=True)
    assert list(g.columns) == ["Estimate", "Std. Error", "z value", "Pr(>|z|)"]
    assert list(g.index) == list(glmm.fixef.index)
    np.testing.assert_allclose(g["Std. Error"], glmm.coef_table()["std_error"])
    # printed, the terms are the row names (no "term" column, no 0, 1, ...)
    assert str(g).splitlines()[1].startswith("(Intercept)")


def test_html_view_shows_the_table_columns(fits: _Fits) -> None:
    """The notebook view has the table's own columns: the term as a column of the
    table, not an unnamed index."""
    # (long headings may break after "_": the HTML view marks the places with <wbr>)
    html = fits.fits["glmm"].coef_table()._repr_html_().replace("<wbr>", "")
    for col in ("term", "estimate", "std_error", "statistic", "p_value"):
        assert f">{col}</th>" in html
    assert ">Estimate</th>" in fits.fits["glmm"].coef_table(r_names=True)._repr_html_()
    assert ">index</th>" not in html


def test_coef_tables_name_the_levels_in_a_column(fits: _Fits) -> None:
    """``coef()`` (lme4's per-level coefficients): the levels in a column named after the
    factor, a RangeIndex, then the fixed effects by name (R's column names: this wide
    table's columns are coefficients, as ``coef(m)$herd``'s). Before: levels in the index."""
    for kind, fit in fits.fits.items():
        tab = fit.coef()["herd"]
        assert isinstance(tab.index, pd.RangeIndex), kind
        assert list(tab.columns) == ["herd", *fit.fixef.index], kind
        assert tab["herd"].nunique() == len(tab) == 15, kind


# ---------------------------------------------------------------------- R's defaults
# The tables a user reads first, fetched from either fit class by the same code, with the
# columns R's default call gives (in crossed's names; R's in the comments):
#   coef_table   coef(summary(m)) (+ Wald intervals): the LMM's lmerTest df between
#   anova        lmerTest's anova(m) (F, Satterthwaite) / car's Anova (Wald chi-square)
#   emmeans      emmeans(m, ~ period): emmean SE df lower.CL upper.CL (asymp.LCL,
#                asymp.UCL, df = Inf for a glmer), on the link scale (logits for a glmer)
#   pairs        pairs(emmeans(m, ~ period)): contrast estimate SE df t.ratio/z.ratio
#                p.value (Tukey) (+ intervals), differences on the link scale
#   confint, ranef, varcorr: confint(m), ranef(m, condVar = TRUE), VarCorr(m) as rows
R_DEFAULT_COLUMNS: dict[str, list[str] | dict[str, list[str]]] = {
    "coef_table": {"lmm": ["term", "estimate", "std_error", "df", "statistic", "p_value",
                           "conf_low", "conf_high"],
                   "glmm": ["term", "estimate", "std_error", "statistic", "p_value",
                            "conf_low", "conf_high"]},
    "anova": {"lmm": ["term", "sum_sq", "mean_sq", "num_df", "den_df", "statistic",
                      "p_value"],
              "glmm": ["term", "statistic", "df", "p_value"]},
    "emmeans": ["period", "estimate", "std_error", "df", "conf_low", "conf_high"],
    "pairs": ["contrast", "estimate", "std_error", "df", "statistic", "p_value",
              "conf_low", "conf_high"],
    "confint": ["parameter", "term", "conf_low", "conf_high"],
    "ranef": ["group", "level", "term", "estimate", "cond_sd"],
    "varcorr": ["group", "term1", "term2", "variance_or_cov", "sd_or_cor"],
}


def _read_defaults(fit: Any) -> dict[str, pd.DataFrame]:
    """The same calls on an LmerFit and a GlmerFit: R's default of each."""
    emm = fit.emmeans("period")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        confint = fit.confint(method="Wald")  # (the profile of an LMM: tests/simulate)
    return {"coef_table": fit.coef_table(), "anova": fit.anova(), "emmeans": emm.table(),
            "pairs": emm.pairs(), "confint": confint, "ranef": fit.ranef(),
            "varcorr": fit.varcorr()}


@pytest.mark.parametrize("kind", ["lmm", "glmm"])
def test_both_fit_classes_read_with_one_code_give_rs_defaults(fits: _Fits, kind: str) -> None:
    """Before: a GLMM's ``emmeans("period")`` was on the response scale (probabilities,
    pairs as odds ratios, emmeans' ``type = "response"``); now, as emmeans, on the link
    scale for both classes: the EMM of period k is the linear predictor β₀ + β_k (logit
    for the GLMM), its pairs the differences of those."""
    fit = fits.fits[kind]
    tables = _read_defaults(fit)
    for name, table in tables.items():
        want = R_DEFAULT_COLUMNS[name]
        want = want[kind] if isinstance(want, dict) else want
        assert list(table.columns) == want, (kind, name, list(table.columns))
        _assert_conventions(table, fits.data, f"{kind}.{name}")
    beta = fit.fixef.to_numpy()
    eta = beta[0] + np.r_[0.0, beta[1:]]  # treatment coding: period1 is the intercept
    emm, pairs = tables["emmeans"], tables["pairs"]
    assert emm.attrs["type"] == pairs.attrs["type"] == "link"
    assert emm.attrs["estimate_name"] == "emmean"
    np.testing.assert_allclose(emm["estimate"], eta, rtol=1e-10)
    labels = [f"period{a} - period{b}" for a in range(1, 5) for b in range(a + 1, 5)]
    assert list(pairs["contrast"]) == labels
    diffs = [eta[a] - eta[b] for a in range(4) for b in range(a + 1, 4)]
    np.testing.assert_allclose(pairs["estimate"], diffs, rtol=1e-8, atol=1e-12)
    assert pairs.attrs["adjust"] == "tukey"
    np.testing.assert_allclose(tables["coef_table"]["estimate"], beta)
    text = str(emm) + str(pairs)
    if kind == "glmm":  # asymptotic, said as emmeans says it, no df method line
        assert np.isinf(emm["df"]).all() and np.isinf(pairs["df"]).all()
        assert "Results are given on the logit (not the response) scale." in str(emm)
        assert ("Results are given on the log odds ratio (not the response) scale."
                in str(pairs))
        assert "Degrees-of-freedom method" not in text
    else:
        assert np.isfinite(emm["df"]).all()
        assert "Degrees-of-freedom method: satterthwaite" in text
        assert "Results are given" not in text
