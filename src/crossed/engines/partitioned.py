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
from typing import Protocol

import numpy as np

from crossed._threads import single_blas_thread
from crossed.design.frame import DataError
from crossed.engines.native.engine import fit_pls
from crossed.engines.native.glmer import fit_glmm_problem
from crossed.engines.native.rescale import column_rescaling
from crossed.formula.spec import ModelSpec
from crossed.model.control import LmerControl
from crossed.model.glmm.family import Family
from crossed.model.glmm.pirls import ETA_TOL, PirlsError, PirlsState, pirls_iterations
from crossed.model.glmm.result import GlmerResult
from crossed.model.partitioned import (
    GlmmSums,
    LocalPirlsSums,
    PartitionSource,
    RowlessDesign,
    has_local_pirls,
    response_centre,
    rowless_design,
    theta_start_of,
    with_column_stats,
)
from crossed.model.pls import PLS
from crossed.model.result import LmerResult

__all__ = ["GlmmSource", "PartitionedGlmm", "PassLog", "fit_glmer_partitioned",
           "fit_lmer_partitioned", "stderr_progress", "stopping_iteration"]


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
        Its design is a :class:`~crossed.model.partitioned.RowlessDesign`; the passes
        made, (name, seconds) each, are kept as ``fit.memo("passes", ...)``.
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


