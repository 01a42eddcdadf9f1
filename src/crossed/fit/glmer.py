"""The public GLMM fit, :class:`GlmerFit`: the model core's
:class:`~crossed.model.glmm.result.GlmerResult` with lme4's methods.

The same methods as :class:`crossed.fit.LmerFit` wherever the meaning is the same; the
tests are Wald z / χ² and likelihood-ratio tests (a GLMM has no residual variance to take
denominator degrees of freedom from). As in ``lmer.py``, each method imports the layer
that implements it when it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.engines.refit import refit_glmer
from crossed.fit.shared import SharedMethods
from crossed.model.control import LmerControl
from crossed.model.glmm.result import GlmerResult
from crossed.tables import Summary, result_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from crossed.display.apa import RandomSelectionLike, WriteUp
    from crossed.inference.emmeans import EMMeans
    from crossed.inference.glmm_emmeans import GlmmEMMeans

__all__ = ["GlmerFit"]


class GlmerFit(SharedMethods, GlmerResult):
    """A fitted generalised linear mixed model (lme4's ``glmer``).

    What :func:`crossed.glmer` returns: the fields of the model core's
    :class:`~crossed.model.glmm.result.GlmerResult` (``design``, ``family``, ``nagq``,
    ``theta``, ``beta``, ``deviance``, ``criterion``, ``vcov_beta`` ...: see there) and its
    accessors (``fixef``, ``vcov``, ``varcorr()``, ``ranef()``, ``predict()``,
    ``residuals()`` ...), with the R-like methods below. Frozen, like ``LmerFit``.
    """

    # ------------------------------------------------------------------ refits, simulation
    def refit(self, y: np.ndarray | None = None, rows: np.ndarray | None = None,
              control: LmerControl | None = None) -> GlmerFit:
        """Fit the same GLMM again on a new response and/or a subset of rows (lme4's
        ``refit``): the same design, engine, family, nAGQ and optimiser settings.

        Parameters
        ----------
        y : array-like, optional
            New response on the scale of ``design.y``: 0/1 or proportions (binomial, trials
            = the prior weights), counts (Poisson).
        rows : array of int or bool, optional
            Rows of the fitted data to keep.
        control : LmerControl, optional
            Optimiser settings (default: the fit's own).

        Returns
        -------
        GlmerFit
            See :func:`crossed.engines.refit.refit_glmer`.
        """
        return refit_glmer(self, y=y, rows=rows, control=control)

    # ------------------------------------------------------------------ inference
    def coef_table(self, level: float = 0.95, r_names: bool = False) -> pd.DataFrame:
        """Wald z table of the fixed effects (R's ``summary(glmer fit)$coefficients``).

        Parameters
        ----------
        level : float
            Confidence level of the Wald intervals (stored in ``attrs``).
        r_names : bool
            True: R's ``coef(summary(fit))`` instead, terms as row names and R's columns
            ``Estimate``, ``Std. Error``, ``z value``, ``Pr(>|z|)``, no intervals
            (:func:`crossed.inference.coefs.r_coefficients`; ``LmerFit.coef_table`` has the
            same keyword).

        Returns
        -------
        pandas.DataFrame
            The LMM's columns without ``df``: ``term``, ``estimate``, ``std_error``,
            ``statistic`` (z value), ``p_value`` (two-sided normal), ``conf_low``,
            ``conf_high`` (Wald), one row per fixed effect (a RangeIndex). See
            :func:`crossed.inference.glmm_wald.glmm_coef_table`.
        """
        from crossed.inference.coefs import r_coefficients
        from crossed.inference.glmm_wald import glmm_coef_table
        table = glmm_coef_table(self, level=level)
        if r_names:
            return result_table(r_coefficients(table, test="z"))
        return result_table(table)

    def anova(self, *others: GlmerResult, type: int | str = 3,
              names: list[str] | None = None) -> pd.DataFrame:
        """Wald χ² tests of the fixed terms or, given other fits, their likelihood-ratio
        comparison (lme4's ``anova(m0, m1)``).

        Parameters
        ----------
        *others : GlmerFit
            Other fits of the same data to compare with (nested or not).
        type : {2, 3}
            Type of the Wald hypotheses (without ``others``).
        names : list of str, optional
            Names of the models in the comparison.

        Returns
        -------
        pandas.DataFrame
            Wald: ``term``, ``statistic`` (χ²), ``df``, ``p_value``; comparison: ``npar``,
            ``aic``, ``bic``, ``loglik``, ``deviance``, ``statistic``, ``df``,
            ``p_value``. See :func:`crossed.inference.glmm.glmm_anova`.
        """
        from crossed.inference.glmm import glmm_anova
        table = glmm_anova(self, *others, type=type, names=names)
        if others:  # lme4's anova(m0, m1): crossed.compare's likelihood-ratio table
            return result_table(table)
        kind = {"1": "I", "2": "II", "3": "III"}.get(str(table.attrs.get("type", type)),
                                                    str(type))
        return result_table(table, title=f"Analysis of Deviance Table (Type {kind} Wald "
                                         "chisquare tests)")

    def drop1(self) -> pd.DataFrame:
        """Likelihood-ratio test of each marginal fixed term (R's ``drop1(fit, test =
        "Chisq")``): each term not contained in another is removed and the model refitted.

        Returns
        -------
        pandas.DataFrame
            ``term``, ``npar``, ``aic``, ``statistic`` (LRT), ``p_value``; the first row,
            ``<none>``, is the full model, with no test (missing values, shown blank as R
            prints them). See :func:`crossed.inference.glmm.drop1`.
        """
        from crossed.inference.glmm import drop1 as _drop1
        table = _drop1(self)
        table.attrs["na"] = ""  # R prints the <none> row's missing cells blank
        return result_table(table)

    def emmeans(self, specs: str | list[str], by: str | list[str] | None = None,
                type: str = "link", level: float = 0.95,
                offset: float | None = None, at: dict[str, Any] | None = None,
                cov_reduce: Any = "mean") -> GlmmEMMeans:
        """Estimated marginal means (emmeans' ``emmeans(fit, specs, type = ...)``).

        Parameters
        ----------
        specs, by : str or list of str
            As :meth:`crossed.LmerFit.emmeans`.
        type : {"link", "response"}
            Scale of the table and of ``pairs()``. emmeans' default, ``"link"``: logits
            (logs) with asymptotic intervals, pairs as log odds (rate) ratios;
            ``"response"``: probabilities (rates), pairs as odds (rate) ratios.
            Differences of probabilities: ``.regrid().pairs()``.
        level : float
        offset : float, optional
            Added to the linear predictor of every EMM (default: the mean offset).
        at : dict, optional
            Grid values per variable (emmeans' ``at``): a number or numbers for a numeric
            covariate, a list of levels restricting a factor.
        cov_reduce : str, callable or dict
            How the other covariates enter the grid (emmeans' ``cov.reduce``; default
            their mean).

        Returns
        -------
        GlmmEMMeans
            ``table()``, ``pairs()``, ``contrast()``, ``regrid()``. See
            :func:`crossed.inference.glmm_emmeans.glmm_emmeans`.
        """
        from crossed.inference.glmm_emmeans import glmm_emmeans
        return glmm_emmeans(self, specs, by=by, type=type, level=level, offset=offset,
                            at=at, cov_reduce=cov_reduce)

    def emtrends(self, specs: str | list[str], var: str, by: str | list[str] | None = None,
                 level: float = 0.95, at: dict | None = None, cov_reduce: Any = "mean",
                 delta_var: float | None = None) -> EMMeans:
        """Estimated marginal trends of the covariate ``var`` on the link scale (emmeans'
        ``emtrends`` of a ``glmer`` fit: asymptotic z intervals, df = Inf).

        Parameters
        ----------
        specs : str or list of str
            The factor(s) whose levels' slopes are estimated.
        var : str
            The numeric covariate.
        by : str or list of str, optional
            Factors to condition on.
        level : float
        at : dict, optional
            Values of covariates (or levels) of the reference grid.
        cov_reduce : str or callable
            How the other numeric covariates are reduced (the mean).
        delta_var : float, optional
            Step of the finite difference (emmeans' ``delta.var``; by default exact).

        Returns
        -------
        EMMeans
            Slopes of η in ``var`` per level, with SEs from ``vcov`` and z intervals. See
            :func:`crossed.inference.emtrends.emtrends`.
        """
        from crossed.inference.emtrends import emtrends as _emtrends
        return _emtrends(self, specs, var, by=by, ddf="none", level=level, at=at,
                         cov_reduce=cov_reduce, delta_var=delta_var)

    def confint(self, parm: str | list[str] | None = None, level: float = 0.95,
                method: str = "Wald", nsim: int = 500, seed: Any = None,
                boot_type: str = "percentile", n_jobs: int | None = 1,
                progress: bool | None = None) -> pd.DataFrame:
        """Confidence intervals of the variance parameters and the fixed effects (lme4's
        ``confint`` of a ``glmer`` fit).

        Parameters
        ----------
        parm : str or list of str, optional
            Parameters (``".sig01"`` ..., fixed-effect names, ``"theta_"``, ``"beta_"``);
            all by default.
        level : float
        method : {"Wald", "boot"}
            ``"Wald"`` (default here): β̂ ± z·SE for the fixed effects, NaN for the
            variance parameters, as lme4. ``"boot"``: parametric bootstrap of all of them
            (percentile by default). lme4's default, the likelihood profile, is not
            implemented for GLMMs (a ValueError says so).
        nsim, seed, boot_type, n_jobs, progress
            For ``method="boot"``.

        Returns
        -------
        pandas.DataFrame
            ``parameter`` (lme4's row name: ``.sig01`` ..., fixed effects; no ``.sigma``),
            ``term``, ``conf_low``, ``conf_high``. See
            :func:`crossed.simulate.confint.confint`.
        """
        from crossed.simulate.confint import confint as _confint
        return result_table(_confint(self, parm=parm, level=level, method=method, nsim=nsim,
                                     seed=seed, boot_type=boot_type, n_jobs=n_jobs,
                                     progress=progress))

    def r2(self, null_intercept: float | None = None,
           tolerance: float = 1e-5) -> pd.DataFrame:
        """Nakagawa's marginal and conditional R² (``performance::r2_nakagawa``).

        Parameters
        ----------
        null_intercept : float, optional
            The null model's intercept (default: from a refit of the null model).
        tolerance : float

        Returns
        -------
        pandas.DataFrame
            See :func:`crossed.inference.glmm.r2_nakagawa_glmm`.
        """
        from crossed.inference.glmm import r2_nakagawa_glmm
        return result_table(r2_nakagawa_glmm(self, null_intercept=null_intercept,
                                             tolerance=tolerance))

    # ------------------------------------------------------------------ write-up
    def report(self, emmeans: str | list[str] | None = None, contrasts: Sequence[Any] = (),
               type: int | str = 3, test: str = "wald", coefficients: bool | None = None,
               alpha: float = 0.05, digits: int = 2,
               random_selection: RandomSelectionLike | None = None) -> WriteUp:
        """APA-style results and methods paragraphs (R's ``report::report``,
        ``papaja::apa_print``).

        One sentence per fixed term (Wald χ² of ``anova()``, or the likelihood-ratio test
        of ``drop1()`` with ``test="lrt"``), per coefficient as an odds ratio (logit
        link) or rate ratio (log link) with its Wald interval and z test, per requested
        EMM and contrast, and a methods paragraph (software, model in words, Laplace or
        AGQ with nAGQ, optimiser and convergence, rows dropped, singularity, tests, how the
        random structure was chosen). Every number is one of the fit's own tables (kept
        in ``WriteUp.tables``), rounded by APA's rules (:mod:`crossed.display.apa`).

        Parameters
        ----------
        emmeans : str or list of str, optional
            Factors whose EMMs (response scale) and pairwise contrasts are reported.
        contrasts : sequence
            EMM objects or EMM / contrast tables (``fit.emmeans("system").pairs()``).
        type : {2, 3}
            Type of the Wald tests.
        test : {"wald", "lrt"}
        coefficients : bool, optional
            The ratio sentences (default: for a logit or log link).
        alpha : float
            Level at which an effect is called significant.
        digits : int
            Decimals of estimates and ratios.
        random_selection : object with ``methods_sentence()``, optional
            How the random-effects structure was chosen (``crossed.select_random``).

        Returns
        -------
        WriteUp
            See :meth:`crossed.LmerFit.report` and :func:`crossed.display.apa.write_up`.
        """
        from crossed.display.apa import write_up
        return write_up(self, emmeans=emmeans, contrasts=contrasts, type=type, test=test,
                        coefficients=coefficients, alpha=alpha, digits=digits,
                        random_selection=random_selection)

    # ------------------------------------------------------------------ display
    def summary(self) -> Summary:
        """R's ``summary(glmer fit)``: a ``str`` of the text R prints, with ``.tables``
        (random effects, fixed effects) for programmatic use and a notebook view."""
        from crossed.display.glmm import format_glmer_summary
        return format_glmer_summary(self)

    def _repr_html_(self) -> str:
        """The notebook view: the summary's text and tables as HTML."""
        from crossed.display.lmer import fit_html
        return fit_html(self)
