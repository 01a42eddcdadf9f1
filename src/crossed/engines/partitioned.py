"""Fits on partitioned data, for any engine that implements
:class:`~crossed.model.partitioned.PartitionSource` (Dask: :mod:`crossed.engines.dask_fit`).

The driver runs the passes over the partitions and fits the summed system: the levels pass
gives the model's structure (:func:`~crossed.model.partitioned.rowless_design`), the sums
pass the cross-products, from which the native engine's optimisation runs on the PLS
problem alone (:meth:`PLS.from_products <crossed.model.pls.PLS.from_products>`). The
result is the in-memory fit's class; its design holds no rows.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from crossed._threads import single_blas_thread
from crossed.design.frame import DataError
from crossed.engines.native.engine import fit_pls
from crossed.formula.spec import ModelSpec
from crossed.model.control import LmerControl
from crossed.model.partitioned import (
    PartitionSource,
    response_centre,
    rowless_design,
    theta_start_of,
    with_column_stats,
)
from crossed.model.pls import PLS
from crossed.model.result import LmerResult

__all__ = ["PassLog", "fit_lmer_partitioned", "stderr_progress"]


class PassLog(list):
    """The passes a fit made over the partitions: (name, seconds) per pass."""


def stderr_progress(name: str, number: int, seconds: float | None) -> None:
    """A one-line counter of the passes on stderr (``seconds``: None when it starts)."""
    if seconds is None:
        print(f"pass {number}: {name} ...", file=sys.stderr, flush=True)
    else:
        print(f"pass {number}: {name} done in {seconds:.2f} s", file=sys.stderr, flush=True)


def _check_rank(xtx: np.ndarray, names: tuple[str, ...]) -> None:
    """Refuse fixed-effects columns that are linearly dependent in the rows (the in-memory
    design drops them; here it is said, never silently done)."""
    d = np.sqrt(np.diag(xtx))
    if np.any(d == 0):
        zero = [names[i] for i in np.flatnonzero(d == 0)]
        raise DataError("fixed-effects column(s) " + ", ".join(map(repr, zero))
                        + " are zero in every row used: drop them from the formula")
    w = np.linalg.eigvalsh(xtx / np.outer(d, d))
    if w[0] <= 1e-10 * w[-1]:
        raise DataError("the fixed-effects columns are linearly dependent in the rows "
                        f"({', '.join(names)}): partitioned fits do not drop columns; "
                        "simplify the fixed part")


def fit_lmer_partitioned(spec: ModelSpec, source: PartitionSource, reml: bool = True,
                         control: LmerControl | None = None, data_name: str = "data",
                         na_action: str = "omit",
                         progress: Callable[[str, int, float | None], None] | None = None
                         ) -> LmerResult:
    """Fit an LMM on partitioned rows: two passes over the partitions, then lme4's
    optimisation on the summed cross-products in the driver.

    Parameters
    ----------
    spec : ModelSpec
    source : PartitionSource
        The partitions (e.g. :class:`crossed.engines.dask_fit.DaskSource`).
    reml, control, data_name, na_action
        As :func:`crossed.lmer`.
    progress : callable, optional
        Called as ``progress(pass_name, pass_number, seconds)`` at each pass's start
        (``seconds`` None) and end.

    Returns
    -------
    LmerResult
        Its design is a :class:`~crossed.model.partitioned.RowlessDesign`; ``fit.passes``
        is not set here (the caller records :class:`PassLog`).
    """
    log = PassLog()

    def run(name: str, work: Callable[[], object]) -> object:
        number = len(log) + 1
        if progress is not None:
            progress(name, number, None)
        t0 = time.perf_counter()
        out = work()
        log.append((name, time.perf_counter() - t0))
        if progress is not None:
            progress(name, number, log[-1][1])
        return out

    levels = run("levels", lambda: source.levels(spec, na_action))
    design = rowless_design(spec, levels, source.n_partitions)  # type: ignore[arg-type]
    centre = response_centre(design, levels)  # type: ignore[arg-type]
    sums = run("sums", lambda: source.sums(design, centre))
    products = sums.products  # type: ignore[attr-defined]
    if products is None:
        raise DataError("no rows in any partition")
    _check_rank(np.asarray(products.xtx), design.fixed.names)
    design = with_column_stats(design, sums)  # type: ignore[arg-type]
    with single_blas_thread():
        pls = PLS.from_products(products, design.random.blocks)
        design.derived("pls", lambda: pls)  # (what PLS.of(design) gives: no rows needed)
        fit = fit_pls(design, pls, reml, control or LmerControl(), data_name,
                      theta0=theta_start_of(design, products))
    fit.memo("passes", lambda: tuple(log))
    return fit
