"""Every CLI failure is one plain line on stderr, ``crossed: error: ...``, and exit code 2.

The hostile inputs of issue 14 ("Trust", section 3): each gave a Python traceback before
(exit code 1), or a message with ANSI colour codes.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import crossed
from crossed.cli import main

SLEEP = str(Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv")
MODEL = "Reaction ~ Days + (1 | Subject)"


def fails(capsys, *argv) -> str:
    """Run the CLI in-process; assert the one-line error contract and return the line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("crossed: error: "), err
    assert "Traceback" not in err and "\x1b" not in err
    return lines[0]


def test_directory_as_data(capsys, tmp_path):
    line = fails(capsys, "fit", str(tmp_path), MODEL)
    assert "is a directory" in line and str(tmp_path) in line


def test_output_is_a_directory(capsys, tmp_path):
    line = fails(capsys, "report", SLEEP, MODEL, "--no-check", "-o", str(tmp_path))
    assert "-o" in line and "is a directory" in line


def test_output_below_a_file(capsys, tmp_path):
    # the directory of the output is a file: cannot be written (NotADirectoryError before)
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    line = fails(capsys, "report", SLEEP, MODEL, "-o", str(blocker / "report.html"))
    assert "does not exist" in line


def test_headroom_output_is_a_directory(capsys, tmp_path):
    line = fails(capsys, "headroom", SLEEP, "--score", "Reaction", "--gold", "400",
                 "--baseline", "200", "-o", str(tmp_path))
    assert "is a directory" in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_on_a_full_disk(capsys):
    line = fails(capsys, "report", SLEEP, MODEL, "--no-check", "-o", "/dev/full")
    assert "/dev/full" in line and "No space left" in line


@pytest.mark.parametrize("formula", ["Reaction ~ I(Days + ) + (1 | Subject)",
                                     "Reaction ~ Days $ 2 + (1 | Subject)"])
def test_malformed_formulas(capsys, formula):
    line = fails(capsys, "fit", SLEEP, formula)
    assert "Days" in line                     # names the expression at fault


def test_named_specification_without_fields(capsys):
    line = fails(capsys, "spec", "repeated_measures")
    assert "needs the fields response, within" in line
    line = fails(capsys, "spec", "repeated_measures", "response=y", "within=a", "colour=red")
    assert "no field 'colour'" in line
    line = fails(capsys, "fit", SLEEP, "cross_classified")   # as a formula
    assert "needs the field response" in line


def test_unknown_column_and_missing_file(capsys, tmp_path):
    assert "Nope" in fails(capsys, "fit", SLEEP, "Nope ~ Days + (1 | Subject)")
    assert "no file" in fails(capsys, "fit", str(tmp_path / "absent.csv"), MODEL)


def test_plain_message_strips_ansi_and_joins_lines():
    from crossed.cli import plain_message

    assert plain_message("Unknown operator.\n\nDays \x1b[1;31m$\x1b[0m 2") == \
        "Unknown operator. Days $ 2"


def test_internal_errors_say_so_and_debug_prints_the_traceback(capsys, monkeypatch):
    import crossed.cli.fit as cli_fit

    def broken(*args, **kwargs):
        raise TypeError("unexpected None")

    monkeypatch.setattr(cli_fit, "lmer", broken)
    line = fails(capsys, "fit", SLEEP, MODEL)
    assert "internal error (TypeError: unexpected None)" in line
    assert "CROSSED_DEBUG=1" in line
    for env, argv in ((None, ["--debug", "fit", SLEEP, MODEL]), ("1", ["fit", SLEEP, MODEL])):
        if env:
            monkeypatch.setenv("CROSSED_DEBUG", env)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and "in broken" in err
        assert err.strip().splitlines()[-1].startswith("crossed: error: internal error")


def _cli(*argv, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    src = str(Path(crossed.__file__).resolve().parents[1])    # the code under test
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CROSSED_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "crossed.cli", *argv], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=120)


def test_subprocess_exit_code_and_one_line(tmp_path):
    proc = _cli("fit", SLEEP, "Reaction ~ Days $ 2 + (1 | Subject)")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("crossed: error: ")
    assert "\x1b" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_subprocess_stdout_on_a_full_disk():
    with open("/dev/full", "w") as full:
        proc = _cli("spec", stdout=full)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("crossed: error: ")
    assert "No space left on device" in proc.stderr


