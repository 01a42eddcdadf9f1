"""What the fitting entry points take as data: a table in memory, or partitioned data
(:mod:`crossed.engines.dask_fit`). Apart from that module so that a fit in memory does not
import the partitioned path."""

from __future__ import annotations

import os

__all__ = ["is_partitioned"]


def is_partitioned(data: object) -> bool:
    """Whether ``data`` is what the partitioned path reads: a Dask DataFrame or a path
    (a Parquet file, directory or glob, local or an fsspec URL)."""
    if isinstance(data, str | os.PathLike):
        return True
    return type(data).__module__.split(".")[0] in ("dask", "dask_expr")
