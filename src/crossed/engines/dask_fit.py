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
import logging
import operator
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from crossed.design.frame import DataError
from crossed.formula.spec import ModelSpec
from crossed.model.partitioned import (
    GlmmPartition,
    GlmmSums,
    LevelsChunk,
    LocalPirlsSums,
    RowlessDesign,
    SumsChunk,
    glmm_partition,
    glmm_pass,
    levels_of,
    local_modes,
    local_pirls,
    sums_of,
    tree_sum,
)

__all__ = ["DaskSource", "as_dask_frame", "dask_client", "local_cluster"]


def _add(a: Any, b: Any) -> Any:
    return a + b


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
        from distributed import Client
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
    with local_cluster() as cluster, Client(cluster) as c:
        yield c


def local_cluster(**kwargs: Any) -> Any:
    """A ``distributed.LocalCluster(**kwargs)`` whose worker processes keep glibc's own
    ``malloc`` trimming.

    Dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (configuration
    ``distributed.nanny.pre-spawn-environ``), which also fixes glibc's mmap threshold at
    128 KiB: every NumPy temporary of a partition's rows is then mapped and unmapped
    afresh, and the GLMM's PIRLS arithmetic ran 5x slower in such workers (49 against
    9 ms per pass over 100,000 rows, `benchmarks/dask_scale.py`'s machine). Workers
    started here inherit no such setting. (For a cluster of your own, set that
    configuration value to None before starting it.)
    """
    import dask
    from distributed import LocalCluster

    key = "MALLOC_TRIM_THRESHOLD_"
    saved = os.environ.pop(key, None)  # (a nanny started earlier exported it here)
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{key}": None}):
            return LocalCluster(**kwargs)
    finally:
        if saved is not None:
            os.environ[key] = saved


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

    def glmm_partitions(self, design: RowlessDesign, family: Any,
                        colocate: tuple[str, ...] | None = None) -> list[Any]:
        """The partitions encoded for a GLMM, computed and kept on the workers (futures);
        with ``colocate``, shuffled first on those columns (Dask's ``shuffle``: the rows
        of each of their values in one partition)."""
        import dask

        parts, shuffled = self._parts, bool(colocate and len(self._parts) > 1)
        if shuffled:
            parts = self.frame.shuffle(on=list(colocate)).to_delayed()
            # (an in-process scheduler logs each shuffle's start and end as warnings)
            logging.getLogger("distributed.shuffle._scheduler_plugin").setLevel(logging.ERROR)
        held = [dask.delayed(_Held(a), pure=False) for a in (design, family)]
        tasks = [dask.delayed(_glmm_partition, pure=True)(part, *held, index=i,
                                                          sort_rows=shuffled)
                 for i, part in enumerate(parts)]
        return list(self.client.compute(tasks))

    def glmm_local(self, handle: list[Any], lp0: list[Any] | None, family: Any,
                   theta: np.ndarray, beta: np.ndarray, maxit: int) -> LocalPirlsSums:
        """:func:`~crossed.model.partitioned.local_pirls` on every partition, its
        iterations' sums (a few numbers each) gathered and added in the driver, in the
        fixed tree."""
        submit = self.client.submit
        outs = [submit(local_pirls, part, None if lp0 is None else lp0[i], family, theta,
                       beta, maxit, pure=False) for i, part in enumerate(handle)]
        return tree_sum(self.client.gather(outs), _add)

    def glmm_local_modes(self, handle: list[Any], lp0: list[Any] | None, family: Any,
                         theta: np.ndarray, beta: np.ndarray, iterations: int, q: int
                         ) -> tuple[list[Any], np.ndarray]:
        """:func:`~crossed.model.partitioned.local_modes` per partition: η per partition
        kept on the workers (futures), and the modes of the ``q`` levels gathered."""
        submit = self.client.submit
        outs = [submit(local_modes, part, None if lp0 is None else lp0[i], family, theta,
                       beta, iterations, pure=False) for i, part in enumerate(handle)]
        etas = [submit(operator.itemgetter(0), out, pure=False) for out in outs]
        modes = self.client.gather([submit(operator.itemgetter(slice(1, 3)), out, pure=False)
                                    for out in outs])
        u = np.zeros(q)
        for levels, values in modes:
            u[levels] = values
        return etas, u

    def glmm_step(self, handle: list[Any], etas: list[Any] | None, family: Any,
                  theta: np.ndarray, u: np.ndarray | None, beta: np.ndarray, joint: bool,
                  lp0: list[Any] | None) -> tuple[list[Any], GlmmSums]:
        """One PIRLS pass: :func:`~crossed.model.partitioned.glmm_pass` per partition
        (its η before and its part of ``lp0`` read where they are kept), the new η kept
        on the workers, the sums added in the fixed tree."""
        submit = self.client.submit
        outs = [submit(_glmm_pass, part, None if etas is None else etas[i], family, theta,
                       u, beta, joint, None if lp0 is None else lp0[i], pure=False)
                for i, part in enumerate(handle)]
        new = [submit(operator.itemgetter(0), out, pure=False) for out in outs]
        root = tree_sum(outs, lambda a, b: submit(_add_second, a, b, pure=False))
        total = root.result()
        return new, total[1] if isinstance(total, tuple) else total


def _add_second(a: Any, b: Any) -> Any:
    """The sums of two passes' results ((η, sums) pairs, or sums already added)."""
    return (a[1] if isinstance(a, tuple) else a) + (b[1] if isinstance(b, tuple) else b)


def _glmm_partition(part: pd.DataFrame, design: _Held, family: _Held, index: int = 0,
                    sort_rows: bool = False) -> GlmmPartition:
    return glmm_partition(design.value, part, family.value, index,  # type: ignore[arg-type]
                          sort_rows)


def _glmm_pass(part: GlmmPartition, eta: np.ndarray | None, family: Any, theta: np.ndarray,
               u: np.ndarray | None, beta: np.ndarray, joint: bool,
               lp0: np.ndarray | None) -> tuple[np.ndarray, GlmmSums]:
    return glmm_pass(part, eta, family, theta, u, beta, joint, lp0)


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
