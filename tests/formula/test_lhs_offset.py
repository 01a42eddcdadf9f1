"""The response, ``offset()`` and ``cbind()`` are parsed once into the spec and evaluated by
the one evaluator (issue 30).

Before: the response was built with formula grammar, so a subtracted part was dropped
without a word (``Reaction - 100`` gave an intercept of 251.41, R 151.41), ``Reaction * 2``
and ``offset(0.5 * Days)`` were refused, and the text of ``offset()``/``cbind()`` was
checked as formula terms (where ``0*x`` drops ``x``) and then evaluated as Python: a shell
command ran. R's values: ``tests/formula/lhs_offset_reference.R`` (R 4.2.2, lme4 1.1-31),
stored in ``tests/data/reference/lhs_offset.json``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main
from crossed.formula import FormulaError

DATA = Path(__file__).resolve().parents[1] / "data"
REFERENCE = json.loads((DATA / "reference" / "lhs_offset.json").read_text())
SLEEP = pd.read_csv(DATA / "sleepstudy.csv")
CBPP = pd.read_csv(DATA / "glmm" / "cbpp.csv")


@pytest.mark.parametrize("formula", [f for f in REFERENCE if not f.startswith("cbind")])
def test_left_sides_and_offsets_give_lmes_numbers(formula: str) -> None:
    ref = REFERENCE[formula]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer(formula, SLEEP)
    np.testing.assert_allclose(fit.fixef.to_numpy(), ref["fixef"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fit.deviance, ref["criterion"], rtol=1e-9)


def test_cbind_gives_glmers_numbers() -> None:
    formula = "cbind(incidence, size - incidence) ~ period + (1|herd)"
    ref = REFERENCE[formula]
    fit = cx.glmer(formula, CBPP.astype({"period": str, "herd": str}), family="binomial")
    np.testing.assert_allclose(np.asarray(fit.fixef), ref["fixef"], rtol=1e-4, atol=1e-5)


def test_an_offset_term_is_evaluated_on_new_data() -> None:
    fit = cx.lmer("Reaction ~ Days + offset(0.5 * Days) + (1|Subject)", SLEEP)
    new = SLEEP.iloc[:4]
    plain = fit.predict(new, include_random=False)
    beta = fit.fixef.to_numpy()
    np.testing.assert_allclose(plain, beta[0] + beta[1] * new.Days + 0.5 * new.Days)


SENTINEL = "/tmp/crossed_test_offset_pwned"
SYSTEM = f"np.f2py.os.system('touch {SENTINEL}')"
HOSTILE_LMM = [f"Reaction ~ Days + offset(Days - {SYSTEM}) + (1|Subject)",
               f"Reaction ~ Days + offset(0*{SYSTEM}) + (1|Subject)",
               f"Reaction - {SYSTEM} ~ Days + (1|Subject)",
               f"Reaction ~ Days + offset(Days.to_csv('{SENTINEL}')) + (1|Subject)"]
HOSTILE_GLMM = [f"cbind(incidence + 0*{SYSTEM}, size - incidence) ~ period + (1|herd)",
                f"cbind(incidence, size - incidence - {SYSTEM}) ~ period + (1|herd)"]


@pytest.fixture
def sentinel():
    path = Path(SENTINEL)
    path.unlink(missing_ok=True)
    yield path
    assert not path.exists(), "a formula ran a shell command"


@pytest.mark.parametrize("formula", HOSTILE_LMM)
def test_code_in_the_response_or_an_offset_never_runs(sentinel, formula: str) -> None:
    with pytest.raises(FormulaError, match="refused"):
        cx.lmer(formula, SLEEP)


@pytest.mark.parametrize("formula", HOSTILE_GLMM)
def test_code_in_cbind_never_runs(sentinel, formula: str) -> None:
    with pytest.raises(FormulaError, match="refused"):
        cx.glmer(formula, CBPP, family="binomial")


@pytest.mark.parametrize("argv", [["fit", str(DATA / "sleepstudy.csv"), HOSTILE_LMM[0]],
                                  ["fit", str(DATA / "glmm" / "cbpp.csv"), HOSTILE_GLMM[0],
                                   "--family", "binomial"]])
def test_code_on_the_command_line_never_runs(sentinel, capsys, argv: list[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("crossed: error: ") and "refused" in err


def test_a_trusted_offset_is_still_python(sentinel) -> None:
    """``trusted=True`` is the one opt-out: its expressions are Python."""
    fit = cx.lmer("Reaction ~ Days + offset(Days.clip(0, 5)) + (1|Subject)", SLEEP,
                  trusted=True)
    assert fit.design.offset is not None
    np.testing.assert_array_equal(fit.design.offset, SLEEP.Days.clip(0, 5))


def test_cbind_in_lmer_points_to_glmer() -> None:
    with pytest.raises(FormulaError, match="glmer"):
        cx.lmer("cbind(incidence, size - incidence) ~ period + (1|herd)", CBPP)


def test_the_spec_prints_back_the_formula() -> None:
    spec = cx.parse("log(Reaction) - 5 ~ Days + offset(0.5 * Days) + (Days | Subject)")
    assert spec.response == "log(Reaction) - 5" and spec.offsets == ("0.5 * Days",)
    text = spec.to_formula()
    assert text == "log(Reaction) - 5 ~ Days + offset(0.5 * Days) + (Days | Subject)"
    again = cx.parse(text)
    assert (again.response, again.fixed, again.offsets, again.random) == (
        spec.response, spec.fixed, spec.offsets, spec.random)
