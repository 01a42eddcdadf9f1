"""Effect sizes of the fixed terms from their F tests, as effectsize 0.8.3 computes them.

From an F test with num_df = df₁, den_df = df₂ (lmerTest's Type III table by default):

- partial η² = F·df₁ / (F·df₁ + df₂)                          (``F_to_eta2``)
- partial ω² = max(0, (F − 1)·df₁ / (F·df₁ + df₂ + 1))        (``F_to_omega2``)
- partial ε² = max(0, (F − 1)·df₁ / (F·df₁ + df₂))            (``F_to_epsilon2``)
- Cohen's f² = η²/(1 − η²)                                     (``F_to_f2``)

Confidence intervals invert the noncentral F distribution: the noncentrality λ with
P(F' ≤ F | λ) = 1 − α/2 (lower) and α/2 (upper) (α = 1 − ci two-sided; 2(1 − ci) one-sided,
``alternative = "greater"`` then reports an upper limit of 1), a limit set to 0 when F is
below the corresponding central quantile, and λ mapped back with λ/(λ + df₂). As in
effectsize, the inverted F is the one implied by the index's own estimate,
(e/df₁)/((1 − e)/df₂) (F itself for η²), and λ is always mapped back through η²'s formula;
Cohen's f² limits are the η² limits transformed.

effectsize finds λ with R's Nelder–Mead (``optim``, abstol 1e-9 on the summed deviation of
the two tail probabilities); here λ is the root itself (Brent's method). The two agree to
~1e-6 where Nelder–Mead converges, but Nelder–Mead's stopping point is chaotic in the last
bits of F: replicating it exactly (same simplex arithmetic, R's ``pnbeta`` series) was tried
and reproduces effectsize bit for bit on identical inputs, yet moves a limit by 2% when F
changes in its 16th digit (cake, recipe: λ 2.663 vs 2.716, the root being 2.716). The root
is the number effectsize aims at; the observed differences are ≤ 3e-4 relative (ω², ham,
Product, where Nelder–Mead stopped at λ = 20.9959 instead of the root 21.0021).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import optimize, stats

from crossed._warn import warn

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["EFFECT_COLUMNS", "cohens_f2", "eta_squared", "f_to_effect", "ncp_interval",
           "omega_squared"]

EFFECT_COLUMNS = ["term", "estimate", "conf_low", "conf_high", "num_df", "den_df"]


def _ncp_bound(f: float, df1: float, df2: float, prob: float) -> float:
    """λ ≥ 0 with P(F(df1, df2, λ) ≤ f) = prob (0 when no positive root exists)."""
    def g(lam: float) -> float:
        return stats.ncf.cdf(f, df1, df2, lam) - prob if lam > 0 else stats.f.cdf(
            f, df1, df2) - prob

    if g(0.0) <= 0:
        return 0.0
    hi = max(10.0, 2.0 * f * df1)
    while g(hi) > 0:
        hi *= 2.0
        if hi > 1e9:
            return np.inf
    return float(optimize.brentq(g, 0.0, hi, xtol=1e-12, rtol=1e-12))


def ncp_interval(f: float, df1: float, df2: float, level: float) -> tuple[float, float]:
    """effectsize's ``.get_ncp_F``: the noncentrality interval of an observed F."""
    if not (np.isfinite(f) and np.isfinite(df1) and np.isfinite(df2)):
        return np.nan, np.nan
    alpha = 1.0 - level
    lo_p, hi_p = alpha / 2.0, 1.0 - alpha / 2.0
    lo = _ncp_bound(f, df1, df2, hi_p)
    hi = _ncp_bound(f, df1, df2, lo_p)
    if f <= stats.f.ppf(lo_p, df1, df2):
        hi = 0.0
    if f <= stats.f.ppf(hi_p, df1, df2):
        lo = 0.0
    return lo, hi


def f_to_effect(F: np.ndarray, df1: np.ndarray, df2: np.ndarray, es: str = "eta2",
                ci: float | None = 0.95, alternative: str = "greater") -> pd.DataFrame:
    """Effect sizes and intervals from F statistics (effectsize's ``F_to_*``).

    Parameters
    ----------
    F, df1, df2 : array-like
        F values, numerator and denominator df.
    es : {"eta2", "omega2", "epsilon2", "f2"}
    ci : float or None
        Confidence level; None for no interval.
    alternative : {"two-sided", "greater", "less"}
        "greater" (effectsize's default): one-sided interval [low, 1] (Inf for f²).

    Returns
    -------
    pandas.DataFrame
        ``estimate``, ``conf_low``, ``conf_high``.
    """
    F, df1, df2 = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (F, df1, df2))
    alt = alternative.replace(".", "-").lower()
    if alt not in ("two-sided", "greater", "less"):
        raise ValueError("alternative must be 'two-sided', 'greater' or 'less'")
    eta = F * df1 / (F * df1 + df2)
    if es == "eta2":
        est = eta
    elif es == "omega2":
        est = np.maximum(0.0, (F - 1.0) * df1 / (F * df1 + df2 + 1.0))
    elif es == "epsilon2":
        est = np.maximum(0.0, (F - 1.0) * df1 / (F * df1 + df2))
    elif es == "f2":
        est = eta / (1.0 - eta)
    else:
        raise ValueError("es must be 'eta2', 'omega2', 'epsilon2' or 'f2'")
    out = pd.DataFrame({"estimate": est})
    if ci is None:
        out["conf_low"] = np.nan
        out["conf_high"] = np.nan
        return out
    level = ci if alt == "two-sided" else 2.0 * ci - 1.0
    # effectsize inverts the F implied by the index's own estimate (F itself for η² and f²)
    base = eta if es == "f2" else est
    with np.errstate(divide="ignore", invalid="ignore"):
        f_ci = np.maximum(0.0, (base / df1) / ((1.0 - base) / df2))
    lows, highs = [], []
    for f, a, b in zip(f_ci, df1, df2, strict=True):
        lo, hi = ncp_interval(float(f), float(a), float(b), level)
        lows.append(lo / (lo + b))
        highs.append(hi / (hi + b))
    lo, hi = np.array(lows), np.array(highs)
    if alt == "greater":
        hi = np.ones_like(hi)
    elif alt == "less":
        lo = np.zeros_like(lo)
    if es == "f2":
        with np.errstate(divide="ignore"):
            lo, hi = lo / (1.0 - lo), hi / (1.0 - hi)
    out["conf_low"], out["conf_high"] = lo, hi
    return out