def test_report_focus_not_a_factor(capsys, tmp_path):
    # a KeyError from deep inside the report before
    line = fails(capsys, "report", SLEEP, MODEL, "--focus", "Nope", "--no-check",
                 "-o", str(tmp_path / "r.html"))
    assert "focus 'Nope' is not a factor" in line


def test_eval_size_names_the_missing_column(capsys):
    line = fails(capsys, "eval-size", SLEEP, "--item", "Subject", "--score", "Reaction")
    assert "--system: column 'system' is not in" in line and "Reaction, Days" in line


def test_warnings_are_one_plain_line_each(tmp_path):
    data = tmp_path / "missing.csv"
    lines = Path(SLEEP).read_text().splitlines()
    lines[4] = ',' + lines[4].split(",", 1)[1]            # one missing response
    data.write_text("\n".join(lines) + "\n")
    proc = _cli("fit", str(data), MODEL)
    assert proc.returncode == 0
    assert proc.stderr == ("crossed: note: 1 of 180 rows dropped for missing values in: "
                           "Reaction (1)\n")


def test_warnings_still_reach_callers_in_process(tmp_path, capsys):
    data = tmp_path / "missing.csv"
    lines = Path(SLEEP).read_text().splitlines()
    lines[4] = ',' + lines[4].split(",", 1)[1]
    data.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match="1 of 180 rows dropped"):
        assert main(["fit", str(data), MODEL]) == 0


def test_usage_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as info:
        main(["fit", SLEEP])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == ("crossed: error: the following arguments are required: formula; "
                   "see 'crossed fit --help'\n")


def test_resample_outputs_checked_before_the_work(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    line = fails(capsys, "resample", "model_recycling_seeds", "--figure",
                 str(tmp_path / "ranks.xyz"))
    assert "unknown image type 'xyz'" in line
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    line = fails(capsys, "resample", "model_recycling_seeds", "--output-dir", str(blocker))
    assert "is a file, not a directory" in line


def test_warning_format_restored_after_main(capsys):
    import warnings

    before = warnings.formatwarning
    assert main(["spec"]) == 0
    fails(capsys, "fit", SLEEP, "Nope ~ Days + (1 | Subject)")
    assert warnings.formatwarning is before


def test_malformed_named_specification_file(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken.toml").write_text('name = "broken"\nformula = "y ~ x"\n[oops\n')
    monkeypatch.setenv("CROSSED_FORMULAS", str(tmp_path))
    line = fails(capsys, "spec", "broken")
    assert str(tmp_path / "broken.toml") in line and "line 3" in line


def test_escape_sequences_in_level_names_do_not_reach_a_terminal(monkeypatch, tmp_path):
    # before: a level named "\x1b[31mred" recoloured the terminal (and \x07 rang its bell)
    import io

    import numpy as np
    import pandas as pd

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    rng = np.random.default_rng(0)
    d = pd.DataFrame({"f": np.resize(["\x1b[31mred\x1b[0m", "plain\x07bell"], 60),
                      "g": np.repeat(list("abcdef"), 10), "y": rng.normal(size=60)})
    d.to_csv(tmp_path / "ansi.csv", index=False)
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    assert main(["emmeans", str(tmp_path / "ansi.csv"), "y ~ f + (1 | g)", "f"]) == 0
    text = screen.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[31mred\\x1b[0m" in text and "plain\\x07bell" in text
    assert sys.stdout is screen  # (restored)


def test_output_to_a_pipe_is_left_as_written(capsys, tmp_path):
    d = "f,g,y\n" + "".join(f"\x1bA,{g},{i % 3}\nB,{g},{i % 2}\n"
                             for i, g in enumerate("abcdefgh"))
    (tmp_path / "d.csv").write_text(d)
    assert main(["emmeans", str(tmp_path / "d.csv"), "y ~ f + (1 | g)", "f", "--json"]) == 0
    assert '"\\u001bA"' in capsys.readouterr().out  # (JSON escapes it itself)
