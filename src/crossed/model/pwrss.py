"""The penalised residual sum of squares where the factor's last pivot cancels.

:meth:`PLS.factor <crossed.model.pls.PLS.factor>` reads the pwrss off the last pivot of the
Cholesky factor of the cross-products, a difference of large numbers where the random
effects explain nearly all of the response or a level's columns are nearly collinear.
There it is recomputed from the residuals, as lme4 computes it always (at a cost of one
solve per evaluation, which lme4 pays everywhere and crossed only here).

Validated against lme4's criterion at given θ and exact (50-digit) values
(``tests/model/test_pwrss.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from crossed.design.random import ReBlock

if TYPE_CHECKING:
    from crossed.model.factor import Factor

__all__ = ["BEYOND_REPAIR", "CANCELLATION_LIMIT", "RANK_DEFICIENT", "ResidualForm",
           "amplification_2x2", "collinear_levels", "from_residuals", "in_repair_range",
           "level_products", "pivot_cancels", "pivots_cancel"]


class ResidualForm(Protocol):
    """What :func:`pivot_cancels` and :func:`from_residuals` read of a PLS problem: the
    public attributes of :class:`crossed.model.pls.PLS` they use (a protocol, so that this
    module, which ``pls.py`` imports, does not import it back)."""

    @property
    def residual_pwrss(self) -> str: ...
    @property
    def q1(self) -> int: ...
    @property
    def X(self) -> np.ndarray: ...
    @property
    def blocks(self) -> tuple[ReBlock, ...]: ...
    @property
    def band(self) -> object | None: ...
    @property
    def centred_response(self) -> np.ndarray: ...
    @property
    def yc_ss(self) -> float: ...
    @property
    def centre(self) -> np.ndarray: ...
    @property
    def first_2x2(self) -> tuple[np.ndarray, list[int], tuple[float, float]]: ...

    def solve(self, f: Factor) -> tuple[np.ndarray, list[np.ndarray]]: ...

CANCELLATION_LIMIT = 1e4
"""The factor's penalised residual sum of squares is recomputed from the residuals at every
θ where a level's cross-products have a Hadamard ratio of at least this
(:func:`collinear_levels`), and elsewhere at a θ where the response's sum of squares about
X is this many times it, counted with the first block's amplification
(:func:`pivot_cancels`)."""
BEYOND_REPAIR = 1e12
"""... up to this product: past it the factor itself has lost all but a few digits, and its
solution, which the residuals are formed from, with them (``Days * 1e12`` in
``(Days | Subject)``: lme4 stops with 'Downdated VtV is not positive definite')."""
RANK_DEFICIENT = 1e10
"""A level whose cross-products have a larger Hadamard ratio is taken as rank deficient
(one row, or a column constant within it) by :func:`collinear_levels`."""


def level_products(block: ReBlock, z: np.ndarray | None = None) -> np.ndarray:
    """Each level's cross-products A_s = Z_sᵀZ_s of a block, (ℓ, q, q) (``z``: other values
    in Z's place, e.g. √w-scaled)."""
    z = block.Z if z is None else z
    q, ell = block.q, block.nlevels
    A = np.empty((ell, q, q))
    for a in range(q):
        for b in range(a + 1):
            A[:, a, b] = A[:, b, a] = np.bincount(block.codes, weights=z[:, a] * z[:, b],
                                                  minlength=ell)
    return A


