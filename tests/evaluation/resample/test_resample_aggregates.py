"""Aggregates, pairwise differences and rank distributions on ner_like."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx

R = cx.resample


def test_reproducible_with_a_seed(ner_table):
    a = R.aggregates(ner_table, n_resamples=500, seed=11)
    b = R.aggregates(ner_table, n_resamples=500, seed=11)
    c = R.aggregates(ner_table, n_resamples=500, seed=12)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["std_error"], c["std_error"])
    g = np.random.default_rng(5)
    d = R.rank_distribution(ner_table, n_resamples=300, seed=g)
    e = R.rank_distribution(ner_table, n_resamples=300, seed=np.random.default_rng(5))
    pd.testing.assert_frame_equal(d, e)


def test_observed_aggregates_and_intervals(ner, ner_table):
    res = R.aggregates(ner_table, n_resamples=2000, seed=1, level=0.9)
    means = ner.groupby(["model", "language"])["f1"].mean().unstack()
    fixed = res[res["tasks"] == "fixed"].set_index(["system", "aggregate"])
    for s in means.index:
        row = means.loc[s].to_numpy()
        assert fixed.loc[(s, "mean"), "estimate"] == pytest.approx(row.mean())
        assert fixed.loc[(s, "median"), "estimate"] == pytest.approx(np.median(row))
        assert fixed.loc[(s, "geometric_mean"), "estimate"] == pytest.approx(
            np.exp(np.log(row).mean()))
    z = 1.6448536269514722
    assert np.allclose(res["conf_low"], res["estimate"] - z * res["std_error"])
    assert np.allclose(res["conf_high"], res["estimate"] + z * res["std_error"])
    assert np.allclose(res["half_width"], (res["pct_high"] - res["pct_low"]) / 2)
    assert res.attrs["conf_level"] == 0.9


def test_standard_errors_match_theory(ner_table):
    st = ner_table
    T = st.shape[1]
    r = R.resample_aggregates(st, ["mean"], n_resamples=20_000, tasks="fixed",
                              replication="parametric", seed=3)
    se = r.draws[..., 0].std(axis=0, ddof=1)
    expect = np.sqrt((st.within_sd**2).sum(axis=1)) / T
    assert np.allclose(se, expect, rtol=0.03)
    r = R.resample_aggregates(st, ["mean"], n_resamples=20_000, tasks="bootstrap",
                              replication="none", seed=3)
    se = r.draws[..., 0].std(axis=0, ddof=1)
    expect = st.mean.std(axis=1, ddof=0) / np.sqrt(T)
    assert np.allclose(se, expect, rtol=0.03)
    none = R.resample_aggregates(st, n_resamples=10, tasks="fixed", replication="none", seed=0)
    assert np.allclose(none.draws, none.observed[None])


def test_nonparametric_replication(ner_table, real_files):
    r = R.resample_aggregates(ner_table, ["mean"], n_resamples=5000, tasks="fixed",
                              replication="nonparametric", seed=4)
    flat, counts = ner_table.replications()
    assert (counts == 10).all()
    # one seed drawn per cell: variance of the mean = mean over tasks of ddof=0 seed variance / T
    v = np.nanvar(flat, axis=-1).sum(axis=1) / ner_table.shape[1] ** 2
    assert np.allclose(r.draws[..., 0].var(axis=0), v, rtol=0.06)
    xq = R.read_table(real_files["xquad"])
    with pytest.raises(ValueError, match="summaries only"):
        R.resample_aggregates(xq, n_resamples=10, replication="nonparametric")


def test_subsample_without_replacement(ner_table):
    x = R.aggregates(ner_table, ["mean"], n_resamples=200, tasks="subsample", n_tasks=10,
                     seed=0)
    assert x.attrs["n_resamples"] == 200 and (x["tasks"] == "subsample").all()
    with pytest.raises(ValueError, match="without replacement"):
        R.resample_aggregates(ner_table, n_resamples=10, tasks="subsample", n_tasks=100)


def test_pairwise_differences(ner_table):
    d = R.pairwise_differences(ner_table, n_resamples=2000, seed=9)
    assert set(d["tasks"]) == {"fixed", "subsample"}
    f = d[(d["tasks"] == "fixed") & (d["aggregate"] == "mean")]
    m = ner_table.mean.mean(axis=1)
    idx = {s: i for i, s in enumerate(ner_table.systems)}
    for row in f.itertuples():
        assert row.estimate == pytest.approx(m[idx[row.system_a]] - m[idx[row.system_b]])
        assert row.effect_size == pytest.approx(row.estimate / row.std_error)
        assert row.large == (abs(row.effect_size) >= 2)
    mat = R.difference_matrix(d, "mean", "estimate", tasks="fixed")
    assert np.allclose(mat.to_numpy(), -mat.to_numpy().T, equal_nan=True)
    sub = d[(d["tasks"] == "subsample") & (d["aggregate"] == "mean")]
    # subsampling tasks adds between-task noise: larger SDs than with tasks fixed
    assert (sub["std_error"].to_numpy() > f["std_error"].to_numpy()).all()


def test_rank_distributions_sum_to_one(ner_table):
    r = R.rank_distribution(ner_table, n_resamples=3000, seed=2)
    S = ner_table.shape[0]
    assert len(r) == 3 * S * S
    sums = r.groupby(["aggregate", "system"])["share"].sum()
    assert np.allclose(sums, 1.0)
    per_rank = r.groupby(["aggregate", "rank"])["share"].sum()
    assert np.allclose(per_rank, 1.0)          # continuous scores: no ties
    obs = r[r["aggregate"] == "mean"].drop_duplicates("system").set_index("system")
    order = np.argsort(-ner_table.mean.mean(axis=1))
    expect = {ner_table.systems[i]: k + 1 for k, i in enumerate(order)}
    assert all(obs.loc[s, "observed_rank"] == k for s, k in expect.items())
    tab = R.rank_table(r, "mean")
    assert np.allclose(tab.sum(axis=1), 1.0)


def test_analyze_pipeline(ner):
    res = R.analyze(ner, n_resamples=500, n_variance_resamples=50, seed=1, score="f1",
                    system="model", task="language", seed_col="seed")
    assert set(res.aggregates["tasks"]) == {"fixed", "bootstrap"}
    assert set(res.pairwise["tasks"]) == {"fixed", "subsample"}
    assert np.allclose(res.ranks.groupby(["tasks", "aggregate", "system"])["share"].sum(), 1)
    again = R.analyze(ner, n_resamples=500, n_variance_resamples=50, seed=1, score="f1",
                      system="model", task="language", seed_col="seed")
    pd.testing.assert_frame_equal(res.pairwise, again.pairwise)


def test_subsampling_the_tasks_of_a_one_task_table_says_why_it_cannot(ner_table):
    # before: "cannot subsample 2 of 1 tasks without replacement"
    long = pd.DataFrame({"system": np.repeat(["a", "b"], 3), "task": "t1",
                         "seed": [0, 1, 2] * 2, "score": [0.1, 0.2, 0.3, 0.5, 0.4, 0.6]})
    one = R.read_table(long, fmt="long", score="score", seed_col="seed")
    with pytest.raises(ValueError, match="subsampling tasks needs at least 2 tasks; the "
                                         "table has 1 \\(t1\\)"):
        R.aggregates(one, n_resamples=10, tasks="subsample", seed=1)
    with pytest.raises(ValueError, match="n_tasks=99 of the table's"):
        R.aggregates(ner_table, n_resamples=10, tasks="subsample", n_tasks=99, seed=1)
