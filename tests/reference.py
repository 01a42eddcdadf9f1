"""R reference cases: load a case's data exactly as tools/r_reference.R does, and its answers.

R's script reads the CSV with the case's factor columns as character, turns them into
factors, applies ``relevel`` and evaluates the ``mutate`` expressions. :func:`case_data`
does the same in pandas: factor columns are strings (the default level order of crossed is
R's), ``relevel`` becomes the ``reference=`` argument of :func:`crossed.lmer` (see
:func:`case_reference`), and the few ``mutate`` expressions the cases use are translated.

Usage from any test module::

    from reference import case_names, load_case, fit_case
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import crossed

DATA_DIR = Path(__file__).resolve().parent / "data"
REFERENCE_DIR = DATA_DIR / "reference"
EXTRA_DIR = REFERENCE_DIR / "extra"

# data files bundled with crossed (load_dataset) rather than stored under tests/data
_BUNDLED = {
    "exist_multi.csv": "exist_multi",
    "exist_mono.csv": "exist_mono",
    "exist_raw.csv": "exist_raw",
    "blurb_like.csv": "blurb_like",
    "ner_like.csv": "ner_like",
}

_MUTATE = re.compile(r"^\s*(\w+)\s*<-\s*as\.numeric\(\s*(\w+)\s*==\s*'([^']*)'\s*\)\s*$")


@functools.cache
def cases() -> dict[str, dict]:
    """All cases of cases.json by name, in file order."""
    with open(REFERENCE_DIR / "cases.json") as fh:
        return {c["name"]: c for c in json.load(fh)}


def case_names() -> list[str]:
    return list(cases())


@functools.cache
def _read_table(file: str, factors: tuple[str, ...]) -> pd.DataFrame:
    if file in _BUNDLED:
        df = crossed.load_dataset(_BUNDLED[file])
        for f in factors:
            df[f] = df[f].astype(str)
        return df
    path = DATA_DIR / file
    if not path.exists():
        path = DATA_DIR / (file + ".gz")
    return pd.read_csv(path, dtype=dict.fromkeys(factors, str))


def case_data(name: str) -> pd.DataFrame:
    """The case's table as R saw it (a fresh copy; factor columns as str, mutate applied)."""
    case = cases()[name]
    df = _read_table(case["data"], tuple(case["factors"])).copy()
    for expr in case.get("mutate", []):
        m = _MUTATE.match(expr)
        if m is None:  # pragma: no cover - a new kind of mutate needs a translation here
            raise NotImplementedError(f"cannot translate R mutate expression {expr!r}")
        new, col, value = m.groups()
        df[new] = (df[col].astype(str) == value).astype(float)
    return df


def case_reference(name: str) -> dict[str, str] | None:
    """The case's ``relevel`` as crossed's ``reference=`` argument (None when absent)."""
    rel = cases()[name].get("relevel")
    return dict(rel) if rel else None


def case_reml(name: str) -> bool:
    return bool(cases()[name].get("reml", True))


@functools.cache
def r_answers(name: str) -> dict:
    """R's answers for a case (the JSON written by tools/r_reference.R)."""
    with open(REFERENCE_DIR / f"{name}.json") as fh:
        return json.load(fh)


def as_list(x) -> list:
    """jsonlite's auto_unbox turns length-1 vectors into scalars: undo it."""
    if x is None:
        return []
    return list(x) if isinstance(x, list) else [x]


def as_array(x) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=float))


def as_matrix(x) -> np.ndarray:
    return np.atleast_2d(np.asarray(x, dtype=float))


@dataclass(frozen=True)
class Case:
    name: str
    formula: str
    data: pd.DataFrame
    reference: dict[str, str] | None
    reml: bool
    r: dict


def load_case(name: str) -> Case:
    c = cases()[name]
    return Case(name=name, formula=c["formula"], data=case_data(name),
                reference=case_reference(name), reml=case_reml(name), r=r_answers(name))


def fit_case(name: str, engine: str = "native", **kwargs) -> crossed.LmerFit:
    """Fit a reference case as R did (warnings, e.g. singular fits, are not filtered)."""
    case = load_case(name)
    return crossed.lmer(case.formula, case.data, reml=case.reml, engine=engine,
                        reference=case.reference, **kwargs)


def load_table(file: str, factors: tuple[str, ...] = ()) -> pd.DataFrame:
    """Any table under tests/data (or bundled with crossed), factor columns read as str."""
    return _read_table(file, tuple(factors)).copy()


def extra_answers() -> dict:
    """R's answers for the extra cases (tests/data/reference/extra/extra.json)."""
    with open(EXTRA_DIR / "extra.json") as fh:
        return json.load(fh)


def extra_table(entry: dict) -> pd.DataFrame:
    """The table of an extra case: its factor columns as strings, its level orders set."""
    factors = tuple(as_list(entry["factors"]))
    path = EXTRA_DIR / entry["data"]
    if path.exists():
        df = pd.read_csv(path, dtype=dict.fromkeys(factors, str))
    else:
        df = load_table(entry["data"], factors)
    for col, levels in (entry.get("levels") or {}).items():
        df[col] = pd.Categorical(df[col], categories=as_list(levels))
    return df
