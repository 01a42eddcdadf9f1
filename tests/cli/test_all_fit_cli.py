"""``crossed all-fit``: lme4's allFit (and with ``--repca`` its rePCA) from the command
line, the same numbers as :meth:`crossed.LmerFit.all_fit` and :meth:`~crossed.LmerFit.rePCA`."""

from __future__ import annotations

import json
import warnings

import numpy as np

import crossed as cx
from crossed.cli import main

SLEEP = "Reaction ~ Days + (Days | Subject)"
CBPP = "cbind(incidence, size - incidence) ~ period + (1 | herd)"


def test_text_output_lists_every_optimiser_and_the_components(capsys) -> None:
    assert main(["all-fit", "sleepstudy", SLEEP, "--repca"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Refits with every optimiser (lme4's allFit): " + SLEEP)
    for label in ("bobyqa", "lbfgsb", "nelder_mead", "nloptwrap.NLOPT_LN_NELDERMEAD"):
        assert label in out
    assert "Fixed effects by optimiser" in out and "(Intercept)" in out
    assert "Subject.Days.(Intercept)" in out  # lme4's $sdcor names
    assert "Lowest criterion among the converged refits: " in out
    assert "Principal components of the random effects (lme4's rePCA)" in out


def test_json_matches_the_api_for_a_glmm(capsys) -> None:
    assert main(["all-fit", "cbpp", CBPP, "--family", "binomial", "--repca", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer(CBPP, cx.load_dataset("cbpp"), family="binomial")
        want = fit.all_fit()
    labels = [row["optimizer"] for row in got["all_fit"]]
    assert labels == list(want.table["optimizer"])
    assert "lbfgsb" not in labels  # (no L-BFGS-B for a GLMM)
    np.testing.assert_allclose([row["criterion"] for row in got["all_fit"]],
                               want.table["criterion"], rtol=1e-12)
    assert got["best"] == want.best
    sd = [row["sd"] for row in got["rePCA"]]
    np.testing.assert_allclose(sd, fit.rePCA()["sd"], rtol=1e-12)


def test_bad_formula_is_one_line(capsys) -> None:
    assert main_exit(["all-fit", "sleepstudy", "Reaction ~ Days + (Days | Nope)"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crossed: error:") and "Nope" in err


def main_exit(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
