"""The benchmark's pooled crowdsourcing design (benchmarks/crowd.py), small: items rated by
annotators of one pool each, so that the annotators' Schur complement is block diagonal by
pool (tests/model/test_sparse_schur.py, tests/model/test_schur_blocks.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def crowd(items: int, pools: int, pool_size: int, raters: int, seed: int = 3) -> pd.DataFrame:
    """``items`` items, each rated by ``raters`` annotators of one of ``pools`` pools of
    ``pool_size``; columns item, annotator, x and y (= 3 + 0.4 x + item + annotator + noise)."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, pools, items)
    local = np.argsort(rng.random((items, pool_size)), axis=1)[:, :raters]
    ann = (pool[:, None] * pool_size + local).ravel()
    item = np.repeat(np.arange(items), raters)
    x = rng.normal(size=len(item))
    y = (3 + 0.4 * x + rng.normal(0, 0.8, items)[item] + rng.normal(0, 0.5, pools * pool_size)[ann]
         + rng.normal(size=len(item)))
    return pd.DataFrame({"item": [f"i{i}" for i in item], "annotator": [f"a{a}" for a in ann],
                         "x": x, "y": y})
