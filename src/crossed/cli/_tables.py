"""Printing tables for people (aligned text) and for machines (JSON) in the CLI commands."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from crossed.display import format_cell


def text_table(df: pd.DataFrame, title: str | None = None) -> str:
    """Aligned text of a table (4 significant digits; empty cells for missing values)."""
    body = df.map(format_cell).to_string(index=False) if len(df) else "(no rows)"
    return f"{title}\n{body}" if title else body


def records(df: pd.DataFrame) -> list[dict]:
    """Table rows as JSON-ready dicts (NaN -> null)."""
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({k: _plain(v) for k, v in rec.items()})
    return out


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def dump_json(obj) -> str:
    """JSON text of ``obj``: DataFrames become lists of records, NaN becomes null."""
    return json.dumps(_clean(obj), indent=2, default=str)


def _clean(obj):
    if isinstance(obj, pd.DataFrame):
        return records(obj)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return _plain(obj)
