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