# ---------------------------------------------------------------------------- GLMMs
class PartitionedGlmm:
    """A GLMM's deviance on partitioned rows, for the native engine's two stages
    (:func:`crossed.engines.native.glmer._fit`, as :class:`GlmmProblem
    <crossed.model.glmm.pirls.GlmmProblem>` on the rows).

    PIRLS runs in the driver on level-sized state (u, β, the summed weighted
    cross-products); each iteration is one pass over the partitions
    (:func:`~crossed.model.partitioned.glmm_pass`): the workers move η to the new
    (u, β), keep it beside their partition, and return the deviance there and the
    weighted products of the next step. Step halving costs a pass per halving.

    With one scalar random-effects term the partitions are regrouped once so that each
    holds every row of its levels (the source's ``colocate``); at fixed β (the Laplace
    stage) the modes of different levels do not interact, so each evaluation is then
    one pass: every partition runs its PIRLS iterations alone
    (:func:`~crossed.model.partitioned.local_pirls`) and returns each iteration's sums,
    and the driver applies the stopping rule to their totals
    (:func:`stopping_iteration`), the same iterations as the pass-per-iteration loop.
    Where that rule would halve a step, the evaluation runs that loop instead. The
    modes themselves are fetched (one more pass) only for the state the fit keeps.
    """

    scalar1 = False  # (no per-row shortcuts: the batched Laplace of the rows' path)

    def __init__(self, design: RowlessDesign, family: Family, source: GlmmSource,
                 tol: float = 1e-7, maxit: int = 100,
                 progress: Callable[[str, int, float | None], None] | None = None) -> None:
        self.progress = progress
        self.design = design
        self.family = family
        self.source = source
        self.tol, self.maxit, self.exact = tol, maxit, False
        self.p = len(design.fixed.names)
        self.blocks = design.random.blocks
        self.sizes = [b.nlevels * b.q for b in self.blocks]
        self.q = int(sum(self.sizes))
        self.local = has_local_pirls(self.blocks)
        self.handle = source.glmm_partitions(
            design, family, self.blocks[0].factors if self.local else None)
        self.passes = 0
        self.evaluations = 0
        self._last: PirlsState | None = None
        self._pending: tuple[np.ndarray, np.ndarray, int, float, float, float] | None = None
        self.last_error: PirlsError | None = None
        self.lp0: object = None
        self.lp0_joint: object = None
        self._start: tuple[object, object, GlmmSums] | None = None
        _, start = self._pass(None, np.zeros(0), None, np.zeros(self.p), True, None)
        self._aic_const = start.aic - start.resdev

    def _count_pass(self) -> None:
        self.passes += 1
        if self.progress is not None and self.passes % 50 == 0:
            self.progress(f"PIRLS (pass {self.passes})", 2, None)

    def _pass(self, etas: object, theta: np.ndarray, u: np.ndarray | None, beta: np.ndarray,
              joint: bool, lp0: object) -> tuple[object, GlmmSums]:
        self._count_pass()
        return self.source.glmm_step(self.handle, etas, self.family, theta, u, beta, joint,
                                     lp0)

    def split(self, u: np.ndarray) -> list[np.ndarray]:
        out, pos = [], 0
        for b, size in zip(self.blocks, self.sizes, strict=True):
            out.append(u[pos:pos + size].reshape(b.nlevels, b.q))
            pos += size
        return out

    def _solve(self, products: object, theta: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, float, PLS, object]:
        pls = PLS.from_products(products, self.blocks)  # type: ignore[arg-type]
        f = pls.factor(theta)
        if not f.ok:
            raise PirlsError("the weighted PLS system is not positive definite")
        beta, ub = pls.solve(f)
        return np.concatenate([b.ravel() for b in ub]), beta, float(f.ldL2), pls, f

    def pirls(self, theta: np.ndarray, beta: np.ndarray | None, joint: bool) -> PirlsState:
        """Conditional modes at θ (and β; ``joint``: β too), as ``GlmmProblem.pirls``
        from the stage's start, one pass per iteration."""
        theta = np.asarray(theta, dtype=float)
        beta = np.zeros(self.p) if joint or beta is None else np.asarray(beta, dtype=float)
        lp0 = self.lp0_joint if joint else self.lp0
        if joint:  # (the start's products do not depend on θ or β then: one pass a stage)
            if self._start is None or self._start[0] is not lp0:
                self._start = (lp0, *self._pass(None, theta, None, beta, joint, lp0))
            etas, sums = self._start[1], self._start[2]
        else:
            etas, sums = self._pass(None, theta, None, beta, joint, lp0)
        ld = 0.0  # (the last solve's: the final state's)

        def solve(at: tuple[object, GlmmSums]) -> tuple[np.ndarray, np.ndarray]:
            nonlocal ld
            with single_blas_thread():
                u_new, b_sol, ld, _, _ = self._solve(at[1].products, theta)
            return u_new, b_sol

        def evaluate(at: tuple[object, GlmmSums], u_new: np.ndarray, b_new: np.ndarray
                     ) -> tuple[tuple[object, GlmmSums], float]:
            new_etas, s = self._pass(at[0], theta, u_new, b_new, joint, None)
            return (new_etas, s), s.resdev + float(u_new @ u_new)

        def settled_at(new: tuple[object, GlmmSums], old: tuple[object, GlmmSums]) -> bool:
            return bool(new[1].step <= ETA_TOL * (1.0 + new[1].size))

        (etas, sums), u, beta, it = pirls_iterations(
            (etas, sums), np.zeros(self.q), beta, joint, solve, evaluate, settled_at,
            self.tol, self.maxit, self.exact)
        state = PirlsState(u=u, beta=np.asarray(beta, dtype=float), eta=np.zeros(0),
                           mu=np.zeros(0), ldL2=ld, sqrt_w=np.zeros(0), iterations=it)
        state.factor = (etas, sums.resdev)  # (η stays on the workers)
        return state

    @property
    def last(self) -> PirlsState | None:
        """The latest evaluation's state (a local evaluation's modes fetched on first
        use: one pass)."""
        if self._pending is not None:
            theta, beta, it, resdev, uu, ld = self._pending
            self._pending = None
            self._count_pass()
            etas, u = self.source.glmm_local_modes(self.handle, self.lp0, self.family,
                                                   theta, beta, it, self.q)
            self._last = PirlsState(u=u, beta=beta, eta=np.zeros(0), mu=np.zeros(0),
                                    ldL2=ld, sqrt_w=np.zeros(0), iterations=it)
            self._last.factor = (etas, resdev)
        return self._last

    @last.setter
    def last(self, state: PirlsState | None) -> None:
        self._pending, self._last = None, state

    def _local_laplace(self, theta: np.ndarray, beta: np.ndarray) -> float | None:
        """The Laplace criterion at (θ, β) from one pass of local PIRLS; None where the
        stopping rule would halve a step (the caller runs the general loop)."""
        self._count_pass()
        sums = self.source.glmm_local(self.handle, self.lp0, self.family, theta, beta,
                                      self.maxit)
        it = stopping_iteration(sums, self.tol, self.maxit, self.exact)
        if it is None:
            return None
        i = sums.at(it)
        resdev, uu, ld = float(sums.resdev[i]), float(sums.uu[i]), float(sums.ld[i])
        self._last = None
        self._pending = (theta, beta, it, resdev, uu, ld)
        return resdev + self._aic_const + uu + ld

    def compiled_deviance(self, joint: bool, mapping: tuple[np.ndarray, ...] | None = None
                          ) -> None:
        """None: the partitions' criterion is evaluated by their passes (``GlmmProblem``'s
        compiled criterion of rows in memory has no counterpart here)."""
        return None

    def set_lp0(self, s: PirlsState, joint: bool) -> None:
        etas = s.factor[0]  # type: ignore[index]
        if joint:
            self.lp0_joint = etas
        else:
            self.lp0 = etas

    def deviance_of(self, s: PirlsState) -> float:
        return float(s.factor[1])  # type: ignore[index]

    def laplace_of(self, s: PirlsState) -> float:
        return self.deviance_of(s) + self._aic_const + float(s.u @ s.u) + s.ldL2

    def deviance0(self, theta: np.ndarray) -> float:
        self.evaluations += 1
        try:
            s = self.pirls(theta, None, joint=True)
        except PirlsError as exc:
            self.last_error = exc
            return np.inf
        self.last = s
        return self.laplace_of(s)

    def deviance(self, pars: np.ndarray, nagq: int = 1) -> float:
        if nagq > 1:
            raise ValueError("nAGQ > 1 is not available on partitioned data")
        self.evaluations += 1
        k = len(pars) - self.p
        theta, beta = np.asarray(pars[:k], dtype=float), np.asarray(pars[k:], dtype=float)
        if self.local:
            value = self._local_laplace(theta, beta)
            if value is not None:
                return value
        try:
            s = self.pirls(theta, beta, joint=False)
        except PirlsError:
            return np.inf
        self.last = s
        return self.laplace_of(s)

    def _at_state(self, theta: np.ndarray, s: PirlsState, joint: bool) -> tuple[PLS, object]:
        _, sums = self._pass(None, theta, None, s.beta, joint, s.factor[0])  # type: ignore[index]
        with single_blas_thread():
            pls = PLS.from_products(sums.products, self.blocks)  # type: ignore[arg-type]
            return pls, pls.factor(theta)

    def unscaled_vcov(self, theta: np.ndarray, s: PirlsState) -> np.ndarray:
        """(R_X'R_X)⁻¹ at the state's working weights (one pass)."""
        if self.p == 0:
            return np.zeros((0, 0))
        pls, f = self._at_state(theta, s, True)
        Ri = pls.rx_inverse(f)  # type: ignore[arg-type]
        return np.asarray(Ri.T @ Ri, dtype=float)

    def cond_var(self, theta: np.ndarray, s: PirlsState) -> list[np.ndarray]:
        """(Λ'Z'WZΛ + I)⁻¹'s diagonal blocks per level at the state's weights (one pass)."""
        pls, f = self._at_state(theta, s, False)
        return pls.conditional_inverse_blocks(f)  # type: ignore[arg-type]


