"""Interaction plot of a design: mean response per level of one factor, one line per level of
another, optionally one panel per level of a third (nothing is modelled here)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crossed.plots._mpl import literal_labels, plt

__all__ = ["interaction_plot"]


@literal_labels
def interaction_plot(data: pd.DataFrame, response: str, x: str, trace: str | None = None,
                     panel: str | None = None, error: str | None = "se", axes=None):
    """Mean of ``response`` by ``x`` (and ``trace`` lines, ``panel`` facets).

    Parameters
    ----------
    data : pandas.DataFrame
    response : str
        Numeric column to average.
    x : str
        Factor on the horizontal axis.
    trace : str, optional
        Factor drawn as separate lines.
    panel : str, optional
        Factor drawn in separate panels (shared y axis).
    error : {"se", None}
        Error bars of ±1 standard error of the cell mean.
    axes : sequence of matplotlib Axes, optional
        One per panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"interaction_plot() takes a pandas DataFrame, got "
                        f"{type(data).__name__}")
    for arg, col in (("response", response), ("x", x), ("trace", trace), ("panel", panel)):
        if col is not None and col not in data.columns:
            raise ValueError(f"interaction_plot(): {arg}={col!r} is not a column of the data")
    if not (pd.api.types.is_numeric_dtype(data[response])
            or pd.api.types.is_bool_dtype(data[response])):
        raise ValueError(f"interaction_plot(): the response {response!r} must be numeric "
                         f"(it holds {data[response].dtype} values)")
    pyplot = plt()
    panels = [None] if panel is None else sorted(data[panel].astype(str).unique())
    if axes is None:
        fig, axes = pyplot.subplots(1, len(panels), figsize=(3.2 * len(panels) + 1.5, 3.4),
                                    sharey=True, squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    xs = sorted(data[x].astype(str).unique())
    for ax, p in zip(axes, panels, strict=True):
        sub = data if p is None else data[data[panel].astype(str) == p]
        groups = [(None, sub)] if trace is None else \
            sorted(sub.groupby(sub[trace].astype(str)), key=lambda g: g[0])
        for k, (label, g) in enumerate(groups):
            stats = g.groupby(g[x].astype(str))[response].agg(["mean", "std", "count"])
            stats = stats.reindex(xs)
            pos = np.arange(len(xs)) + (k - (len(groups) - 1) / 2) * 0.04
            se = stats["std"] / np.sqrt(stats["count"]) if error == "se" else None
            ax.errorbar(pos, stats["mean"], yerr=se, marker="o", capsize=3,
                        label=None if label is None else str(label))
        ax.set_xticks(np.arange(len(xs)), xs)
        ax.set_xlabel(x)
        if p is not None:
            ax.set_title(f"{panel} = {p}")
    axes[0].set_ylabel(f"mean {response}")
    if trace is not None:
        axes[-1].legend(title=trace, fontsize="small", loc="best")
    fig.tight_layout()
    return fig
