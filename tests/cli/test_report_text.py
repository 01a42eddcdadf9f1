"""``crossed report DATA FORMULA --text / --markdown / --latex``: the APA write-up printed
(the same paragraphs as ``fit.report()``), no HTML written, no plotting needed."""

from pathlib import Path

import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
SLEEP = DATA / "sleepstudy.csv"
MODEL = "Reaction ~ Days + (Days | Subject)"


def test_text_prints_the_write_up_of_the_fit(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(SLEEP), MODEL, "--text"]) == 0
    out = capsys.readouterr().out
    fit = cx.lmer(MODEL, pd.read_csv(SLEEP))
    assert out.strip() == fit.report().text
    assert out.startswith("The effect of Days was significant, F(1, 17) = 45.85, "
                          "p < .001")
    assert not list(tmp_path.iterdir())  # no report.html


def test_focus_adds_the_emms_and_latex_adds_the_table(capsys):
    d = DATA / "Dyestuff.csv"
    assert main(["report", str(SLEEP), "Reaction ~ Days + (1 | Subject)", "--factor",
                 "Days", "--focus", "Days", "--latex"]) == 0
    out = capsys.readouterr().out
    assert r"The EMM of Days 0 was " in out and r"\textit{F}(9, 153)" in out
    assert r"\toprule" in out and r"\bottomrule" in out and "sleepstudy.csv" in out
    assert main(["report", str(d), "Yield ~ 1 + (1 | Batch)", "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "| (Intercept) | 1527.50 |" in md and "random intercepts for Batch" in md


def test_glmm_text(capsys):
    cbpp = Path(cx.__file__).parent / "data" / "cbpp.csv"
    assert main(["report", str(cbpp), "cbind(incidence, size - incidence) ~ period + "
                 "(1 | herd)", "--family", "binomial", "--factor", "period", "--text"]) == 0
    out = capsys.readouterr().out
    assert "χ²(3) = 25.49, p < .001" in out and "For period2, OR = 0.37" in out
    assert "Laplace approximation" in out


def test_text_refuses_what_belongs_to_the_html_report(capsys):
    assert main(["report", str(SLEEP), MODEL, "--text", "--compare",
                 "Reaction ~ Days + (1 | Subject)"]) != 0
    assert "--compare belongs to the HTML report" in capsys.readouterr().err
    assert main(["report", str(SLEEP), MODEL, "--text", "--ddf", "none"]) != 0
    assert "--ddf 'none'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", str(SLEEP), MODEL, "--text", "--latex"])
