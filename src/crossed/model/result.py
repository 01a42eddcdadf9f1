"""The immutable fit result every engine returns (:class:`LmerFit`), and its method table.

:class:`LmerFit` belongs to the model core: engines build it (``finish_fit``) and every layer
above reads it. Its R-like convenience methods (``fit.anova()``, ``fit.emmeans()``,
``fit.refit()``, ``fit.summary()`` ...) are implemented by the layers above, which
register them with :func:`provide` when they are imported (``crossed/fit.py``,
``crossed/inference/__init__.py``, ``crossed/simulate/__init__.py``,
``crossed/evaluation/__init__.py``, ``crossed/display.py``); ``import crossed`` imports
them all. So the static import graph points down only: no module here imports a layer
above the model core.
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
from crossed.design.frame import DataError, check_response_varies
from crossed.design.glm import newdata_offset
from crossed.model.convergence import ConvergenceStatus
from crossed.model.factor import basis_inverse
from crossed.model.fitbase import FitBase, MethodTable

if TYPE_CHECKING:
    from crossed.engines.native.optimize import OptSummary
    from crossed.model.pls import PLS, Factor

__all__ = ["LmerFit", "provide"]


# ---------------------------------------------------------------- the method table
# name -> (implementation, the module that provides it: named in the error when missing)
_PROVIDERS = {
    "refit": "crossed.fit", "simulate": "crossed.simulate", "check": "crossed.simulate",
    "coef_table": "crossed.inference", "anova": "crossed.inference",
    "emmeans": "crossed.inference", "emtrends": "crossed.inference",
    "eta_squared": "crossed.inference",
    "r2": "crossed.inference", "ranova": "crossed.inference",
    "variance_components": "crossed.inference", "adjusted_means": "crossed.evaluation",
    "interaction_effects": "crossed.evaluation", "summary": "crossed.display",
    "confint": "crossed.simulate", "coef": "crossed.inference", "icc": "crossed.inference",
    "hatvalues": "crossed.inference", "cooks_distance": "crossed.inference",
    "influence": "crossed.inference", "step": "crossed.inference",
    "repr_html": "crossed.display",
}


_METHODS = MethodTable("LmerFit", _PROVIDERS)
provide = _METHODS.provide  # (called by the layer that owns a method when it is imported)
_provided = _METHODS.get


@dataclass(frozen=True, eq=False)
class LmerFit(FitBase):
    """A fitted linear mixed model (lme4's ``merMod`` with lmerTest's inference).

    Every engine returns this class; inference only reads its fields and, where it needs
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
        object.__setattr__(self, "engine_info", MappingProxyType(dict(self.engine_info)))
        if self.convergence is None:  # a fit built without one (user code, older callers)
            status = (ConvergenceStatus.combine(self.is_singular) if self.converged
                      else ConvergenceStatus.FAILED)
            object.__setattr__(self, "convergence", status)
        elif self.convergence.converged != self.converged:
            raise ValueError(f"converged={self.converged} contradicts "
                             f"convergence={self.convergence.value!r}")
        # a frozen result: its arrays are read-only too
        for arr in (self.theta, self.beta, self.vcov_beta, *self.u):
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    def __getstate__(self) -> dict[str, Any]:
        """State for pickle and copy: the fields, with an empty cache (never shared)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        state["engine_info"] = dict(self.engine_info)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["engine_info"] = MappingProxyType(dict(state.get("engine_info", {})))
        self.__dict__.update(state)

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
        return self.nobs - len(self.beta)

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
    def _templates(self) -> list[np.ndarray]:
        return [b.template(self.theta) for b in self.design.random.blocks]

    @cached_property
    def _b(self) -> list[np.ndarray]:
        """Conditional modes b = Λu per block, each (levels, q)."""
        return [u @ T.T for u, T in zip(self.u, self._templates(), strict=True)]

    @cached_property
    def _cond_var(self) -> list[np.ndarray]:
        """Conditional covariance of b per block and level, σ² T V Tᵀ (lme4's condVar)."""
        V = self.pls.conditional_inverse_blocks(self.factor_at_optimum)
        return [self.sigma**2 * (T @ v @ T.T) for v, T in zip(V, self._templates(), strict=True)]

    def varcorr(self) -> pd.DataFrame:
        """Variance components, as ``as.data.frame(VarCorr(fit))``.

        Returns
        -------
        pandas.DataFrame
            One row per variance, then per covariance of each term, then the residual:
            ``group`` (grouping factor or ``"Residual"``), ``term1``, ``term2`` (None for a
            variance), ``variance_or_cov`` (lme4's ``vcov``) and ``sd_or_cor`` (lme4's
            ``sdcor``: SD for a variance, correlation for a covariance). Validated against
            lme4 1.1-31 on the reference cases.
        """
        rows: list[tuple[str, str | None, str | None, float, float]] = []
        s2 = self.sigma**2
        for term in self.design.random.terms:
            blk = self.design.random.blocks[term.block]
            k = len(term.columns)
            T = blk.template(self.theta)[term.offset: term.offset + k, term.offset: term.offset + k]
            S = s2 * T @ T.T
            sd = np.sqrt(np.diag(S))
            for i in range(k):
                rows.append((term.group, term.columns[i], None, S[i, i], sd[i]))
            for j in range(k):
                for i in range(j + 1, k):
                    cor = S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else np.nan
                    rows.append((term.group, term.columns[j], term.columns[i], S[i, j], cor))
        rows.append(("Residual", None, None, s2, self.sigma))
        out = pd.DataFrame(rows, columns=["group", "term1", "term2", "variance_or_cov",
                                          "sd_or_cor"])
        # a missing label in a column of labels is NaN, as pandas 3's string columns show
        # it, under pandas 2 too (its object columns kept None)
        for col in ("term1", "term2"):
            if out[col].notna().any():
                out[col] = out[col].where(out[col].notna(), np.nan)
        return out

    def ranef(self) -> pd.DataFrame:
        """Conditional modes of the random effects with their conditional SDs.

        Returns
        -------
        pandas.DataFrame
            Long form: ``group``, ``level``, ``term`` (column of the random term),
            ``estimate`` (conditional mode, lme4's ``ranef``) and ``cond_sd`` (square root
            of the diagonal of lme4's ``condVar``: σ² Λ (ΛᵀZᵀZΛ + I)⁻¹ Λᵀ, given β̂).
            Validated against lme4 1.1-31's ``ranef(fit, condVar = TRUE)``.
        """
        frames = []
        seen = []
        for term in self.design.random.terms:
            if term.group in seen:
                continue
            seen.append(term.group)
        for group in seen:
            blocks = [i for i, b in enumerate(self.design.random.blocks) if b.group == group]
            bi = blocks[0]
            blk = self.design.random.blocks[bi]
            b, cv = self._b[bi], self._cond_var[bi]
            sd = np.sqrt(np.maximum(np.diagonal(cv, axis1=1, axis2=2), 0.0))
            levels = np.array(blk.levels, dtype=object)
            for j, name in enumerate(blk.column_names):
                frames.append(pd.DataFrame({
                    "group": group, "level": levels, "term": name,
                    "estimate": b[:, j], "cond_sd": sd[:, j],
                }))
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------ fitted values
    def _random_part(self, blocks_codes: list[np.ndarray], Zs: list[np.ndarray]) -> np.ndarray:
        n = len(blocks_codes[0]) if blocks_codes else 0
        out = np.zeros(n)
        for b, codes, Z in zip(self._b, blocks_codes, Zs, strict=True):
            valid = codes >= 0
            out[valid] += np.einsum("ij,ij->i", Z[valid], b[codes[valid]])
        return out

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
        for name, flag in (("include_random", include_random),
                           ("allow_new_levels", allow_new_levels)):
            if not isinstance(flag, bool | np.bool_):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        if newdata is None:
            if include_random:
                return self.fitted()
            pop: np.ndarray = self.design.X @ self.beta
            if self.design.offset is not None:  # lme4's predict(re.form = NA) adds it
                pop = pop + self.design.offset
            return pop
        new = self.design.encode(newdata, include_random=include_random,
                                 allow_new_levels=allow_new_levels)
        out = np.full(len(new.rows), np.nan)  # rows with a missing predictor: NaN (R's NA)
        pred = new.X @ self.beta
        terms = newdata_offset(self.design, newdata, offset)
        if terms is not None:
            pred = pred + terms[new.rows]
        if include_random:
            pred = pred + self._random_part(new.codes, new.Z)
        out[new.rows] = pred
        return out

    # ------------------------------------------------------------------ refits, simulation
    def refit(self, y: np.ndarray | None = None, rows: np.ndarray | None = None,
              reml: bool | None = None) -> LmerFit:
        """Fit the same model again on a new response and/or a subset of the rows.

        The stored design is reused: no formula parsing, no model-matrix building (lme4's
        ``refit``). The same engine and optimiser settings are used.

        Parameters
        ----------
        y : array-like, optional
            New response, one value per row of the (subset) design.
        rows : array of int or bool, optional
            Rows of the fitted data to keep (e.g. to drop a random fraction).
        reml : bool, optional
            Criterion of the refit; defaults to the original one.
        """
        if reml is not None and not isinstance(reml, bool | np.bool_):
            raise TypeError(f"reml must be True, False or None (the fit's), got {reml!r}")
        design = self.design if rows is None else self.design.subset(rows)
        if y is not None:  # a copy: the fit freezes its arrays, never the caller's
            try:
                y_new = np.array(y, dtype=float, copy=True)
            except (TypeError, ValueError):
                raise DataError("refit: the new response y must be numbers") from None
            design = design.with_response(y_new)
            check_response_varies(design.y, self.spec.response)
        control = self.opt.control if self.opt is not None else None
        refit: LmerFit = _provided("refit")(self.engine, design,
                                            reml=self.reml if reml is None else bool(reml),
                                            control=control, data_name=self.data_name)
        return refit

    def simulate(self, nsim: int = 1, seed: int | np.random.Generator | None = None,
                 use_ranef: bool = False) -> np.ndarray:
        """Simulated responses, shape (nobs, nsim), with lme4's ``simulate()`` semantics.

        ``use_ranef=False`` draws new random effects for each simulation (lme4's default);
        ``use_ranef=True`` conditions on the estimated ones. See
        :func:`crossed.simulate.simulate_responses`.
        """
        sims: np.ndarray = _provided("simulate")(self, nsim=nsim, seed=seed,
                                                 use_ranef=use_ranef)
        return sims

    def check(self, nsim: int = 250, seed: int | np.random.Generator | None = None,
              use_ranef: bool = False, alpha: float = 0.05, calibrate: int = 0,
              **kwargs: Any) -> Any:
        """Simulated-residual (DHARMa) diagnostics, explained in words: uniformity (KS),
        dispersion and outlier tests, ``plot()``. See :func:`crossed.simulate.check`."""
        return _provided("check")(self, nsim=nsim, seed=seed, use_ranef=use_ranef, alpha=alpha,
                     calibrate=calibrate, **kwargs)

    # ------------------------------------------------------------------ inference
    def coef_table(self, ddf: str = "satterthwaite", level: float = 0.95) -> pd.DataFrame:
        """Fixed effects with standard errors, t tests and confidence intervals.

        Parameters
        ----------
        ddf : {"satterthwaite", "kenward-roger", "none"}
            Denominator df: lmerTest's Satterthwaite approximation, Kenward–Roger (pbkrtest:
            adjusted SEs and df, REML fits) or ``"none"`` for asymptotic z tests (df = inf).
        level : float
            Confidence level of ``conf_low``/``conf_high`` (stored in ``attrs``).

        Returns
        -------
        pandas.DataFrame
            ``term``, ``estimate``, ``std_error``, ``df``, ``statistic`` (t value),
            ``p_value`` (two-sided), ``conf_low``, ``conf_high``. Validated against
            ``summary(lmerTest::lmer(...))$coefficients`` (lmerTest 3.1-3).
        """
        return _provided("coef_table")(self, ddf=ddf, level=level)

    def anova(self, type: int | str = 3, ddf: str = "satterthwaite") -> pd.DataFrame:
        """ANOVA table of the fixed terms; see :func:`crossed.inference.anova.anova`."""
        return _provided("anova")(self, type=type, ddf=ddf)

    def emmeans(self, specs: str | list[str], by: str | list[str] | None = None,
                ddf: str = "satterthwaite", level: float = 0.95, **kwargs: Any) -> Any:
        """Estimated marginal means; see :func:`crossed.inference.emmeans.emmeans`
        (``at=``, ``cov_reduce=``, ``type=`` pass through)."""
        return _provided("emmeans")(self, specs, by=by, ddf=ddf, level=level, **kwargs)

    def emtrends(self, specs: str | list[str], var: str, **kwargs: Any) -> Any:
        """Estimated marginal trends of ``var``; see
        :func:`crossed.inference.emtrends.emtrends`."""
        return _provided("emtrends")(self, specs, var, **kwargs)

    def eta_squared(self, partial: bool = True, ci: float | None = 0.95,
                    alternative: str = "two-sided") -> pd.DataFrame:
        """Partial η² per fixed term; see :func:`crossed.inference.effect_sizes.eta_squared`."""
        return _provided("eta_squared")(self, partial=partial, ci=ci, alternative=alternative)

    def r2(self) -> pd.DataFrame:
        """Nakagawa's marginal and conditional R²; see :func:`crossed.inference.r2.r2_nakagawa`."""
        return _provided("r2")(self)

    def ranova(self) -> pd.DataFrame:
        """Likelihood-ratio test per random term; see :func:`crossed.inference.lrt.ranova`."""
        return _provided("ranova")(self)

    def variance_components(self, test: bool = True) -> pd.DataFrame:
        """Variances, shares and LRTs; see :func:`crossed.inference.lrt.variance_components`."""
        return _provided("variance_components")(self, test=test)

    def adjusted_means(self, group: str, level: float = 0.95) -> pd.DataFrame:
        """Population mean + conditional mode per level; see ``evaluation.adjusted``."""
        return _provided("adjusted_means")(self, group, level=level)

    def interaction_effects(self, a: str, b: str, level: float = 0.95) -> pd.DataFrame:
        """Conditional modes of ``(1 | a:b)``; see ``evaluation.adjusted``."""
        return _provided("interaction_effects")(self, a, b, level=level)

    def confint(self, parm: str | list[str] | None = None, level: float = 0.95,
                method: str = "profile", **kwargs: Any) -> pd.DataFrame:
        """Intervals of the variance parameters, σ and β (lme4's ``confint``: profile, Wald,
        boot); see :func:`crossed.simulate.confint.confint`."""
        out: pd.DataFrame = _provided("confint")(self, parm=parm, level=level, method=method,
                                                 **kwargs)
        return out

    def coef(self) -> dict[str, pd.DataFrame]:
        """Per-level coefficients (lme4's ``coef``); see ``inference.levels.coef_levels``."""
        out: dict[str, pd.DataFrame] = _provided("coef")(self)
        return out

    def icc(self, by_group: bool = False) -> pd.DataFrame:
        """Adjusted and conditional ICC (``performance::icc``); see ``inference.icc``."""
        return cast(pd.DataFrame, _provided("icc")(self, by_group=by_group))

    def hatvalues(self) -> np.ndarray:
        """Leverages (lme4's ``hatvalues``); see ``inference.influence.hatvalues``."""
        return cast(np.ndarray, _provided("hatvalues")(self))

    def cooks_distance(self) -> np.ndarray:
        """Cook's distance per observation (lme4's ``cooks.distance``)."""
        return cast(np.ndarray, _provided("cooks_distance")(self))

    def influence(self, groups: str | None = None) -> pd.DataFrame:
        """Case-deletion influence (lme4's ``influence``); see ``inference.influence``."""
        return cast(pd.DataFrame, _provided("influence")(self, groups=groups))

    def step(self, **kwargs: Any) -> Any:
        """Backward elimination of random then fixed terms (lmerTest's ``step``); see
        :func:`crossed.inference.step.step`."""
        return _provided("step")(self, **kwargs)

    def summary(self, ddf: str = "satterthwaite") -> str:
        """What ``summary(lmerTest::lmer(...))`` prints.

        Returns
        -------
        crossed.tables.Summary
            A ``str`` (the text; ``print()`` shows it) with ``.tables`` (``"Random
            effects"``, ``"Fixed effects"``: DataFrames) and a notebook view.
        """
        return cast(str, _provided("summary")(self, ddf=ddf))

    def _repr_html_(self) -> str:
        """The notebook view: the summary's criteria and tables (``crossed.display``)."""
        return cast(str, _provided("repr_html")(self))

    def __repr__(self) -> str:
        kind = "REML" if self.reml else "ML"
        return (f"<LmerFit {self.formula!r} by {kind} ({self.engine}): nobs={self.nobs}, "
                f"deviance={self.deviance:.4f}{', singular' if self.is_singular else ''}>")
