"""The same answers and the same output under pandas 2 (the oldest supported, CI's
oldest-dependencies job: scripts/test_oldest) and pandas 3 (the main job)."""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import crossed
from reference import load_table, read_csv

DATA = Path(__file__).resolve().parent / "data"


def test_reference_numbers_are_correctly_rounded():
    """pandas 2's default parser read 438 values of yearx_uncorrelated.csv one ulp away
    from R's read.csv (and pandas 3); the reference tables are read correctly rounded."""
    path = DATA / "yearx_uncorrelated.csv"
    d = read_csv(path, dtype={"g": str, "h": str})
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for col in ("x", "y"):
        exact = np.array([float(r[col]) for r in rows])  # Python's parser: correctly rounded
        np.testing.assert_array_equal(d[col].to_numpy(), exact)


def test_bundled_datasets_are_correctly_rounded():
    d = crossed.load_dataset("exist_mono")
    path = Path(crossed.__file__).parent / "data"
    files = sorted(path.glob("exist_mono*"))
    assert files
    raw = pd.read_csv(files[0], dtype=str) if files[0].suffix == ".csv" else None
    if raw is not None:
        for col in d.columns:
            if pd.api.types.is_float_dtype(d[col]):
                exact = np.array([float(v) for v in raw[col]])
                np.testing.assert_array_equal(d[col].to_numpy(), exact)


def test_varcorr_residual_labels_are_nan():
    """The Residual row's term1 is NaN (pandas 2 printed None, pandas 3 NaN)."""
    fit = crossed.lmer("Reaction ~ Days + (Days | Subject)",
                       load_table("sleepstudy.csv", ("Subject",)))
    vc = fit.varcorr()
    res = vc[vc["group"] == "Residual"].iloc[0]
    assert isinstance(res["term1"], float) and math.isnan(res["term1"])
    assert isinstance(res["term2"], float) and math.isnan(res["term2"])
    assert "None" not in vc.to_string()


def test_predict_newdata_warns_nothing():
    """predict(newdata) called pd.unique on an array pandas 2 deprecates (FutureWarning)."""
    d = load_table("sleepstudy.csv", ("Subject",))
    fit = crossed.lmer("Reaction ~ Days + (Days | Subject)", d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit.predict(d.head(3))
        fit.predict(d.head(3).assign(Subject="new"), allow_new_levels=True)
