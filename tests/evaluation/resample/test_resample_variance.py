"""Variance components against direct numpy/pandas computations of the same definitions."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx


def test_ner_like_matches_direct_computation(ner):
    vc = cx.resample.variance_components(ner, score="f1", system="model", task="language",
                                         seed_col="seed", n_resamples=200, seed=1)
    cell = ner.groupby(["model", "language"])["f1"].agg(["mean", "std"])
    between = cell["mean"].groupby("model").std(ddof=1)
    grand = cell["mean"].groupby("model").mean()
    seed_rms = np.sqrt((cell["std"] ** 2).groupby("model").mean())
    w = vc.wide()
    assert np.allclose(w["mean"], grand.reindex(w.index), rtol=0, atol=1e-10)
    assert np.allclose(w["between_task_sd"], between.reindex(w.index), atol=1e-10)
    assert np.allclose(w["seed_sd"], seed_rms.reindex(w.index), atol=1e-10)
    assert np.allclose(w["within_sd"], seed_rms.reindex(w.index), atol=1e-10)
    assert w["boot_sd"].isna().all()
    # per-task summaries across tasks
    c = vc.components.set_index(["system", "component"])
    per_sys = cell["std"].groupby("model")
    for s in w.index:
        assert c.loc[(s, "seed_sd"), "task_min"] == pytest.approx(per_sys.min()[s])
        assert c.loc[(s, "seed_sd"), "task_max"] == pytest.approx(per_sys.max()[s])
        assert c.loc[(s, "seed_sd"), "task_mean"] == pytest.approx(per_sys.mean()[s])
        assert c.loc[(s, "mean"), "task_sd"] == pytest.approx(between[s])
    pt = vc.per_task.set_index(["system", "task"])
    assert np.allclose(pt["seed_sd"], cell["std"].reindex(pt.index), atol=1e-10)
    assert (pt["n_seeds"] == 10).all()


def test_seed_and_boot_components():
    rng = np.random.default_rng(3)
    S, T, K, B = 3, 4, 3, 6
    y = rng.normal(50, 5, (S, T, 1, 1)) + rng.normal(0, 1, (S, T, K, 1)) \
        + rng.normal(0, 2, (S, T, K, B))
    s, t, k, b = np.indices(y.shape).reshape(4, -1)
    df = pd.DataFrame({"sys": s.astype(str), "task": t.astype(str), "seed": k, "b": b,
                       "y": y.ravel()})
    vc = cx.resample.variance_components(df, score="y", system="sys", task="task",
                                         seed_col="seed", boot="b", n_resamples=100, seed=0)
    seed_means = y.mean(axis=3)
    seed_sd = seed_means.std(axis=2, ddof=1)                        # (S, T)
    boot_sd = np.sqrt(y.var(axis=3, ddof=1).mean(axis=2))
    pt = vc.per_task
    assert np.allclose(pt["seed_sd"], seed_sd.ravel())
    assert np.allclose(pt["boot_sd"], boot_sd.ravel())
    assert np.allclose(pt["within_sd"], np.sqrt(seed_sd**2 + boot_sd**2).ravel())
    w = vc.wide()
    assert np.allclose(w["boot_sd"], np.sqrt((boot_sd**2).mean(axis=1)))
    assert np.allclose(w["between_task_sd"], y.mean(axis=(2, 3)).std(axis=1, ddof=1))
    se = vc.wide("std_error")
    assert (se > 0).all().all()


def test_summary_table_and_parametric_se():
    df = pd.DataFrame({"system": np.repeat(["a", "b"], 5), "task": list("vwxyz") * 2,
                       "m": np.arange(10.0), "s_seed": 1.0, "s_boot": 2.0})
    vc = cx.resample.variance_components(df, mean="m", seed_sd="s_seed", boot_sd="s_boot",
                                         n_seeds=5, n_boot=1000, n_resamples=4000,
                                         seed=2)
    w = vc.wide()
    assert np.allclose(w["seed_sd"], 1.0) and np.allclose(w["boot_sd"], 2.0)
    assert np.allclose(w["within_sd"], np.sqrt(5.0))
    assert np.allclose(w["between_task_sd"], np.std(np.arange(5.0), ddof=1))
    se = vc.wide("std_error")
    # pooled seed SD over 5 tasks of 5 seeds: SE ≈ σ / sqrt(2 · 5 · 4)
    assert se.loc["a", "seed_sd"] == pytest.approx(1 / np.sqrt(40), rel=0.15)
    # mean over tasks, tasks resampled: SE ≈ SD·sqrt((T−1)/T)/sqrt(T)
    assert se.loc["a", "mean"] == pytest.approx(np.std(np.arange(5.0)) / np.sqrt(5), rel=0.1)


def test_same_seed_same_numbers(ner):
    kw = dict(score="f1", system="model", task="language", seed_col="seed", n_resamples=100)
    a = cx.resample.variance_components(ner, seed=7, **kw).components
    b = cx.resample.variance_components(ner, seed=7, **kw).components
    c = cx.resample.variance_components(ner, seed=8, **kw).components
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["std_error"].fillna(0), c["std_error"].fillna(0))


def test_items_bootstrap():
    rng = np.random.default_rng(0)
    n = 400
    rows = [pd.DataFrame({"system": s, "task": t, "item": np.arange(n),
                          "correct": rng.binomial(1, p, n)})
            for s, p in (("a", 0.6), ("b", 0.7)) for t in ("t1", "t2")]
    df = pd.concat(rows, ignore_index=True)
    st = cx.resample.from_items(df, "correct", item="item", n_boot=400, seed=1)
    assert st.values.shape == (2, 2, 1, 400)
    expect = np.sqrt(0.6 * 0.4 / n)
    assert st.boot_sd[0, 0] == pytest.approx(expect, rel=0.2)
    assert np.isnan(st.seed_sd).all()
    vc = cx.resample.variance_components(st, n_resamples=50, seed=0)
    assert vc.wide().loc["a", "boot_sd"] == pytest.approx(expect, rel=0.2)


def test_incomplete_systems_are_dropped_with_a_warning():
    df = pd.DataFrame({"system": ["a", "a", "b", "b", "c"], "task": ["x", "y", "x", "y", "x"],
                       "m": [1.0, 2.0, 3.0, 4.0, 5.0]})
    with pytest.warns(UserWarning, match="dropped 1 systems"):
        st = cx.resample.from_summary(df, "m")
    assert st.systems == ("a", "b")
    with pytest.raises(ValueError, match="no score"):
        cx.resample.from_summary(df, "m", missing="error")
    with pytest.warns(UserWarning, match="dropped 1 tasks"):
        assert cx.resample.from_summary(df, "m", missing="drop_tasks").tasks == ("x",)


def test_ragged_replications(ner):
    rag = ner.drop(index=ner.sample(frac=0.1, random_state=1).index)
    st = cx.resample.from_replicates(rag, "f1", "model", "language", seed_col="seed")
    assert st.replications()[1].min() < 10
    vc = cx.resample.variance_components(st, n_resamples=100, seed=0)
    cell = rag.groupby(["model", "language"])["f1"].std()
    expect = np.sqrt((cell**2).groupby("model").mean())
    assert np.allclose(vc.wide()["seed_sd"], expect.reindex(vc.wide().index))
    assert np.isfinite(vc.wide("std_error")["seed_sd"]).all()
    r = cx.resample.aggregates(st, replication="nonparametric", n_resamples=200, seed=0,
                               progress=True)
    assert np.isfinite(r["std_error"]).all()
