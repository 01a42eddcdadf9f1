"""Wald z tests of a GLMM's fixed effects (R's ``summary(glmer fit)$coefficients``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from crossed._conventions import check_fraction
from crossed.model.glmm.result import GlmerResult as GlmerFit

__all__ = ["glmm_coef_table"]


def glmm_coef_table(fit: GlmerFit, level: float = 0.95) -> pd.DataFrame:
    """Fixed effects with Wald z tests and Wald intervals.

    Returns
    -------
    pandas.DataFrame
        One row per fixed effect (a RangeIndex), the columns of the LMM's table
        (:func:`crossed.inference.coefs.coef_table`) without ``df``: ``term`` (lme4's
        coefficient name), ``estimate``, ``std_error`` (√diag of ``vcov``: lme4's
        Hessian-based covariance), ``statistic`` (z value), ``p_value`` (two-sided normal),
        ``conf_low``/``conf_high`` (Wald interval at ``level``, R's ``confint(fit,
        method="Wald")``; the level is in ``attrs["conf_level"]``). Validated against lme4
        1.1-31's ``summary()`` (tests/model/glmm/test_glmm_reference.py). R's names:
        :func:`crossed.inference.coefs.r_coefficients`.
    """
    level = check_fraction("level", level)
    se = np.sqrt(np.maximum(np.diag(fit.vcov_beta), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = fit.beta / se
    q = stats.norm.ppf(0.5 + level / 2)
    out = pd.DataFrame({"term": list(fit.fixef_names), "estimate": fit.beta,
                        "std_error": se, "statistic": z,
                        "p_value": 2 * stats.norm.sf(np.abs(z)),
                        "conf_low": fit.beta - q * se, "conf_high": fit.beta + q * se})
    out.attrs["conf_level"] = level
    return out
