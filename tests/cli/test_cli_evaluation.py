"""crossed fit / anova / emmeans / compare-specs / spec / headroom end to end on bundled data."""

import json

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main
from reference import r_answers

FULL = "delta ~ language * task * mode + (1 | architecture)"
ARCH = "delta ~ language * architecture + (1 | task)"
ADD = "delta ~ language + task + mode + (1 | architecture)"


def run(capsys, *argv) -> str:
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


@pytest.mark.filterwarnings("ignore::crossed.SingularFitWarning")
def test_fit_with_a_named_specification(capsys):
    out = run(capsys, "fit", "exist_mono",
              "repeated_measures:response=delta;within=language,task,mode")
    assert "Formula: delta ~ language * task * mode + (1 | architecture/model)" in out
    assert "model:architecture" in out


def test_anova(capsys):
    out = run(capsys, "anova", "exist_multi", FULL)
    assert "Type 3 ANOVA" in out and "language:task:mode" in out
    assert "Partial eta squared" in out
    data = json.loads(run(capsys, "anova", "exist_multi", FULL, "--json"))
    ref = pd.DataFrame(r_answers("exist_multi_full")["anova3_satterthwaite"])
    got = pd.DataFrame(data["anova"])
    np.testing.assert_allclose(got["statistic"], ref["F value"], rtol=1e-4)
    eta = pd.DataFrame(data["eta_squared"])
    want = pd.DataFrame(r_answers("exist_multi_full")["eta2_partial_one_sided"])
    np.testing.assert_allclose(eta["estimate"], want["Eta2_partial"], rtol=1e-4)
    # effectsize's default interval, one-sided [low, 1]; --alternative two-sided on request
    np.testing.assert_allclose(eta["conf_low"], want["CI_low"], rtol=1e-4, atol=1e-12)
    assert "one-sided, upper bound fixed at 1" in out
    data = json.loads(run(capsys, "anova", "exist_multi", FULL, "--json", "--alternative",
                          "two-sided"))
    want = pd.DataFrame(r_answers("exist_multi_full")["eta2_partial_two_sided"])
    np.testing.assert_allclose(pd.DataFrame(data["eta_squared"])["conf_high"],
                               want["CI_high"], rtol=1e-4)


def test_emmeans(capsys):
    out = run(capsys, "emmeans", "exist_multi", FULL, "language")
    assert "en - es" in out
    data = json.loads(run(capsys, "emmeans", "exist_multi", FULL, "language", "--json"))
    pair = r_answers("exist_multi_full")["emmeans"][0]["pairs_satterthwaite"][0]
    assert data["contrasts"][0]["estimate"] == pytest.approx(pair["estimate"], rel=1e-6)
    assert data["contrasts"][0]["df"] == pytest.approx(pair["df"], rel=1e-4)
    assert [r["language"] for r in data["emmeans"]] == ["en", "es"]
    out = run(capsys, "emmeans", "exist_multi", FULL, "task", "--by", "language",
              "--adjust", "holm")
    assert "holm" in out


def test_compare_specs_csv_and_parquet(capsys, tmp_path):
    out = run(capsys, "compare-specs", "exist_multi", FULL, ARCH, ADD, "--focus", "language",
              "--names", "full", "arch_fixed", "additive")
    assert "Likelihood-ratio tests" in out and "arch_fixed" in out
    path = tmp_path / "exist.csv"
    cx.load_dataset("exist_multi").to_csv(path, index=False)
    data = json.loads(run(capsys, "compare-specs", str(path), FULL, ADD, "--focus",
                          "language", "--json"))
    table = pd.DataFrame(data["table"])
    refs = [r_answers(c)["emmeans"][0]["pairs_satterthwaite"][0]
            for c in ("exist_multi_full", "exist_multi_additive")]
    np.testing.assert_allclose(table["std_error"], [r["SE"] for r in refs], rtol=1e-4)
    assert len(data["lrt"]) == 1
    pytest.importorskip("pyarrow")
    pq = tmp_path / "exist.parquet"
    cx.load_dataset("exist_multi").to_parquet(pq, index=False)
    data2 = json.loads(run(capsys, "compare-specs", str(pq), FULL, ADD, "--focus",
                           "language", "--json"))
    assert pd.DataFrame(data2["table"])["std_error"].tolist() == \
        pytest.approx(table["std_error"].tolist(), rel=1e-10)


def test_spec_command(capsys):
    out = run(capsys, "spec")
    assert "repeated_measures" in out and "cross_classified" in out
    out = run(capsys, "spec", "cross_classified", "response=score", "nuisance=seed,lr",
              "--formula-only")
    assert out.strip() == ("score ~ seed + lr + (1 | model) + (1 | dataset) + "
                           "(1 | model:dataset) + (0 + seed + lr || model:dataset)")
    data = json.loads(run(capsys, "spec", "repeated_measures", "response=delta",
                          "within=language,task", "--json"))
    assert data["formula"] == "delta ~ language * task + (1 | architecture/model)"


def test_headroom_command(capsys, tmp_path):
    out_path = tmp_path / "h.csv"
    run(capsys, "headroom", "exist_raw", "--score", "icm", "--gold", "gold_icm",
        "--baseline", "baseline_icm", "--name", "dh", "-o", str(out_path))
    out = pd.read_csv(out_path)
    np.testing.assert_allclose(out["dh"], out["delta"], rtol=1e-8)
    raw = cx.load_dataset("exist_raw")
    keys = ["language", "task", "mode"]
    raw[keys + ["gold_icm"]].drop_duplicates().to_csv(tmp_path / "gold.csv", index=False)
    base = raw[keys + ["baseline_icm"]].drop_duplicates()
    pd.concat([base.assign(run=1, baseline_icm=base["baseline_icm"] - 0.1),
               base.assign(run=2, baseline_icm=base["baseline_icm"] + 0.1)]).to_csv(
        tmp_path / "base.csv", index=False)
    raw.drop(columns=["gold_icm", "baseline_icm"]).to_csv(tmp_path / "scores.csv", index=False)
    run(capsys, "headroom", str(tmp_path / "scores.csv"), "--score", "icm",
        "--gold", str(tmp_path / "gold.csv"), "--baseline", str(tmp_path / "base.csv"),
        "--on", *keys, "--name", "dh", "-o", str(out_path))
    out = pd.read_csv(out_path)
    np.testing.assert_allclose(out["dh"], raw["delta"], rtol=1e-8)


def test_errors_are_reported(capsys):
    assert main(["compare-specs", "exist_multi", FULL, "--focus", "nope"]) == 2
    assert "focus 'nope'" in capsys.readouterr().err
    assert main(["spec", "nonexistent"]) == 2
