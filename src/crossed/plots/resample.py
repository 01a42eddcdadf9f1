"""Figures for the resampling analyses (matplotlib, imported lazily; nothing is computed here)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crossed.plots import _mpl

__all__ = ["plot_rank_distribution", "plot_tau_by_size"]


@_mpl.literal_labels
def plot_tau_by_size(result, ax=None, show_weighted: bool = True, level: float | None = None):
    """Kendall τ (mean and 5–95 % band over subsets) against subset size, one line per strategy.

    Parameters
    ----------
    result : EvalSizeResult
        From :func:`crossed.resample.eval_size`.
    ax : matplotlib Axes, optional
    show_weighted : bool
        Also draw the mean weighted τ (dashed).
    level : float, optional
        Horizontal line at this τ (default: the level used for ``min_size``).
    """
    plt = _mpl.plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    subs = result.subsamples
    for strategy, g in subs.groupby("strategy", sort=False):
        q = g.groupby("size")["kendall_tau"]
        sizes = np.asarray(sorted(g["size"].unique()), float)
        mean = q.mean().reindex(sizes).to_numpy()
        line, = ax.plot(sizes, mean, marker="o", label=f"{strategy} τ")
        if g.groupby("size").size().max() > 1:
            lo = q.quantile(0.05).reindex(sizes).to_numpy()
            hi = q.quantile(0.95).reindex(sizes).to_numpy()
            ax.fill_between(sizes, lo, hi, alpha=0.15, color=line.get_color())
        if show_weighted:
            wt = g.groupby("size")["weighted_tau"].mean().reindex(sizes).to_numpy()
            ax.plot(sizes, wt, ls="--", color=line.get_color(), alpha=0.7,
                    label=f"{strategy} weighted τ")
    lv = level if level is not None else (
        float(result.min_size["level"].iloc[0]) if len(result.min_size) else None)
    if lv is not None:
        ax.axhline(lv, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    all_sizes = np.asarray(sorted(subs["size"].unique()), float)
    ax.set_xticks(all_sizes, [f"{v:g}" for v in all_sizes])
    ax.minorticks_off()
    ax.set_xlabel(f"evaluation-set size ({result.unit})")
    ax.set_ylabel("Kendall τ with the full-set ranking")
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return ax


@_mpl.literal_labels
def plot_rank_distribution(ranks: pd.DataFrame, aggregate: str = "mean", tasks: str | None = None,
                           ax=None):
    """Stacked bars: share of resamples at each rank, one bar per system."""
    plt = _mpl.plt()
    d = ranks[ranks["aggregate"] == aggregate]
    if tasks is not None and "tasks" in d.columns:
        d = d[d["tasks"] == tasks]
    elif "tasks" in d.columns:
        d = d[d["tasks"] == d["tasks"].iloc[0]]
    m = d.pivot(index="system", columns="rank", values="share")
    m = m.reindex(d.drop_duplicates("system").sort_values("mean_rank")["system"])
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.4 * len(m) + 1.5))
    left = np.zeros(len(m))
    cmap = plt.get_cmap("viridis", m.shape[1])
    for k, col in enumerate(m.columns):
        ax.barh(m.index.astype(str), m[col].to_numpy(), left=left, color=cmap(k), label=str(col))
        left += m[col].to_numpy()
    ax.invert_yaxis()
    ax.set_xlabel("share of resamples")
    ax.legend(title="rank", fontsize="small", ncol=min(10, m.shape[1]), loc="lower center",
              bbox_to_anchor=(0.5, 1.0), frameon=False)
    return ax

