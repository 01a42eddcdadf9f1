"""Evaluation-set size: subset strategies, Kendall τ (against scipy), ASO agreement."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

import crossed as cx
from crossed.evaluation.resample.evalsize import _masks


def test_kendall_tau_equals_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 7))
    y = x + rng.normal(scale=0.8, size=x.shape)
    y[:10, :3] = 1.0                                   # ties
    x[5:15, 2:4] = 0.0
    tau = cx.resample.kendall_tau_b(x, y)
    ref = np.array([kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)])
    assert np.allclose(tau, ref, atol=1e-12)


def test_subset_strategies_items_and_tokens():
    rng = np.random.default_rng(1)
    w = np.ones(20)
    seq = _masks("seq", 5, w, 3, rng)
    assert seq.shape == (1, 20) and seq[0, -5:].all() and seq[0].sum() == 5
    rand = _masks("rand", 5, w, 30, rng)
    assert (rand.sum(axis=1) == 5).all() and len({tuple(r) for r in rand}) > 1
    rs = _masks("rand_seq", 5, w, 30, rng)
    for row in rs:
        idx = np.flatnonzero(row)
        assert len(idx) == 5 and (np.diff(idx) == 1).all()
    tokens = rng.integers(3, 30, 40).astype(float)
    for strategy in ("seq", "rand", "rand_seq"):
        m = _masks(strategy, 100, tokens, 25, rng)
        got = (m * tokens).sum(axis=1)
        assert (got >= 100).all()                       # whole sentences up to the size
        if strategy != "rand":
            for row in m:
                idx = np.flatnonzero(row)
                assert (np.diff(idx) == 1).all()
    assert _masks("rand", 1e9, tokens, 5, rng).all()


def test_eval_size_on_ner_like(ner):
    kw = dict(score="f1", system="model", item="language", seed_col="seed",
              sizes=[5, 15, 30, 61], n_subsamples=15, aso_bootstrap=100)
    r = cx.resample.eval_size(ner, seed=3, **kw)
    again = cx.resample.eval_size(ner, seed=3, **kw)
    pd.testing.assert_frame_equal(r.subsamples, again.subsamples)
    full = r.summary[r.summary["size"] == 61]
    assert np.allclose(full["tau_mean"], 1.0) and np.allclose(full["weighted_tau_mean"], 1.0)
    assert np.allclose(full["aso_agreement_mean"], 1.0)
    # per-subset τ equals scipy's on the subset's system means
    means = ner.groupby(["model", "language"])["f1"].mean().unstack()
    assert r.full.set_index("system")["score"].sub(means.mean(axis=1)).abs().max() < 1e-10
    rand = r.summary[r.summary["strategy"] == "rand"].set_index("size")["tau_mean"]
    assert rand[5] < rand[30] <= 1.0
    assert r.subsamples["aso_agreement"].between(0, 1).all()
    ms = r.min_size.set_index("strategy")
    stat = r.summary[r.summary["strategy"] == "rand"].set_index("size")["tau_mean"]
    ok = stat >= 0.9
    first = min(s for s in stat.index if ok.loc[s:].all())
    assert ms.loc["rand", "min_size"] == first


def test_eval_size_tokens_and_counts():
    rng = np.random.default_rng(0)
    n, rows = 300, []
    tok = rng.integers(5, 40, n)
    q = rng.normal(0, 1, n)
    for s in range(4):
        for k in range(3):
            p = 1 / (1 + np.exp(-(q + 0.3 * s)))
            tp = rng.binomial(tok, p)
            rows.append(pd.DataFrame({"system": f"s{s}", "seed": k, "item": np.arange(n),
                                      "tokens": tok, "tp": tp, "fp": rng.binomial(tok // 3, 1 - p),
                                      "fn": tok - tp}))
    df = pd.concat(rows, ignore_index=True)
    r = cx.resample.eval_size(df, seed_col="seed", tokens="tokens", unit="tokens",
                              counts=("tp", "fp", "fn"), sizes=[200, 1000, 4000],
                              n_subsamples=10, seed=1, aso_bootstrap=50)
    assert r.unit == "tokens"
    assert (r.subsamples["n_tokens"] >= r.subsamples["size"]).all()
    tot = df.groupby("system")[["tp", "fp", "fn"]].sum() / 3
    f1 = 2 * tot.tp / (2 * tot.tp + tot.fp + tot.fn)
    got = r.full.set_index("system")["score"]
    # mean over seeds of per-seed micro-F1 (close to F1 of the pooled counts)
    assert np.allclose(got.sort_index(), f1.sort_index(), atol=2e-3)
    assert list(r.full.sort_values("rank")["system"]) == ["s3", "s2", "s1", "s0"]


def test_eval_size_on_a_summary_table(real_files):
    st = cx.resample.read_table(real_files["xquad"])
    r = cx.resample.eval_size(st, sizes=[4, 8, 12], n_subsamples=10, seed=0, aso_bootstrap=50)
    assert set(r.summary["strategy"]) == {"seq", "rand", "rand_seq"}
    assert r.aso_full is not None and len(r.aso_full) == 6


def test_figure(ner, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from crossed.plots.resample import plot_tau_by_size

    with pytest.raises(ValueError, match="seed column"):
        cx.resample.eval_size(ner, score="f1", system="model", item="language")
    r = cx.resample.eval_size(ner, score="f1", system="model", item="language", seed_col="seed",
                              sizes=[10, 61], n_subsamples=5, aso=False, seed=0)
    ax = plot_tau_by_size(r)
    ax.figure.savefig(tmp_path / "tau.png")
    assert (tmp_path / "tau.png").stat().st_size > 0


def test_subset_tau_equals_scipy_on_the_subset(ner):
    r = cx.resample.eval_size(ner, score="f1", system="model", item="language",
                              seed_col="seed", sizes=[7, 20], strategies=["seq"], aso=False)
    languages = list(pd.unique(ner["language"]))
    full = ner.groupby("model", sort=False)["f1"].mean()
    for size in (7, 20):
        last = languages[-size:]
        sub = ner[ner["language"].isin(last)].groupby("model", sort=False)["f1"].mean()
        ref = kendalltau(full.to_numpy(), sub.reindex(full.index).to_numpy()).statistic
        got = r.subsamples.set_index("size").loc[float(size), "kendall_tau"]
        assert got == pytest.approx(ref, abs=1e-12)


def test_min_size_is_where_tau_stays_above_the_level():
    """A size whose τ dips below the level after a good one does not count."""
    from crossed.evaluation.resample.evalsize import _min_sizes

    summary = pd.DataFrame({"strategy": ["rand"] * 4 + ["seq"] * 2,
                            "size": [10.0, 20.0, 40.0, 80.0, 10.0, 80.0],
                            "tau_mean": [0.95, 0.85, 0.92, 0.97, 0.5, 0.6],
                            "tau_low": [0.9, 0.9, 0.9, 0.9, 0.9, 0.9]})
    mins = _min_sizes(summary, 0.9, None).set_index("strategy")
    assert mins.loc["rand", "min_size"] == 40.0          # not 10: τ dips at 20
    assert np.isnan(mins.loc["seq", "min_size"]) and mins.loc["seq", "statistic"] == "mean"
    by_low = _min_sizes(summary, 0.9, 0.05).set_index("strategy")
    assert list(by_low["min_size"]) == [10.0, 10.0] and by_low["statistic"].iloc[0] == "q0.05"
