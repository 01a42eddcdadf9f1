"""Running many independent simulation tasks: seeds, chunks, joblib and Dask.

Every task gets its own random stream, derived from the user's seed with numpy's
``SeedSequence.spawn`` *before* anything is dispatched: task ``i`` always receives child
``i``, whatever the number of workers, the chunking or the backend. Workers never use
global or worker-local random state, so identical seeds give identical results with
``n_jobs=1``, ``n_jobs=2`` or a Dask cluster.

Tasks are grouped into chunks (a few per worker) so that the function and its arguments
(often a fitted model) are shipped once per chunk, not once per task.

An interrupt (Ctrl-C) stops the scheduling of further tasks: :func:`run_tasks` warns and
returns the results finished so far, flagged ``interrupted``.

Tasks run in this process (``n_jobs=1``) run under one BLAS thread
(:func:`crossed._threads.single_blas_thread`) set once for the run rather than once per
refit: the same numbers (every fit runs under one BLAS thread anyway), without the cost
of setting and restoring the limit thousands of times. A fit started meanwhile in another
thread of this process waits for its turn at the limit until the run ends. (Workers,
which Dask may run as threads of one process, still take it per fit.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crossed._conventions import check_seed, show_progress
from crossed._threads import single_blas_thread, use_helper_thread
from crossed._warn import warn

__all__ = ["BACKENDS", "Seed", "TaskResults", "run_tasks",
           "seed_sequence", "spawn_seeds"]

Seed = int | np.random.Generator | np.random.SeedSequence | None

BACKENDS = ("joblib", "dask")


class TaskResults(list):
    """Results of :func:`run_tasks`: a list, plus whether the run was interrupted.

    Attributes
    ----------
    interrupted : bool
        True when a KeyboardInterrupt stopped the run; the list then holds the results
        finished before it (in the order of the items where the backend keeps it).
    n_tasks : int
        Number of tasks asked for.
    """

    interrupted: bool = False
    n_tasks: int = 0


def seed_sequence(seed: Seed) -> np.random.SeedSequence:
    """A SeedSequence from an int, a SeedSequence, a Generator or None.

    A Generator contributes the next draw of its stream as entropy (so passing the same
    Generator state twice gives the same tasks); None draws fresh OS entropy.
    """
    check_seed(seed)
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(0, 2**63 - 1)))
    return np.random.SeedSequence(seed)


def spawn_seeds(seed: Seed, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds of ``seed`` (task ``i`` gets child ``i``)."""
    return seed_sequence(seed).spawn(n)


def _run_chunk(func: Callable, shared: Any, items: Sequence) -> list:
    return [func(shared, item) for item in items]


def _run_chunk_in_worker(func: Callable, shared: Any, items: Sequence) -> list:
    """A chunk in a worker process: the processes share the cores, so the engine's helper
    thread is turned off (results are the same with or without it)."""
    use_helper_thread(False)
    return _run_chunk(func, shared, items)


