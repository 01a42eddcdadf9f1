"""The fixed-effects table: estimates, SEs, t tests and Wald intervals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from crossed._conventions import check_fraction
from crossed.inference.ddf import contrast_t, normalise_ddf

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["coef_table", "contrast_tests"]


def contrast_tests(fit: LmerFit, L: np.ndarray, ddf: str = "satterthwaite",
                   level: float = 0.95) -> pd.DataFrame:
    """t tests of the rows of ``L @ beta`` with the chosen denominator df.

    Returns the columns ``estimate, std_error, df, statistic, p_value, conf_low, conf_high``.
    """
    method = normalise_ddf(ddf)
    level = check_fraction("level", level)
    est, se, df = contrast_t(fit, L, method)
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


def r_coefficients(table: pd.DataFrame, test: str = "t") -> pd.DataFrame:
    """A fixed-effects table with R's names: what ``coef(summary(fit))`` holds.

    Parameters
    ----------
    table : pandas.DataFrame
        A table of :func:`coef_table` (LMM) or
        :func:`crossed.inference.glmm_wald.glmm_coef_table` (GLMM).
    test : {"t", "z"}
        The statistic's name: ``"t"`` for an LMM, ``"z"`` for a GLMM's Wald z tests.

    Returns
    -------
    pandas.DataFrame
        Indexed by the terms (R's row names, index name None), with R's columns:
        ``Estimate``, ``Std. Error``, then for an LMM with denominator df lmerTest's ``df``,
        ``t value``, ``Pr(>|t|)``; for an LMM without them (``ddf="none"``) lme4's
        ``Estimate``, ``Std. Error``, ``t value`` only; for a GLMM ``z value``,
        ``Pr(>|z|)``. No intervals (R's ``confint`` gives those). Checked against the
        column names of ``coef(summary(lmerTest::lmer(...)))`` (lmerTest 3.1-3) and
        ``coef(summary(lme4::glmer(...)))`` (lme4 1.1-31) in tests/fit/test_table_conventions.py.
    """
    if test not in ("t", "z"):
        raise ValueError(f"test must be 't' or 'z', not {test!r}")
    missing = [c for c in ("term", "estimate", "std_error", "statistic") if c not in table]
    if missing:
        raise ValueError(f"not a fixed-effects table: no column {missing[0]!r}")
    cols = {"estimate": "Estimate", "std_error": "Std. Error"}
    with_p = "p_value" in table.columns
    if test == "t":
        with_df = "df" in table.columns and bool(np.all(np.isfinite(table["df"])))
        with_p = with_p and with_df
        if with_df:
            cols["df"] = "df"
    cols["statistic"] = f"{test} value"
    if with_p:
        cols["p_value"] = f"Pr(>|{test}|)"
    out = pd.DataFrame({r: table[c].to_numpy() for c, r in cols.items()},
                       index=pd.Index(table["term"].astype(str).to_list()))
    return out
