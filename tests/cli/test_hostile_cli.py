"""CLI arguments found by adversarial probing (issue 14): one-line errors, no garbage."""

from pathlib import Path

import pytest

from crossed.cli import main

SLEEP = str(Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv")
MODEL = "Reaction ~ Days + (1 | Subject)"


def fails(capsys, *argv) -> str:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors exit
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crossed: error: "), err
    return lines[0]


def test_emmeans_of_a_numeric_covariate_prints_its_mean(capsys):
    # "need at least one array to concatenate" before: one mean has no pairs; emmeans
    # prints "(nothing)  nonEst"
    assert main(["emmeans", SLEEP, MODEL, "Days"]) == 0
    out = capsys.readouterr().out
    assert "(nothing)" in out and "nonEst" in out


@pytest.mark.parametrize("command", [["compare-engines", SLEEP, MODEL],
                                     ["resample", SLEEP]])
def test_negative_digits_are_refused(capsys, command):
    # compare-engines said "Format specifier missing precision"; resample rounded to tens
    line = fails(capsys, *command, "--digits", "-2")
    assert "--digits" in line and ">= 0" in line


@pytest.mark.parametrize("level", ["2", "0", "-0.5"])
def test_emmeans_level_outside_0_1_is_refused(capsys, level):
    line = fails(capsys, "emmeans", SLEEP, MODEL, "Days", "--level", level)
    assert "level must be a number between 0 and 1" in line


@pytest.mark.parametrize("specs", ["", ":"])
def test_emmeans_empty_specs_are_refused(capsys, specs):
    # a numpy "matmul: Input operand 1 has a mismatch" message before
    line = fails(capsys, "emmeans", SLEEP, MODEL, specs)
    assert "specs and by take variable names" in line




def test_headroom_on_a_missing_column_is_refused(capsys):
    # --on was ignored with numeric gold and baseline
    line = fails(capsys, "headroom", SLEEP, "--score", "Reaction", "--gold", "900",
                 "--baseline", "0", "--on", "nope")
    assert "'nope'" in line


def test_headroom_non_numeric_score_names_the_column(capsys, tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("s,g\na,1\nb,2\n")
    line = fails(capsys, "headroom", str(data), "--score", "s", "--gold", "10",
                 "--baseline", "0")
    assert "score column 's' is not numeric" in line


def test_resample_negative_seed_is_refused_by_name(capsys):
    # numpy's "expected non-negative integer" named no argument
    line = fails(capsys, "resample", SLEEP, "--seed", "-5")
    assert "--seed" in line and ">= 0" in line


@pytest.mark.parametrize("flag,value,bound", [("--n-resamples", "0", ">= 1"),
                                              ("--n-resamples", "-5", ">= 1"),
                                              ("--n-tasks", "-1", ">= 1"),
                                              ("--n-boot", "-3", ">= 1"),
                                              ("--max-matrix", "-1", ">= 0")])
def test_resample_counts_are_refused_by_flag(capsys, flag, value, bound):
    # --n-resamples 0 was an "internal error (IndexError ...)"; -5 a numpy message;
    # --n-boot -3 was accepted
    line = fails(capsys, "resample", SLEEP, flag, value)
    assert flag in line and bound in line
