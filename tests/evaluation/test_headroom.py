"""cx.headroom: gold-standard normalisation and fraction of headroom (exist_raw's delta)."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx


@pytest.fixture(scope="module")
def raw():
    return cx.load_dataset("exist_raw")


def test_delta_by_hand(raw):
    """The formulas of the issue written out by hand reproduce exist_raw's delta column."""
    s, G, b = raw["icm"], raw["gold_icm"], raw["baseline_icm"]
    s_norm = (s + G) / (2 * G)
    b_norm = (b + G) / (2 * G)
    by_hand = (s_norm - b_norm) / (1 - b_norm)
    np.testing.assert_allclose(by_hand, raw["delta"], rtol=1e-8)
    out = cx.headroom(raw.drop(columns="delta"), score="icm", gold="gold_icm",
                      baseline="baseline_icm")
    np.testing.assert_allclose(out["delta"], raw["delta"], rtol=1e-8)
    np.testing.assert_allclose(out["score_norm"], s_norm, rtol=1e-12)
    np.testing.assert_allclose(out["baseline_norm"], b_norm, rtol=1e-12)
    # equivalent closed form (s - b) / (G - b); data untouched
    np.testing.assert_allclose(out["delta"], (s - b) / (G - b), rtol=1e-10)
    assert "score_norm" not in raw.columns


def test_first_row_numbers(raw):
    row = raw.iloc[[0]].drop(columns="delta")
    out = cx.headroom(row, score="icm", gold="gold_icm", baseline="baseline_icm", name="dh")
    # s = 0.4873114763, G = 0.98, b = 0.13916
    s_norm = (0.4873114763 + 0.98) / 1.96
    b_norm = (0.13916 + 0.98) / 1.96
    assert out["dh"].iloc[0] == pytest.approx((s_norm - b_norm) / (1 - b_norm), rel=1e-12)
    assert out["dh"].iloc[0] == pytest.approx(0.4140519912, rel=1e-9)


def test_lookup_tables_and_baseline_runs(raw):
    keys = ["language", "task", "mode"]
    gold = raw[keys + ["gold_icm"]].drop_duplicates()
    base = raw[keys + ["baseline_icm"]].drop_duplicates()
    # three baseline runs per test set whose mean is the baseline
    runs = pd.concat([base.assign(run=i, baseline_icm=base["baseline_icm"] + d)
                      for i, d in enumerate([-0.01, 0.0, 0.01])], ignore_index=True)
    scores = raw[["architecture", "model"] + keys + ["icm"]]
    out = cx.headroom(scores, score="icm", gold=gold, baseline=runs, on=keys)
    np.testing.assert_allclose(out["delta"], raw["delta"], rtol=1e-8)
    np.testing.assert_allclose(out["gold"], raw["gold_icm"])
    np.testing.assert_allclose(out["baseline"], raw["baseline_icm"], rtol=1e-12)


def test_scalar_gold_and_baseline():
    df = pd.DataFrame({"score": [0.5, 0.8, 0.2]})
    out = cx.headroom(df, gold=1.0, baseline=0.2)
    np.testing.assert_allclose(out["delta"], [(0.5 - 0.2) / 0.8, 0.75, 0.0])


def test_errors(raw):
    keys = ["language", "task", "mode"]
    scores = raw[keys + ["icm", "gold_icm"]]
    at_ceiling = scores.assign(b=scores["gold_icm"])
    with pytest.raises(ValueError, match="at or above the gold standard"):
        cx.headroom(at_ceiling, score="icm", gold="gold_icm", baseline="b")
    above = scores.assign(b=scores["gold_icm"] + 1)
    with pytest.raises(ValueError, match="no headroom"):
        cx.headroom(above, score="icm", gold="gold_icm", baseline="b")
    base = raw[keys + ["baseline_icm"]].drop_duplicates()
    partial = base[base["language"] == "en"]
    with pytest.raises(ValueError, match=r"no baseline for 6 group\(s\)"):
        cx.headroom(scores, score="icm", gold="gold_icm", baseline=partial, on=keys)
    with pytest.raises(ValueError, match="needs the key columns"):
        cx.headroom(scores, score="icm", gold="gold_icm", baseline=base)
    with pytest.raises(ValueError, match="must be positive"):
        cx.headroom(scores.assign(g=0.0), score="icm", gold="g", baseline=-1.0)
    with pytest.raises(ValueError, match="not in the data"):
        cx.headroom(scores, score="nope", gold="gold_icm", baseline=0.0)
    gold_conflict = pd.concat([raw[keys + ["gold_icm"]].drop_duplicates(),
                               raw[keys + ["gold_icm"]].drop_duplicates().assign(
                                   gold_icm=lambda d: d["gold_icm"] + 1)])
    with pytest.raises(ValueError, match="several different values"):
        cx.headroom(scores, score="icm", gold=gold_conflict, baseline=-0.5, on=keys)
