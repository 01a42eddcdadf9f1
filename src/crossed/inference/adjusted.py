"""Adjusted means of the systems and their interaction effects with datasets (CCMEM answers).

In a cross-classified model ``score ~ nuisance + (1 | model) + (1 | dataset) +
(1 | model:dataset)`` each model's *adjusted mean* is the population mean score (the
fixed part averaged over the nuisance factors' levels, emmeans' grand mean) plus the
model's conditional mode: its expected score on a typical dataset with typical nuisance
settings, after dataset difficulty and the model × dataset interaction are accounted for.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from crossed._conventions import check_fraction

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["adjusted_means", "grand_mean", "interaction_effects"]


def grand_mean(fit: LmerFit) -> tuple[float, float]:
    """The fixed part averaged over emmeans' reference grid, and its standard error.

    Equal weight for every combination of factor levels, numeric covariates at their
    means (emmeans' ``emmeans(fit, ~ 1)``). On a rank-deficient fit where that average is
    not estimable (emmeans' ``nonEst``), both are NaN.
    """
    from crossed.inference.estimability import fit_null_basis, is_estimable
    from crossed.inference.grid import full_grid_matrix, reference_grid

    _, X = reference_grid(fit)
    c = np.asarray(X, dtype=float).mean(axis=0)
    nb = fit_null_basis(fit)
    if nb is not None:
        c_full = full_grid_matrix(fit, nb).mean(axis=0)
        if not is_estimable(c_full, nb.basis)[0]:
            return np.nan, np.nan
    est = float(c @ fit.beta)
    se = float(np.sqrt(max(c @ fit.vcov_beta @ c, 0.0)))
    return est, se


def _random_groups(fit: LmerFit) -> list[str]:
    return [t.group for t in fit.design.random.terms]


def adjusted_means(fit: LmerFit, group: str, level: float = 0.95) -> pd.DataFrame:
    """Each level's adjusted mean: population mean plus its conditional mode, with an interval.

    Parameters
    ----------
    fit : LmerFit
    group : str
        A grouping factor with a random intercept (e.g. ``"model"`` in a CCMEM). When
        ``group`` is a fixed factor instead, its EMMs are returned in the same columns.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    pandas.DataFrame
        Sorted from best to worst: ``level`` (the group's level), ``estimate`` (adjusted
        mean = ``population_mean`` + ``conditional_mode``), ``std_error``
        (√(SE(population mean)² + cond_sd²), the conditional SE, treating β̂ and the
        conditional mode as independent, as merTools' ``predictInterval`` does),
        ``conf_low``, ``conf_high`` (normal intervals at ``level``), ``population_mean``
        (emmeans' grand mean of the fixed part), ``conditional_mode`` and ``cond_sd``
        (lme4's ``ranef`` and ``condVar``), ``rank`` (1 = highest). ``attrs``: ``group``,
        ``conf_level``, ``kind`` (``"random"`` or ``"fixed"``). Validated against R:
        ``emmeans(fit, ~ 1)`` plus ``ranef(fit, condVar = TRUE)`` (tests/data/reference/
        extra/adjusted.R).

        On a rank-deficient fit (a column dropped for an empty cell) a random ``group``
        raises ``ValueError`` when the population mean is not estimable; a fixed
        ``group``'s non-estimable EMMs (emmeans' ``nonEst``) are NaN, listed last, with
        ``rank`` NaN.
    """
    level = check_fraction("level", level)
    if group in _random_groups(fit):
        re = fit.ranef()
        re = re[(re["group"] == group) & (re["term"] == "(Intercept)")]
        if re.empty:
            raise ValueError(f"grouping factor {group!r} has no random intercept")
        mu, se_mu = grand_mean(fit)
        if not np.isfinite(mu):
            raise ValueError(
                "the population mean (emmeans(fit, ~ 1)) is not estimable on this "
                "rank-deficient fit (dropped columns: "
                f"{', '.join(fit.design.fixed.dropped)}): an interaction cell has no "
                f"data, so adjusted means of {group!r} cannot be formed; drop the empty "
                "cell's interaction from the fixed part")
        out = pd.DataFrame({
            "level": re["level"].to_numpy(),
            "estimate": mu + re["estimate"].to_numpy(),
            "std_error": np.sqrt(se_mu**2 + re["cond_sd"].to_numpy() ** 2),
            "population_mean": mu,
            "conditional_mode": re["estimate"].to_numpy(),
            "cond_sd": re["cond_sd"].to_numpy(),
        })
        z = stats.norm.ppf(0.5 + level / 2)
        out["conf_low"] = out["estimate"] - z * out["std_error"]
        out["conf_high"] = out["estimate"] + z * out["std_error"]
        kind = "random"
    elif group in fit.design.columns:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tab = fit.emmeans(group, level=level).table()
        out = pd.DataFrame({
            "level": tab[group].astype(str).to_numpy(), "estimate": tab["estimate"],
            "std_error": tab["std_error"], "population_mean": np.nan,
            "conditional_mode": np.nan, "cond_sd": np.nan,
            "conf_low": tab["conf_low"], "conf_high": tab["conf_high"]})
        kind = "fixed"
    else:
        raise ValueError(f"{group!r} is neither a grouping factor nor a variable of the model")
    out = out.sort_values("estimate", ascending=False, kind="stable",
                          na_position="last").reset_index(drop=True)
    n_est = int(out["estimate"].notna().sum())
    if n_est == len(out):
        out["rank"] = np.arange(1, len(out) + 1)
    else:
        out["rank"] = np.concatenate([np.arange(1, n_est + 1), np.full(len(out) - n_est,
                                                                        np.nan)])
    out = out[["level", "estimate", "std_error", "conf_low", "conf_high", "population_mean",
               "conditional_mode", "cond_sd", "rank"]]
    out.attrs.update(group=group, conf_level=level, kind=kind)
    return out


def interaction_effects(fit: LmerFit, a: str, b: str, level: float = 0.95) -> pd.DataFrame:
    """Conditional modes of the ``a:b`` random intercept (e.g. model × dataset), with intervals.

    Parameters
    ----------
    fit : LmerFit
        A fit with a ``(1 | a:b)`` (or ``(1 | b:a)``) term.
    a, b : str
        The two factors, e.g. ``"model"``, ``"dataset"``.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per observed (a, b) cell: columns ``a`` and ``b`` (named after the factors),
        ``estimate`` (conditional mode of the interaction: how much better or worse than
        expected from its overall level ``a`` does on ``b``), ``cond_sd``, ``conf_low``,
        ``conf_high`` (normal intervals), ``main_effect`` (the conditional mode of ``a``'s
        own random intercept, 0 if the model has none) and ``combined``
        (``main_effect + estimate``: ``a``'s deviation from the population mean on ``b``,
        before dataset difficulty). Values are lme4's ``ranef(fit, condVar = TRUE)``.
    """
    level = check_fraction("level", level)
    groups = _random_groups(fit)
    name = f"{a}:{b}" if f"{a}:{b}" in groups else f"{b}:{a}" if f"{b}:{a}" in groups else None
    if name is None:
        raise ValueError(f"the model has no (1 | {a}:{b}) term; random terms: {groups}")
    re = fit.ranef()
    re = re[(re["group"] == name) & (re["term"] == "(Intercept)")]
    # the cells by their levels, not by splitting labels (model names may contain ':')
    blk = next(b for b in fit.design.random.blocks if b.group == name)
    cells = pd.DataFrame(list(blk.level_keys()), columns=list(blk.factors))
    z = stats.norm.ppf(0.5 + level / 2)
    out = pd.DataFrame({a: cells[a], b: cells[b], "estimate": re["estimate"].to_numpy(),
                        "cond_sd": re["cond_sd"].to_numpy()})
    out["conf_low"] = out["estimate"] - z * out["cond_sd"]
    out["conf_high"] = out["estimate"] + z * out["cond_sd"]
    main = pd.Series(0.0, index=out.index)
    if a in groups:
        full = fit.ranef()
        m = full[(full["group"] == a) & (full["term"] == "(Intercept)")]
        main = out[a].map(dict(zip(m["level"].astype(str), m["estimate"], strict=True)))
    out["main_effect"] = main.to_numpy(dtype=float)
    out["combined"] = out["main_effect"] + out["estimate"]
    out = out.sort_values([a, b], kind="stable").reset_index(drop=True)
    out.attrs.update(conf_level=level, term=name)
    return out
