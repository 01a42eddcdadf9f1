"""The immutable result of a linear mixed model fit (:class:`LmerResult`): what every
engine returns and every layer above the model core reads.

The public class users get, :class:`crossed.fit.LmerFit`, subclasses it with the R-like
methods implemented by the layers above (``fit.anova()``, ``fit.emmeans()``,
``fit.summary()`` ...), with ordinary downward imports; nothing here imports a layer above
the model core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from crossed.design import Design
from crossed.model.factor import basis_inverse
from crossed.model.fitbase import FitBase
from crossed.model.status import ConvergenceStatus

if TYPE_CHECKING:
    from crossed.model.control import OptSummary
    from crossed.model.pls import PLS, Factor

__all__ = ["LmerResult"]


@dataclass(frozen=True, eq=False)
class LmerResult(FitBase):
    """A fitted linear mixed model, as the model core knows it (lme4's ``merMod``).

    Every engine returns this class (:class:`crossed.fit.LmerFit` to users: the same
    fields, with the R-like methods); inference only reads its fields and, where it needs
    the likelihood at other parameter values, re-evaluates the penalised least squares
    problem of ``design`` (engine independent).

    Attributes
    ----------
    design : Design
        Model matrices, random-effects blocks and factor levels (not the user's table).
    reml : bool
        True for the REML criterion, False for maximum likelihood.
    engine : str
        Name of the engine that produced the estimates.
    theta : numpy.ndarray
        Relative covariance factor parameters, lme4's order and parameterisation.
    beta : numpy.ndarray
        Fixed-effects estimates.
    sigma : float
        Residual standard deviation.
    deviance : float
        REML criterion for REML fits, −2 log-likelihood for ML fits.
    vcov_beta : numpy.ndarray
        Covariance matrix of the fixed effects (σ² R_X⁻¹ R_X⁻ᵀ).
    u : tuple of numpy.ndarray
        Spherical random effects per engine block, each (levels, q).
    opt : OptSummary or None
        Optimiser settings and log (None for engines that do not expose one).
    is_singular : bool
        Some bounded theta below 1e-4 (lme4's ``isSingular``).
    converged : bool
        The optimiser stopped on a tolerance and the convergence checks passed.
    messages : tuple of str
        Warnings raised while fitting (singularity, convergence, dropped rows/columns).
    data_name : str
        The name of the data in printed output.
    fit_seconds : float or None
        Wall time of the fit, as the engine measured it.
    engine_info : mapping
        What an engine reports beyond the common fields (read-only): statsmodels'
        ``statsmodels_result`` and ``statsmodels_layout``; lme4's ``r_seconds``,
        ``r_optimizer``, ``r_feval``; a pymer4 fit's ``r_formula_fit``.
    convergence : ConvergenceStatus
        How the optimisation ended, as one value (:class:`ConvergenceStatus`: ok, singular,
        gradient, hessian, max_evaluations, failed); ``converged`` is
        ``convergence.converged``. Engines set it; when omitted it is derived from
        ``converged`` and ``is_singular`` (``FAILED`` for a fit that did not converge).
    fixed_basis : numpy.ndarray or None
        R (p x p, upper triangular) where the engine solved the penalised least squares on
        orthogonalised fixed-effect columns X R⁻¹ because X is nearly collinear
        (``engines/native/rescale.py``); None otherwise. :meth:`solved_pls` rebuilds that
        problem for inference that re-evaluates the fit.
    """

    design: Design
    reml: bool
    engine: str
    theta: np.ndarray
    beta: np.ndarray
    sigma: float
    deviance: float
    vcov_beta: np.ndarray
    u: tuple[np.ndarray, ...]
    opt: OptSummary | None
    is_singular: bool
    converged: bool
    messages: tuple[str, ...] = ()
    data_name: str = "data"
    convergence: ConvergenceStatus | None = None
    fit_seconds: float | None = field(default=None, compare=False)
    engine_info: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    fixed_basis: np.ndarray | None = field(default=None, repr=False, compare=False)
    # derived objects of *this* result (its factorisation, inference models): created
    # empty in every instance (replace, copy and pickle too), written only by
    # :meth:`memo`, never a constructor argument
    _cache: dict[str, Any] = field(init=False, default_factory=dict, repr=False,
                                   compare=False)

    def __post_init__(self) -> None:
        if self.convergence is not None and self.convergence.converged != self.converged:
            raise ValueError(f"converged={self.converged} contradicts "
                             f"convergence={self.convergence.value!r}")
        super().__post_init__()

    # ------------------------------------------------------------------ basic quantities
    @property
    def npar(self) -> int:
        """Parameters counted by logLik's df: fixed effects, theta and sigma."""
        return len(self.beta) + len(self.theta) + 1

    @property
    def loglik(self) -> float:
        """Log-likelihood (REML log-likelihood for REML fits, as lme4's ``logLik``)."""
        return -0.5 * self.deviance

    @property
    def df_residual(self) -> int:
        """lme4's ``df.residual``: the number of observations minus every parameter
        (fixed effects, θ and σ: :attr:`npar`), the ``df.resid`` of an ML fit's summary
        (174 for ``Reaction ~ Days + (Days | Subject)`` on sleepstudy, R 4.2.2)."""
        return self.nobs - self.npar

    # ------------------------------------------------------------------ PLS re-evaluation
    @property
    def pls(self) -> PLS:
        """The penalised least squares problem of the design (:meth:`PLS.of`: built once
        per design and shared with the engine that fitted it)."""
        from crossed.model.pls import PLS

        return PLS.of(self.design)

    def solved_pls(self) -> tuple[PLS, np.ndarray | None]:
        """The penalised least squares problem as the engine solved it, and the map of its
        fixed effects back to the formula's: (PLS, R⁻¹) with β = R⁻¹β′ and
        cov(β) = R⁻¹ cov(β′) R⁻ᵀ where ``fixed_basis`` is set (its X is X R⁻¹: the same
        column space, so the criterion differs by a constant at most and the random part,
        the penalised residual sum of squares and their derivatives are the same, without
        the digits the formula's nearly collinear columns lose), else (:attr:`pls`, None).
        """
        R = self.fixed_basis
        if R is None:
            return self.pls, None

        def build() -> tuple[PLS, np.ndarray]:
            return self.pls.reparametrised(self.pls.blocks, R), basis_inverse(R)

        return cast("tuple[PLS, np.ndarray]", self.memo("solved_pls", build))

    @property
    def factor_at_optimum(self) -> Factor:
        """The PLS factorisation at ``theta`` (computed once)."""
        return cast("Factor", self.memo("factor", lambda: self.pls.factor(self.theta)))

    # ------------------------------------------------------------------ random effects
    def _residual_sd(self) -> float | None:
        return self.sigma

    @cached_property
    def _cond_var_blocks(self) -> list[np.ndarray]:
        V = self.pls.conditional_inverse_blocks(self.factor_at_optimum)
        return [self.sigma**2 * (T @ v @ T.T) for v, T in zip(V, self._templates(), strict=True)]

    def _cond_var(self) -> list[np.ndarray]:
        """Conditional covariance of b per block and level, σ² T V Tᵀ (lme4's condVar)."""
        return self._cond_var_blocks

    # ------------------------------------------------------------------ fitted values
    def _fitted_eta(self) -> np.ndarray:
        return self.fitted()

    def fitted(self) -> np.ndarray:
        """Conditional fitted values Xβ̂ + Zb̂ (length nobs)."""
        blocks = self.design.random.blocks
        out: np.ndarray = self.design.X @ self.beta + self._random_part(
            [b.codes for b in blocks], [b.Z for b in blocks])
        if self.design.offset is not None:  # (lmer's offset=)
            out = out + self.design.offset
        return out

    def residuals(self, type: str = "response", scaled: bool = False) -> np.ndarray:
        """Conditional residuals (lme4's ``residuals(fit, type, scaled)``).

        ``type="response"`` (or ``"working"``): y − (Xβ̂ + Zb̂); ``"pearson"``: the same
        times the square root of the prior weights (equal for unweighted fits).
        ``scaled=True`` divides by σ̂ (lme4's scaled residuals).
        """
        if type not in ("response", "working", "pearson"):
            raise ValueError(f"type must be 'response', 'working' or 'pearson', got {type!r}")
        if not isinstance(scaled, bool | np.bool_):
            raise TypeError(f"scaled must be True or False, got {scaled!r}")
        out: np.ndarray = self.design.y - self.fitted()
        weights = getattr(self.design, "weights", None)
        if type == "pearson" and weights is not None:
            out = out * np.sqrt(np.asarray(weights, dtype=float))
        if scaled:
            out = out / self.sigma
        return out

    def predict(self, newdata: pd.DataFrame | None = None, include_random: bool = True,
                allow_new_levels: bool = False, offset: object = None) -> np.ndarray:
        """Predictions on new data, with or without the random effects.

        Parameters
        ----------
        newdata : pandas.DataFrame, optional
            Rows to predict; None gives the fitted values of the data used to fit.
        include_random : bool
            Add the conditional modes of the random effects (lme4's ``re.form = NULL``);
            False gives population-level predictions Xβ̂ (``re.form = NA``).
        allow_new_levels : bool
            Levels of a grouping factor not seen when fitting (and missing grouping values)
            contribute 0 (the population mean); otherwise they raise an error naming the
            factor and the level.
        offset : str or array, optional
            With ``newdata``: the offset on the new rows where the fit had an ``offset=``
            argument (a column of ``newdata`` or one value per row; required then). The
            formula's ``offset(x)`` terms are evaluated on ``newdata`` (lme4's ``predict``).

        Returns
        -------
        numpy.ndarray
            One prediction per row; NaN where a predictor is missing (lme4's ``NA``).

        Raises
        ------
        DataError
            A level of a fixed-effect factor not seen when fitting (lme4: ``factor f has
            new level x``), also when the column is part of a grouping factor too; a
            missing column; a non-numeric value in a numeric column.

        Notes
        -----
        Levels are matched by R's labels: a grouping factor fitted on integers ``308``
        matches ``308.0`` and ``"308"`` in the new data, as R's ``factor()`` would.
        """
        return self._eta(newdata, include_random, allow_new_levels, offset)

    def __repr__(self) -> str:
        kind = "REML" if self.reml else "ML"
        return (f"<{type(self).__name__} {self.formula!r} by {kind} ({self.engine}): "
                f"nobs={self.nobs}, deviance={self.deviance:.4f}"
                f"{', singular' if self.is_singular else ''}>")
