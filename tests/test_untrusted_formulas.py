"""Formulas cannot run code through any entry point (issue 14, section 4).

The two exploits of the issue, made harmless: each would write a file under tmp_path if
evaluated; after the refusal the file must not exist.

- ``I(np.lib._npyio_impl.os.system('touch FILE'))`` (a shell command);
- ``I(Days.to_csv('FILE'))`` (a file written by a column's method).

Entry points: ``crossed.lmer``, ``crossed fit DATA FORMULA`` (the CLI), named
specifications (a TOML file, ``crossed spec``, ``NAME:key=value`` on the command line) and
the specification builders' field values, plus ``compare_specs`` and ``cross_validate``.
"""

from __future__ import annotations

import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main
from crossed.evaluation import specs
from reference import load_table


@pytest.fixture
def sleep() -> pd.DataFrame:
    return load_table("sleepstudy.csv", ("Subject",))


def exploits(target) -> list[str]:
    return [f"I(np.lib._npyio_impl.os.system('touch {target}'))",
            f"I(Days.to_csv('{target}'))"]


@pytest.mark.parametrize("which", [0, 1])
def test_api(sleep, tmp_path, which):
    target = tmp_path / "pwned"
    expr = exploits(target)[which]
    for formula in (f"Reaction ~ Days + {expr} + (Days | Subject)",
                    f"Reaction ~ Days + ({expr} | Subject)",
                    f"{expr} ~ Days + (1 | Subject)"):
        with pytest.raises(cx.FormulaError, match="refused to evaluate"):
            cx.lmer(formula, sleep)
        with pytest.raises(cx.FormulaError, match="refused to evaluate"):
            cx.parse(formula)
    assert not target.exists()


@pytest.mark.parametrize("which", [0, 1])
def test_cli_fit(sleep, tmp_path, capsys, which):
    target = tmp_path / "pwned"
    data = tmp_path / "sleep.csv"
    sleep.to_csv(data, index=False)
    formula = f"Reaction ~ Days + {exploits(target)[which]} + (Days | Subject)"
    assert main(["fit", str(data), formula]) == 2
    assert "refused to evaluate" in capsys.readouterr().err
    assert main(["anova", str(data), formula]) == 2
    assert not target.exists()


@pytest.mark.parametrize("which", [0, 1])
def test_named_specification_file(sleep, tmp_path, capsys, monkeypatch, which):
    target = tmp_path / "pwned"
    folder = tmp_path / "formulas"
    folder.mkdir()
    expr = exploits(target)[which]
    (folder / "evil.toml").write_text(
        f'name = "evil"\nformula = "{{response}} ~ Days + {expr} + (1 | Subject)"\n'
    )
    monkeypatch.setenv("CROSSED_FORMULAS", str(folder))
    with pytest.raises(cx.FormulaError):
        specs.from_name("evil", response="Reaction")
    assert main(["spec", "evil", "response=Reaction"]) == 2
    data = tmp_path / "sleep.csv"
    sleep.to_csv(data, index=False)
    assert main(["fit", str(data), "evil:response=Reaction"]) == 2
    assert main(["fit", str(data), f"{folder / 'evil.toml'}:response=Reaction"]) == 2
    assert "refused to evaluate" in capsys.readouterr().err
    assert not target.exists()


def test_template_fields_are_plain_names(tmp_path, monkeypatch):
    folder = tmp_path / "formulas"
    folder.mkdir()
    (folder / "leak.toml").write_text(
        'name = "leak"\nformula = "{response.__class__} ~ 1 + (1 | g)"\n')
    monkeypatch.setenv("CROSSED_FORMULAS", str(folder))
    with pytest.raises(ValueError, match="not a plain name"):
        specs.from_name("leak", response="y")


@pytest.mark.parametrize("which", [0, 1])
def test_specification_fields(sleep, tmp_path, capsys, which):
    target = tmp_path / "pwned"
    expr = exploits(target)[which]
    with pytest.raises(cx.FormulaError):
        specs.repeated_measures(expr, within=["Days"], subjects="Subject")
    with pytest.raises(cx.FormulaError):
        specs.repeated_measures("Reaction", within=["Days", expr], subjects="Subject")
    with pytest.raises(cx.FormulaError):
        specs.cross_classified("Reaction", systems="Subject", datasets="Days",
                               nuisance=[expr])
    assert main(["spec", "repeated_measures", f"response={expr}", "within=Days",
                 "subjects=Subject"]) == 2
    data = tmp_path / "sleep.csv"
    sleep.to_csv(data, index=False)
    assert main(["fit", str(data), f"repeated_measures:response={expr};within=Days;"
                                   "subjects=Subject"]) == 2
    assert not target.exists()


@pytest.mark.parametrize("which", [0, 1])
def test_compare_specs_and_cross_validate(sleep, tmp_path, which):
    target = tmp_path / "pwned"
    formula = f"Reaction ~ Days + {exploits(target)[which]} + (1 | Subject)"
    with pytest.raises(cx.FormulaError):
        cx.compare_specs(sleep, [formula, "Reaction ~ Days + (1 | Subject)"], focus="Days",
                         check=False)
    with pytest.raises(cx.FormulaError):
        cx.cross_validate(sleep, ["Reaction ~ Days + (1 | Subject)", formula], folds=3)
    assert not target.exists()
