"""The immutable GLMM fit (:class:`GlmerFit`, lme4's ``glmerMod``) and its method table.

Same shape as :class:`crossed.model.result.LmerFit` where the meaning is the same; the
methods implemented above the model core (``summary``, ``coef_table``, ``anova``,
``emmeans``, ``r2``, ``simulate``, ...) are registered with :func:`provide` by their layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from crossed.design import Design
from crossed.design.glm import newdata_offset
from crossed.model.convergence import ConvergenceStatus
from crossed.model.fitbase import FitBase, MethodTable
from crossed.model.glmm.family import Family

if TYPE_CHECKING:
    from crossed.model.control import OptSummary

__all__ = ["GlmerFit", "provide"]

_PROVIDERS = {
    "summary": "crossed.display", "coef_table": "crossed.inference",
    "anova": "crossed.inference", "emmeans": "crossed.inference", "r2": "crossed.inference",
    "drop1": "crossed.inference", "simulate": "crossed.simulate", "check": "crossed.simulate",
    "refit": "crossed.fit", "bootstrap": "crossed.simulate", "repr_html": "crossed.display",
}


_METHODS = MethodTable("GlmerFit", _PROVIDERS)
provide = _METHODS.provide  # (called by the layer that owns a method when it is imported)
_provided = _METHODS.get


@dataclass(frozen=True, eq=False)
class GlmerFit(FitBase):
    """A fitted generalised linear mixed model (lme4's ``glmer``).

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_info", MappingProxyType(dict(self.engine_info)))
        if self.convergence is None:
            object.__setattr__(self, "convergence", ConvergenceStatus.combine(
                self.is_singular) if self.converged else ConvergenceStatus.FAILED)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        state["engine_info"] = dict(self.engine_info)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["engine_info"] = MappingProxyType(dict(state["engine_info"]))
        self.__dict__.update(state)

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
    def _templates(self) -> list[np.ndarray]:
        return [b.template(self.theta) for b in self.design.random.blocks]

    @cached_property
    def _b(self) -> list[np.ndarray]:
        return [u @ T.T for u, T in zip(self.u, self._templates(), strict=True)]

    def varcorr(self) -> pd.DataFrame:
        """Variance components as ``as.data.frame(VarCorr(fit))`` (no residual row: a
        GLMM has no residual variance). Columns ``group``, ``term1``, ``term2``,
        ``variance_or_cov``, ``sd_or_cor``."""
        rows: list[tuple[str, str | None, str | None, float, float]] = []
        for term in self.design.random.terms:
            blk = self.design.random.blocks[term.block]
            k = len(term.columns)
            T = blk.template(self.theta)[term.offset:term.offset + k,
                                         term.offset:term.offset + k]
            S = T @ T.T
            sd = np.sqrt(np.diag(S))
            for i in range(k):
                rows.append((term.group, term.columns[i], None, S[i, i], sd[i]))
            for j in range(k):
                for i in range(j + 1, k):
                    cor = S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else np.nan
                    rows.append((term.group, term.columns[j], term.columns[i], S[i, j], cor))
        return pd.DataFrame(rows, columns=["group", "term1", "term2", "variance_or_cov",
                                           "sd_or_cor"])

    def ranef(self, condvar: bool = True) -> pd.DataFrame:
        """Conditional modes (``estimate``) with conditional SDs (``cond_sd``: lme4's
        ``condVar``, Λ (Λ'Z'WZΛ + I)⁻¹ Λ' at the optimum's working weights), long form:
        ``group``, ``level``, ``term``, ``estimate``, ``cond_sd``."""
        frames = []
        for bi, blk in enumerate(self.design.random.blocks):
            T = blk.template(self.theta)
            b = self._b[bi]
            levels = np.array(blk.levels, dtype=object)
            cv = T @ self.cond_var_u[bi] @ T.T
            sd = np.sqrt(np.maximum(np.diagonal(cv, axis1=1, axis2=2), 0.0))
            for j, name in enumerate(blk.column_names):
                df = pd.DataFrame({"group": blk.group, "level": levels, "term": name,
                                   "estimate": b[:, j]})
                if condvar:
                    df["cond_sd"] = sd[:, j]
                frames.append(df)
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------ fitted values
    @property
    def eta(self) -> np.ndarray:
        """Fitted linear predictor (offset and random effects included)."""
        return self.linear_predictor

    @property
    def mu(self) -> np.ndarray:
        """Fitted mean (binomial: probability)."""
        return self.family.link.linkinv(self.linear_predictor)

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
        if newdata is None:
            eta = self.eta if include_random else self.offset + self.design.X @ self.beta
        else:
            new = self.design.encode(newdata, include_random=include_random,
                                     allow_new_levels=allow_new_levels)
            eta = np.full(len(new.rows), np.nan)
            pred = new.X @ self.beta
            off = newdata_offset(self.design, newdata, offset)
            if off is not None:
                pred = pred + off[new.rows]
            if include_random:
                for b, codes, Z in zip(self._b, new.codes, new.Z, strict=True):
                    ok = codes >= 0
                    pred[ok] += np.einsum("ij,ij->i", Z[ok], b[codes[ok]])
            eta[new.rows] = pred
        if type == "response":
            out = np.full(eta.shape, np.nan)
            ok = np.isfinite(eta)
            out[ok] = self.family.link.linkinv(eta[ok])
            return out
        return eta

    # ------------------------------------------------------------------ provided
    def summary(self, *args: Any, **kwargs: Any) -> str:
        """R's ``summary(glmer fit)``: a ``str`` of the text R prints, with ``.tables``
        (random effects, fixed effects) for programmatic use and a notebook view."""
        return cast(str, _provided("summary")(self, *args, **kwargs))

    def _repr_html_(self) -> str:
        """The notebook view: the summary's text and tables as HTML."""
        return cast(str, _provided("repr_html")(self))

    def coef_table(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """Wald z table: ``Estimate``, ``Std. Error``, ``z value``, ``Pr(>|z|)`` and CI
        columns (R's ``summary(glmer fit)$coefficients``)."""
        out: pd.DataFrame = _provided("coef_table")(self, *args, **kwargs)
        return out

    def anova(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("anova")(self, *args, **kwargs)

    def emmeans(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("emmeans")(self, *args, **kwargs)

    def r2(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("r2")(self, *args, **kwargs)

    def drop1(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("drop1")(self, *args, **kwargs)

    def simulate(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("simulate")(self, *args, **kwargs)

    def check(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("check")(self, *args, **kwargs)

    def refit(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("refit")(self, *args, **kwargs)

    def bootstrap(self, *args: Any, **kwargs: Any) -> Any:
        return _provided("bootstrap")(self, *args, **kwargs)

    def __repr__(self) -> str:
        return (f"GlmerFit({self.formula!r}, family={self.family}, nAGQ={self.nagq}, "
                f"nobs={self.nobs}, engine={self.engine!r}, logLik={self.loglik:.4f})")
