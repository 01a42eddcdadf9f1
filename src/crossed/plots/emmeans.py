"""Estimated marginal means with their confidence intervals (computed elsewhere)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crossed.inference.emmeans import estimate_column
from crossed.plots._mpl import checked_table, literal_labels, plt

__all__ = ["plot_emmeans"]


@literal_labels
def plot_emmeans(table: pd.DataFrame, factor: str | None = None, by: str | None = None,
                 ax=None, label: str = "EMM"):
    """Points and interval bars of an EMM table (``fit.emmeans(...).table()``).

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``estimate`` (or ``response``, a GLMM's ``prob``/``rate``, or emtrends'
        ``<var>.trend``),
        ``conf_low``, ``conf_high`` and the key columns (an EMM object is taken as its
        ``table()``).
    factor : str, optional
        Key column on the vertical axis (default: the first key column).
    by : str, optional
        Key column whose levels are drawn in different colours.
    ax : matplotlib Axes, optional
    label : str
        Horizontal-axis label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(table, pd.DataFrame) and callable(getattr(table, "table", None)):
        table = table.table()
    # the estimate's column: an EMM, a back-transformed EMM (``response``, a GLMM's
    # ``prob``/``rate``) or a trend (emtrends' ``<var>.trend``)
    est = (estimate_column(table) if isinstance(table, pd.DataFrame) else "estimate")
    table = checked_table(table, (est, "conf_low", "conf_high"), "plot_emmeans",
                          "fit.emmeans(...).table()")
    pyplot = plt()
    keys = [c for c in table.columns
            if c not in (est, "std_error", "df", "conf_low", "conf_high", "statistic",
                         "p_value", "note")]
    factor = factor or keys[0]
    if ax is None:
        _, ax = pyplot.subplots(figsize=(5.5, 0.45 * len(table) + 1.4))
    groups = [(None, table)] if by is None else list(table.groupby(by, sort=False))
    ticks, labels = [], []
    pos = 0
    for name, g in groups:
        y = pos + np.arange(len(g))
        ax.errorbar(g[est], y, xerr=[g[est] - g["conf_low"], g["conf_high"] - g[est]],
                    fmt="o", capsize=3, label=None if name is None else f"{by} = {name}")
        ticks += list(y)
        labels += [str(v) for v in g[factor]]
        pos += len(g) + 0.5
    ax.set_yticks(ticks, labels)
    ax.invert_yaxis()
    level = table.attrs.get("conf_level", 0.95)
    ax.set_xlabel(f"{label} with {level:.0%} interval")
    ax.set_ylabel(factor)
    if by is not None:
        ax.legend(fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    ax.figure.tight_layout()
    return ax.figure
