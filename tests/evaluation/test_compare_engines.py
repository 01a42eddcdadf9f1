"""``compare_engines`` and ``crossed compare-engines``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.cli import main
from crossed.evaluation.compare_engines import format_comparison
from reference import DATA_DIR, load_table

SLEEP = "Reaction ~ Days + (Days | Subject)"


@pytest.fixture(scope="module")
def sleep():
    return load_table("sleepstudy.csv", ("Subject",))


@pytest.fixture(scope="module")
def table(sleep):
    return crossed.compare_engines(SLEEP, sleep, engines=["native", "statsmodels"])


def test_layout(table):
    assert list(table.columns) == ["quantity", "term", "native", "statsmodels", "spread"]
    assert list(dict.fromkeys(table["quantity"])) == [
        "criterion", "fixef", "std_error", "variance", "covariance", "sigma", "theta", "time_s"]
    fixef = table[table["quantity"] == "fixef"]
    assert list(fixef["term"]) == ["(Intercept)", "Days"]
    assert list(table[table["quantity"] == "variance"]["term"]) == ["Subject (Intercept)",
                                                                   "Subject Days"]
    assert table.attrs["errors"] == {} and table.attrs["reml"] is True


def test_values_are_each_engines(table, sleep):
    nat = crossed.lmer(SLEEP, sleep)
    crit = table[table["quantity"] == "criterion"].iloc[0]
    assert crit["term"] == "REML criterion"
    assert crit["native"] == pytest.approx(nat.deviance, rel=1e-10)
    assert crit["statsmodels"] == pytest.approx(nat.deviance, rel=1e-6)
    se = table[table["quantity"] == "std_error"]
    np.testing.assert_allclose(se["native"], np.sqrt(np.diag(nat.vcov_beta)), rtol=1e-8)
    body = table[table["quantity"] != "time_s"]
    np.testing.assert_allclose(body["spread"],
                               (body["native"] - body["statsmodels"]).abs(), rtol=1e-12)
    assert (table[table["quantity"] == "time_s"][["native", "statsmodels"]] > 0).all(axis=None)


def test_engine_that_cannot_fit_is_reported():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": np.repeat([f"a{i}" for i in range(6)], 10),
                       "b": np.tile([f"b{i}" for i in range(5)], 12)})
    df["x"] = rng.normal(size=60)
    df["y"] = df["x"] + rng.normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = crossed.compare_engines("y ~ x + (1 + x | a) + (1 | b)", df,
                                      engines=["native", "statsmodels"])
    assert tab["statsmodels"].isna().all()
    assert "correlated random slopes" in tab.attrs["errors"]["statsmodels"]
    assert tab["spread"].fillna(0).eq(0).all()  # one engine: no spread
    text = format_comparison(tab)
    assert "statsmodels: not fitted:" in text


def test_unknown_engine(sleep):
    with pytest.raises(ValueError, match="unknown engine 'sas'"):
        crossed.compare_engines(SLEEP, sleep, engines=["native", "sas"])


def test_all_engines_by_default(r_stack, sleep):
    tab = crossed.compare_engines(SLEEP, sleep)
    assert list(tab.columns[2:5]) == ["native", "statsmodels", "lme4"]
    body = tab[tab["quantity"].isin(["criterion", "fixef", "std_error"])]
    np.testing.assert_allclose(body["lme4"], body["native"], rtol=1e-5)
    # lme4's time is the fit, not R's start-up
    assert tab[tab["quantity"] == "time_s"]["lme4"].iloc[0] < 3.0


def test_cli_text_and_json(capsys):
    path = str(DATA_DIR / "sleepstudy.csv")
    args = ["compare-engines", path, SLEEP, "--engines", "native,statsmodels",
            "--factor", "Subject"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "native" in out and "statsmodels" in out and "REML criterion" in out
    assert main(args + ["--ml", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reml"] is False
    crit = [row for row in data["table"] if row["quantity"] == "criterion"][0]
    assert crit["term"] == "-2 log-likelihood"
    assert crit["statsmodels"] == pytest.approx(crit["native"], rel=1e-6)


def test_cli_help_lists_engines(capsys):
    with pytest.raises(SystemExit):
        main(["compare-engines", "--help"])
    out = capsys.readouterr().out
    assert "--engines" in out and "--engine " not in out
