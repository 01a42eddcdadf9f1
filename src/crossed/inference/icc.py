"""Intraclass correlations as ``performance::icc`` (performance 0.10.2) computes them.

With the variance parts of Nakagawa's R² (:func:`crossed.inference.r2.variance_parts`:
σ²_f of the fixed predictions, σ²_r of all random terms, σ²_ε residual):

- adjusted ICC = σ²_r / (σ²_r + σ²_ε);
- conditional ICC = σ²_r / (σ²_f + σ²_r + σ²_ε);
- by group (random-intercept models only, as performance recommends): σ²_g / (Σ_g σ²_g + σ²_ε).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from crossed.inference.r2 import variance_parts

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["icc"]


def icc(fit: LmerFit, by_group: bool = False) -> pd.DataFrame:
    """Adjusted and conditional intraclass correlation (``performance::icc``).

    Parameters
    ----------
    fit : LmerFit
    by_group : bool
        One ICC per grouping factor (``icc(fit, by_group = TRUE)``): the share of each
        factor's intercept variance in the random plus residual variance. Refused for
        models with random slopes (performance warns that its by-group values are not
        accurate there).

    Returns
    -------
    pandas.DataFrame
        ``by_group=False``: one row, ``adjusted`` and ``conditional`` (see the module
        docstring). ``by_group=True``: ``group`` and ``icc``, one row per grouping factor.
        Validated against performance 0.10.2 on sleepstudy (random slopes) and Penicillin
        (crossed intercepts).
    """
    if not isinstance(by_group, bool):
        raise TypeError(f"by_group must be True or False, got {by_group!r}")
    if by_group:
        vc = fit.varcorr()
        rand = vc[vc["group"] != "Residual"]
        slopes = rand[(rand["term1"] != "(Intercept)") | rand["term2"].notna()]
        if len(slopes):
            raise ValueError("icc(by_group=True) needs a model with random intercepts only; "
                             f"this one has {', '.join(slopes['term1'] + ' | ' + slopes['group'])}")
        total = float(vc["variance_or_cov"].sum())
        out = rand.groupby("group", sort=False)["variance_or_cov"].sum() / total
        return pd.DataFrame({"group": out.index, "icc": out.to_numpy()})
    v = variance_parts(fit)
    return pd.DataFrame([{
        "adjusted": v["random"] / (v["random"] + v["residual"]),
        "conditional": v["random"] / (v["fixed"] + v["random"] + v["residual"]),
    }])
