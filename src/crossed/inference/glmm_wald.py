"""Wald z tests of a GLMM's fixed effects (R's ``summary(glmer fit)$coefficients``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from crossed.model.glmm.result import GlmerResult as GlmerFit

__all__ = ["glmm_coef_table"]


def glmm_coef_table(fit: GlmerFit, level: float = 0.95) -> pd.DataFrame:
    """Fixed effects with Wald z tests and Wald intervals.

    Returns
    -------
    pandas.DataFrame
        Indexed by lme4's coefficient names: ``Estimate``, ``Std. Error`` (√diag of
        ``vcov``: lme4's Hessian-based covariance), ``z value``, ``Pr(>|z|)`` (two-sided
        normal), ``lower``/``upper`` (Wald interval at ``level``, R's
        ``confint(fit, method="Wald")``). Validated against lme4 1.1-31's summary.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    se = np.sqrt(np.maximum(np.diag(fit.vcov_beta), 0.0))
    z = fit.beta / se
    q = stats.norm.ppf(0.5 + level / 2)
    return pd.DataFrame({"Estimate": fit.beta, "Std. Error": se, "z value": z,
                         "Pr(>|z|)": 2 * stats.norm.sf(np.abs(z)),
                         "lower": fit.beta - q * se, "upper": fit.beta + q * se},
                        index=list(fit.fixef_names))
