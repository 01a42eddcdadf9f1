"""Gold-standard normalisation and the fraction of headroom over a baseline.

Unbounded metrics such as ICM have no fixed range: the score of the gold standard G (the
metric of the reference annotation against itself) is the test set's ceiling and −G its
floor. Normalising by it puts every test set on [0, 1],

    s_norm = (s + G) / (2G),

and the fraction of the headroom above a non-linguistic baseline b (a majority-class or
random system, normalised the same way) that a system achieves is

    Δh = (s_norm − b_norm) / (1 − b_norm)   (= (s − b) / (G − b)).

Δh is 0 at the baseline, 1 at the gold standard, negative below the baseline, and
comparable across test sets whose raw scores are not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["headroom"]


def _as_list(x: str | Sequence[str] | None) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _lookup(data: pd.DataFrame, table: pd.DataFrame, on: list[str], what: str,
            average: bool) -> np.ndarray:
    """Values of ``table``'s value column for every row of ``data``, matched on ``on``."""
    if not on:
        raise ValueError(f"a {what} lookup table needs the key columns: pass on=[...]")
    for col in on:
        if col not in data.columns:
            raise ValueError(f"key column {col!r} is not in the data")
        if col not in table.columns:
            raise ValueError(f"key column {col!r} is not in the {what} table")
    values = [c for c in table.columns
              if c not in on and pd.api.types.is_numeric_dtype(table[c])]
    values = [c for c in values if c not in ("run", "seed")]
    if len(values) != 1:
        raise ValueError(
            f"the {what} table must have exactly one numeric value column besides the keys "
            f"{on} (and optional 'run'/'seed'); found {values}")
    value = values[0]
    keys = table[on].astype(str)
    grouped = pd.concat([keys, table[value]], axis=1).groupby(on, sort=False)[value]
    if not average:
        spread = grouped.nunique()
        if (spread > 1).any():
            bad = spread[spread > 1].index[0]
            raise ValueError(f"the {what} table has several different values for {bad}")
    means = grouped.mean()
    data_keys = pd.MultiIndex.from_frame(data[on].astype(str)) if len(on) > 1 else \
        pd.Index(data[on[0]].astype(str))
    out = means.reindex(data_keys).to_numpy(dtype=float)
    missing = np.isnan(out)
    if missing.any():
        groups = sorted({tuple(r) for r in data.loc[missing, on].astype(str).to_numpy()})
        shown = ", ".join("/".join(g) for g in groups[:5])
        raise ValueError(f"no {what} for {len(groups)} group(s) of {on}: {shown}"
                         + (" ..." if len(groups) > 5 else ""))
    return out


def _numeric(data: pd.DataFrame, column: str, what: str) -> np.ndarray:
    """A column as floats, or a ValueError naming it and its first non-number."""
    try:
        return pd.to_numeric(data[column], errors="raise").to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} column {column!r} is not numeric ({exc})") from None


def _values(data: pd.DataFrame, source, on: list[str], what: str, average: bool) -> np.ndarray:
    if isinstance(source, pd.DataFrame):
        return _lookup(data, source, on, what, average)
    if isinstance(source, str):
        if source not in data.columns:
            raise ValueError(f"{what} column {source!r} is not in the data")
        out = _numeric(data, source, what)
        if np.isnan(out).any():
            raise ValueError(f"{what} column {source!r} has missing values")
        return out
    if np.isscalar(source):
        return np.full(len(data), float(source))
    raise TypeError(f"{what} must be a column name, a number or a lookup DataFrame")


def headroom(data: pd.DataFrame, score: str = "score", gold: str | float | pd.DataFrame = "gold",
             baseline: str | float | pd.DataFrame = "baseline",
             on: str | Sequence[str] | None = None, name: str = "delta") -> pd.DataFrame:
    """Gold-standard normalised scores and the fraction of headroom over a baseline.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per score (system × test set × ...).
    score : str
        Column with the raw metric score s.
    gold : str, float or pandas.DataFrame
        The gold-standard score G of each row's test set: a column of ``data``, one number
        for all rows, or a lookup table with the ``on`` key columns and one numeric value
        column (one value per group).
    baseline : str, float or pandas.DataFrame
        The baseline's score b, given like ``gold``. A lookup table may hold several runs of
        the baseline per group (e.g. with a ``run`` or ``seed`` column, which is ignored):
        they are averaged.
    on : str or list of str, optional
        Key columns (e.g. ``["language", "task", "mode"]``) matching lookup tables to rows.
    name : str
        Name of the headroom column (replaced if ``data`` already has it).

    Returns
    -------
    pandas.DataFrame
        A copy of ``data`` with ``gold`` and ``baseline`` (the values used, added only when
        they came from a lookup table or a number), ``score_norm`` = (s + G)/(2G),
        ``baseline_norm`` = (b + G)/(2G) and ``name`` = (s_norm − b_norm)/(1 − b_norm),
        the fraction of the headroom over the baseline (0 at the baseline, 1 at the gold
        standard). Validated against the ``delta`` column of the bundled ``exist_raw``
        table, computed by hand from its ``icm``, ``gold_icm`` and ``baseline_icm``.

    Raises
    ------
    ValueError
        When a gold score is not positive, a baseline is at or above its gold standard (no
        headroom to measure), a lookup table misses a group of the data, or a column is
        missing.
    """
    on_l = _as_list(on)
    if score not in data.columns:
        raise ValueError(f"score column {score!r} is not in the data")
    missing_on = [c for c in on_l if c not in data.columns]
    if missing_on:
        raise ValueError(f"on: column {missing_on[0]!r} is not in the data")
    s = _numeric(data, score, "score")
    G = _values(data, gold, on_l, "gold", average=False)
    b = _values(data, baseline, on_l, "baseline", average=True)
    if np.any(G <= 0):
        i = int(np.flatnonzero(G <= 0)[0])
        raise ValueError(f"gold-standard score must be positive (row {i}: G = {G[i]:g}); "
                         "normalisation by (s + G) / (2G) needs G > 0")
    s_norm = (s + G) / (2.0 * G)
    b_norm = (b + G) / (2.0 * G)
    at_ceiling = b_norm >= 1.0
    if at_ceiling.any():
        i = int(np.flatnonzero(at_ceiling)[0])
        raise ValueError(f"baseline at or above the gold standard (row {i}: b = {b[i]:g}, "
                         f"G = {G[i]:g}): there is no headroom to measure")
    out = data.copy()
    if not isinstance(gold, str):
        if "gold" in out.columns:
            raise ValueError("data already has a 'gold' column; pass gold='gold'")
        out["gold"] = G
    if not isinstance(baseline, str):
        if "baseline" in out.columns:
            raise ValueError("data already has a 'baseline' column; pass baseline='baseline'")
        out["baseline"] = b
    out["score_norm"] = s_norm
    out["baseline_norm"] = b_norm
    out[name] = (s_norm - b_norm) / (1.0 - b_norm)
    return out
