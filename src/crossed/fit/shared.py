"""What :class:`~crossed.fit.LmerFit` and :class:`~crossed.fit.GlmerFit` share with the
same meaning and the same code: simulation, simulated-residual diagnostics, the parametric
bootstrap and lme4's per-level coefficients (one mixin, so the two classes cannot drift).

The simulate and inference layers are imported inside the methods (a fit does not load
them until one is called); ``check``'s default ``max_rows`` is
:data:`crossed.simulate.diagnostics.MAX_ROWS`, written out (tests/fit/test_methods.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from crossed.engines.allfit import AllFit
    from crossed.simulate.bootstrap import BootResult
    from crossed.simulate.diagnostics import Diagnostics

__all__ = ["SharedMethods"]


class SharedMethods:
    """Methods of both fit classes (mixed in before the model core's result)."""

    def describe(self) -> str:
        """A one-line description (formula, criterion, engine, nobs): the model core's
        result's own ``repr`` (the class after this mixin)."""
        return super().__repr__()

    def __repr__(self) -> str:
        """What lme4's ``print(fit)`` shows (:func:`crossed.display.lmer.format_print`)."""
        from crossed.display.lmer import format_print
        try:
            return format_print(self)  # type: ignore[arg-type]
        except Exception:  # a repr never raises: the one-line description instead
            return self.describe()

    def simulate(self, nsim: int = 1, seed: int | np.random.Generator | None = None,
                 use_ranef: bool = False) -> pd.DataFrame:
        """Simulated responses with lme4's ``simulate()`` semantics (a GLMM's: binomial
        proportions of the prior weights' trials, Poisson counts), as R returns them: a
        table with one column per simulation.

        Parameters
        ----------
        nsim : int
            Number of simulated responses.
        seed : int or numpy.random.Generator, optional
        use_ranef : bool
            False (lme4's default) draws new random effects for each simulation; True
            conditions on the estimated ones (lme4's ``re.form = NULL``).

        Returns
        -------
        pandas.DataFrame
            R's ``simulate(fit, nsim)``: columns ``sim_1`` ... ``sim_<nsim>`` (R's names),
            one row per observation used in the fit, in the fit's order (a RangeIndex;
            rows dropped for missing values are not there, as in R's model frame).
            ``.to_numpy()`` gives the (nobs, nsim) array. ``attrs``: ``nsim``,
            ``use_ranef``. See :func:`crossed.simulate.simulate_responses` (validated
            against lme4 1.1-31's ``simulate`` in distribution).
        """
        from crossed.simulate.response import simulate_responses
        sims = simulate_responses(self, nsim=nsim, seed=seed, use_ranef=use_ranef)
        out = pd.DataFrame(sims, columns=[f"sim_{i + 1}" for i in range(sims.shape[1])])
        out.attrs.update(nsim=sims.shape[1], use_ranef=bool(use_ranef))
        return out

    def check(self, nsim: int = 250, seed: Any = None, use_ranef: bool = False,
              alpha: float = 0.05, calibrate: int = 0, n_jobs: int | None = 1,
              backend: str = "joblib", scheduler: Any = None, progress: bool | None = None,
              max_rows: int | None = 50_000) -> Diagnostics:
        """Simulated-residual (DHARMa) diagnostics, explained in words.

        Parameters
        ----------
        nsim, seed, use_ranef
            Simulations of the response (as :meth:`simulate`).
        alpha : float
            Level of the uniformity (KS), dispersion and outlier tests.
        calibrate : int
            Refits that calibrate the tests (0: none).
        n_jobs, backend, scheduler, progress
            Execution (:func:`crossed.simulate.execution.run_tasks`).
        max_rows : int or None
            Largest table simulated whole (see :func:`crossed.simulate.check`).

        Returns
        -------
        Diagnostics
            The tests, in words, and ``plot()``. See :func:`crossed.simulate.check`.
        """
        from crossed.simulate.diagnostics import check as _check
        return _check(self, nsim=nsim, seed=seed, use_ranef=use_ranef, alpha=alpha,
                      calibrate=calibrate, n_jobs=n_jobs, backend=backend,
                      scheduler=scheduler, progress=progress, max_rows=max_rows)

    def bootstrap(self, stat: str | Callable[[Any], Any] = "fixef", nsim: int = 1000,
                  seed: Any = None, ci: str = "percentile", level: float = 0.95,
                  use_ranef: bool = False, check_conv: bool = False,
                  n_jobs: int | None = 1, backend: str = "joblib", scheduler: Any = None,
                  progress: bool | None = None) -> BootResult:
        """Parametric bootstrap of a statistic of the fit (lme4's ``bootMer``).

        Parameters
        ----------
        stat : str or callable
            ``"fixef"``, ``"theta"``, ``"sigma"``, ``"varcorr"`` ... or a function of a
            refit returning a number, a Series or a dict (see :func:`crossed.bootstrap`).
        nsim : int
            Number of bootstrap samples.
        seed : int, optional
        ci : {"percentile", "basic", "normal"}
            Interval type of ``BootResult.ci``.
        level : float
        use_ranef : bool
            Condition on the estimated random effects (lme4's ``use.u``).
        check_conv : bool
            lme4's convergence derivative check on each refit.
        n_jobs, backend, scheduler, progress
            Execution (:func:`crossed.simulate.execution.run_tasks`).

        Returns
        -------
        BootResult
            The replicates, the estimate and intervals. Delegates to
            :func:`crossed.bootstrap`.
        """
        from crossed.simulate.bootstrap import bootstrap as _bootstrap
        return _bootstrap(self, stat=stat, nsim=nsim, seed=seed, ci=ci, level=level,
                          use_ranef=use_ranef, check_conv=check_conv, n_jobs=n_jobs,
                          backend=backend, scheduler=scheduler, progress=progress)

    def coef(self) -> dict[str, pd.DataFrame]:
        """Per-level coefficients, fixed effects plus conditional modes (lme4's ``coef``;
        a GLMM's on the link scale).

        Returns
        -------
        dict of str to pandas.DataFrame
            One table per grouping factor: the levels in a column named after the factor,
            then one column per fixed effect.
            See :func:`crossed.inference.levels.coef_levels`. Validated against lme4
            1.1-31's ``coef()`` (tests/fit/test_methods.py).
        """
        from crossed.inference.levels import coef_levels
        return coef_levels(self)

    def rePCA(self, r_names: bool = False) -> pd.DataFrame | dict[str, pd.DataFrame]:
        """Principal components of each grouping factor's random effects (lme4's
        ``rePCA``): how many dimensions the random effects really span.

        Parameters
        ----------
        r_names : bool
            True: R's layout instead, ``summary(rePCA(m))``'s ``importance`` matrix per
            grouping factor (a dict of DataFrames, rows ``"Standard deviation"``,
            ``"Proportion of Variance"``, ``"Cumulative Proportion"``, columns ``PC1`` ...;
            :func:`crossed.inference.repca.r_importance`).

        Returns
        -------
        pandas.DataFrame
            ``group``, ``component``, ``sd`` (singular value of the factor's relative
            covariance factor), ``proportion`` (of the factor's variance), ``cumulative``,
            one row per (grouping factor, component). A component with ``sd`` ≈ 0 (the
            cumulative proportion reaching 1 before the last component) marks an
            over-parametrised term. See :func:`crossed.inference.repca.re_pca`; validated
            against ``summary(lme4::rePCA(m))`` (lme4 1.1-31).
        """
        from crossed.inference.repca import r_importance, re_pca
        from crossed.tables import result_table
        table = re_pca(self)
        return r_importance(table) if r_names else result_table(table)

    def all_fit(self) -> AllFit:
        """Refit with every optimiser crossed has (lme4's ``allFit``): BOBYQA, L-BFGS-B and
        Nelder–Mead (a GLMM: BOBYQA and Nelder–Mead, no L-BFGS-B), each with and without
        crossed's continuations, from the same start.

        Returns
        -------
        AllFit
            ``table`` (``optimizer``, ``lme4_optimizer`` (lme4's allFit name of the refit
            with the same NLopt algorithm, ``"nloptwrap.NLOPT_LN_NELDERMEAD"`` ...; empty
            where lme4 has none), ``criterion``, ``loglik``, ``converged``,
            ``singular``, ``feval``, ``seconds``, ``messages``), ``fixef`` and ``sdcor``
            (one row per optimiser, lme4's ``$fixef`` and ``$sdcor``), ``fits`` (each
            refit) and ``errors``. See :func:`crossed.engines.allfit.all_fit`; validated
            against lme4 1.1-31's refits with each of its optimisers.
        """
        from crossed.engines.allfit import all_fit as _all_fit
        return _all_fit(self)
