"""Almost Stochastic Order against deepsig's ``aso`` (stored reference numbers and live)."""

import json
from pathlib import Path

import numpy as np
import pytest

import crossed as cx

REF = json.loads((Path(__file__).resolve().parents[2] / "data" / "aso_deepsig.json").read_text())
CASES = {c["name"]: c for c in REF["cases"]}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_deepsig_reference(name):
    # reference: tests/evaluation/resample/make_aso_reference.py (deepsig 1.2.8)
    case = CASES[name]
    mine = cx.resample.aso(case["a"], case["b"], seed=0, n_bootstrap=20_000)
    assert mine == pytest.approx(case["eps_min"], abs=0.02)


def test_deepsig_readme_example():
    # deepsig's README: aso(my_model_scores, baseline_scores, seed=1234) -> 0.225
    case = CASES["readme"]
    assert cx.resample.aso(case["a"], case["b"], seed=1234) == pytest.approx(0.225, abs=0.02)


def test_violation_ratio_matches_deepsig_live():
    aso_mod = pytest.importorskip("deepsig.aso")
    rng = np.random.default_rng(1)
    for n, m in [(5, 5), (10, 7), (50, 50), (3, 200), (2, 3)]:
        a, b = rng.normal(0, 1, n), rng.normal(0.2, 1, m)
        ref = aso_mod.compute_violation_ratio(a, b, dt=0.005)
        assert float(cx.resample.violation_ratio(a, b)) == pytest.approx(ref, abs=1e-12)


def test_aso_live_against_deepsig():
    deepsig = pytest.importorskip("deepsig")
    rng = np.random.default_rng(42)
    a, b = rng.normal(0.55, 0.1, 12), rng.normal(0.5, 0.1, 12)
    ref = deepsig.aso(a, b, seed=5, num_bootstrap_iterations=100, show_progress=False)
    mine = cx.resample.aso(a, b, seed=5, n_bootstrap=20_000)
    assert mine == pytest.approx(ref, abs=0.05)       # deepsig's own 100-draw noise included


def test_separated_and_identical_distributions():
    rng = np.random.default_rng(0)
    a, b = rng.normal(10, 1, 20), rng.normal(0, 1, 20)
    assert cx.resample.aso(a, b, seed=1) < 0.01
    assert cx.resample.aso(b, a, seed=1) > 0.99
    for s in range(5):
        x, y = rng.normal(0, 1, (2, 30))
        assert cx.resample.aso(x, y, seed=s) > 0.2


def test_seeded_and_batched():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.1, 1, 15), rng.normal(0, 1, 15)
    assert cx.resample.aso(a, b, seed=9) == cx.resample.aso(a, b, seed=9)
    e, v, s = cx.resample.aso_batch(np.stack([a, b]), np.stack([b, a]), seed=0)
    assert e.shape == (2,)
    # ε_W2(A, B) = 1 − ε_W2(B, A), up to the first grid point deepsig's convention leaves out
    assert v[0] == pytest.approx(1 - v[1], abs=0.05)
    m = cx.resample.aso_matrix({"a": a, "b": b, "c": b + 5}, seed=0)
    assert len(m) == 6 and m.attrs["num_comparisons"] == 3
    row = m.set_index(["system_a", "system_b"])
    assert row.loc[("c", "a"), "eps_min"] < 0.05
