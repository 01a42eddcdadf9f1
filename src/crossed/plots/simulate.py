"""Figures of the simulation results (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from typing import Any

import numpy as np

from crossed.plots import _mpl

__all__ = ["METHOD_LABELS", "plot_ablation", "plot_bootstrap", "plot_power_curve",
           "plot_residual_diagnostics"]

METHOD_LABELS = {"lmm": "mixed model", "rm_anova": "repeated-measures ANOVA"}


@_mpl.literal_labels
def plot_ablation(result: Any, axes=None):
    """Detection rate (with Clopper–Pearson bars) and usable analyses against the fraction
    of data removed, one line per method. Returns the figure."""
    plt = _mpl.plt()
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    else:
        fig = axes[0].figure
    tab = result.summary()
    for method, g in tab.groupby("method", sort=False):
        label = METHOD_LABELS.get(method, method)
        x = g["fraction"].to_numpy()
        rate = g["rate"].to_numpy()
        err = np.vstack([rate - g["conf_low"].to_numpy(), g["conf_high"].to_numpy() - rate])
        axes[0].errorbar(x, rate, yerr=err, marker="o", capsize=3, label=label)
        axes[1].plot(x, g["n_ok"].to_numpy() / g["reps"].to_numpy(), marker="o", label=label)
    axes[0].set_xlabel(f"fraction of {result.unit} removed")
    axes[0].set_ylabel(f"detection rate (p < {result.alpha:g})")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set_title(f"test: {result.test}")
    axes[0].legend()
    axes[1].set_xlabel(f"fraction of {result.unit} removed")
    axes[1].set_ylabel("share of analyses possible")
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_title("fits that worked and tests that were estimable")
    fig.tight_layout()
    return fig


@_mpl.literal_labels
def plot_power_curve(curve: Any, ax=None, target: float | None = 0.8):
    """Power with Clopper–Pearson bars against the design dimension. Returns the figure."""
    plt = _mpl.plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    tab = curve.table
    x = tab["break"].to_numpy()
    p = tab["power"].to_numpy()
    err = np.vstack([p - tab["conf_low"].to_numpy(), tab["conf_high"].to_numpy() - p])
    ax.errorbar(x, p, yerr=err, marker="o", capsize=3)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(f"number of levels of {curve.along}" if not curve.along.startswith("rows")
                  else curve.along)
    ax.set_ylabel(f"power (alpha = {curve.alpha:g})")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(curve.test)
    fig.tight_layout()
    return fig


@_mpl.literal_labels
def plot_bootstrap(result: Any, terms: list[str] | None = None):
    """Histogram of the bootstrap replicates per term, estimate and interval marked."""
    plt = _mpl.plt()
    tab = result.intervals()
    if terms is not None:
        tab = tab[tab["term"].isin(terms)]
    k = len(tab)
    ncol = min(3, k)
    nrow = -(-k // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), squeeze=False)
    for ax, (_, row) in zip(axes.ravel(), tab.iterrows(), strict=False):
        t = result.replicates[row["term"]].to_numpy(dtype=float)
        ax.hist(t[np.isfinite(t)], bins=30, color="0.7")
        ax.axvline(row["estimate"], color="k")
        ax.axvline(row["conf_low"], color="C3", linestyle="--")
        ax.axvline(row["conf_high"], color="C3", linestyle="--")
        ax.set_title(str(row["term"]))
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


@_mpl.literal_labels
def plot_residual_diagnostics(diag: Any, axes=None):
    """DHARMa-style figure: QQ plot of scaled residuals against Uniform(0, 1) with the
    test results, and scaled residuals against rank-transformed predictions with binned
    0.25/0.5/0.75 quantiles (should be flat at those values). Returns the figure."""
    plt = _mpl.plt()
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    else:
        fig = axes[0].figure
    res = diag.residuals
    r = np.sort(res.scaled)
    n = len(r)
    expected = (np.arange(1, n + 1) - 0.5) / n
    axes[0].plot(expected, r, ".", markersize=3)
    axes[0].plot([0, 1], [0, 1], color="C3")
    axes[0].set_xlabel("expected")
    axes[0].set_ylabel("observed scaled residual")
    axes[0].set_title("QQ plot of scaled residuals")
    text = "\n".join(f"{t.test}: p = {t.p_value:.3g}" for t in diag.tests.itertuples())
    axes[0].text(0.03, 0.97, text, transform=axes[0].transAxes, va="top", fontsize=8)
    order = np.argsort(np.argsort(res.predicted, kind="stable"), kind="stable")
    x = order / max(n - 1, 1)
    axes[1].plot(x, res.scaled, ".", markersize=3, alpha=0.6)
    bins = np.linspace(0, 1, min(10, max(2, n // 10)) + 1)
    mids = 0.5 * (bins[1:] + bins[:-1])
    which = np.clip(np.digitize(x, bins) - 1, 0, len(mids) - 1)
    for q in (0.25, 0.5, 0.75):
        axes[1].axhline(q, color="0.6", linestyle=":", linewidth=1)
        vals = [np.quantile(res.scaled[which == b], q) if np.any(which == b) else np.nan
                for b in range(len(mids))]
        axes[1].plot(mids, vals, color="C3")
    axes[1].set_xlabel("predicted (rank transformed)")
    axes[1].set_ylabel("scaled residual")
    axes[1].set_ylim(0, 1)
    axes[1].set_title("residuals against predicted")
    fig.tight_layout()
    return fig
