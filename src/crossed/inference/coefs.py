"""The fixed-effects table: estimates, SEs, t tests and Wald intervals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

if TYPE_CHECKING:
    from crossed.fit import LmerFit

DDF_METHODS = ("satterthwaite", "none")


def normalise_ddf(ddf: str) -> str:
    """Canonical name of a denominator-df method (case and punctuation insensitive)."""
    key = str(ddf).lower().replace("_", "-").replace(" ", "-")
    aliases = {"satterthwaite": "satterthwaite", "none": "none", "asymptotic": "none",
               "kenward-roger": "kenward-roger", "kr": "kenward-roger"}
    if key not in aliases:
        raise ValueError(f"unknown ddf {ddf!r}; use 'satterthwaite', 'kenward-roger' or 'none'")
    return aliases[key]


def check_level(level: object, name: str = "level") -> float:
    """A confidence level strictly between 0 and 1 (``0.95``), else a ValueError naming
    the argument (R's ``confint`` would return NaN or a zero-width interval)."""
    if (isinstance(level, bool | np.bool_) or not isinstance(level, int | float | np.number)
            or not 0.0 < float(level) < 1.0):
        raise ValueError(f"{name} must be a number between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(level)


def contrast_tests(fit: LmerFit, L: np.ndarray, ddf: str = "satterthwaite",
                   level: float = 0.95) -> pd.DataFrame:
    """t tests of the rows of ``L @ beta`` with the chosen denominator df.

    Returns the columns ``estimate, std_error, df, statistic, p_value, conf_low, conf_high``.
    """
    method = normalise_ddf(ddf)
    level = check_level(level)
    L = np.atleast_2d(np.asarray(L, dtype=float))
    if method == "satterthwaite":
        from crossed.inference.satterthwaite import satterthwaite_t

        est, se, df = satterthwaite_t(fit, L)
    elif method == "none":
        est = L @ fit.beta
        se = np.sqrt(np.einsum("ij,jk,ik->i", L, fit.vcov_beta, L))
        df = np.full(len(est), np.inf)
    else:
        from crossed.inference import kenward_roger

        est, se, df = kenward_roger.kr_t(fit, L)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = est / se
    p = 2.0 * stats.t.sf(np.abs(t), df)
    q = stats.t.ppf(0.5 + level / 2.0, df)
    out = pd.DataFrame({"estimate": est, "std_error": se, "df": df, "statistic": t,
                        "p_value": p, "conf_low": est - q * se, "conf_high": est + q * se})
    out.attrs["conf_level"] = level
    out.attrs["ddf"] = method
    return out


def coef_table(fit: LmerFit, ddf: str = "satterthwaite", level: float = 0.95) -> pd.DataFrame:
    """Fixed-effects table (see :meth:`crossed.fit.LmerFit.coef_table`)."""
    p = len(fit.beta)
    tab = contrast_tests(fit, np.eye(p), ddf=ddf, level=level)
    tab.insert(0, "term", list(fit.fixef_names))
    return tab
