"""Caterpillar plot of conditional modes (``fit.ranef()``) with conditional intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from crossed.plots._mpl import checked_table, literal_labels, plt

__all__ = ["caterpillar"]


@literal_labels
def caterpillar(ranef: pd.DataFrame, group: str, term: str = "(Intercept)",
                level: float = 0.95, max_levels: int = 60, ax=None):
    """Sorted conditional modes of one random term with ±z·cond_sd intervals.

    Parameters
    ----------
    ranef : pandas.DataFrame
        ``fit.ranef()`` (columns ``group``, ``level``, ``term``, ``estimate``, ``cond_sd``),
        or the fit itself.
    group : str
        Grouping factor to draw.
    term : str
        Column of the random term (default the intercept).
    level : float
        Coverage of the intervals (normal quantile times the conditional SD).
    max_levels : int
        Draw at most this many levels (the most extreme ones, which the title says) so that
        labels stay readable.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(ranef, pd.DataFrame) and callable(getattr(ranef, "ranef", None)):
        ranef = ranef.ranef()  # (a fit)
    ranef = checked_table(ranef, ("group", "level", "term", "estimate", "cond_sd"),
                          "caterpillar", "fit.ranef()")
    pyplot = plt()
    sub = ranef[(ranef["group"] == group) & (ranef["term"] == term)]
    if sub.empty:
        have = sorted({f"{g} / {t}" for g, t in zip(ranef["group"], ranef["term"],
                                                    strict=True)})
        raise ValueError(f"no conditional modes for {group!r} / {term!r} (group / term: "
                         f"{', '.join(have)})")
    sub = sub.sort_values("estimate")
    shown = ""
    if len(sub) > max_levels:
        half = max_levels // 2
        shown = (f"\n(the {half} lowest and {max_levels - half} highest of {len(sub)} "
                 "levels)")
        sub = pd.concat([sub.head(half), sub.tail(max_levels - half)])
    z = stats.norm.ppf(0.5 + level / 2)
    if ax is None:
        _, ax = pyplot.subplots(figsize=(5.5, min(0.22 * len(sub) + 1.2, 14)))
    y = np.arange(len(sub))
    ax.errorbar(sub["estimate"], y, xerr=z * sub["cond_sd"], fmt="o", ms=3, capsize=2)
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.set_yticks(y, [str(v) for v in sub["level"]], fontsize="small" if len(sub) > 20 else None)
    ax.set_xlabel(f"conditional mode ({level:.0%} interval)")
    ax.set_title(f"{term} | {group}{shown}")
    ax.figure.tight_layout()
    return ax.figure
