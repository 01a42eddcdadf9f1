"""From fit to paper on every tutorial's model (issue 33): the write-up, the publication
table, rePCA, allFit and the selection of the random structure, from Python and from the
command line, for the cross-classified LMM, the repeated-measures LMM and the item-level
GLMM. The numbers themselves are checked against R in tests/display/test_apa.py,
tests/inference/test_repca.py, tests/engines/test_allfit.py and
tests/evaluation/test_random_selection.py; here every part must run on each model and agree
with the fit's own tables."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main

TUTORIALS = {
    "cross-classified": ("score ~ seed + (1 | model) + (1 | dataset) + (1 | model:dataset)",
                         "model_recycling_seeds", None),
    "repeated-measures": ("delta ~ language * task * mode + (1 | architecture)",
                          "exist_multi", None),
    "item-level": ("correct ~ system + (1 | dataset/item)", "item_level_irt", "binomial"),
}


def _data(name: str) -> pd.DataFrame:
    if name == "item_level_irt":
        return cx.datasets.item_level_irt(seed=1)
    return cx.load_dataset(name)


def _fit(formula: str, data: pd.DataFrame, family: str | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if family is None:
            return cx.lmer(formula, data)
        return cx.glmer(formula, data, family=family)


@pytest.fixture(scope="module", params=list(TUTORIALS))
def tutorial(request):
    formula, data_name, family = TUTORIALS[request.param]
    data = _data(data_name)
    return request.param, formula, data, family, _fit(formula, data, family)


def test_write_up_has_a_sentence_per_term_and_the_methods(tutorial) -> None:
    _, formula, data, family, fit = tutorial
    report = fit.report()
    terms = fit.anova().iloc[:, 0] if "term" not in fit.anova() else fit.anova()["term"]
    for term in terms:
        words = term.replace(":", " × ")
        assert words in report.results, (term, report.results)
    assert f"{fit.nobs:,} observations" in report.methods
    assert "crossed" in report.methods
    assert ("Laplace" in report.methods) == (family is not None)
    latex = report.latex()
    assert "\\textit{p}" in latex


def test_publication_table_lists_every_coefficient(tutorial) -> None:
    _, _, _, _, fit = tutorial
    table = cx.regression_table(fit)
    latex = table.latex()
    assert latex.index("\\toprule") < latex.index("\\midrule") < latex.index("\\bottomrule")
    frame = table.frame()
    for term in fit.coef_table()["term"]:
        assert term in set(frame["term"]), term
    assert f"{fit.nobs}" in table.markdown().replace(",", "")


def test_repca_and_all_fit(tutorial) -> None:
    _, _, _, family, fit = tutorial
    pca = fit.rePCA()
    groups = {b.group for b in fit.design.random.blocks}
    assert set(pca["group"]) <= groups and len(pca) >= 1
    assert np.all(np.diff(pca.groupby("group")["cumulative"].last()) <= 1.0 + 1e-12)
    np.testing.assert_allclose(pca.groupby("group")["cumulative"].last(), 1.0, atol=1e-12)
    refits = fit.all_fit()
    labels = set(refits.table["optimizer"])
    assert {"bobyqa", "nelder_mead"} <= labels
    assert ("lbfgsb" in labels) == (family is None)
    # the fit is at the optimum: no optimiser finds a higher likelihood (beyond 1e-6
    # relative), and the default one reaches the fit's own
    ok = refits.table[refits.table["converged"].astype(bool)]
    assert len(ok) >= 2
    assert ok["loglik"].max() <= fit.loglik + 1e-6 * abs(fit.loglik)
    assert abs(ok.set_index("optimizer").loc["bobyqa", "loglik"] - fit.loglik) \
        <= 1e-6 * abs(fit.loglik)


def test_select_random_keeps_or_reduces(tutorial) -> None:
    _, formula, data, family, fit = tutorial
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = cx.select_random(formula, data, strategy="lrt", family=family)
    assert sel.steps["step"].iloc[0] == 0
    assert sel.steps["n_params"].is_monotonic_decreasing
    assert sel.methods_sentence().startswith("The random-effects structure was selected")
    # the methods paragraph reports the selection
    assert sel.methods_sentence() in sel.fit.report(random_selection=sel).methods


@pytest.mark.parametrize("name", list(TUTORIALS))
def test_command_line(name, tmp_path, capsys) -> None:
    formula, data_name, family = TUTORIALS[name]
    path = tmp_path / "data.csv"
    _data(data_name).to_csv(path, index=False)
    extra = ["--family", family] if family else []
    assert main(["report", str(path), formula, "--text", *extra]) == 0
    out = capsys.readouterr().out
    assert "We fitted a" in out and "observations of" in out
    assert main(["all-fit", str(path), formula, "--repca", *extra]) == 0
    out = capsys.readouterr().out
    assert "nelder_mead" in out and "lme4's rePCA" in out
    assert main(["select-random", str(path), formula, *extra]) == 0
    out = capsys.readouterr().out
    assert "Final model: " in out
