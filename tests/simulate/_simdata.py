"""Helpers of the simulation tests: a small design, fits to simulated responses."""

import warnings

import numpy as np
import pandas as pd


def small_design(groups: int = 10, per_group: int = 4) -> pd.DataFrame:
    """``groups`` groups of ``per_group`` rows, a covariate x varying within groups."""
    x = np.tile(np.linspace(-1.0, 1.0, per_group), groups)
    g = np.repeat([f"g{i:02d}" for i in range(groups)], per_group)
    return pd.DataFrame({"x": x, "g": g})


def fit_to(truth, y):
    """Fit the truth's model to a simulated response (stored design reused)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return truth.refit(y)
