"""Printing tables for people (aligned text) and for machines (JSON) in the CLI commands."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from crossed.tables import format_frame, note_text

__all__ = ["dump_json", "note_text", "print_notes", "records", "text_table"]


def count_arg(text: str, minimum: int = 0) -> int:
    """An argparse type: a whole number >= ``minimum`` (digits printed, seeds, counts)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
    return value


def positive_arg(text: str) -> int:
    """An argparse type: a whole number >= 1 (numbers of resamples, tasks, replicates)."""
    return count_arg(text, minimum=1)


def text_table(df: pd.DataFrame, title: str | None = None) -> str:
    """Aligned text of a table, each numeric column formatted as R's ``format(x, digits =
    4)``, p-values as ``format.pval`` or, for EMM and contrast tables, as emmeans prints
    them (``<.0001``); empty cells for missing values."""
    style = getattr(df, "_pvalues", "r")
    body = (format_frame(pd.DataFrame(df), style, na="").to_string(index=False) if len(df)
            else "(no rows)")
    return f"{title}\n{body}" if title else body


def records(df: pd.DataFrame) -> list[dict]:
    """Table rows as JSON-ready dicts (NaN and ±inf -> null)."""
    return [{str(k): _clean(v) for k, v in rec.items()} for rec in df.to_dict(orient="records")]


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def dump_json(obj) -> str:
    """Strict JSON text of ``obj``: DataFrames become lists of records; NaN, Infinity and
    -Infinity (e.g. the infinite df of ``--ddf none``) become null, as JSON has no such
    numbers. Anything else that JSON cannot hold is written as its ``str``."""
    return json.dumps(_clean(obj), indent=2, default=str, allow_nan=False)


def _clean(obj):
    if isinstance(obj, pd.DataFrame):
        return records(obj)
    if isinstance(obj, pd.Series | np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_clean(v) for v in obj]
    return _plain(obj)


def print_notes(notes: list[str]) -> None:
    """The warnings a command collected, one ``note:`` line each."""
    for n in notes:
        print(f"note: {note_text(n)}")
