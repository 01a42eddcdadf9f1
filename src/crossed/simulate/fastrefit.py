"""Refits for simulation loops: same numbers as ``LmerFit.refit``, less set-up per refit.

``LmerFit.refit`` rebuilds the penalised least squares (PLS) cross-products from scratch.
When only the response changes (parametric bootstrap, power analysis) most of them do not
depend on y: the sparse indicator matrices, ZᵀZ blocks and Z₁ᵀZ_rest. :class:`Refitter`
computes those once and, for each new response, only the products with y (same
expressions, same order, so the factorisations are bit-for-bit those of a plain refit).
Row subsets (missing-data ablation) change everything, so they build a fresh PLS, but skip
copying the private data frame that reference grids need.

``check_conv=False`` skips lme4's post-fit gradient/Hessian check (2k² extra criterion
evaluations for k variance parameters). Estimates are unchanged; only ``converged`` and the
convergence messages are not computed.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import nlopt
import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from crossed._threads import single_blas_thread
from crossed.engines.native.engine import finish_fit
from crossed.engines.native.optimize import LmerControl, bobyqa
from crossed.engines.native.pls import PLS, Factor, _sparse_z, profiled_deviance

if TYPE_CHECKING:
    from crossed.design import Design
    from crossed.fit import LmerFit


class FastPLS(PLS):
    """:class:`~crossed.engines.native.pls.PLS` with less Python overhead per evaluation.

    For a scalar first block (``(1 | g)``), scalar later blocks and the dense first-to-rest
    product (the small designs simulations refit thousands of times), ``factor`` reads
    theta directly instead of building templates, skips the scaling by ones when there are
    no later blocks and uses array methods instead of ``np.sum``: the same floating-point
    operations in the same order, so the factors are identical (tested). Any other design
    uses PLS's own code.
    """

    def __init__(self, blocks, X, y):
        if len(blocks) == 1 and blocks[0].q == 1:
            self._init_single_scalar(blocks[0], X, y)
        else:
            super().__init__(blocks, X, y)
        self._setup_fast()

    def _init_single_scalar(self, block, X: np.ndarray, y: np.ndarray) -> None:
        """PLS.__init__ for one ``(1 | g)`` block: the same arrays, built without the
        COO conversions and stacking that dominate its cost on small designs."""
        self.blocks = (block,)
        self.n, self.p = X.shape
        self.X, self.y = X, y
        self.q1, self.l1 = 1, block.nlevels
        self.rest_sizes = []
        self.r_rand = 0
        self.r = self.p + 1
        dense = np.column_stack([X, y])
        # the CSR matrix _sparse_z builds (one entry per row, in row order)
        Z1 = sp.csr_matrix((block.Z.ravel(), block.codes, np.arange(self.n + 1)),
                           shape=(self.n, self.l1))
        A11 = np.zeros((self.l1, 1, 1))
        np.add.at(A11, block.codes, block.Z[:, :, None] * block.Z[:, None, :])
        self.A11 = A11
        self.Arr = np.empty((self.r, self.r))
        self.Arr[:, :] = dense.T @ dense
        A1r = sp.csr_matrix(np.asarray(Z1.T.tocsr() @ dense))
        A1r.sum_duplicates()
        A1r.sort_indices()
        self.A1r = A1r
        lev_nnz = np.diff(A1r.indptr).astype(np.float64)
        sparse_cost = float(np.sum(lev_nnz * lev_nnz)) / 2.0
        dense_cost = self.l1 * self.r * self.r / 50.0
        self.A1r_dense = None
        if dense_cost < sparse_cost and self.l1 * self.r <= 20_000_000:
            self.A1r_dense = A1r.toarray().reshape(self.l1, 1, self.r)
        else:
            self._build_w(A1r)
        self._rest_scalar = True

    def _setup_fast(self) -> None:
        self._diag = np.arange(self.r_rand)
        self._fast = (self.q1 == 1 and self._rest_scalar and self.A1r_dense is not None)
        if self._fast:
            self._t1 = int(self.blocks[0].theta_index[0, 0])
            self._a11 = self.A11[:, 0, 0]
            self._rest = [(int(b.theta_index[0, 0]), b.nlevels) for b in self.blocks[1:]]
            self._ones = np.ones(self.p + 1)

    def first_block(self, theta: np.ndarray):
        if not self._fast:
            return super().first_block(theta)
        t = theta[self._t1]
        b = t * t * self._a11 + 1.0
        return np.sqrt(b)[:, None, None], (t * t / b)[:, None, None], float(
            np.log(b).sum()), True

    def schur(self, theta: np.ndarray, G: np.ndarray) -> np.ndarray:
        if not self._fast:
            return super().schur(theta, G)
        A3 = self.A1r_dense
        GA = G @ A3
        C = self.Arr - A3.reshape(-1, self.r).T @ GA.reshape(-1, self.r)
        if self._rest:  # scaling by ones (no later blocks) changes nothing
            s = np.concatenate([np.repeat(theta[i], n) for i, n in self._rest] + [self._ones])
            C *= s[:, None]
            C *= s[None, :]
        C[self._diag, self._diag] += 1.0
        return C

    def factor(self, theta: np.ndarray) -> Factor:
        if not self._fast:
            return super().factor(theta)
        theta = np.asarray(theta, dtype=float)
        chol, G, ld1, _ = self.first_block(theta)
        C = self.schur(theta, G)
        L, info = lapack.dpotrf(C.T, lower=1, clean=1, overwrite_a=1)
        if info != 0:
            return Factor(theta=theta, ok=False)
        d = L.diagonal()
        rr = self.r_rand
        return Factor(theta=theta, ok=True, ldL2=ld1 + 2.0 * float(np.log(d[:rr]).sum()),
                      ldRX2=2.0 * float(np.log(d[rr:-1]).sum()), pwrss=float(d[-1] ** 2),
                      L=L, B_chol=chol)


FIT_ERRORS = (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError,
              nlopt.RoundoffLimited, nlopt.ForcedStop)
"""Exceptions a refit in a simulation may raise; they are recorded as failed fits."""


class Refitter:
    """Repeated refits of one fitted model (native engine).

    Parameters
    ----------
    fit : LmerFit
        The model whose design is reused. Fits from other engines are refitted with their
        own ``fit.refit`` (no speed-up).
    check_conv : bool, optional
        Run lme4's convergence derivative check after each refit (default: as the fit's
        own control). Skipping it does not change any estimate.
    keep_frame : bool
        Keep the private data frame on row-subset refits (needed for EMMs computed from
        scratch on the refit, e.g. ``refit.emmeans(...)``); off by default for speed.

    Notes
    -----
    Validated by ``tests/simulate/test_fastrefit.py``: theta, beta, sigma, deviance and
    vcov are identical (``assert_array_equal``) to those of ``fit.refit``.
    """

    def __init__(self, fit: LmerFit, check_conv: bool | None = None, keep_frame: bool = False):
        self.fit = fit
        self.native = fit.engine == "native"
        base = fit.opt.control if fit.opt is not None else LmerControl()
        if check_conv is not None:
            base = replace(base, check_conv=check_conv)
        self.control = base
        self.keep_frame = keep_frame
        self._parts: dict | None = None

    # ------------------------------------------------------------------ public
    def refit(self, y: np.ndarray | None = None, rows: np.ndarray | None = None,
              reml: bool | None = None) -> LmerFit:
        """As :meth:`crossed.LmerFit.refit` (new response and/or subset of rows)."""
        fit = self.fit
        if not self.native:  # other engines: their own refit
            return fit.refit(y=y, rows=rows, reml=reml)
        reml = fit.reml if reml is None else reml
        if rows is None:
            design = fit.design if y is None else fit.design.with_response(y)
            with single_blas_thread():
                pls = self._pls_with_response(design.y)
                return self._optimise(design, pls, reml)
        design = subset_design(fit.design, rows, keep_frame=self.keep_frame)
        if y is not None:
            design = design.with_response(y)
        return fit_design(design, reml, self.control, fit.data_name)

    # ------------------------------------------------------------------ internals
    def _optimise(self, design: Design, pls: PLS, reml: bool) -> LmerFit:
        return _optimise(design, pls, reml, self.control, self.fit.data_name)

    def _y_independent(self) -> dict:
        """Cross-products that do not involve y, built once (the expressions of PLS)."""
        if self._parts is None:
            blocks = self.fit.design.random.blocks
            Z1 = _sparse_z(blocks[0])
            rest = blocks[1:]
            Zr = sp.hstack([_sparse_z(b) for b in rest], format="csr") if rest else None
            Z1t = Z1.T.tocsr()
            self._parts = {
                "Zr": Zr,
                "Z1t": Z1t,
                "Z1tZr": (Z1t @ Zr).tocsr() if Zr is not None else None,
                "template": FastPLS.__new__(FastPLS),
            }
            base = self.fit.pls
            tpl = self._parts["template"]
            for name in ("blocks", "n", "p", "q1", "l1", "rest_sizes", "r_rand", "r", "X",
                         "A11", "_rest_scalar"):
                setattr(tpl, name, getattr(base, name))
            self._parts["ZrtZr"] = base.Arr[: base.r_rand, : base.r_rand].copy()
        return self._parts

    def _pls_with_response(self, y: np.ndarray) -> PLS:
        """A PLS for the fit's design with response ``y`` (same arrays as ``PLS(...)``)."""
        parts = self._y_independent()
        pls = copy.copy(parts["template"])
        X = pls.X
        pls.y = y
        rr, r = pls.r_rand, pls.r
        dense = np.column_stack([X, y])
        Zr, Z1t = parts["Zr"], parts["Z1t"]
        Arr = np.empty((r, r))
        if Zr is not None:
            Arr[:rr, :rr] = parts["ZrtZr"]
            ZtD = np.asarray(Zr.T @ dense)
            Arr[:rr, rr:] = ZtD
            Arr[rr:, :rr] = ZtD.T
        Arr[rr:, rr:] = dense.T @ dense
        pls.Arr = Arr
        A1r_parts = []
        if Zr is not None:
            A1r_parts.append(parts["Z1tZr"])
        A1r_parts.append(sp.csr_matrix(np.asarray(Z1t @ dense)))
        A1r = sp.hstack(A1r_parts, format="csr")
        A1r.sum_duplicates()
        A1r.sort_indices()
        pls.A1r = A1r
        # the same dense/sparse decision as PLS.__init__
        lev_nnz = np.diff(A1r.indptr[:: pls.q1]).astype(np.float64)
        sparse_cost = float(np.sum(lev_nnz * lev_nnz)) / 2.0
        dense_cost = pls.l1 * pls.q1 * r * r / 50.0
        pls.A1r_dense = None
        if dense_cost < sparse_cost and pls.l1 * pls.q1 * r <= 20_000_000:
            pls.A1r_dense = A1r.toarray().reshape(pls.l1, pls.q1, r)
        else:
            pls._build_w(A1r)
        pls._setup_fast()
        return pls


