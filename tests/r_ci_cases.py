"""R's answers of tests/data/reference/r_ci/r_ci.R (confint, coef, icc, influence, residuals,
anova(lmer, lm), step) and the fits they belong to, cached per process.

Data are read as the R script reads them: the factor columns as strings.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import crossed

DATA = Path(__file__).resolve().parent / "data"
JSON = DATA / "reference" / "r_ci" / "r_ci.json"

CASES = {
    "sleepstudy": ("sleepstudy.csv", ("Subject",)),
    "penicillin": ("Penicillin.csv", ("plate", "sample")),
}


@functools.cache
def answers() -> dict:
    with open(JSON) as fh:
        return json.load(fh)


def num(value: object) -> float:
    """A number of the JSON (R's NA is written "NA")."""
    return math.nan if value in ("NA", None) else float(value)  # type: ignore[arg-type]


@functools.cache
def data(file: str, factors: tuple[str, ...]) -> pd.DataFrame:
    return pd.read_csv(DATA / file, dtype={f: str for f in factors})


@functools.cache
def fit(name: str) -> crossed.LmerFit:
    """The REML fit of case ``name`` (lme4's default criterion, as in the R script)."""
    file, factors = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(answers()[name]["formula"], data(file, factors))


def interval_table(rows: list[dict]) -> pd.DataFrame:
    """R's confint matrix (rows ``term``, columns ``2.5 %``/``97.5 %`` or others)."""
    out = pd.DataFrame(rows).set_index("term")
    return out.map(num) if hasattr(out, "map") else out.applymap(num)


def arr(values: list) -> np.ndarray:
    return np.array([num(v) for v in values])
