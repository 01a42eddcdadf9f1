"""R's GLMM answers (tests/data/reference/glmm/glmm.json, from glmm.R next to it) and the
data of each case, read as the R script wrote and read it.

:func:`r_estimates_fit` builds a stand-in fit that carries crossed's design and *R's*
estimates (β, vcov, θ, logLik): inference computed on it must reproduce R's tables to
rounding, whatever the optimiser of a native fit does.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crossed.datasets import EXACT_FLOATS
from crossed.design import build_design
from crossed.formula import parse
from crossed.model.glmm.family import binomial, poisson

DATA = Path(__file__).resolve().parent / "data"
REF = DATA / "reference" / "glmm" / "glmm.json"

# the data columns R treated as factors, per data file
FACTORS = {
    "cbpp.csv": ["herd", "period"],
    "grouseticks.csv": ["INDEX", "BROOD", "YEAR", "LOCATION"],
    "errors_offset.csv": ["prompt", "task", "system"],
    "items_systems.csv.gz": ["item", "dataset", "system"],
    "singular_cond.csv": ["group", "cond"],
}

# the case's model for crossed's LMM design builder (no cbind/offset): what the stand-in
# fits' designs are built from (same fixed and random columns as R's model)
DESIGN_FORMULA = {
    "cbpp": "prop ~ period + (1 | herd)",
    "cbpp_agq9": "prop ~ period + (1 | herd)",
    "cbpp_probit": "prop ~ period + (1 | herd)",
    "cbpp_cloglog": "prop ~ period + (1 | herd)",
    "grouseticks": "TICKS ~ YEAR + scale(HEIGHT) + (1 | BROOD) + (1 | INDEX) + (1 | LOCATION)",
    "errors_offset": "errors ~ system * task + (1 | prompt)",
    "items_systems": "correct ~ system + (1 | item) + (1 | dataset)",
    "singular": "y ~ cond + (1 | group)",
}


@functools.cache
def reference() -> dict[str, Any]:
    with open(REF) as fh:
        return json.load(fh)


def as_list(x: Any) -> list:
    """A JSON value R wrote unboxed when it had length 1, as a list."""
    return x if isinstance(x, list) else [x]


def case(name: str) -> dict[str, Any]:
    return reference()["cases"][name]


@functools.cache
def _read(file: str) -> pd.DataFrame:
    cols = FACTORS[file]
    df = pd.read_csv(DATA / "glmm" / file, dtype=dict.fromkeys(cols, str),
                     **EXACT_FLOATS)  # correctly rounded, as R (any pandas)
    if file == "cbpp.csv":
        df["prop"] = df["incidence"] / df["size"]
    return df


def case_data(name: str) -> pd.DataFrame:
    """The case's data (a copy), factor columns as strings (R's level order when sorted:
    the numeric factors of cbpp and grouseticks are ordered numerically, as R's)."""
    df = _read(case(name)["data"]).copy()
    for col in FACTORS[case(name)["data"]]:
        vals = df[col]
        if vals.str.fullmatch(r"\d+").all():  # R's levels of a numeric-looking factor
            levels = sorted(vals.unique(), key=int)
            df[col] = pd.Categorical(vals, categories=levels)
    return df


# ---------------------------------------------------------------------- stand-in fits
@dataclass
class REstimatesFit:
    """crossed's design with R's estimates: what the inference layer reads of a GlmerFit."""

    design: Any
    family: Any
    beta: np.ndarray
    vcov_beta: np.ndarray
    theta: np.ndarray
    loglik: float
    nagq: int = 1
    engine: str = "r-estimates"
    _cache: dict = field(default_factory=dict)

    @property
    def fixef_names(self):
        return self.design.fixed.names

    @property
    def npar(self) -> int:
        return len(self.beta) + len(self.theta)

    @property
    def aic(self) -> float:
        return -2 * self.loglik + 2 * self.npar

    @property
    def nobs(self) -> int:
        return self.design.n

    def memo(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]


def r_estimates_fit(name: str) -> REstimatesFit:
    c = case(name)
    # glmm=True: one level per observation is allowed (grouseticks' INDEX), as glmer
    design = build_design(parse(DESIGN_FORMULA[name]), case_data(name), glmm=True)
    assert list(design.fixed.names) == c["fixef_names"], (design.fixed.names, c["fixef_names"])
    assert list(design.random.theta_names) == as_list(c["theta_names"])
    family = binomial(c["link"]) if c["family"] == "binomial" else poisson(c["link"])
    return REstimatesFit(design=design, family=family, beta=np.array(c["beta"]),
                         vcov_beta=np.array(c["vcov"]), theta=np.array(as_list(c["theta"])),
                         loglik=c["loglik"], nagq=c["nagq"])


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)
