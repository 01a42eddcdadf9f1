"""Every analysis runs on the four published tables (reading, pipeline, CLI)."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.cli import main

SHAPES = {"xquad": (4, 12), "flores": (3, 16), "openner": (6, 61), "ea_mt": (33, 10)}


def _read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # EA-MT: incomplete submissions
        return cx.resample.read_table(path)


@pytest.mark.parametrize("name", list(SHAPES))
def test_read_and_analyze(real_files, name):
    st = _read(real_files[name])
    assert st.shape == SHAPES[name] and st.kind == "summary"
    res = cx.resample.analyze(st, n_resamples=300, n_variance_resamples=50, seed=0)
    S = st.shape[0]
    assert len(res.aggregates) == 2 * S * 3
    assert len(res.pairwise) == 2 * S * (S - 1) * 3
    assert np.allclose(res.ranks.groupby(["tasks", "aggregate", "system"])["share"].sum(), 1)
    w = res.variance.wide()
    assert np.allclose(w["between_task_sd"], st.mean.std(axis=1, ddof=1))


def test_readers_use_the_published_columns(real_files):
    raw = pd.read_json(real_files["xquad"], lines=True)
    st = _read(real_files["xquad"])
    i, j = st.systems.index("gemma-2-9b"), st.tasks.index("de")
    row = raw[(raw.Model == "gemma-2-9b") & (raw.Language == "de")].iloc[0]
    assert st.mean[i, j] == row.F1 and st.seed_sd[i, j] == row.SD_seed
    assert st.boot_sd[i, j] == row.SD_boot_avg and st.boot_sd_se[i, j] == row.SD_boot_stderr
    fl = cx.resample.read_table(real_files["flores"], metric="comet")
    assert fl.score == "comet_mean" and (fl.n_seeds == 5).all()
    with pytest.warns(UserWarning, match="dropped 17 systems"):
        ea = cx.resample.read_table(real_files["ea_mt"], metric="comet")
    assert np.isnan(ea.seed_sd).all() and not np.isnan(ea.boot_sd).any()
    with pytest.raises(ValueError, match="no metric"):
        cx.resample.read_table(real_files["flores"], metric="ter")


def test_long_table_reader(tmp_path, ner):
    path = tmp_path / "ner.csv"
    ner.to_csv(path, index=False)
    st = cx.resample.read_table(path, score="f1", system="model", task="language")
    assert st.kind == "replicates" and st.values.shape == (6, 61, 10, 1)


@pytest.mark.parametrize("name", list(SHAPES))
def test_cli_resample(real_files, name, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        code = main(["resample", str(real_files[name]), "--n-resamples", "200", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0
    for title in ("Variance components", "Aggregates over tasks", "beats_subsample",
                  "Rank distribution"):
        assert title in out


def test_cli_predict_and_eval_size(real_files, capsys, tmp_path):
    pytest.importorskip("sklearn")
    code = main(["resample", str(real_files["xquad"]), "--analysis", "predict",
                 "--n-resamples", "100", "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "Leave-one-language-out MAE" in out
    assert (tmp_path / "predictions.csv").exists()
    code = main(["eval-size", str(real_files["openner"]), "--sizes", "5,20,61",
                 "--n-subsamples", "5", "--no-aso"])
    out = capsys.readouterr().out
    assert code == 0 and "Smallest size" in out


def test_cli_eval_size_per_item(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [pd.DataFrame({"system": f"s{s}", "item": np.arange(100),
                          "score": rng.binomial(1, 0.5 + 0.1 * s, 100)}) for s in range(3)]
    path = tmp_path / "items.csv"
    pd.concat(rows).to_csv(path, index=False)
    code = main(["eval-size", str(path), "--item", "item", "--sizes", "20,50,100",
                 "--n-subsamples", "5", "--seed", "2"])
    assert code == 0 and "Kendall" in capsys.readouterr().out
