"""``crossed.datasets.read_data``: delimited files with another separator than their name
says (a ``;``-separated .csv, as R's ``write.csv2`` writes in continental Europe)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossed.datasets import EXACT_FLOATS, read_data, sniff_delimiter


def test_a_semicolon_csv_with_decimal_commas_is_read_as_r_read_csv2(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("y;x;g;label\n1,5;2;a;x,y\n2,25;3;b;z\n-3;4;a;w\n")
    df = read_data(path)
    assert list(df.columns) == ["y", "x", "g", "label"]
    np.testing.assert_allclose(df["y"], [1.5, 2.25, -3.0])
    assert pd.api.types.is_integer_dtype(df["x"])
    assert list(df["g"]) == ["a", "b", "a"]
    assert list(df["label"]) == ["x,y", "z", "w"]  # text with a comma stays text


@pytest.mark.parametrize("name, text, sep", [
    ("tabs.csv", "y\tg\n1.5\ta\n2\tb\n", "\t"),
    ("commas.tsv", "y,g\n1.5,a\n2,b\n", ","),
    ("pipes.csv", "y|g\n1.5|a\n2|b\n", "|"),
    ("plain.csv", "y,g\n1.5,a\n2,b\n", ","),
    ("one_column.csv", "y\n1.5\n2\n", ","),
])
def test_the_separator_of_the_first_lines_is_used(tmp_path, name, text, sep):
    path = tmp_path / name
    path.write_text(text)
    expected = "\t" if name.endswith(".tsv") else ","
    assert sniff_delimiter(path, expected) == sep
    df = read_data(path)
    assert list(df.columns) == (["y"] if name == "one_column.csv" else ["y", "g"])
    np.testing.assert_allclose(df["y"], [1.5, 2.0])


def test_an_error_in_a_semicolon_file_says_how_it_was_read(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("y;g\n1;a\n2;b;extra\n")
    with pytest.raises(ValueError, match="ragged.csv.*read as semicolon-separated"):
        read_data(path)


def test_a_file_that_is_not_utf8_says_so(tmp_path):
    # before: "cannot read latin1.csv as CSV: 'utf-8' codec can't decode byte 0xe9 ..."
    path = tmp_path / "latin1.csv"
    path.write_bytes("y,g\n1,caf\xe9\n2,na\xefve\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.csv: it is not UTF-8 text.*save it as UTF-8"):
        read_data(path)


@pytest.mark.parametrize("name, text", [("header.csv", "y,x,g\n"),
                                        ("header.tsv", "y\tx\tg\n"),
                                        ("none.json", '{"y": [], "x": []}')])
def test_a_file_with_a_header_and_no_rows_names_its_columns(tmp_path, name, text):
    # before: "the data table is empty (0 rows)" from the model, naming no file
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{name} holds no rows \\(columns: y, x"):
        read_data(path)


@pytest.mark.parametrize("name, copy", [
    ("sleepstudy", "sleepstudy.csv"), ("Penicillin", "Penicillin.csv"),
    ("Dyestuff", "Dyestuff.csv"), ("InstEval", "InstEval.csv.gz"),
    ("cbpp", "glmm/cbpp.csv"), ("grouseticks", "glmm/grouseticks.csv"),
    ("item_level_binary", "glmm/items_systems.csv.gz")])
def test_lme4s_datasets_are_bundled_under_rs_names(name: str, copy: str) -> None:
    """``cx.load_dataset("cbpp")`` is what ``data(cbpp)`` is in R: the tables the reference
    tests read, with the factor columns' values as strings."""
    import crossed as cx

    bundled = cx.load_dataset(name)
    ref = pd.read_csv(Path(__file__).parent / "data" / copy, **EXACT_FLOATS)
    assert list(bundled.columns) == list(ref.columns)
    for col in ref.columns:
        if pd.api.types.is_numeric_dtype(bundled[col]):
            np.testing.assert_array_equal(bundled[col].to_numpy(), ref[col].to_numpy())
        else:
            assert bundled[col].tolist() == ref[col].astype(str).tolist()
    assert name in cx.list_datasets()


# levels(lme4::cbpp$herd), levels(lme4::InstEval$dept) ... (lme4 1.1-31, scripts/r_levels.R)
R_LEVELS = [
    ("cbpp", "herd", [str(i) for i in range(1, 16)]),
    ("cbpp", "period", ["1", "2", "3", "4"]),
    ("InstEval", "dept", ["15", "5", "10", "12", "6", "7", "4", "8", "9", "14", "1", "3",
                          "11", "2"]),
    ("grouseticks", "YEAR", ["95", "96", "97"]),
    ("sleepstudy", "Subject", ["308", "309", "310", "330", "331", "332", "333", "334", "335",
                               "337", "349", "350", "351", "352", "369", "370", "371", "372"]),
]


@pytest.mark.parametrize(("name", "column", "levels"), R_LEVELS)
def test_lme4s_factors_have_rs_level_order(name: str, column: str, levels: list[str]) -> None:
    """The factors of lme4's data are Categoricals in R's level order (not the string
    order 1, 10, 11, ...), so per-level results and reference levels read as in R."""
    import crossed as cx

    values = cx.load_dataset(name)[column]
    assert isinstance(values.dtype, pd.CategoricalDtype)
    assert values.cat.categories.tolist() == levels


def test_cbpp_random_effects_in_rs_order() -> None:
    """ranef(glmer(..., data = cbpp)) lists the herds 1, 2, ..., 15 as R does."""
    import warnings

    import crossed as cx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                     cx.load_dataset("cbpp"), family="binomial")
    assert g.ranef()["level"].tolist() == [str(i) for i in range(1, 16)]
