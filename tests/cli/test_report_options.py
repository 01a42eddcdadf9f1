"""``crossed report --no-check``, and the report's statement of a subsampled diagnostic."""

from pathlib import Path

import pandas as pd
import pytest

from crossed.cli import main
from crossed.fit import LmerFit

pytest.importorskip("matplotlib")

SLEEP = Path(__file__).resolve().parents[1] / "data" / "sleepstudy.csv"
MODEL = "Reaction ~ Days + (1 | Subject)"


def test_no_check_leaves_out_the_simulated_tests(capsys, tmp_path, monkeypatch):
    ran = []

    def refuse(self, *args, **kwargs):
        ran.append(self.formula)
        raise AssertionError("check() ran despite --no-check")

    monkeypatch.setattr(LmerFit, "check", refuse)
    out = tmp_path / "r.html"
    assert main(["report", str(SLEEP), MODEL, "--no-check", "-o", str(out), "--factor", "Days",
                 "--compare", "Reaction ~ Days + (1 | Subject)"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "Simulated-residual tests not run." in text
    assert "Specifications compared" in text and not ran
    section = text.split("<h2>Residual checks</h2>", 1)[1].split("</section>", 1)[0]
    assert "sim_uniformity_p" not in section and "resid_normality_p" in section


def test_report_states_the_subsample_of_the_diagnostics(monkeypatch):
    from crossed.report import build_report

    real = LmerFit.check

    def small(self, *args, **kwargs):           # as a fit larger than max_rows would be
        return real(self, *args, max_rows=50, **kwargs)

    monkeypatch.setattr(LmerFit, "check", small)
    text = build_report(pd.read_csv(SLEEP), MODEL, data_name="sleepstudy")
    assert "on a random subsample of 50 of the 180 observations" in text
    assert "sim_uniformity_p" in text


def test_report_with_a_mathtext_level_name(capsys, tmp_path):
    d = pd.read_csv(SLEEP)
    d["cond"] = ["$\\frac{$" if i % 2 else "a_b^c" for i in range(len(d))]
    data = tmp_path / "d.csv"
    d.to_csv(data, index=False)
    out = tmp_path / "r.html"
    assert main(["report", str(data), "Reaction ~ Days + cond + (1 | Subject)", "--no-check",
                 "--focus", "cond", "-o", str(out)]) == 0, capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert "$\\frac{$" in text and "a_b^c" in text


def test_report_focus_with_a_single_level(capsys, tmp_path):
    d = pd.read_csv(SLEEP)
    d["cond"] = "only"
    data = tmp_path / "d.csv"
    d.to_csv(data, index=False)
    code = main(["report", str(data), "Reaction ~ 0 + cond + Days + (1 | Subject)",
                 "--no-check", "--focus", "cond", "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "'cond' has a single level" in err and "'only'" in err