class _Halving(Exception):
    """The stopping rule would halve a step (:func:`stopping_iteration`)."""


def stopping_iteration(sums: LocalPirlsSums, tol: float, maxit: int, exact: bool
                       ) -> int | None:
    """The iteration at which PIRLS stops (:func:`pirls_iterations
    <crossed.model.glmm.pirls.pirls_iterations>`: lme4's test on the penalised deviance,
    then, ``exact``, η settled) on the summed iterations of local PIRLS; None where the
    rule would halve a step instead (local iterations do not halve)."""
    pdev = sums.resdev + sums.uu
    at = sums.at

    def evaluate(_: int, u_new: np.ndarray, b_new: np.ndarray) -> tuple[int, float]:
        k = float(u_new[0])
        if k != int(k):  # (a halved step: between two iterations)
            raise _Halving
        return int(k), float(pdev[at(int(k))])

    if not len(sums):
        return None
    try:
        _, u, _, _ = pirls_iterations(
            0, np.zeros(1), np.zeros(0), False,
            lambda k: (np.array([k + 1.0]), np.zeros(0)), evaluate,
            lambda new, old: bool(sums.step[at(new)] <= ETA_TOL * (1.0 + sums.size[at(new)])),
            tol, maxit, exact)
    except (_Halving, PirlsError):
        return None
    return int(u[0])


