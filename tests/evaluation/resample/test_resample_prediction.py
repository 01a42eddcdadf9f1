"""Leave-one-language-out performance prediction on XQuAD."""

import sys

import numpy as np
import pytest

import crossed as cx

R = cx.resample


@pytest.fixture(scope="module")
def xquad_frame(real_files):
    return R.prediction_frame(R.read_table(real_files["xquad"]))


def test_language_features():
    f = R.language_features(["ar", "en-de", "de-en", "hau_MasakhaNER_2.0", "ko_KR", "xx"])
    f = f.set_index("task")
    assert f.loc["ar", "family"] == "Afro-Asiatic" and f.loc["ar", "script"] == "Arabic"
    assert f.loc["en-de", "language"] == "deu" and f.loc["en-de", "direction"] == "from_en"
    assert f.loc["de-en", "direction"] == "to_en"
    assert f.loc["hau_MasakhaNER_2.0", "latin_script"] == 1
    assert f.loc["ko_KR", "family"] == "Koreanic"
    assert f.loc["xx", "family"] == "unknown"


def test_leave_one_language_out(xquad_frame):
    pytest.importorskip("sklearn")
    res = R.leave_one_task_out(xquad_frame, numeric=["latin_script"], categorical=["script"],
                               group="family", seed=0, gbm_params={"n_estimators": 20})
    assert set(res.mae["model"]) == {"baseline", "linear", "gbm", "mixed"}
    assert len(res.mae_by_task) == 12 * 4
    assert (res.mae["n"] == 48).all()
    # the baseline is the system's mean over the other languages
    df = xquad_frame
    pr = res.predictions
    p = pr[(pr["model"] == "baseline") & (pr["task"] == "en")]
    for row in p.itertuples():
        other = df[(df["system"] == row.system) & (df["task"] != "en")]["score"].mean()
        assert row.predicted == pytest.approx(other)
    by = res.mae_by_task.groupby("model")["mae"].mean()
    assert np.allclose(by.reindex(res.mae["model"]).to_numpy(), res.mae["mae"].to_numpy())
    again = R.leave_one_task_out(xquad_frame, numeric=["latin_script"], categorical=["script"],
                                 group="family", seed=0, gbm_params={"n_estimators": 20})
    assert res.predictions.equals(again.predictions)
    assert np.isfinite(res.predictions["predicted"]).all()


def test_mixed_model_uses_family_intercepts(xquad_frame):
    res = R.leave_one_task_out(xquad_frame, group="family", models=("mixed", "linear"))
    lin = res.mae.set_index("model")["mae"]
    # without features the linear model is the system mean; the mixed model borrows from
    # the held-out language's family and does better on XQuAD
    assert lin["mixed"] < lin["linear"]


def test_gbm_needs_scikit_learn(xquad_frame, monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.ensemble", None)
    with pytest.raises(ImportError, match="scikit-learn"):
        R.leave_one_task_out(xquad_frame, models=("gbm",))
