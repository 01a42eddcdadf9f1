"""Score tables found by adversarial probing (issue 14): clear errors, not NaN crashes or
infinite means."""

import numpy as np
import pandas as pd
import pytest

from crossed import resample


def _replicates() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame([{"system": s, "task": t, "seed": k, "score": rng.normal(50, 2)}
                         for s in "ABC" for t in ("t1", "t2", "t3") for k in range(3)])


def test_an_empty_table_is_refused():
    # "cannot convert float NaN to integer" before
    with pytest.raises(ValueError, match="the table has no rows"):
        resample.from_replicates(_replicates().iloc[:0], "score", seed_col="seed")
    with pytest.raises(ValueError, match="the table has no rows"):
        resample.from_items(_replicates().iloc[:0].assign(item=1), "score")


def test_a_table_of_missing_scores_is_refused():
    with pytest.raises(ValueError, match="no rows with a value in every one of"):
        resample.from_replicates(_replicates().assign(score=np.nan), "score", seed_col="seed")


def test_an_infinite_score_is_refused_by_column():
    # the cell mean became inf and the aggregates inf or NaN
    d = _replicates()
    d.loc[4, "score"] = np.inf
    with pytest.raises(ValueError, match="column 'score' has 1 infinite values"):
        resample.from_replicates(d, "score", seed_col="seed")


@pytest.mark.parametrize("kw,name", [({"n_resamples": 0}, "n_resamples"),
                                     ({"n_resamples": -2}, "n_resamples"),
                                     ({"n_tasks": 0, "tasks": "subsample"}, "n_tasks")])
def test_resample_counts_are_validated_by_name(kw, name):
    # n_resamples=0 raised an IndexError, -2 "negative dimensions are not allowed"
    st = resample.from_replicates(_replicates(), "score", seed_col="seed")
    with pytest.raises(ValueError, match=f"{name} must be a whole number >= 1"):
        resample.aggregates(st, seed=0, **kw)
    with pytest.raises(ValueError, match=f"{name} must be a whole number >= 1"):
        resample.pairwise_differences(st, seed=0, **kw)


@pytest.mark.parametrize("kw,match", [({"n_subsamples": -1}, "n_subsamples must be"),
                                      ({"n_subsamples": 0}, "n_subsamples must be"),
                                      ({"level": 5}, "level is a Kendall tau"),
                                      ({"quantile": 7}, "quantile must be from 0 to 1"),
                                      ({"sizes": []}, "sizes is empty")])
def test_eval_size_arguments_are_validated_by_name(kw, match):
    # -1: "negative dimensions are not allowed"; sizes=[]: IndexError; 0 and level=5 ran
    rng = np.random.default_rng(0)
    d = pd.DataFrame([{"system": s, "item": i, "score": rng.random()}
                      for s in "ABC" for i in range(40)])
    with pytest.raises(ValueError, match=match):
        resample.eval_size(d, seed=0, **{"n_subsamples": 3, **kw})
