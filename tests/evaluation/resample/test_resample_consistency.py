"""The same right answer for every call: rank tables of analyze(), seeded variance
components, one item bootstrap per table, nothing silently dropped."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx


@pytest.fixture(scope="module")
def items():
    """3 systems × 3 tasks × 50 items of 0/1 scores."""
    rng = np.random.default_rng(0)
    rows = []
    for s, p in [("A", 0.5), ("B", 0.55), ("C", 0.6)]:
        for t in ["t1", "t2", "t3"]:
            for i in range(50):
                rows.append((s, t, f"i{i}", float(rng.random() < p)))
    return pd.DataFrame(rows, columns=["system", "task", "item", "correct"])


# ------------------------------------------------------------------ rank_table
def test_rank_table_of_analyze_output(ner_table):
    res = cx.resample.analyze(ner_table, n_resamples=200, seed=0, n_variance_resamples=20)
    tab = cx.resample.rank_table(res.ranks, "mean")
    assert list(pd.unique(tab.index.get_level_values("tasks"))) == ["fixed", "bootstrap"]
    for mode in ("fixed", "bootstrap"):
        one = cx.resample.rank_table(res.ranks, "mean", tasks=mode)
        alone = cx.resample.rank_table(res.ranks[res.ranks["tasks"] == mode]
                                       .drop(columns="tasks"), "mean")
        pd.testing.assert_frame_equal(one, alone)
        np.testing.assert_array_equal(tab.loc[mode].to_numpy(), one.to_numpy())
        assert list(tab.loc[mode].index) == list(one.index)
        np.testing.assert_allclose(one.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="'subsample'"):
        cx.resample.rank_table(res.ranks, "mean", tasks="subsample")
    with pytest.raises(ValueError, match="'mode'"):
        cx.resample.rank_table(res.ranks, "mode")


# ------------------------------------------------------------------ variance_components
def test_variance_components_seed_is_the_random_seed(ner_table):
    a = cx.resample.variance_components(ner_table, n_resamples=60, seed=0).components
    b = cx.resample.variance_components(ner_table, n_resamples=60, seed=0).components
    c = cx.resample.variance_components(ner_table, n_resamples=60, seed=1).components
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["std_error"].fillna(0), c["std_error"].fillna(0))
    gen = cx.resample.variance_components(ner_table, n_resamples=60,
                                          seed=np.random.default_rng(0)).components
    pd.testing.assert_frame_equal(a, gen)


def test_variance_components_seed_column_is_seed_col(ner, ner_table):
    kw = dict(score="f1", system="model", task="language", n_resamples=30, seed=3)
    by_col = cx.resample.variance_components(ner, seed_col="seed", **kw).components
    by_table = cx.resample.variance_components(ner_table, **{"n_resamples": 30, "seed": 3})
    pd.testing.assert_series_equal(by_col["estimate"], by_table.components["estimate"])
    with pytest.raises(TypeError, match="seed_col='seed'"):
        cx.resample.variance_components(ner, score="f1", system="model", task="language",
                                        seed="seed")
    with pytest.raises(TypeError, match="seed="):
        cx.resample.variance_components(ner_table, random_state=1)


# ------------------------------------------------------------------ per-item tables
def test_aggregates_of_items_same_estimate_in_every_mode(items):
    out = cx.resample.aggregates(items, score="correct", item="item", n_resamples=200,
                                 seed=0, aggregates=["mean"])
    est = out.pivot(index="system", columns="tasks", values="estimate")
    np.testing.assert_array_equal(est["fixed"], est["bootstrap"])
    # the statistic on the original sample: mean over tasks of the item means
    sample = items.groupby(["system", "task"])["correct"].mean().groupby("system").mean()
    np.testing.assert_allclose(est["fixed"], sample.reindex(est.index), rtol=1e-12)


def test_item_table_mean_is_the_sample_mean(items):
    st = cx.resample.from_items(items, "correct", item="item", n_boot=50, seed=4)
    cell = items.groupby(["system", "task"], sort=False)["correct"].mean()
    np.testing.assert_allclose(st.mean.ravel(), cell.to_numpy(), rtol=1e-12)
    assert st.paired


def test_item_bootstrap_is_paired_across_systems(items):
    # B is A with 2 of 150 items changed: paired differences barely move
    a = items[items["system"] == "A"]
    b = a.assign(system="B")
    b.loc[b.index[:2], "correct"] = 1.0 - b.loc[b.index[:2], "correct"]
    df = pd.concat([a, b], ignore_index=True)
    out = cx.resample.pairwise_differences(df, score="correct", item="item", aggregates=["mean"],
                                           tasks="fixed", replication="nonparametric",
                                           n_resamples=2000, seed=0)
    se = float(out["std_error"].iloc[0])
    # paired: only the 2 changed items of task t1 move the difference, SD about
    # sqrt(var(d) / 50) / 3 with var(d) ≈ 2/50, i.e. ≈ 0.009; an unpaired draw gives
    # sqrt(2) · SE(mean of A) ≈ sqrt(2) · sqrt(3 · 0.25 / 50) / 3 ≈ 0.058
    assert se < 0.02


# ------------------------------------------------------------------ missing scores
def test_missing_scores_are_reported(ner):
    df = ner.copy()
    df.loc[df.index[[0, 1, 700]], "f1"] = np.nan
    systems = df.loc[df.index[[0, 1, 700]], "model"]
    with pytest.warns(UserWarning, match=r"dropped 3 of \d+ rows with a missing value in 'f1'"
                      ) as rec:
        st = cx.resample.from_replicates(df, "f1", "model", "language", seed_col="seed")
    msg = str(rec[0].message)
    for name, n in systems.value_counts().items():
        assert f"{name} ({n})" in msg
    full = cx.resample.from_replicates(ner, "f1", "model", "language", seed_col="seed")
    assert st.systems == full.systems
    assert int(np.isnan(st.values).sum()) == 3


def test_missing_item_scores_are_reported(items):
    df = items.copy()
    df.loc[df.index[5], "correct"] = np.nan
    with pytest.warns(UserWarning, match=r"dropped 1 of .* A \(1\)"):
        cx.resample.from_items(df, "correct", item="item", n_boot=20, seed=0)


def test_prediction_reports_dropped_rows(real_files):
    frame = cx.resample.prediction_frame(cx.resample.read_table(real_files["xquad"]))
    frame.loc[frame.index[0], "score"] = np.nan
    name = frame.loc[frame.index[0], "system"]
    with pytest.warns(UserWarning, match=rf"dropped 1 of .*{name} \(1\)"):
        res = cx.resample.leave_one_task_out(frame, models=("baseline",))
    assert len(res.predictions) == len(frame) - 1


# ------------------------------------------------------------------ keyword conventions
# seed= is the random seed, seed_col= a column of seeds, progress= the progress bars; every
# old spelling fails with a TypeError that names the new keyword.
_ANALYSES = ["variance_components", "aggregates", "resample_aggregates", "rank_distribution",
             "pairwise_differences", "analyze"]


@pytest.mark.parametrize("name", _ANALYSES)
def test_analyses_reject_old_keyword_spellings(name, ner):
    f = getattr(cx.resample, name)
    kw = dict(score="f1", system="model", task="language", n_resamples=10)
    with pytest.raises(TypeError, match=r"seed= is the random seed.*seed_col='seed'"):
        f(ner, seed="seed", **kw)
    with pytest.raises(TypeError, match=r"random_state= is now seed="):
        f(ner, seed_col="seed", random_state=1, **kw)
    with pytest.raises(TypeError, match=r"progress_bar= is now progress="):
        f(ner, seed_col="seed", progress_bar=False, **kw)


def test_table_builders_reject_old_keyword_spellings(ner, items):
    with pytest.raises(TypeError, match=r"from_replicates: seed= is now seed_col="):
        cx.resample.from_replicates(ner, "f1", "model", "language", seed="seed")
    with pytest.raises(TypeError, match=r"read_table: seed= is now seed_col="):
        cx.resample.read_table(ner, fmt="long", score="f1", system="model", task="language",
                               seed="seed")
    with pytest.raises(TypeError, match=r"from_items: random_state= is now seed="):
        cx.resample.from_items(items, "correct", item="item", n_boot=5, random_state=0)
    with pytest.raises(TypeError, match=r"from_items: seed= is the random seed.*seed_col="):
        cx.resample.from_items(items, "correct", item="item", n_boot=5, seed="seed")
    with pytest.raises(TypeError, match=r"as_score_table: random_state= is now seed="):
        cx.resample.as_score_table(items, "correct", item="item", n_boot=5, random_state=0)
    with pytest.raises(TypeError, match=r"as_score_table: seed= is the random seed"):
        cx.resample.as_score_table(ner, "f1", "model", "language", seed="seed")


def test_other_analyses_reject_old_keyword_spellings(ner, real_files):
    kw = dict(score="f1", system="model", item="language", seed_col="seed", sizes=[7],
              strategies=["seq"], aso=False, n_subsamples=2)
    with pytest.raises(TypeError, match=r"eval_size: progress_bar= is now progress="):
        cx.resample.eval_size(ner, progress_bar=False, **kw)
    with pytest.raises(TypeError, match=r"eval_size: random_state= is now seed="):
        cx.resample.eval_size(ner, random_state=0, **kw)
    frame = cx.resample.prediction_frame(cx.resample.read_table(real_files["xquad"]))
    with pytest.raises(TypeError, match=r"leave_one_task_out: progress_bar= is now progress="):
        cx.resample.leave_one_task_out(frame, progress_bar=False)
    with pytest.raises(TypeError, match=r"leave_one_task_out: random_state= is now seed="):
        cx.resample.leave_one_task_out(frame, random_state=0)


def test_seed_col_and_seed_give_the_old_numbers(ner, items):
    """The renamed keywords reach the same computation: a seed column read by seed_col= and
    the item bootstrap seeded by seed= (values pinned from the code before the rename)."""
    st = cx.resample.from_replicates(ner, "f1", "model", "language", seed_col="seed")
    assert st.values.shape[2] == ner["seed"].nunique()
    a = cx.resample.from_items(items, "correct", item="item", n_boot=50, seed=4)
    b = cx.resample.from_items(items, "correct", item="item", n_boot=50,
                               seed=np.random.default_rng(4))
    np.testing.assert_array_equal(a.values, b.values)
