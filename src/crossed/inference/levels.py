"""Per-level coefficients (lme4's ``coef()``): fixed effects plus conditional modes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["coef_levels"]


def coef_levels(fit: LmerFit) -> dict[str, pd.DataFrame]:
    """The coefficients of every level of every grouping factor (lme4's ``coef(fit)``).

    Returns
    -------
    dict of str to pandas.DataFrame
        One table per grouping factor: its levels in a first column named after the factor
        (lme4's row names; a RangeIndex, as every result table), then one column per fixed
        effect in ``fixef`` order: the fixed effect plus the level's conditional mode for
        the columns that also have a random effect of that factor (the others are the fixed
        effect alone, as in lme4). Validated against lme4 1.1-31.

    Raises
    ------
    ValueError
        A random-effect column that is not a fixed effect (lme4: "unable to align random
        and fixed effects").
    """
    fe = fit.fixef
    re = fit.ranef()
    out: dict[str, pd.DataFrame] = {}
    for group, sub in re.groupby("group", sort=False):
        wide = sub.pivot(index="level", columns="term", values="estimate")
        levels = list(dict.fromkeys(sub["level"]))
        wide = wide.loc[levels]
        missing = [c for c in wide.columns if c not in fe.index]
        if missing:
            raise ValueError(f"coef(): the random effect(s) {', '.join(missing)} of {group!r} "
                             "have no fixed effect to add to (lme4: unable to align random "
                             "and fixed effects); use ranef() and fixef")
        tab = pd.DataFrame({name: float(fe[name]) for name in fe.index},
                           index=pd.Index(levels, name=str(group)))
        for c in wide.columns:
            tab[c] = tab[c] + wide[c].to_numpy(dtype=float)
        out[str(group)] = tab.reset_index()
    return out