class GlmmSource(PartitionSource, Protocol):
    """A :class:`PartitionSource` that also runs PIRLS passes over partitions kept on
    the workers."""

    def glmm_partitions(self, design: RowlessDesign, family: Family,
                        colocate: tuple[str, ...] | None) -> object:
        """The partitions encoded for the GLMM (``glmm_partition``), kept on the workers;
        with ``colocate`` (columns), regrouped first so that the rows sharing their values
        are in one partition."""
        ...

    def glmm_local(self, handle: object, lp0: object, family: Family, theta: np.ndarray,
                   beta: np.ndarray, maxit: int) -> LocalPirlsSums:
        """``local_pirls`` on every partition (with its part of ``lp0``), added."""
        ...

    def glmm_local_modes(self, handle: object, lp0: object, family: Family,
                         theta: np.ndarray, beta: np.ndarray, iterations: int, q: int
                         ) -> tuple[object, np.ndarray]:
        """``local_modes`` (``iterations`` iterations) on every partition: the η per
        partition, kept on the workers, and the modes of all ``q`` levels."""
        ...

    def glmm_step(self, handle: object, etas: object, family: Family, theta: np.ndarray,
                  u: np.ndarray | None, beta: np.ndarray, joint: bool, lp0: object
                  ) -> tuple[object, GlmmSums]:
        """``glmm_pass`` on every partition (with its η before, ``etas``, and its part of
        ``lp0``): the new η per partition, kept on the workers, and the sums, added."""
        ...


def fit_glmer_partitioned(spec: ModelSpec, source: GlmmSource, family: Family,
                          nagq: int = 1, control: LmerControl | None = None,
                          data_name: str = "data", na_action: str = "omit",
                          progress: Callable[[str, int, float | None], None] | None = None
                          ) -> GlmerResult:
    """Fit a GLMM on partitioned rows (Laplace or nAGQ = 0): the levels pass, then lme4's
    two stages with each PIRLS iteration one pass over the partitions kept on the
    workers (:class:`PartitionedGlmm`).

    Returns
    -------
    GlmerResult
        Its design is a :class:`~crossed.model.partitioned.RowlessDesign`; row-level
        quantities (η, μ, residuals) are refused.
    """
    if nagq > 1:
        raise ValueError("nAGQ > 1 is not available on partitioned data: use nAGQ=1 "
                         "(Laplace) or fit in memory")
    t0 = time.perf_counter()
    if progress is not None:
        progress("levels", 1, None)
    levels = source.levels(spec, na_action)
    if progress is not None:
        progress("levels", 1, time.perf_counter() - t0)
    design = rowless_design(spec, levels, source.n_partitions, glmm=True)
    n = design.n_rows
    if n * levels.y_ss - levels.y_sum ** 2 == 0.0:  # (exact for 0/1 and counts)
        raise DataError(f"the response {spec.response!r} is constant on all {n} rows used: "
                        "a GLMM cannot be fitted to it (lme4: 'Response is constant')")
    # one pass of the LMM's sums: XᵀX's rank and the random-effects columns' statistics
    # (what the optimiser's rescaling reads)
    sums = source.sums(design, np.zeros(len(design.fixed.names)))
    if sums.products is None:
        raise DataError("no rows in any partition")
    _check_rank(np.asarray(sums.products.xtx), design.fixed.names)
    design = with_column_stats(design, sums)
    if column_rescaling(design.random.blocks) is not None:
        raise DataError("this model needs the optimiser's rescaling of random slopes far "
                        "from zero, computed from the rows: centre them before fitting on "
                        "partitioned data, or fit in memory")
    t1 = time.perf_counter()
    # (no single_blas_thread around it: in-process workers take it for their passes)
    problem = PartitionedGlmm(design, family, source, progress=progress)
    fit = fit_glmm_problem(design, family, nagq, control or LmerControl(), data_name,
                           problem)
    if progress is not None:
        progress(f"PIRLS ({problem.passes} passes)", 2, time.perf_counter() - t1)
    fit.memo("passes", lambda: (("levels", t1 - t0), ("pirls", problem.passes)))
    return fit
