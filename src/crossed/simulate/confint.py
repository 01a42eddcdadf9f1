"""``fit.confint()``: lme4's ``confint.merMod`` with its three methods.

It lives in the simulation layer because ``method="boot"`` runs the parametric bootstrap
(:func:`crossed.simulate.bootstrap`); the profile is :mod:`crossed.inference.profile`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from crossed._conventions import check_count, check_fraction
from crossed.inference.profile import profile_confint, sdcor_of, var_params
from crossed.simulate.bootstrap import bootstrap
from crossed.simulate.response import is_glmm

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["CONFINT_COLUMNS", "confint"]

CONFINT_COLUMNS = ["parameter", "term", "conf_low", "conf_high"]
METHODS = ("profile", "Wald", "boot")


def _names(fit: LmerFit) -> tuple[list[str], list[str]]:
    """lme4's names (``.sig01`` ..., ``.sigma``, fixed effects) and crossed's; a GLMM has
    no ``.sigma`` row (lme4's ``confint`` of a binomial or Poisson ``glmer``)."""
    params = var_params(fit)
    fe = list(fit.fixef_names)
    sigma = [] if is_glmm(fit) else [".sigma"]
    return ([p.r_name for p in params] + sigma + fe,
            [p.name for p in params] + ["sigma" for _ in sigma] + fe)


def _select(fit: LmerFit, parm: str | list[str] | None) -> list[str]:
    """The lme4 names asked for: all, ``"theta_"`` (variance parameters and σ),
    ``"beta_"`` (fixed effects), or names (lme4's or crossed's)."""
    r_names, names = _names(fit)
    nvar = len(r_names) - len(fit.fixef_names)
    if parm is None:
        return r_names
    if isinstance(parm, str):
        if parm == "theta_":
            return r_names[:nvar]
        if parm == "beta_":
            return r_names[nvar:]
        parm = [parm]
    lookup = dict(zip(names, r_names, strict=True)) | {r: r for r in r_names}
    out = []
    for p in parm:
        if p not in lookup:
            raise ValueError(f"confint: no parameter {p!r}; the parameters are "
                             f"{', '.join(r_names)} (or {', '.join(names)})")
        out.append(lookup[p])
    return out


def _boot_stat(fit: LmerFit) -> pd.Series:
    """lme4's bootstrap statistic of ``confint``: SDs/correlations, σ (not for a GLMM),
    fixed effects."""
    params = var_params(fit)
    if is_glmm(fit):  # (Λ is the random effects' factor itself: σ = 1)
        vals = np.concatenate([sdcor_of(fit, fit.theta, 1.0, params), fit.beta])
        return pd.Series(vals, index=[p.r_name for p in params] + list(fit.fixef_names))
    vals = np.concatenate([sdcor_of(fit, fit.theta, fit.sigma, params), [fit.sigma],
                           fit.beta])
    return pd.Series(vals, index=[p.r_name for p in params] + [".sigma"]
                     + list(fit.fixef_names))


def confint(fit: LmerFit, parm: str | list[str] | None = None, level: float = 0.95,
            method: str = "profile", nsim: int = 500, seed: Any = None,
            boot_type: str = "percentile", n_jobs: int | None = 1,
            progress: bool | None = None) -> pd.DataFrame:
    """Confidence intervals of the variance parameters, σ and the fixed effects
    (lme4's ``confint(fit, parm, level, method)``).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    parm : str or list of str, optional
        Parameters: lme4's names (``".sig01"``, ``".sigma"``, ``"Days"``), crossed's
        (``"sd_(Intercept)|Subject"``, ``"sigma"``), ``"theta_"`` (all variance
        parameters) or ``"beta_"`` (all fixed effects); None for all.
    level : float
        Confidence level.
    method : {"profile", "Wald", "boot"}
        ``"profile"`` (lme4's default): likelihood-profile intervals of the ML deviance (a
        REML fit is refitted by ML, as lme4 does), :mod:`crossed.inference.profile`.
        Where the optimiser centred a term's covariate (far from 0: a year), the SD of
        that term's intercept (at 0) and its correlations get NaN with a warning: their
        profile in the formula's columns loses its digits (centre the covariate, or use
        ``"boot"``). ``"Wald"``: β̂ ± z·SE for the fixed effects, NaN for the variance parameters (as
        lme4). ``"boot"``: parametric bootstrap (``bootMer``: new random effects per
        replicate, refits with the fit's criterion) with percentile intervals. A GLMM
        (no ``.sigma`` row) has ``"Wald"`` and ``"boot"``; its profile is not implemented
        (a ValueError says so).
    nsim, seed, boot_type, n_jobs, progress
        Bootstrap replicates, random seed, interval type (``"percentile"``, ``"basic"``,
        ``"normal"``) and execution (``method="boot"`` only). R's random numbers differ:
        bootstrap intervals agree with R's only up to Monte Carlo error.

    Returns
    -------
    pandas.DataFrame
        One row per parameter, in lme4's order (``.sig01`` ..., ``.sigma``, fixed
        effects): ``parameter`` (lme4's row name), ``term`` (crossed's name:
        ``sd_<column>|<group>``, ``cor_<a>.<b>|<group>``, ``sigma`` or the fixed effect),
        ``conf_low``, ``conf_high`` (lme4's ``2.5 %`` / ``97.5 %`` columns).
        ``attrs``: ``method``, ``conf_level``. Validated against lme4 1.1-31 on
        sleepstudy (random slopes) and Penicillin (crossed): profile and Wald to 1e-5
        relative, boot within Monte Carlo error.
    """
    level = check_fraction("level", level)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, "
                         f"got {method!r}")
    if method == "profile" and is_glmm(fit):
        raise ValueError("confint: profile intervals of a GLMM are not implemented; use "
                         "method='Wald' (fixed effects) or method='boot' (all parameters)")
    wanted = _select(fit, parm)
    r_names, names = _names(fit)
    label = dict(zip(r_names, names, strict=True))
    if method == "profile":
        tab = profile_confint(fit, level=level, which=wanted).set_index("parameter")
        lo, hi = tab["conf_low"], tab["conf_high"]
    elif method == "Wald":
        z = stats.norm.ppf(0.5 + level / 2)
        se = np.sqrt(np.diag(fit.vcov_beta))
        fe = list(fit.fixef_names)
        lo = pd.Series(np.nan, index=r_names)
        hi = pd.Series(np.nan, index=r_names)
        lo[fe] = fit.beta - z * se
        hi[fe] = fit.beta + z * se
    else:
        nsim = check_count("nsim", nsim)
        boot = bootstrap(fit, stat=_boot_stat, nsim=nsim, seed=seed, ci=boot_type,
                         level=level, n_jobs=n_jobs, progress=progress)
        tab = boot.intervals().set_index("term")
        lo, hi = tab["conf_low"], tab["conf_high"]
    out = pd.DataFrame({"parameter": wanted, "term": [label[w] for w in wanted],
                        "conf_low": [float(lo[w]) for w in wanted],
                        "conf_high": [float(hi[w]) for w in wanted]},
                       columns=CONFINT_COLUMNS)
    out.attrs.update(method=method, conf_level=level)
    return out
