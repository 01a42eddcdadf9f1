"""The public linear mixed model fit, :class:`LmerFit`: the model core's
:class:`~crossed.model.result.LmerResult` with lme4's and lmerTest's methods.

Each method calls the layer that implements it (inference, simulate, display), imported
inside the method: this module sits above them, and a fit that is never summarised or
tested does not load them (nor SciPy's statistics), so ``import crossed`` and the first
``crossed.lmer(...)`` stay cheap (tests/test_imports.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.engines.refit import refit_lmer
from crossed.fit.shared import SharedMethods
from crossed.model.result import LmerResult
from crossed.tables import Summary, result_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from crossed.display.apa import RandomSelectionLike, WriteUp
    from crossed.inference.emmeans import EMMeans
    from crossed.inference.step import StepResult

__all__ = ["LmerFit"]


class LmerFit(SharedMethods, LmerResult):
    """A fitted linear mixed model (lme4's ``merMod`` with lmerTest's inference).

    What :func:`crossed.lmer` returns: the fields of the model core's
    :class:`~crossed.model.result.LmerResult` (``design``, ``theta``, ``beta``, ``sigma``,
    ``deviance``, ``vcov_beta``, ``u``, ``opt``, ``converged`` ...: see there) and its
    accessors (``fixef``, ``vcov``, ``varcorr()``, ``ranef()``, ``predict()``,
    ``residuals()`` ...), with the R-like methods below. Frozen: its arrays are read-only,
    ``dataclasses.replace`` gives a new fit, copies and pickles start with an empty cache.
    """

    # ------------------------------------------------------------------ refits, simulation
    def refit(self, y: np.ndarray | None = None, rows: np.ndarray | None = None,
              reml: bool | None = None) -> LmerFit:
        """Fit the same model again on a new response and/or a subset of the rows.

        The stored design is reused: no formula parsing, no model-matrix building (lme4's
        ``refit``). The same engine and optimiser settings are used; the native engine
        starts the optimiser at this fit's θ when the rows are the same (as lme4's
        ``refit`` does; :func:`crossed.engines.refit.refit_lmer`).

        Parameters
        ----------
        y : array-like, optional
            New response, one value per row of the (subset) design.
        rows : array of int or bool, optional
            Rows of the fitted data to keep (e.g. to drop a random fraction).
        reml : bool, optional
            Criterion of the refit; defaults to the original one.

        Returns
        -------
        LmerFit
        """
        return refit_lmer(self, y=y, rows=rows, reml=reml)

    # ------------------------------------------------------------------ inference
    def coef_table(self, ddf: str = "satterthwaite", level: float = 0.95,
                   r_names: bool = False) -> pd.DataFrame:
        """Fixed effects with standard errors, t tests and confidence intervals.

        Parameters
        ----------
        ddf : {"satterthwaite", "kenward-roger", "none"}
            Denominator df: lmerTest's Satterthwaite approximation, Kenward–Roger (pbkrtest:
            adjusted SEs and df, REML fits) or ``"none"`` for asymptotic z tests (df = inf).
        level : float
            Confidence level of ``conf_low``/``conf_high`` (stored in ``attrs``).
        r_names : bool
            True: R's ``coef(summary(fit))`` instead, terms as row names and R's columns
            ``Estimate``, ``Std. Error``, ``df``, ``t value``, ``Pr(>|t|)`` (lme4's
            ``Estimate``, ``Std. Error``, ``t value`` for ``ddf="none"``), no intervals
            (:func:`crossed.inference.coefs.r_coefficients`; ``GlmerFit.coef_table`` has
            the same keyword).

        Returns
        -------
        pandas.DataFrame
            ``term``, ``estimate``, ``std_error``, ``df``, ``statistic`` (t value),
            ``p_value`` (two-sided), ``conf_low``, ``conf_high``, one row per fixed effect
            (a RangeIndex). Validated against
            ``summary(lmerTest::lmer(...))$coefficients`` (lmerTest 3.1-3).
        """
        from crossed.inference.coefs import coef_table as _coef_table
        from crossed.inference.coefs import r_coefficients
        table = _coef_table(self, ddf=ddf, level=level)
        if r_names:
            return result_table(r_coefficients(table, test="t"))
        return result_table(table)

    def anova(self, type: int | str = 3, ddf: str = "satterthwaite") -> pd.DataFrame:
        """ANOVA table of the fixed terms (lmerTest's ``anova``).

        Parameters
        ----------
        type : {1, 2, 3}
            Type of the hypotheses (lmerTest's ``type``; 3 by default).
        ddf : {"satterthwaite", "kenward-roger"}
            Denominator df of the F tests.

        Returns
        -------
        pandas.DataFrame
            ``term``, ``sum_sq``, ``mean_sq``, ``num_df``, ``den_df``, ``statistic`` (F),
            ``p_value``. See :func:`crossed.inference.anova.anova`.
        """
        from crossed.inference.anova import anova as _anova
        return result_table(_anova(self, type=type, ddf=ddf))

    def drop1(self, ddf: str = "satterthwaite") -> pd.DataFrame:
        """F test of each marginal fixed term (lmerTest's ``drop1``).

        The terms not contained in another term (R's ``drop.scope``) are tested, each by
        the F test that its coefficients are zero (a marginal, Type II-like test in the
        full model; no refits).

        Parameters
        ----------
        ddf : {"satterthwaite", "kenward-roger"}
            Denominator df of the F tests.

        Returns
        -------
        pandas.DataFrame
            ``term``, ``sum_sq``, ``mean_sq``, ``num_df``, ``den_df``, ``statistic`` (F),
            ``p_value``, one row per marginal term. See
            :func:`crossed.inference.step.drop1`.
        """
        from crossed.inference.step import drop1 as _drop1
        return result_table(_drop1(self, ddf=ddf))

    def emmeans(self, specs: str | list[str], by: str | list[str] | None = None,
                ddf: str = "satterthwaite", level: float = 0.95, at: dict | None = None,
                cov_reduce: Any = "mean", type: str = "link") -> EMMeans:
        """Estimated marginal means (emmeans' ``emmeans``).

        Parameters
        ----------
        specs : str or list of str
            The factor(s) whose levels' means are estimated.
        by : str or list of str, optional
            Factors to condition on (one table per level).
        ddf : {"satterthwaite", "kenward-roger", "none"}
        level : float
            Confidence level.
        at : dict, optional
            Values of covariates (or levels) of the reference grid.
        cov_reduce : str or callable
            How numeric covariates are reduced (emmeans' ``cov.reduce``; the mean).
        type : {"link", "response"}
            The scale of the means (a transformed response: ``"response"`` back-transforms).

        Returns
        -------
        EMMeans
            The means, ``pairs()``, ``contrast()`` ... See
            :func:`crossed.inference.emmeans.emmeans`.
        """
        from crossed.inference.emmeans import emmeans as _emmeans
        return _emmeans(self, specs, by=by, ddf=ddf, level=level, at=at,
                        cov_reduce=cov_reduce, type=type)

    def emtrends(self, specs: str | list[str], var: str, by: str | list[str] | None = None,
                 ddf: str = "satterthwaite", level: float = 0.95, at: dict | None = None,
                 cov_reduce: Any = "mean", delta_var: float | None = None) -> EMMeans:
        """Estimated marginal trends of the covariate ``var`` (emmeans' ``emtrends``).

        Parameters
        ----------
        specs : str or list of str
            The factor(s) whose levels' slopes are estimated.
        var : str
            The numeric covariate.
        by, ddf, level, at, cov_reduce
            As :meth:`emmeans`.
        delta_var : float, optional
            Step of the finite difference (emmeans' ``delta.var``; by default exact).

        Returns
        -------
        EMMeans
            See :func:`crossed.inference.emtrends.emtrends`.
        """
        from crossed.inference.emtrends import emtrends as _emtrends
        return _emtrends(self, specs, var, by=by, ddf=ddf, level=level, at=at,
                         cov_reduce=cov_reduce, delta_var=delta_var)

    def eta_squared(self, partial: bool = True, ci: float | None = 0.95,
                    alternative: str = "greater", type: int | str = 3,
                    ddf: str = "satterthwaite") -> pd.DataFrame:
        """(Partial) η² per fixed term from the F tests (``effectsize::eta_squared``).

        Parameters
        ----------
        partial : bool
        ci : float or None
            Confidence level of the interval (None: no interval).
        alternative : {"greater", "two-sided", "less"}
            effectsize's default ``"greater"``: one-sided interval [low, 1];
            ``"two-sided"``: α/2 in each tail.
        type : {1, 2, 3}
            Type of the ANOVA it is computed from.
        ddf : {"satterthwaite", "kenward-roger"}

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.effect_sizes.eta_squared`.
        """
        from crossed.inference.effect_sizes import eta_squared as _eta_squared
        return result_table(_eta_squared(self, partial=partial, ci=ci,
                                         alternative=alternative, type=type, ddf=ddf))

    def r2(self) -> pd.DataFrame:
        """Nakagawa's marginal and conditional R² (``performance::r2_nakagawa``).

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.r2.r2_nakagawa`.
        """
        from crossed.inference.r2 import r2_nakagawa
        return result_table(r2_nakagawa(self))

    def ranova(self) -> pd.DataFrame:
        """Likelihood-ratio test of each random term (lmerTest's ``ranova``).

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.lrt.ranova`.
        """
        from crossed.inference.lrt import ranova as _ranova
        return result_table(_ranova(self))

    def variance_components(self, test: bool = True) -> pd.DataFrame:
        """Variances, their shares of the total and (``test``) a likelihood-ratio test of
        each random term.

        Parameters
        ----------
        test : bool

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.lrt.variance_components`.
        """
        from crossed.inference.lrt import variance_components as _variance_components
        return result_table(_variance_components(self, test=test))

    def adjusted_means(self, group: str, level: float = 0.95) -> pd.DataFrame:
        """Population mean plus the conditional mode of each level of ``group``.

        Parameters
        ----------
        group : str
            A grouping factor with a random intercept.
        level : float

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.adjusted.adjusted_means`.
        """
        from crossed.inference.adjusted import adjusted_means as _adjusted_means
        return _adjusted_means(self, group, level=level)

    def interaction_effects(self, a: str, b: str, level: float = 0.95) -> pd.DataFrame:
        """Conditional modes of the interaction ``(1 | a:b)``.

        Parameters
        ----------
        a, b : str
            The two grouping factors.
        level : float

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.adjusted.interaction_effects`.
        """
        from crossed.inference.adjusted import interaction_effects as _interaction_effects
        return _interaction_effects(self, a, b, level=level)

    def confint(self, parm: str | list[str] | None = None, level: float = 0.95,
                method: str = "profile", nsim: int = 500, seed: Any = None,
                boot_type: str = "percentile", n_jobs: int | None = 1,
                progress: bool | None = None) -> pd.DataFrame:
        """Confidence intervals of the variance parameters, σ and β (lme4's ``confint``).

        Parameters
        ----------
        parm : str or list of str, optional
            Parameters (``".sig01"`` ..., ``".sigma"``, fixed-effect names); all by default.
        level : float
        method : {"profile", "Wald", "boot"}
        nsim, seed, boot_type, n_jobs, progress
            For ``method="boot"``.

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.simulate.confint.confint`.
        """
        from crossed.simulate.confint import confint as _confint
        return result_table(_confint(self, parm=parm, level=level, method=method, nsim=nsim,
                                     seed=seed, boot_type=boot_type, n_jobs=n_jobs,
                                     progress=progress))

    def icc(self, by_group: bool = False) -> pd.DataFrame:
        """Adjusted and conditional ICC (``performance::icc``).

        Parameters
        ----------
        by_group : bool
            One ICC per grouping factor.

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.icc.icc`.
        """
        from crossed.inference.icc import icc as _icc
        return result_table(_icc(self, by_group=by_group))

    def hatvalues(self) -> np.ndarray:
        """Leverages, the diagonal of the hat matrix (lme4's ``hatvalues``)."""
        from crossed.inference.influence import hatvalues as _hatvalues
        return _hatvalues(self)

    def cooks_distance(self) -> np.ndarray:
        """Cook's distance per observation (lme4's ``cooks.distance``)."""
        from crossed.inference.influence import cooks_distance as _cooks_distance
        return _cooks_distance(self)

    def influence(self, groups: str | None = None) -> pd.DataFrame:
        """Case-deletion influence (lme4's ``influence``), by observation or by level of
        ``groups``.

        Parameters
        ----------
        groups : str, optional
            A grouping factor: delete its levels one at a time.

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.influence.influence` (a
            :class:`~crossed.tables.ResultTable`: printed and shown as R formats it,
            ``converged`` as yes/no).
        """
        from crossed.inference.influence import influence as _influence
        return result_table(_influence(self, groups=groups))

    def step(self, ddf: str = "satterthwaite", alpha_random: float = 0.1,
             alpha_fixed: float = 0.05, reduce_random: bool = True,
             reduce_fixed: bool = True, keep: list[str] | None = None) -> StepResult:
        """Backward elimination of random then fixed terms (lmerTest's ``step``).

        Parameters
        ----------
        ddf : {"satterthwaite", "kenward-roger"}
        alpha_random, alpha_fixed : float
            Terms with p-values above these are eliminated.
        reduce_random, reduce_fixed : bool
            False keeps that part as it is.
        keep : list of str, optional
            Fixed terms never eliminated.

        Returns
        -------
        StepResult
            The elimination tables and the final ``model`` (an ``LmerFit``). See
            :func:`crossed.inference.step.step`.
        """
        from crossed.inference.step import step as _step
        out = _step(self, ddf=ddf, alpha_random=alpha_random, alpha_fixed=alpha_fixed,
                    reduce_random=reduce_random, reduce_fixed=reduce_fixed, keep=keep)
        return replace(out, model=self.like(out.model))

    # ------------------------------------------------------------------ write-up
    def report(self, emmeans: str | list[str] | None = None, contrasts: Sequence[Any] = (),
               ddf: str = "satterthwaite", type: int | str = 3, effect_size: bool = True,
               ci: float | None = None, alternative: str | None = None,
               coefficients: bool = False, alpha: float = 0.05, digits: int = 2,
               random_selection: RandomSelectionLike | None = None) -> WriteUp:
        """APA-style results and methods paragraphs (R's ``report::report``,
        ``papaja::apa_print``).

        One sentence per ANOVA term (F test with its df and p, partial η² with the
        interval ``eta_squared`` returns), per requested EMM and contrast, and a methods
        paragraph (software, model in words, REML/ML, optimiser and convergence, rows
        dropped, singularity, tests, how the random structure was chosen). Every number
        is one of the fit's own tables (kept in ``WriteUp.tables``), rounded by APA's
        rules (:mod:`crossed.display.apa`).

        Parameters
        ----------
        emmeans : str or list of str, optional
            Factors whose EMMs and pairwise contrasts are reported.
        contrasts : sequence
            EMM objects or EMM / contrast tables (``fit.emmeans("system").pairs()``).
        ddf : {"satterthwaite", "kenward-roger"}
        type : {1, 2, 3}
            Type of the ANOVA.
        effect_size : bool
            Partial η² beside each F test.
        ci, alternative : optional
            ``eta_squared``'s interval (default: its own defaults).
        coefficients : bool
            Also a sentence per fixed effect (b, SE, CI, t(df), p).
        alpha : float
            Level at which an effect is called significant.
        digits : int
            Decimals of estimates.
        random_selection : object with ``methods_sentence()``, optional
            How the random-effects structure was chosen (``crossed.select_random``).

        Returns
        -------
        WriteUp
            ``.results``, ``.methods``, ``.text``, ``.markdown()``, ``.html()``,
            ``.latex()``. See :func:`crossed.display.apa.write_up`.
        """
        from crossed.display.apa import write_up
        return write_up(self, emmeans=emmeans, contrasts=contrasts, ddf=ddf, type=type,
                        effect_size=effect_size, ci=ci, alternative=alternative,
                        coefficients=coefficients, alpha=alpha, digits=digits,
                        random_selection=random_selection)

    # ------------------------------------------------------------------ display
    def summary(self, ddf: str = "satterthwaite") -> Summary:
        """What ``summary(lmerTest::lmer(...))`` prints.

        Parameters
        ----------
        ddf : {"satterthwaite", "kenward-roger", "none"}

        Returns
        -------
        crossed.tables.Summary
            A ``str`` (the text; ``print()`` shows it) with ``.tables`` (``"Random
            effects"``, ``"Fixed effects"``: DataFrames) and a notebook view.
        """
        from crossed.display.lmer import summary_of
        return summary_of(self, ddf)

    def _repr_html_(self) -> str:
        """The notebook view: the summary's criteria and tables (``crossed.display``)."""
        from crossed.display.lmer import fit_html
        return fit_html(self)
