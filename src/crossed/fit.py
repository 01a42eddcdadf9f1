"""The immutable fit result every engine returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from crossed.design import Design
from crossed.design.frame import (
    DataError,
    check_response_varies,
    encode_new,
    expression_variables,
)
from crossed.design.newdata import (
    build_new,
    check_new_values,
    describe_level,
    missing_rows,
    new_level_codes,
)

if TYPE_CHECKING:
    from crossed.engines.native.optimize import OptSummary
    from crossed.engines.native.pls import PLS, Factor


@dataclass(frozen=True, eq=False)
class LmerFit:
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
    # derived objects of *this* result (PLS problem, factorisation, inference models):
    # never a constructor argument, so replace() starts from an empty cache; engines and
    # inference add entries after construction
    _cache: dict = field(init=False, default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # a frozen result: its arrays are read-only too
        for arr in (self.theta, self.beta, self.vcov_beta, *self.u):
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    def __getstate__(self) -> dict:
        """State for pickle and copy: the fields, with an empty cache (never shared)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # ------------------------------------------------------------------ basic quantities
    @property
    def spec(self):
        return self.design.spec

    @property
    def formula(self) -> str:
        return self.design.spec.formula

    @property
    def fixef_names(self) -> tuple[str, ...]:
        return self.design.fixed.names

    @property
    def theta_names(self) -> tuple[str, ...]:
        return self.design.random.theta_names

    @property
    def fixef(self) -> pd.Series:
        """Fixed-effects estimates with lme4's names, in lme4's order."""
        return pd.Series(self.beta, index=list(self.fixef_names), name="estimate")

    @property
    def vcov(self) -> pd.DataFrame:
        """Covariance matrix of the fixed effects, labelled like ``fixef``."""
        names = list(self.fixef_names)
        return pd.DataFrame(self.vcov_beta, index=names, columns=names)

    @property
    def nobs(self) -> int:
        return self.design.n

    @property
    def n_dropped(self) -> int:
        """Rows dropped for missing values before fitting."""
        return self.design.n_dropped

    @property
    def ngroups(self) -> dict[str, int]:
        """Number of levels of each grouping factor (lme4's ``ngrps``)."""
        out: dict[str, int] = {}
        for term in self.design.random.terms:
            out.setdefault(term.group, self.design.random.blocks[term.block].nlevels)
        return out

    @property
    def npar(self) -> int:
        """Parameters counted by logLik's df: fixed effects, theta and sigma."""
        return len(self.beta) + len(self.theta) + 1

    @property
    def loglik(self) -> float:
        """Log-likelihood (REML log-likelihood for REML fits, as lme4's ``logLik``)."""
        return -0.5 * self.deviance

    @property
    def aic(self) -> float:
        return self.deviance + 2.0 * self.npar

    @property
    def bic(self) -> float:
        return self.deviance + np.log(self.nobs) * self.npar

    @property
    def df_residual(self) -> int:
        return self.nobs - len(self.beta)

    # ------------------------------------------------------------------ PLS re-evaluation
    @property
    def pls(self) -> PLS:
        """The penalised least squares problem of this design (built once, cached)."""
        if "pls" not in self._cache:
            from crossed.engines.native.pls import PLS

            d = self.design
            self._cache["pls"] = PLS(d.random.blocks, d.X, d.y)
        return self._cache["pls"]

    @property
    def factor_at_optimum(self) -> Factor:
        if "factor" not in self._cache:
            self._cache["factor"] = self.pls.factor(self.theta)
        return self._cache["factor"]

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
        rows = []
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
        return pd.DataFrame(rows, columns=["group", "term1", "term2", "variance_or_cov",
                                           "sd_or_cor"])

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
        return self.design.X @ self.beta + self._random_part(
            [b.codes for b in blocks], [b.Z for b in blocks])

    def residuals(self) -> np.ndarray:
        """Response minus conditional fitted values."""
        return self.design.y - self.fitted()

    def predict(self, newdata: pd.DataFrame | None = None, include_random: bool = True,
                allow_new_levels: bool = False) -> np.ndarray:
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
            return self.fitted() if include_random else self.design.X @ self.beta
        if not isinstance(newdata, pd.DataFrame):
            raise DataError(f"newdata must be a pandas DataFrame, got {type(newdata).__name__}")
        spec = self.design.spec
        known_cols = set(map(str, newdata.columns)) | set(self.design.columns)
        value_vars = expression_variables(spec.fixed, known_cols)
        group_vars: set[str] = set()
        if include_random:
            for term in spec.random:
                value_vars |= expression_variables(term.expr, known_cols)
                group_vars |= set(term.factors)
        needed = [c for c in self.design.columns if c in value_vars | group_vars]
        values = [c for c in needed if c in value_vars]
        frame = encode_new(newdata, self.design.levels, needed)
        frame = check_new_values(frame, self.design, values)
        out = np.full(len(frame), np.nan)  # rows with a missing predictor: NaN (R's NA)
        ok = ~missing_rows(frame, values)
        frame = frame.loc[ok]
        pred = build_new(self.design.fixed.spec, frame, "fixed-effects") @ self.beta
        if include_random:
            codes_list, Zs = [], []
            for blk in self.design.random.blocks:
                codes = new_level_codes(blk, frame)
                if not allow_new_levels and np.any(codes < 0):
                    row = int(np.flatnonzero(codes < 0)[0])
                    raise DataError(
                        f"{describe_level(blk, frame, row)} of grouping factor {blk.group!r} "
                        "was not in the fitted data; use allow_new_levels=True to predict "
                        "it at the population level"
                    )
                parts = [build_new(mspec, frame, f"random-effects ({blk.group})")[:, list(c)]
                         for mspec, c in blk.exprs]
                codes_list.append(codes)
                Zs.append(np.column_stack(parts))
            pred = pred + self._random_part(codes_list, Zs)
        out[ok] = pred
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
        from crossed.engines import fit_with

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
        return fit_with(self.engine, design, reml=self.reml if reml is None else bool(reml),
                        control=control, data_name=self.data_name)

    def simulate(self, nsim: int = 1, seed: int | np.random.Generator | None = None,
                 use_ranef: bool = False) -> np.ndarray:
        """Simulated responses, shape (nobs, nsim), with lme4's ``simulate()`` semantics.

        ``use_ranef=False`` draws new random effects for each simulation (lme4's default);
        ``use_ranef=True`` conditions on the estimated ones. See
        :func:`crossed.simulate.simulate_responses`.
        """
        from crossed.simulate import simulate_responses

        return simulate_responses(self, nsim=nsim, seed=seed, use_ranef=use_ranef)

    def check(self, nsim: int = 250, seed: int | np.random.Generator | None = None,
              use_ranef: bool = False, alpha: float = 0.05, calibrate: int = 0, **kwargs):
        """Simulated-residual (DHARMa) diagnostics, explained in words: uniformity (KS),
        dispersion and outlier tests, ``plot()``. See :func:`crossed.simulate.check`."""
        from crossed.simulate.diagnostics import check

        return check(self, nsim=nsim, seed=seed, use_ranef=use_ranef, alpha=alpha,
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
        from crossed.inference.coefs import coef_table

        return coef_table(self, ddf=ddf, level=level)

    def anova(self, type: int | str = 3, ddf: str = "satterthwaite") -> pd.DataFrame:
        """ANOVA table of the fixed terms; see :func:`crossed.inference.anova.anova`."""
        from crossed.inference.anova import anova

        return anova(self, type=type, ddf=ddf)

    def emmeans(self, specs: str | list[str], by: str | list[str] | None = None,
                ddf: str = "satterthwaite", level: float = 0.95):
        """Estimated marginal means; see :func:`crossed.inference.emmeans.emmeans`."""
        from crossed.inference.emmeans import emmeans

        return emmeans(self, specs, by=by, ddf=ddf, level=level)

    def eta_squared(self, partial: bool = True, ci: float | None = 0.95,
                    alternative: str = "two-sided") -> pd.DataFrame:
        """Partial η² per fixed term; see :func:`crossed.inference.effect_sizes.eta_squared`."""
        from crossed.inference.effect_sizes import eta_squared

        return eta_squared(self, partial=partial, ci=ci, alternative=alternative)

    def r2(self) -> pd.DataFrame:
        """Nakagawa's marginal and conditional R²; see :func:`crossed.inference.r2.r2_nakagawa`."""
        from crossed.inference.r2 import r2_nakagawa

        return r2_nakagawa(self)

    def ranova(self) -> pd.DataFrame:
        """Likelihood-ratio test per random term; see :func:`crossed.inference.lrt.ranova`."""
        from crossed.inference.lrt import ranova

        return ranova(self)

    def variance_components(self, test: bool = True) -> pd.DataFrame:
        """Variances, shares and LRTs; see :func:`crossed.inference.lrt.variance_components`."""
        from crossed.inference.lrt import variance_components

        return variance_components(self, test=test)

    def adjusted_means(self, group: str, level: float = 0.95) -> pd.DataFrame:
        """Population mean + conditional mode per level; see ``evaluation.adjusted``."""
        from crossed.evaluation.adjusted import adjusted_means

        return adjusted_means(self, group, level=level)

    def interaction_effects(self, a: str, b: str, level: float = 0.95) -> pd.DataFrame:
        """Conditional modes of ``(1 | a:b)``; see ``evaluation.adjusted``."""
        from crossed.evaluation.adjusted import interaction_effects

        return interaction_effects(self, a, b, level=level)

    def summary(self, ddf: str = "satterthwaite") -> str:
        """The text ``summary(lmerTest::lmer(...))`` prints, as a string."""
        from crossed.display import format_summary

        return format_summary(self, ddf=ddf)

    def __repr__(self) -> str:
        kind = "REML" if self.reml else "ML"
        return (f"<LmerFit {self.formula!r} by {kind} ({self.engine}): nobs={self.nobs}, "
                f"deviance={self.deviance:.4f}{', singular' if self.is_singular else ''}>")
