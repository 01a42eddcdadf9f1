"""``crossed fit DATA FORMULA --dask [SCHEDULER_ADDRESS]``: Parquet files fitted on a Dask
cluster, a line per pass on stderr, the same numbers as the in-memory fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

import crossed as cx  # noqa: E402
from crossed.cli import main  # noqa: E402

FORMULA = "score ~ system + (1 | item) + (1 | system:dataset)"


def scores(n: int = 4000, seed: int = 5):
    import pandas as pd

    rng = np.random.default_rng(seed)
    system = rng.choice(["s1", "s2", "s3"], n)
    dataset = rng.choice(["d1", "d2", "d3", "d4"], n)
    item = rng.integers(0, 120, n)
    cell = dict(zip([(s, d) for s in ("s1", "s2", "s3") for d in ("d1", "d2", "d3", "d4")],
                    rng.normal(0, 0.7, 12), strict=True))
    score = (5 + rng.normal(0, 1, 120)[item] + rng.normal(0, 1, n) + (system == "s2")
             + np.array([cell[(s, d)] for s, d in zip(system, dataset, strict=True)]))
    return pd.DataFrame({"system": system, "dataset": dataset, "item": item, "score": score})


@pytest.fixture(scope="module")
def address():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def test_fit_parquet_glob_on_a_scheduler(capsys, tmp_path, address):
    data = scores()
    for i, rows in enumerate(np.array_split(np.arange(len(data)), 3)):
        data.iloc[rows].to_parquet(tmp_path / f"part-{i}.parquet")
    glob = str(tmp_path / "*.parquet")
    assert main(["fit", glob, FORMULA, "--dask", address, "--json"]) == 0
    out = capsys.readouterr()
    got = json.loads(out.out)
    mem = cx.lmer(FORMULA, data)
    assert got["nobs"] == mem.nobs
    assert abs(got["deviance"] - mem.deviance) <= 1e-10 * abs(mem.deviance)
    np.testing.assert_allclose(got["theta"], mem.theta, rtol=1e-8, atol=1e-8)
    # the progress over the passes, on stderr
    assert "pass 1: levels ..." in out.err and "pass 2: sums done in" in out.err


def test_dask_refuses_a_csv_file(capsys, tmp_path, address):
    path = tmp_path / "d.csv"
    scores().to_csv(path, index=False)
    assert main(["fit", str(path), FORMULA, "--dask", address]) != 0
    assert "--dask reads Parquet data" in capsys.readouterr().err
