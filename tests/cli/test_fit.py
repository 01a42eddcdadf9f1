"""``crossed fit --factor``: a numeric column made a factor as R's ``factor(x)`` does."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from crossed.cli import main
from crossed.cli.fit import as_factor


def test_as_factor_labels_and_orders_numbers_as_r():
    s = as_factor(pd.Series([10.0, 2.0, np.nan, 3.0, 2.0]))
    assert list(s.cat.categories) == ["2", "3", "10"]  # before: "10.0", "2.0", "3.0"
    assert s.isna().tolist() == [False, False, True, False, False]
    strings = as_factor(pd.Series(["b", None, "a"]))
    assert strings.isna().tolist() == [False, True, False] and strings[0] == "b"


def test_factor_option_uses_rs_reference_level(capsys, tmp_path):
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"seed": np.resize(np.arange(2, 11), 90).astype(float),
                      "g": np.repeat(list("abcdefghi"), 10), "y": rng.normal(size=90)})
    path = tmp_path / "seeds.csv"
    d.to_csv(path, index=False)
    assert main(["fit", str(path), "y ~ seed + (1 | g)", "--factor", "seed", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    text = json.dumps(out["coefficients"])  # the reference level is 2, as factor(seed) in R
    assert "seed10" in text and "seed3" in text and "seed2" not in text, text