def collinear_levels(A: np.ndarray) -> bool:
    """Whether some level's cross-products A_s (stacked, (ℓ, q, q)) of full rank have a
    Hadamard ratio Π diag(A_s) / det(A_s) of ``CANCELLATION_LIMIT`` or more (below
    ``RANK_DEFICIENT``): columns nearly collinear within a level, a random slope on an
    uncentred year (x ≈ 2000, SD 10 within a level: about 4e4). With two columns and an
    uncorrelated template ΛᵀA_sΛ + I has a smaller ratio, whatever θ."""
    if A.shape[1] < 2:
        return False
    if A.shape[1] == 2:  # (the closed form: few calls for small designs)
        product = A[:, 0, 0] * A[:, 1, 1]
        det = product - A[:, 1, 0] * A[:, 1, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((product > 0) & (det > 0), product / det, np.inf)
        return bool(((ratio >= CANCELLATION_LIMIT) & (ratio < RANK_DEFICIENT)).any())
    diag = np.einsum("sii->si", A)
    used = np.all(diag > 0, axis=1)
    if not used.any():
        return False
    sign, logdet = np.linalg.slogdet(A[used])
    log_ratio = np.log(diag[used]).sum(axis=1) - np.where(sign > 0, logdet, -np.inf)
    full = log_ratio < np.log(RANK_DEFICIENT)
    return bool(np.any(log_ratio[full] >= np.log(CANCELLATION_LIMIT)))


def pivot_cancels(pls: ResidualForm, pwrss: float, first: np.ndarray | None = None,
                  theta: np.ndarray | None = None, amplification: float | None = None
                  ) -> bool:
    """Whether a factor's pwrss, its last squared pivot, has lost digits to
    cancellation and is to be recomputed from the residuals.

    The pivot is the centred response's sum of squares less what the random effects
    explain, so it loses the digits of their ratio ρ = yᵀy / pwrss, and where the first
    block has two columns also those its per-level solves lose: the largest Hadamard
    ratio b₀₀b₁₁ / det B_s of its matrices (``first``: their entries, ``first_block``'s
    for q₁ = 2, at ``theta``; computed where a bound of it from θ can reach the limit;
    or that ratio itself, ``amplification``, where the caller has it: 1 for q₁ = 1).
    Recomputed where the product reaches ``CANCELLATION_LIMIT`` (the
    reference cases: at most 70) and is below ``BEYOND_REPAIR``, and always with
    ``pls.residual_pwrss == "always"`` (nearly collinear levels: :func:`collinear_levels`)."""
    if pls.residual_pwrss != "auto":
        return pls.residual_pwrss == "always"
    if not pwrss > 0:
        return False  # (not positive definite: the caller's business)
    rho = pls.yc_ss / pwrss
    if amplification is not None:
        rho *= amplification
    elif first is not None and pls.q1 == 2 and pls.band is None and (
            theta is None or rho * _ratio_bound(pls, theta) >= CANCELLATION_LIMIT):
        rho *= float(amplification_2x2(first))
    return bool(in_repair_range(rho))


def pivots_cancel(pls: ResidualForm, pwrss: np.ndarray, amplification: np.ndarray
                  ) -> np.ndarray:
    """:func:`pivot_cancels` given the ratio (``amplification``), element by element for
    arrays of pwrss and ratios (evaluations at many θ together): the same test in the
    same order of operations."""
    if pls.residual_pwrss != "auto":
        return np.full(np.shape(pwrss), pls.residual_pwrss == "always")
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = pls.yc_ss / pwrss * amplification
    return np.asarray((pwrss > 0) & in_repair_range(rho))


def in_repair_range(product: float | np.ndarray) -> bool | np.ndarray:
    """Whether ρ times the first block's amplification (:func:`pivot_cancels`; one or an
    array of them) calls for the residual form: from ``CANCELLATION_LIMIT`` to below
    ``BEYOND_REPAIR``."""
    return (CANCELLATION_LIMIT <= product) & (product < BEYOND_REPAIR)


def amplification_2x2(b: np.ndarray, det: np.ndarray | None = None) -> np.ndarray:
    """The largest Hadamard ratio b₀₀b₁₁ / det B_s over the levels (last axis) of 2 x 2
    matrices given by their entries (b₀₀, b₁₀, b₁₁) on the axis before (``det``: their
    determinants, when known)."""
    b00b11 = b[..., 0, :] * b[..., 2, :]
    if det is None:
        det = b00b11 - b[..., 1, :] * b[..., 1, :]
    return np.asarray((b00b11 / det).max(axis=-1))


def _ratio_bound(pls: ResidualForm, theta: np.ndarray) -> float:
    """An upper bound of the largest b₀₀b₁₁ / det B_s at ``theta``, from a few Python
    floats: the ratio is at most min(b₀₀, b₁₁) (B_s − I is positive semi-definite), and
    b₀₀ and b₁₁ at most their values at the levels' largest a₀₀ and a₁₁
    (|a₁₀| ≤ √(a₀₀a₁₁); T = [[t₀, 0], [t₁, t₂]])."""
    _, positions, (a00, a11) = pls.first_2x2
    th = theta.tolist() + [0.0]  # (index -1: a zero of T)
    t0, t1, t2 = (th[i] for i in positions)
    root00, root11 = a00 ** 0.5, a11 ** 0.5
    b00 = 1.0 + (abs(t0) * root00 + abs(t1) * root11) ** 2
    b11 = 1.0 + t2 * t2 * a11
    return float(min(b00, b11))


def from_residuals(pls: ResidualForm, f: Factor) -> Factor:
    """``f`` with its penalised residual sum of squares recomputed from the residuals,
    ‖y − Xβ − ZΛu‖² + ‖u‖², as lme4 computes it (where :func:`pivot_cancels`).

    The factor's last pivot is that minimum as a difference of cross-products, whose
    rounding the levels' solves amplify: on an uncorrelated slope of an uncentred year
    it was off by 7e-6 relative (the ML criterion by 0.004, and the optimiser's path
    differed between BLAS kernels). The same happens where the random effects explain
    nearly all of the response (a tiny y with an O(1) ``offset(z)`` and a slope on z:
    a pwrss 1.8e7 times below y's sum of squares, the criterion off by 0.05). At a
    solution with error δ the residual form is off by O(δ²) only: 1e-10 there."""
    try:
        beta, u = pls.solve(f)
    except np.linalg.LinAlgError:  # (a level's matrix not numerically positive
        return f  # definite: the factor's pwrss, and the fit's own error if at the end)
    theta = f.theta
    fitted = pls.X @ (beta - pls.centre)  # (the centred response's fit)
    for blk, ub in zip(pls.blocks, u, strict=True):
        b = ub @ blk.template(theta).T  # b = Λu per level
        fitted += np.einsum("nq,nq->n", blk.Z, b[blk.codes])
    res = pls.centred_response - fitted
    pwrss = float(res @ res) + sum(float(np.vdot(ub, ub)) for ub in u)
    return replace(f, pwrss=pwrss) if np.isfinite(pwrss) and pwrss > 0 else f
