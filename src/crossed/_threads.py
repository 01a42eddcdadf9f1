"""Thread control: BLAS threads and the one helper thread of the native engine.

The engine runs many small dense factorisations; multi-threaded OpenBLAS spends more time
synchronising than computing on them, and on a loaded 2-core machine a 260 x 260 Cholesky
went from 0.3 ms (one thread) to 280 ms (two). Numerical code runs under one BLAS thread.

Large dense factorisations and sparse Schur updates (``model/cholesky.py``,
``sparse_map.py``) instead split their work between the calling thread and one helper
thread, at points fixed by the problem's size, so results do not depend on whether the
helper is used. It is used when at least two CPUs are available,
unless turned off (environment variable ``CROSSED_HELPER_THREAD=0``, or
:func:`use_helper_thread`; simulation workers running in parallel processes turn it off, as
the processes already share the cores).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager

from threadpoolctl import ThreadpoolController

__all__ = ["available_cpus", "blas_threads", "helper_thread", "single_blas_thread",
           "use_helper_thread"]

_CONTROLLER: ThreadpoolController | None = None
_HELPER: ThreadPoolExecutor | None = None
_HELPER_WANTED: bool | None = None
_HELPER_NAME = "crossed-helper"


def _controller() -> ThreadpoolController:
    """threadpoolctl's controller of the BLAS libraries loaded when it is first asked for:
    NumPy's and SciPy's OpenBLAS, both loaded first (SciPy's comes with ``scipy.linalg``;
    a controller made before it would never limit it)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        import scipy.linalg  # noqa: F401  (loads NumPy's and SciPy's OpenBLAS)

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def blas_threads(n: int | None) -> AbstractContextManager:
    """Context manager setting the number of BLAS threads (None: one per core).

    Process-wide and not shared with :func:`single_blas_thread`'s count: use it only where
    no fit runs concurrently.
    """
    return _controller().limit(limits=n if n is not None else os.cpu_count() or 1,
                               user_api="blas")


_SINGLE_LOCK = threading.RLock()
_HOLDING = threading.local()  # .held: this thread is inside single_blas_thread


@contextmanager
def single_blas_thread() -> Iterator[None]:
    """Context manager limiting BLAS libraries to one thread, one caller at a time.

    The BLAS thread count is process-wide: a fit in one thread that restored it while a
    fit in another was running made the second run multi-threaded BLAS, whose sums differ
    in the last bits (2e-11 on theta), and OpenBLAS ignores a raise of the count made from
    another thread than the one that lowered it. So callers in different threads take turns
    (a re-entrant lock): each sets one thread and restores the count itself, and concurrent
    fits give the serial results bit for bit (``tests/test_threads.py``). Nested use in one
    thread costs nothing: the outermost use holds the limit (a refit's fit runs inside the
    refit's: the limit is set once per refit instead of twice). The native engine is mostly
    interpreted code, which the GIL serialises anyway; parallel fits belong in processes
    (``crossed.simulate``'s backends), which this does not limit.
    """
    if getattr(_HOLDING, "held", False):  # (this thread already holds the limit)
        yield
        return
    with _SINGLE_LOCK, _controller().limit(limits=1, user_api="blas"):
        _HOLDING.held = True
        try:
            yield
        finally:
            _HOLDING.held = False


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def use_helper_thread(enabled: bool | None) -> None:
    """Turn the native engine's helper thread on (True), off (False) or back to the default
    (None: on when at least two CPUs are available). Results are the same either way."""
    global _HELPER_WANTED
    _HELPER_WANTED = enabled


def helper_thread() -> ThreadPoolExecutor | None:
    """The helper thread's executor, or None when it is not to be used.

    Default: used when at least two CPUs are available and the environment variable
    ``CROSSED_HELPER_THREAD`` is not ``0``; :func:`use_helper_thread` overrides both.
    """
    global _HELPER
    wanted = _HELPER_WANTED
    if wanted is None:
        wanted = (available_cpus() >= 2
                  and os.environ.get("CROSSED_HELPER_THREAD", "1").strip() != "0")
    if not wanted or threading.current_thread().name.startswith(_HELPER_NAME):
        return None  # (work already on the helper never waits for the helper)
    if _HELPER is None:
        _HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_HELPER_NAME)
    return _HELPER


def _forget_helper() -> None:
    """A forked child has no helper thread: make it start its own when needed (and holds
    no other thread's turn at the BLAS limit)."""
    global _HELPER, _SINGLE_LOCK
    _HELPER = None
    _SINGLE_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_forget_helper)
