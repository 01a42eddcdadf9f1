"""Small models for the simulation tests (fast refits)."""

import warnings

import pytest
from _simdata import small_design

import crossed as cx


@pytest.fixture(scope="session")
def truth():
    """A specified model: y = 1 + 0.5 x + b_g + e, sd(b) = 0.8, sigma = 1."""
    return cx.specify("y ~ x + (1 | g)", small_design(), fixef={"(Intercept)": 1.0, "x": 0.5},
                      varcorr={"g": 0.8}, sigma=1.0)


@pytest.fixture(scope="session")
def exist_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("delta ~ language * task * mode + (1 | architecture)",
                       cx.load_dataset("exist_multi"))
