"""``crossed select-random``: the steps table, the final formula and the methods sentence
from the command line, the same numbers as :func:`crossed.select_random`."""

from __future__ import annotations

import json
import warnings

import numpy as np

import crossed as cx
from crossed.cli import main

SLEEP = "Reaction ~ Days + (Days | Subject)"
GROUSE = "TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD) + (1 | LOCATION)"


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_text_output(capsys) -> None:
    assert main(["select-random", "sleepstudy", SLEEP, "--strategy", "lrt"]) == 0
    out = capsys.readouterr().out
    assert "Random-effects selection (lrt) from the maximal model: " \
           "Reaction ~ Days + (1 + Days | Subject)" in out
    assert "dropped the correlations of (1 + Days | Subject)" in out
    assert "Final model: Reaction ~ Days + (1 + Days || Subject)" in out
    assert "(χ²(1) = 0.04, p = .839)" in out


def test_json_matches_the_api_for_a_glmm(capsys) -> None:
    assert main(["select-random", "grouseticks", GROUSE, "--family", "poisson",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = cx.select_random(GROUSE, cx.load_dataset("grouseticks"), family="poisson")
    assert got["final"] == sel.formula == "TICKS ~ YEAR + cHEIGHT + (1 | INDEX) + (1 | BROOD)"
    np.testing.assert_allclose([s["criterion"] for s in got["steps"]], sel.steps.criterion,
                               rtol=1e-10)
    assert [s["decision"] for s in got["steps"]] == sel.steps.decision.tolist()
    assert got["methods"] == sel.methods_sentence()


def test_design_maximal_and_errors(capsys) -> None:
    assert main(["select-random", "sleepstudy", "Reaction ~ Days + (1 | Subject)",
                 "--maximal-design", "--strategy", "maximal-converging"]) == 0
    assert "maximal model: Reaction ~ Days + (1 + Days | Subject)" in capsys.readouterr().out
    assert run(["select-random", "sleepstudy", SLEEP, "--strategy", "bic"]) == 2
    assert "invalid choice: 'bic'" in capsys.readouterr().err
    assert run(["select-random", "sleepstudy", "Reaction ~ Days"]) == 2
    assert "no random terms" in capsys.readouterr().err
    assert run(["select-random", "sleepstudy", SLEEP, "--weights", "Days"]) == 2
    assert "--weights: only with --family" in capsys.readouterr().err
