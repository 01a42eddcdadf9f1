"""Satterthwaite's denominator degrees of freedom, as lmerTest computes them.

With variance parameters φ = (θ, σ), lmerTest takes the Hessian H of the unprofiled
deviance at φ̂ (numDeriv), A = 2·H⁻¹ (Moore–Penrose over eigenvalues > 1e-8), and the
Jacobian of vcov(β) = σ² (R_XᵀR_X)⁻¹ with respect to φ. For a contrast row L,

    df = 2 (L C Lᵀ)² / (gᵀ A g),    g_i = L (∂C/∂φ_i) Lᵀ.

The derivatives are taken in the parametrisation the optimiser used (``_FactorCache``):
the same df wherever the formula's θ is well scaled, the right ones where it is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from crossed._threads import single_blas_thread
from crossed._warn import warn
from crossed.inference import _hessian
from crossed.inference.numderiv import central_derivatives, mixed_second
from crossed.inference.reparam import optimiser_problem
from crossed.model.pls import deviance_at

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["EIG_SCALED", "EIG_TOL", "SatterthwaiteModel", "satterthwaite_t"]

EIG_TOL = 1e-8
EIG_SCALED = 1e-6
"""An eigenvalue of the Hessian scaled to unit diagonal (D^-1/2 H D^-1/2) under this is
not resolved by the central differences: such a direction is treated as zero, and the
inverse taken in the scaled coordinates (lmerTest's rule alone, an absolute 1e-8 in the
unscaled ones, depends on the units). On a fuzzed singular fit (31 rows,
``y ~ x*f*f2 + (x | g) + (z | h)``) the scaled eigenvalue was 7e-8 and the unscaled one
1.2e-8 under the SkylakeX kernel and 4.6e-9 under Haswell: the intercept's df was 1e-6
under one, silently, and 3.6 with lmerTest's "close to zero" warning under the other."""


class _FactorCache:
    """Factorisations of the PLS problem in the optimiser's parametrisation, by θ (σ
    changes reuse them).

    That is the problem the native engine solved (``engines/native/rescale.py``): X
    orthogonalised where its columns are nearly collinear (:meth:`LmerFit.solved_pls`,
    ``back`` maps β′ to β), and random-effects columns far from zero centred, or far from
    unit SD scaled, with ``theta`` the optimiser's θ′ of the fit's θ. Satterthwaite's df
    do not depend on how (θ, σ) is parametrised (the Jacobians cancel in gᵀAg) nor on
    X's basis, but numerical derivatives do: with a random slope on a year (x ≈ 2000)
    the formula's θ span 167 to 6e-5, and the central differences lost the Hessian's
    smallest eigenvalue (df 2230 under one BLAS kernel and 1827 under another, where
    lmerTest on the centred x, the same model, gives 56.4)."""

    def __init__(self, fit: LmerFit):
        problem = optimiser_problem(fit)
        self.pls, self.theta, self.back = problem.pls, problem.theta, problem.back
        self.store: dict[bytes, object] = {}
        if problem.columns is None and self.back is None:  # (the fit's own problem and θ)
            self.store[self.theta.tobytes()] = fit.factor_at_optimum

    def __call__(self, theta: np.ndarray):
        key = np.asarray(theta, dtype=float).tobytes()
        f = self.store.get(key)
        if f is None:
            f = self.pls.factor(theta)
            self.store[key] = f
        return f