def _chunks(n: int, n_chunks: int) -> list[range]:
    n_chunks = max(1, min(n, n_chunks))
    bounds = np.linspace(0, n, n_chunks + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def run_tasks(func: Callable[[Any, Any], Any], shared: Any, items: Sequence, *,
              n_jobs: int | None = 1, backend: str = "joblib", scheduler: Any = None,
              progress: bool | None = None, desc: str = "simulating",
              chunk_size: int | None = None) -> list:
    """``[func(shared, item) for item in items]``, possibly in parallel, in order.

    Parameters
    ----------
    func : callable
        A module-level function (picklable) taking the shared object and one item.
    shared : object
        What every task needs (a fitted model, a test); sent once per chunk.
    items : sequence
        One entry per task, typically including its ``SeedSequence``.
    n_jobs : int or None
        Local worker processes for joblib (1: run in this process; -1: all cores).
    backend : {"joblib", "dask"}
        ``"dask"`` submits the chunks to a ``distributed`` cluster.
    scheduler : str or distributed.Client, optional
        For ``backend="dask"``: a scheduler address (``"tcp://host:8786"``) or a Client;
        default: the current client (``distributed.get_client()``).
    progress : bool or None
        Progress bar (tqdm); None shows it only when stderr is a terminal.
    chunk_size : int, optional
        Tasks per chunk; default about four chunks per worker.

    Returns
    -------
    TaskResults
        Results in the order of ``items`` (a list). On KeyboardInterrupt no further task is
        started, a warning is issued and the results finished so far are returned with
        ``interrupted=True`` (Dask: those of the finished chunks).
    """
    items = list(items)
    n = len(items)
    out = TaskResults()
    out.n_tasks = n
    if n == 0:
        return out
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    bar = None
    if show_progress(progress):
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc=desc)
    try:
        if backend == "dask":
            _run_dask(func, shared, items, scheduler, bar, chunk_size, out)
        elif (workers := _n_workers(n_jobs)) == 1:
            with single_blas_thread():  # (once for the run: each refit's use is then free)
                for item in items:
                    out.append(func(shared, item))
                    if bar is not None:
                        bar.update(1)
        else:
            _run_joblib(func, shared, items, workers, bar, chunk_size, out)
    except KeyboardInterrupt:
        out.interrupted = True
        warn(f"{desc}: interrupted after {len(out)} of {n} replicates; the result "
             "holds the finished ones (interrupted=True)", UserWarning)
    finally:
        if bar is not None:
            bar.close()
    return out


def _n_workers(n_jobs: int | None) -> int:
    cores = os.cpu_count() or 1
    if n_jobs is None or n_jobs == 0:
        return 1
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return int(n_jobs)


def _run_joblib(func, shared, items, workers, bar, chunk_size, out: list) -> None:
    """Chunks in worker processes; results appended to ``out`` as they arrive, in order."""
    from joblib import Parallel, delayed

    size = chunk_size or max(1, -(-len(items) // (4 * workers)))
    chunks = _chunks(len(items), -(-len(items) // size))
    parallel = Parallel(n_jobs=workers, return_as="generator")
    gen = parallel(delayed(_run_chunk_in_worker)(func, shared, [items[i] for i in c])
                   for c in chunks)
    try:
        for res in gen:
            out.extend(res)
            if bar is not None:
                bar.update(len(res))
    finally:
        gen.close()  # on an interrupt: cancel the chunks not yet finished


def _run_dask(func, shared, items, scheduler, bar, chunk_size, out: list) -> None:
    try:
        from distributed import Client, as_completed, get_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("backend='dask' needs dask and distributed: "
                          "pip install 'crossed[dask]'") from exc
    own = False
    if scheduler is None:
        client = get_client()
    elif isinstance(scheduler, Client):
        client = scheduler
    else:
        client = Client(scheduler)
        own = True
    try:
        workers = max(1, sum(client.nthreads().values()))
        size = chunk_size or max(1, -(-len(items) // (4 * workers)))
        chunks = _chunks(len(items), -(-len(items) // size))
        shared_f = client.scatter(shared, broadcast=True)
        futures = [client.submit(_run_chunk_in_worker, func, shared_f, [items[i] for i in c],
                                 pure=False)
                   for c in chunks]
        index = {f.key: k for k, f in enumerate(futures)}
        results: list = [None] * len(futures)
        try:
            for fut in as_completed(futures):
                results[index[fut.key]] = fut.result()
                if bar is not None:
                    bar.update(len(results[index[fut.key]]))
        finally:  # all chunks, or on an interrupt those finished (the rest cancelled)
            out.extend(r for chunk in results if chunk is not None for r in chunk)
            pending = [f for f, r in zip(futures, results, strict=True) if r is None]
            if pending:
                client.cancel(pending)
    finally:
        if own:
            client.close()
