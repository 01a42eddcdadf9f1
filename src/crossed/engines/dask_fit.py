"""Dask as a :class:`~crossed.model.partitioned.PartitionSource`: mixed-model fits on a
Dask DataFrame or Parquet files, on a ``distributed`` cluster.

Each pass maps a pure function over the DataFrame's partitions (``to_delayed``: one task
per partition, with its position) and adds the results in a fixed binary tree of
``dask.delayed`` tasks over the partitions in their order (:func:`tree_sum`): the cluster
schedules the tasks; the order of the floating-point sums is the tree's, so a refit, or a
task retried on another worker after a worker was lost, gives bitwise the same sums. Only
the root's result (level-sized) comes back to the driver.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from crossed.design.frame import DataError
from crossed.formula.spec import ModelSpec
from crossed.model.partitioned import (
    LevelsChunk,
    RowlessDesign,
    SumsChunk,
    levels_of,
    sums_of,
    tree_sum,
)

__all__ = ["DaskSource", "as_dask_frame", "dask_client", "is_partitioned"]


def _add(a: Any, b: Any) -> Any:
    return a + b


def is_partitioned(data: object) -> bool:
    """Whether ``data`` is what the partitioned path reads: a Dask DataFrame or a path
    (a Parquet file, directory or glob, local or an fsspec URL)."""
    if isinstance(data, str | os.PathLike):
        return True
    return type(data).__module__.split(".")[0] in ("dask", "dask_expr")


def as_dask_frame(data: object) -> Any:
    """``data`` as a Dask DataFrame: a Parquet path or glob is read with
    ``dask.dataframe.read_parquet``."""
    try:
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ImportError("fits on Dask DataFrames and Parquet files need dask and "
                          "distributed: pip install 'crossed[dask]'") from exc
    if isinstance(data, str | os.PathLike):
        path = os.fspath(data)
        try:
            return dd.read_parquet(path)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise DataError(f"cannot read Parquet data from {path!r}: {exc}") from exc
    if not isinstance(data, dd.DataFrame):
        raise DataError(f"data must be a pandas or Dask DataFrame or a Parquet path, got "
                        f"{type(data).__name__}")
    return data


@contextlib.contextmanager
def dask_client(client: object = None) -> Iterator[Any]:
    """The ``distributed.Client`` to run on: ``client`` itself, a client connected to it
    when it is a scheduler address, or a ``LocalCluster`` sized to the machine (closed on
    exit) when None."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover
        raise ImportError("fits on Dask DataFrames need distributed: "
                          "pip install 'crossed[dask]'") from exc
    if isinstance(client, Client):
        yield client
        return
    if isinstance(client, str):
        with Client(client) as c:
            yield c
        return
    if client is not None:
        raise TypeError(f"client must be a distributed.Client or a scheduler address, got "
                        f"{type(client).__name__}")
    with LocalCluster() as cluster, Client(cluster) as c:
        yield c


class DaskSource:
    """The partitions of a Dask DataFrame on a cluster (a
    :class:`~crossed.model.partitioned.PartitionSource`).

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
    client : distributed.Client
    persist : bool
        Keep the partitions in the workers' memory between passes (``persist``), instead
        of reading them again (from Parquet) at each pass.
    """

    def __init__(self, frame: Any, client: Any, persist: bool = False) -> None:
        self.client = client
        self.frame = client.persist(frame) if persist else frame
        self._parts = self.frame.to_delayed()

    @property
    def n_partitions(self) -> int:
        return len(self._parts)

    def _reduce(self, func: Any, *args: Any) -> Any:
        import dask

        # (each argument one task of the graph, shipped once to each worker)
        shared = [dask.delayed(_Held(a), pure=False) for a in args]
        mapped = [dask.delayed(func, pure=True)(part, *shared, index=i)
                  for i, part in enumerate(self._parts)]
        root = tree_sum(mapped, lambda a, b: dask.delayed(_add, pure=True)(a, b))
        return self.client.compute(root).result()

    def levels(self, spec: ModelSpec, na_action: str) -> LevelsChunk:
        """:func:`~crossed.model.partitioned.levels_of` on every partition, added."""
        return self._reduce(_levels, spec, na_action)

    def sums(self, design: RowlessDesign, centre: np.ndarray) -> SumsChunk:
        """:func:`~crossed.model.partitioned.sums_of` on every partition, added."""
        return self._reduce(_sums, design, centre)


class _Held:
    """An argument shipped to the tasks as it is (Dask would unpack a dataclass's fields,
    and a rowless design refuses its rows)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _levels(part: pd.DataFrame, spec: _Held, na_action: _Held, index: int = 0
            ) -> LevelsChunk:
    return levels_of(spec.value, part, na_action.value, index)  # type: ignore[arg-type]


def _sums(part: pd.DataFrame, design: _Held, centre: _Held, index: int = 0) -> SumsChunk:
    return sums_of(design.value, part, centre.value, index)  # type: ignore[arg-type]
