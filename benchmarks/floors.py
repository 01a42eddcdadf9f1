"""Where a fit's time goes: the parts of a fit that no choice of optimiser removes.

Usage::

    .venv/bin/python benchmarks/floors.py [--cases sleepstudy,leaderboard,insteval]

For each case of ``benchmarks/run.py``, in this process (medians of repeated calls): the
whole fit (``crossed.lmer``), building the design from the parsed formula, setting up the
PLS problem (cross-products, the sparse map), one evaluation of the criterion and one
of its analytic gradient at the fitted θ (BLAS on one thread, as in a fit), and the
optimiser's counts. Then LAPACK's dense Cholesky (dpotrf) and inverse (dpotri) on one
thread at the orders of the leaderboard's and InstEval's dense parts. These are the
floors the closing notes of issue 16 compare its absolute targets with.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.linalg import lapack

sys.path.insert(0, str(Path(__file__).resolve().parent))

import crossed  # noqa: E402
from cases import CASES  # noqa: E402
from crossed._threads import single_blas_thread  # noqa: E402
from crossed.design import build_design  # noqa: E402
from crossed.formula import parse  # noqa: E402
from crossed.model import gradient  # noqa: E402
from crossed.model.pls import PLS  # noqa: E402
from workers import load_data  # noqa: E402


def median_seconds(fn: Callable[[], object], n: int) -> float:
    """Median wall time of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def floors(name: str) -> str:
    """One line of the parts of ``name``'s fit."""
    case = next(c for c in CASES if c.name == name)
    data = load_data(case)
    small = case.name == "sleepstudy"
    n = 300 if small else 5
    fit = crossed.lmer(case.formula, data)
    spec = parse(case.formula)
    design = build_design(spec, data)
    t_design = median_seconds(lambda: build_design(spec, data), n)
    t_pls = median_seconds(lambda: PLS(design.random.blocks, design.X, design.y), n)
    pls = PLS.of(fit.design)
    theta = np.asarray(fit.theta, dtype=float)
    with single_blas_thread():
        t_eval = median_seconds(lambda: pls.factor(theta), 2000 if small else 20)
        f = pls.factor(theta)
        # (the sparse Schur complement's path has no analytic gradient: the crowd case)
        t_grad = None if pls.uses_sparse_schur else median_seconds(
            lambda: gradient.criterion_gradient(pls, f, fit.reml), 500 if small else 5)
    t_fit = median_seconds(lambda: crossed.lmer(case.formula, data), n if small else 3)
    o = fit.opt
    return (f"{name}: fit {t_fit * 1e3:.2f} ms; design {t_design * 1e3:.2f} ms; PLS set-up "
            f"{t_pls * 1e3:.2f} ms; one evaluation {t_eval * 1e3:.3f} ms; one gradient "
            f"{'none (sparse Schur path)' if t_grad is None else f'{t_grad * 1e3:.3f} ms'}; "
            f"{o.optimizer}, {o.feval} evaluations, {o.geval} "
            f"gradients; dense order {pls.dense_order}")


def lapack_line(order: int) -> str:
    """dpotrf and dpotri of a dense SPD matrix of ``order`` on one thread."""
    A = np.random.default_rng(0).normal(size=(order, order))
    S = np.asfortranarray(A @ A.T + order * np.eye(order))
    with single_blas_thread():
        t_chol = median_seconds(lambda: lapack.dpotrf(S, lower=1), 50)
        L = lapack.dpotrf(S, lower=1)[0]
        t_inv = median_seconds(lambda: lapack.dpotri(L, lower=1), 20)
    return (f"LAPACK on one thread, order {order}: dpotrf {t_chol * 1e3:.2f} ms, "
            f"dpotri {t_inv * 1e3:.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="sleepstudy,leaderboard,insteval")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for name in args.cases.split(","):
        print(floors(name), flush=True)
    for order in (313, 1145):
        print(lapack_line(order), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