@dataclass(frozen=True)
class SatterthwaiteModel:
    """Derivatives lmerTest's Satterthwaite method needs, computed once per fit.

    Attributes
    ----------
    varpar : numpy.ndarray
        φ̂ = (θ̂, σ̂), θ̂ in the optimiser's parametrisation (the fit's θ unless its
        random-effects columns were centred or scaled: ``_FactorCache``).
    hessian : numpy.ndarray
        Hessian of the deviance (REML or ML, as fitted) with respect to φ at φ̂.
    A : numpy.ndarray
        2·H⁻¹: asymptotic covariance of φ̂.
    jac : numpy.ndarray
        (len φ, p, p): ∂vcov(β)/∂φ_i.
    vcov : numpy.ndarray
        vcov(β) at φ̂.
    """

    varpar: np.ndarray
    hessian: np.ndarray
    A: np.ndarray
    jac: np.ndarray
    vcov: np.ndarray

    @classmethod
    def from_fit(cls, fit: LmerFit) -> SatterthwaiteModel:
        """Compute (or fetch from the fit's cache) the derivatives for ``fit``."""
        def compute() -> SatterthwaiteModel:
            with single_blas_thread():
                return cls._compute(fit)

        return fit.memo("satterthwaite", compute)

    @classmethod
    def _compute(cls, fit: LmerFit) -> SatterthwaiteModel:
        factors = _FactorCache(fit)
        pls, back = factors.pls, factors.back  # (back: R⁻¹ of orthogonalised columns)
        n, p = fit.design.n, len(fit.beta)
        theta = factors.theta
        k = len(theta)
        sigma = float(fit.sigma)
        n_eff = n - p if fit.reml else n

        # Everything at a theta comes from one factorisation: the deviance at σ̂, the
        # penalised RSS (for the σ derivatives, which are analytic) and the unscaled vcov.
        def at_theta(theta: np.ndarray) -> np.ndarray:
            f = factors(theta)
            if not f.ok:
                return np.full(2 + p * p, np.nan)
            Ri = pls.rx_inverse(f)
            if back is not None:  # (R_XᵀR_X)⁻¹ of the formula's columns
                Ri = Ri @ back.T
            dev = deviance_at(f, sigma, n, p, fit.reml)  # (a constant apart: derivatives)
            return np.concatenate([[dev, f.pwrss], (Ri.T @ Ri).ravel()])

        def at_thetas(thetas: np.ndarray, full: bool = True) -> np.ndarray:
            """``at_theta`` at each row (``full=False``: its deviance alone, a column):
            small designs in one compiled loop (``PLS.deviance_batch``: the same numbers),
            the rows it leaves to the caller and other designs one by one."""
            width = 2 + p * p if full else 1
            batch = pls.deviance_batch(thetas, sigma, fit.reml, vcov=full, back=back)
            if batch is None:
                return np.array([at_theta(t)[:width] for t in thetas]).reshape(-1, width)
            out, own = batch
            for i in (~own).nonzero()[0]:
                out[i] = at_theta(thetas[i])[:width]
            return out

        f0, first, second = central_derivatives(at_thetas, theta)
        H_tt = mixed_second(lambda ths: at_thetas(ths, full=False)[:, 0], theta, second[0],
                            f0[0])
        pwrss = f0[1]
        H = np.zeros((k + 1, k + 1))
        H[:k, :k] = H_tt
        H[:k, k] = H[k, :k] = -2.0 * first[1] / sigma**3  # ∂²dev/∂θ_i∂σ
        H[k, k] = 6.0 * pwrss / sigma**4 - 2.0 * n_eff / sigma**2
        A = 2.0 * _pinv_psd(H)
        unscaled = f0[2:].reshape(p, p)
        jac = np.empty((k + 1, p, p))
        jac[:k] = sigma**2 * first[2:].T.reshape(k, p, p)
        jac[k] = 2.0 * sigma * unscaled
        varpar = np.concatenate([theta, [sigma]])
        return cls(varpar=varpar, hessian=H, A=A, jac=jac, vcov=np.asarray(fit.vcov_beta))

    def df(self, L: np.ndarray) -> np.ndarray:
        """Satterthwaite df for each row of the contrast matrix ``L`` (k x p)."""
        L = np.atleast_2d(np.asarray(L, dtype=float))
        var = np.einsum("ij,jk,ik->i", L, self.vcov, L)
        g = np.einsum("ij,ajk,ik->ia", L, self.jac, L)  # (rows, len φ)
        denom = np.einsum("ia,ab,ib->i", g, self.A, g)
        with np.errstate(divide="ignore", invalid="ignore"):
            return 2.0 * var**2 / denom


def _pinv_psd(H: np.ndarray) -> np.ndarray:
    """Moore–Penrose inverse over positive eigenvalues, warning as lmerTest does: in the
    coordinates scaled to unit diagonal where one of their eigenvalues is under
    ``EIG_SCALED``, else over eigenvalues above lmerTest's ``EIG_TOL`` (compiled:
    ``_hessian.pinv_psd``)."""
    A, finite, neg, zero = _hessian.pinv_psd(np.ascontiguousarray(H, dtype=float),
                                             EIG_SCALED, EIG_TOL)
    if not finite:
        warn("the Hessian of the deviance in the variance parameters is not finite at the "
             "optimum (the model's system is numerically singular beside it: nearly "
             "collinear or badly scaled predictors?): Satterthwaite df are not available "
             "(NaN); rescale or centre the predictors")
    if neg:
        warn(f"Model failed to converge with {neg} negative eigenvalue(s) of the "
             "Hessian of the deviance; Satterthwaite df may be unreliable")
    if zero:
        warn(f"Model may not have converged with {zero} eigenvalue(s) of the Hessian "
             "close to zero")
    return A


def satterthwaite_t(fit: LmerFit, L: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimates, standard errors and Satterthwaite df of the contrasts ``L @ beta``.

    Parameters
    ----------
    fit : LmerFit
    L : array-like, shape (k, p)
        One contrast per row over the fixed effects.

    Returns
    -------
    estimate, std_error, df : numpy.ndarray
        Validated against lmerTest 3.1-3 (``contest1D`` / ``summary``).
    """
    model = SatterthwaiteModel.from_fit(fit)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    est = L @ fit.beta
    se = np.sqrt(np.einsum("ij,jk,ik->i", L, model.vcov, L))
    return est, se, model.df(L)
