"""Shared helpers of the hostile-input tests: a small mixed table and a quiet lmer."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

import crossed


def hostile_data(n: int = 120, seed: int = 1) -> pd.DataFrame:
    """A grouping factor g (ints), h (letters), a covariate x and a factor f."""
    rng = np.random.default_rng(seed)
    d = pd.DataFrame({"g": rng.integers(0, 8, n), "h": rng.choice(list("pqrs"), n),
                      "x": rng.normal(size=n), "f": rng.choice(list("abc"), n)})
    d["y"] = d.x + (d.f == "b") + rng.normal(size=n) + d.g * 0.3
    return d


def quiet_lmer(formula, data, **kw):
    """``crossed.lmer`` with its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, data, **kw)
