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