def _effect_table(fit: LmerFit, es: str, partial: bool, ci: float | None, alternative: str,
                  type: int | str, ddf: str) -> pd.DataFrame:
    from crossed.inference.anova import anova

    if not partial:
        warn("only partial effect sizes are available for mixed models (as in "
             "effectsize); returning partial values", UserWarning)
    if ci is not None:
        from crossed._conventions import check_fraction

        ci = check_fraction("ci", ci)
    tab = anova(fit, type=type, ddf=ddf)
    res = f_to_effect(tab["statistic"], tab["num_df"], tab["den_df"], es=es, ci=ci,
                      alternative=alternative)
    out = pd.concat([tab[["term"]], res], axis=1)
    out["num_df"], out["den_df"] = tab["num_df"].to_numpy(), tab["den_df"].to_numpy()
    out = out[EFFECT_COLUMNS]
    out.attrs.update(effect=f"{es}_partial", conf_level=ci, alternative=alternative,
                     anova_type=str(type), ddf=ddf)
    if ci is not None:  # effectsize's note below a one-sided interval
        alt = alternative.replace(".", "-").lower()
        bound = {"greater": "upper", "less": "lower"}.get(alt)
        if bound is not None:
            fixed = "0.00" if alt == "less" else ("Inf" if es == "f2" else "1.00")
            out.attrs["messages"] = [f"One-sided CIs: {bound} bound fixed at [{fixed}]."]
    return out


def eta_squared(fit: LmerFit, partial: bool = True, ci: float | None = 0.95,
                alternative: str = "greater", type: int | str = 3,
                ddf: str = "satterthwaite") -> pd.DataFrame:
    """Partial η² of each fixed term from the ANOVA F tests (effectsize's ``F_to_eta2``).

    Parameters
    ----------
    fit : LmerFit
    partial : bool
        Only partial η² is defined for mixed models (effectsize does the same); False
        warns and returns partial values.
    ci : float or None
        Confidence level of the noncentral-F interval.
    alternative : {"greater", "two-sided", "less"}
        effectsize's default, ``"greater"``: the one-sided interval [low, 1] (printed with
        effectsize's note "One-sided CIs: upper bound fixed at [1.00]."); ``"two-sided"``:
        the interval with α/2 in each tail.
    type, ddf
        The ANOVA the F tests come from (lmerTest's Type III, Satterthwaite by default).

    Returns
    -------
    pandas.DataFrame
        ``term``, ``estimate`` (partial η²), ``conf_low``, ``conf_high`` (1 for the
        default one-sided interval), ``num_df``, ``den_df``; ``attrs``: ``effect``,
        ``conf_level``, ``alternative``. Validated against effectsize 0.8.3 ``F_to_eta2``
        on lmerTest's Type III table (two- and one-sided) and ``eta_squared(m, partial =
        TRUE)`` with its defaults.
    """
    return _effect_table(fit, "eta2", partial, ci, alternative, type, ddf)


def omega_squared(fit: LmerFit, partial: bool = True, ci: float | None = 0.95,
                  alternative: str = "greater", type: int | str = 3,
                  ddf: str = "satterthwaite") -> pd.DataFrame:
    """Partial ω² of each fixed term (effectsize's ``F_to_omega2``; its default, a one-sided
    interval [low, 1]); see :func:`eta_squared`."""
    return _effect_table(fit, "omega2", partial, ci, alternative, type, ddf)


def cohens_f2(fit: LmerFit, partial: bool = True, ci: float | None = 0.95,
              alternative: str = "greater", type: int | str = 3,
              ddf: str = "satterthwaite") -> pd.DataFrame:
    """Cohen's f² = η²/(1 − η²) of each fixed term (effectsize's ``F_to_f2``; its default,
    a one-sided interval [low, Inf)); see :func:`eta_squared`."""
    return _effect_table(fit, "f2", partial, ci, alternative, type, ddf)
