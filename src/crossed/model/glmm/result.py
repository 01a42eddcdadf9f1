"""The immutable result of a generalised linear mixed model fit (:class:`GlmerResult`,
lme4's ``glmerMod``): what every engine's ``glmer`` returns.

Same shape as :class:`crossed.model.result.LmerResult` where the meaning is the same (the
shared part is :class:`crossed.model.fitbase.FitBase`). The public class users get,
:class:`crossed.fit.GlmerFit`, subclasses it with the methods implemented above the model
core (``summary``, ``coef_table``, ``anova``, ``emmeans``, ``confint``, ``simulate`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.design import Design
from crossed.model.fitbase import FitBase
from crossed.model.glmm.family import Family
from crossed.model.status import ConvergenceStatus

if TYPE_CHECKING:
    from crossed.model.control import OptSummary

__all__ = ["GlmerResult"]


@dataclass(frozen=True, eq=False)
class GlmerResult(FitBase):
    """A fitted generalised linear mixed model, as the model core knows it (lme4's
    ``glmerMod``; :class:`crossed.fit.GlmerFit` to users: the same fields, with the R-like
    methods).

    Attributes
    ----------
    design : Design
        With ``weights`` (binomial: trials) and ``offset``.
    family : Family
    nagq : int
        Quadrature points: 0 (lme4's nAGQ = 0), 1 (Laplace) or more (adaptive
        Gauss–Hermite, one scalar random-effects term).
    engine : str
    theta, beta : numpy.ndarray
    u : tuple of numpy.ndarray
        Spherical conditional modes per block, each (levels, q).
    deviance : float
        As lme4's ``deviance()`` for a glmer fit: the sum of squared deviance residuals
        at the conditional modes.
    criterion : float
        The optimised criterion (lme4's ``devcomp$cmp["dev"]``): −2 log L by the Laplace
        approximation (nAGQ ≤ 1), lme4's AGQ deviance for nAGQ > 1; ``loglik`` is −½ of it.
    vcov_beta : numpy.ndarray
        As lme4's ``vcov()``: from the finite-difference Hessian of the criterion over
        (θ, β) when it was computed (fewer than 10,000 rows, as lme4) and positive
        definite, else from R_X at the optimum.
    linear_predictor : numpy.ndarray
        η at the optimum (offset included).
    cond_var_u : tuple of numpy.ndarray
        Diagonal blocks of (Λ'Z'WZΛ + I)⁻¹ per level (spherical), for ``ranef``.
    """

    design: Design
    family: Family
    nagq: int
    engine: str
    theta: np.ndarray
    beta: np.ndarray
    u: tuple[np.ndarray, ...]
    deviance: float
    criterion: float
    vcov_beta: np.ndarray
    linear_predictor: np.ndarray
    cond_var_u: tuple[np.ndarray, ...]
    opt: OptSummary | None
    is_singular: bool
    converged: bool
    convergence: ConvergenceStatus | None = None
    messages: tuple[str, ...] = ()
    data_name: str = "data"
    fit_seconds: float | None = field(default=None, compare=False)
    engine_info: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _cache: dict[str, Any] = field(init=False, default_factory=dict, repr=False,
                                   compare=False)

    def _frozen_arrays(self) -> tuple[Any, ...]:
        return (*super()._frozen_arrays(), self.linear_predictor, *self.cond_var_u)

    # ------------------------------------------------------------------ basics
    @property
    def npar(self) -> int:
        """Parameters counted by logLik's df: fixed effects and theta (no σ)."""
        return len(self.beta) + len(self.theta)

    @property
    def loglik(self) -> float:
        """lme4's ``logLik``: −½ the optimised criterion."""
        return -0.5 * self.criterion

    @property
    def df_residual(self) -> int:
        return self.nobs - len(self.beta) - len(self.theta)

    @property
    def prior_weights(self) -> np.ndarray:
        w = self.design.weights
        return np.ones(self.nobs) if w is None else np.asarray(w)

    @property
    def offset(self) -> np.ndarray:
        o = self.design.offset
        return np.zeros(self.nobs) if o is None else np.asarray(o)

    # ------------------------------------------------------------------ random effects
    def _cond_var(self) -> list[np.ndarray]:
        """Conditional covariance of b per block and level, T (Λ'Z'WZΛ + I)⁻¹ Tᵀ at the
        optimum's working weights (lme4's condVar)."""
        return [T @ cv @ T.T for cv, T in zip(self.cond_var_u, self._templates(), strict=True)]

    # ------------------------------------------------------------------ fitted values
    def _rows_eta(self) -> np.ndarray:
        """The linear predictor of the rows (a fit on partitioned data holds none)."""
        if not self.design.holds_rows:
            from crossed.model.partitioned import ROWS_MESSAGE, RowsNotHeldError

            raise RowsNotHeldError(ROWS_MESSAGE.replace("cx.lmer", "cx.glmer"))
        return self.linear_predictor

    @property
    def eta(self) -> np.ndarray:
        """Fitted linear predictor (offset and random effects included)."""
        return self._rows_eta()

    def _fitted_eta(self) -> np.ndarray:
        return self._rows_eta()

    @property
    def mu(self) -> np.ndarray:
        """Fitted mean (binomial: probability)."""
        return self.family.link.linkinv(self._rows_eta())

    def fitted(self, type: str = "response") -> np.ndarray:
        """Fitted values on the response (default, lme4's ``fitted``) or link scale."""
        if type == "response":
            return self.mu
        if type == "link":
            return self.eta
        raise ValueError(f"type must be 'response' or 'link', got {type!r}")

    def residuals(self, type: str = "deviance") -> np.ndarray:
        """lme4's ``residuals(fit, type)``: ``"deviance"`` (default), ``"pearson"``,
        ``"response"`` (y − μ) or ``"working"`` ((y − μ)/μ')."""
        y, mu, wt = np.asarray(self.design.y), self.mu, self.prior_weights
        if type == "deviance":
            d = self.family.dev_resids(y, mu, wt)
            return np.asarray(np.sign(y - mu) * np.sqrt(np.maximum(d, 0.0)), dtype=float)
        if type == "pearson":
            var = self.family.variance(mu)
            return np.asarray((y - mu) * np.sqrt(wt) / np.sqrt(var), dtype=float)
        if type == "response":
            return np.asarray(y - mu, dtype=float)
        if type == "working":
            return np.asarray((y - mu) / self.family.link.mu_eta(self.eta), dtype=float)
        raise ValueError("type must be 'deviance', 'pearson', 'response' or 'working', "
                         f"got {type!r}")

    def predict(self, newdata: pd.DataFrame | None = None, type: str = "link",
                include_random: bool = True, allow_new_levels: bool = False,
                offset: object = None) -> np.ndarray:
        """Predictions (lme4's ``predict.merMod``).

        Parameters
        ----------
        newdata : pandas.DataFrame, optional
            None: the fitted rows.
        type : {"link", "response"}
            The linear predictor η (default) or the mean μ = g⁻¹(η).
        include_random : bool
            False is lme4's ``re.form = NA`` (population level: Xβ̂ plus the offset).
        allow_new_levels : bool
            New grouping levels contribute 0; otherwise they raise an error naming them.
        offset : str or array, optional
            With ``newdata``: the offset on the new rows where the fit had an ``offset=``
            argument (a column of ``newdata`` or one value per row; required then, where
            lme4 silently predicts without it). The formula's ``offset(x)`` terms are
            evaluated on ``newdata``, as lme4 does.

        Returns
        -------
        numpy.ndarray
            One prediction per row; NaN where a predictor or offset is missing.
        """
        if type not in ("link", "response"):
            raise ValueError(f"type must be 'link' or 'response', got {type!r}")
        eta = self._eta(newdata, include_random, allow_new_levels, offset)
        if type == "response":
            out = np.full(eta.shape, np.nan)
            ok = np.isfinite(eta)
            out[ok] = self.family.link.linkinv(eta[ok])
            return out
        return eta

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.formula!r}, family={self.family}, nAGQ={self.nagq}, "
                f"nobs={self.nobs}, engine={self.engine!r}, logLik={self.loglik:.4f})")
