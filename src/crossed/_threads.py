"""BLAS thread control.

The engine runs many small dense factorisations; multi-threaded OpenBLAS spends more time
synchronising than computing on them, and on a loaded 2-core machine a 260 x 260 Cholesky
went from 0.3 ms (one thread) to 280 ms (two). Numerical code runs under one BLAS thread.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager

from threadpoolctl import ThreadpoolController

_CONTROLLER: ThreadpoolController | None = None


def blas_threads(n: int | None) -> AbstractContextManager:
    """Context manager setting the number of BLAS threads (None: one per core)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=n if n is not None else os.cpu_count() or 1,
                             user_api="blas")


def single_blas_thread() -> AbstractContextManager:
    """Context manager limiting BLAS libraries to one thread."""
    return blas_threads(1)
