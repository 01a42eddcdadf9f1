"""Display objects (crossed.tables): tables, summaries and notebook views read as R prints
them, and stay what they were for code (DataFrames, str)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.display import format_summary
from crossed.tables import ResultTable, Summary, note_text, result_table


@pytest.fixture(scope="module")
def fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("delta ~ language * task * mode + (1 | architecture)",
                       cx.load_dataset("exist_multi"))


def test_tables_are_dataframes_printed_as_r(fit):
    tab = fit.anova()
    assert isinstance(tab, ResultTable) and isinstance(tab, pd.DataFrame)
    assert list(tab.columns)[:2] == ["term", "sum_sq"]
    text = repr(tab)
    assert "1.73e-07" in text and "0.52694" in text      # format.pval on the column
    assert "<table" in tab._repr_html_()
    # derived tables are plain DataFrames; .frame is the plain table
    assert type(tab[tab.p_value < 0.05]) is pd.DataFrame
    assert type(tab.frame) is pd.DataFrame and tab.frame.equals(pd.DataFrame(tab))
    pd.testing.assert_frame_equal(tab.frame, pd.DataFrame(tab))


def test_emm_tables_print_pvalues_as_emmeans(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = fit.emmeans("task").pairs()
    assert (pairs["p_value"] < 1e-4).all()
    text = str(pairs)
    assert text.count("<.0001") == 3
    assert "P value adjustment: tukey method" in text
    zero = result_table(pd.DataFrame({"contrast": ["a - b"], "p_value": [0.0]}), "emmeans")
    assert "<.0001" in repr(zero) and " 0\n" not in repr(zero)


def test_emmeans_repr_is_its_table(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emm = fit.emmeans("language")
    assert emm.describe().startswith("<EMMeans of language: 2 means")
    text = repr(emm)  # as emmeans prints an emmGrid: its table and notes
    assert text == str(emm.table()) and text.splitlines()[0].split()[0] == "language"
    assert "array" not in text and "linfct" not in text
    assert "<table" in emm._repr_html_()


def test_summary_is_the_text_with_tables(fit):
    s = fit.summary()
    assert isinstance(s, Summary) and isinstance(s, str)
    assert str(s) == format_summary(fit) and repr(s) == str(s)
    assert list(s.tables) == ["Scaled residuals", "Random effects", "Fixed effects"]
    np.testing.assert_array_equal(s.tables["Fixed effects"]["estimate"],
                                  fit.coef_table()["estimate"])
    html = fit._repr_html_()
    assert "Fixed effects" in html and "REML criterion" in html and "<table" in html
    assert f"Number of obs: {fit.nobs}, groups:" in html and "Scaled residuals" in html
    assert fit.describe().startswith("<LmerFit ") and "\n" not in fit.describe()
    assert repr(fit).startswith("Linear mixed model fit by REML") and "Fixed Effects:" in repr(fit)


def test_spec_comparison_one_row_per_spec():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = cx.compare_specs(cx.load_dataset("exist_multi"),
                               ["delta ~ language * task + (1 | architecture)",
                                "delta ~ language + task + (1 | architecture)"],
                               focus="task", check=False)
    assert len(cmp.table) == 6 and len(cmp.specs) == 2 and len(cmp.contrasts) == 6
    assert "contrast" not in cmp.specs.columns and "aic" in cmp.specs.columns
    assert "\n" not in repr(cmp) and repr(cmp).startswith("<SpecComparison")
    assert cmp._repr_html_().count("<table") == 3


def test_note_text_drops_its_own_prefix():
    assert note_text("NOTE: Results may be misleading") == "Results may be misleading"
    assert note_text("nothing to strip") == "nothing to strip"