def _clearly_full_rank(X: np.ndarray) -> bool:
    """All columns independent with a margin (the test ``independent_columns`` uses as its
    fast path): then it would keep every column, so its QR loop can be skipped."""
    norms = np.linalg.norm(X, axis=0)
    if X.shape[1] == 0 or not np.all(norms > 0):
        return False
    scaled = X / norms
    try:
        chol = np.linalg.cholesky(scaled.T @ scaled)
    except np.linalg.LinAlgError:
        return False
    return bool(np.min(np.abs(np.diag(chol))) > 1e-4)


def subset_design(design: Design, rows: np.ndarray, keep_frame: bool = False) -> Design:
    """``Design.subset`` with the same result, minus the private frame (unless
    ``keep_frame``) and the column-by-column rank check when the subset is clearly of full
    rank."""
    from crossed.design import DataError
    from crossed.design.fixed import subset_fixed
    from crossed.design.random import subset_random

    if keep_frame:
        return design.subset(rows)
    idx = np.arange(design.n)[np.asarray(rows)]
    if idx.size == 0:
        raise DataError("the subset has no rows")
    X = design.fixed.X[idx]
    if _clearly_full_rank(X):
        fixed = replace(design.fixed, X=X)
    else:
        fixed = subset_fixed(design.fixed, idx)
    random = subset_random(design.random, idx)
    return replace(design, y=design.y[idx], fixed=fixed, random=random, frame=None)


def _optimise(design: Design, pls: PLS, reml: bool, control: LmerControl,
              data_name: str) -> LmerFit:
    """The native engine's optimisation (``fit_native``) on a prepared PLS."""
    t0 = time.perf_counter()
    n, p = design.X.shape

    def crit(theta: np.ndarray) -> float:
        return profiled_deviance(pls.factor(theta), n, p, reml)

    opt = bobyqa(crit, design.random.theta_start(), design.random.theta_lower, control)
    theta = opt.theta_final.copy()
    f = pls.factor(theta)
    dev = profiled_deviance(f, n, p, reml)
    return finish_fit(design, pls, f, theta, dev, reml, "native", opt, control, t0, data_name,
                      crit)


def fit_design(design: Design, reml: bool, control: LmerControl,
               data_name: str = "data") -> LmerFit:
    """Fit a prepared design with the native engine and the given control."""
    with single_blas_thread():
        pls = FastPLS(design.random.blocks, design.X, design.y)
        return _optimise(design, pls, reml, control, data_name)
