"""What the CLI reads (format by file name; duplicated columns refused) and writes (strict JSON)."""

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crossed.cli import main


def read_data(path):
    """crossed.datasets.read_data, imported late (each test fails alone on older code)."""
    from crossed.datasets import read_data as read

    return read(path)


SLEEP = Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv"
MODEL = "Reaction ~ Days + (1 | Subject)"


@pytest.fixture(scope="module")
def sleep() -> pd.DataFrame:
    return pd.read_csv(SLEEP)


def _write(df: pd.DataFrame, path: Path) -> Path:
    name = path.name
    if name.endswith((".csv", ".csv.gz")):
        df.to_csv(path, index=False)
    elif name.endswith((".tsv", ".tsv.gz")):
        df.to_csv(path, sep="\t", index=False)
    elif name.endswith(".jsonl"):
        df.to_json(path, orient="records", lines=True)
    elif name.endswith(".jsonl.gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(df.to_json(orient="records", lines=True))
    elif name.endswith(".json"):
        df.to_json(path, orient="records")
    else:
        pytest.importorskip("pyarrow")
        df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("name", ["s.csv", "s.csv.gz", "s.tsv", "s.tsv.gz", "s.jsonl",
                                  "s.jsonl.gz", "s.json", "s.parquet"])
def test_formats_read_by_name(tmp_path, sleep, name):
    got = read_data(_write(sleep, tmp_path / name))
    pd.testing.assert_frame_equal(got, sleep, check_dtype=False)


def test_jsonl_is_not_read_as_csv(capsys, tmp_path, sleep):
    # a .jsonl file used to go to read_csv: one column of JSON text
    path = _write(sleep, tmp_path / "sleep.jsonl")
    assert main(["fit", str(path), MODEL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nobs"] == 180
    assert main(["fit", str(SLEEP), MODEL, "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert out["deviance"] == pytest.approx(ref["deviance"], rel=1e-12)


def test_json_object_of_columns(tmp_path, sleep):
    path = tmp_path / "cols.json"
    path.write_text(json.dumps(sleep.to_dict(orient="list")))
    pd.testing.assert_frame_equal(read_data(path), sleep, check_dtype=False)
    sleep.to_json(path)                               # pandas' default: {column: {row: value}}
    pd.testing.assert_frame_equal(read_data(path), sleep, check_dtype=False)


@pytest.mark.parametrize("name", ["sleep.xlsx", "sleep.txt", "sleep", "sleep.csv.bz2"])
def test_other_file_types_refused_by_name(capsys, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(SLEEP.read_bytes())
    assert main(["fit", str(path), MODEL]) == 2
    err = capsys.readouterr().err
    assert f"cannot read {name!r}: unknown file type" in err and ".parquet" in err


def test_duplicated_csv_header_refused(capsys, tmp_path):
    # pandas would silently rename the second column Days.1
    path = tmp_path / "dup.csv"
    lines = SLEEP.read_text().splitlines()
    path.write_text("\n".join(['"Reaction","Days","Days"'] + lines[1:]) + "\n")
    assert main(["fit", str(path), "Reaction ~ 1 + (1 | Days)"]) == 2  # fitted to Days before
    err = capsys.readouterr().err
    assert "dup.csv names the column 'Days' more than once" in err
    gz = tmp_path / "dup.tsv.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("a\tb\ta\n1\t2\t3\n")
    with pytest.raises(ValueError, match="column 'a' more than once"):
        read_data(gz)


def test_duplicated_json_key_refused(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text('{"y": 1, "g": "a"}\n{"y": 2, "g": "b", "y": 3}\n')
    with pytest.raises(ValueError, match="line 2 of dup.jsonl names the column 'y' more"):
        read_data(path)


def test_rows_longer_than_the_header_refused(tmp_path):
    # pandas would silently turn the first column into the index and shift the others
    path = tmp_path / "long.csv"
    path.write_text("y,g\n1,a,extra\n2,b,extra\n")
    with pytest.raises(ValueError, match="more fields than its header"):
        read_data(path)


@pytest.mark.parametrize("content, match", [
    ("", "empty"),
    ("[1, 2]", "list of records"),
    ("not json", "is not JSON"),
])
def test_bad_files_named_in_the_message(tmp_path, content, match):
    path = tmp_path / ("bad.json" if content else "bad.csv")
    path.write_text(content)
    with pytest.raises(ValueError, match=match) as info:
        read_data(path)
    assert path.name in str(info.value)


def _strict(text: str):
    def refuse(const):
        raise AssertionError(f"non-standard JSON constant {const}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", [["fit"], ["anova"], ["emmeans", "Days", "--factor", "Days"]])
def test_json_output_is_strict(capsys, command):
    # --ddf none gives infinite df and the correlation table NaN: JSON has neither
    argv = [command[0], str(SLEEP), MODEL, *command[1:], "--json", "--ddf", "none"]
    assert main(argv) == 0
    data = _strict(capsys.readouterr().out)
    if command[0] == "fit":
        assert [row["df"] for row in data["coefficients"]] == [None, None]
        assert any(v is None for row in data["varcorr"] for v in row.values())
    if command[0] == "anova":
        assert data["anova"][0]["den_df"] is None


def test_json_helper_writes_null_for_nonfinite_numbers():
    from crossed.cli._tables import dump_json

    table = pd.DataFrame({"a": [1.0, np.inf, -np.inf, np.nan]})
    out = _strict(dump_json({"t": table, "x": np.float64(np.inf), "v": np.array([np.nan, 2.0]),
                             "nested": [[float("nan")]]}))
    assert out == {"t": [{"a": 1.0}, {"a": None}, {"a": None}, {"a": None}], "x": None,
                   "v": [None, 2.0], "nested": [[None]]}


def test_a_semicolon_separated_csv_is_fitted(capsys, tmp_path, sleep):
    path = tmp_path / "sleep_semicolon.csv"
    sleep.to_csv(path, sep=";", decimal=",", index=False)
    assert main(["fit", str(path), MODEL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nobs"] == len(sleep)
    assert main(["fit", str(SLEEP), MODEL, "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert out["deviance"] == pytest.approx(ref["deviance"], rel=1e-10)
