"""Residual checks of a fit: residuals against fitted values, and a normal Q-Q plot."""

from __future__ import annotations

import numpy as np
from scipy import stats

from crossed.plots._mpl import literal_labels, plt

__all__ = ["residual_plots"]


@literal_labels
def residual_plots(fit, axes=None):
    """Two panels: conditional residuals against fitted values, and their normal Q-Q plot.

    For a GLMM (:class:`~crossed.GlmerFit`) raw residuals of a binary or count response
    carry no normal shape to check: the panels are DHARMa's instead (QQ plot of the
    simulated, randomised quantile residuals against Uniform(0, 1), and those residuals
    against the rank-transformed predictions), from ``fit.check(seed=0)`` on at most
    10,000 rows.

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    axes : pair of matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from crossed.simulate.response import is_glmm

    if is_glmm(fit):
        from crossed.plots.simulate import plot_residual_diagnostics
        from crossed.simulate.diagnostics import check

        return plot_residual_diagnostics(check(fit, seed=0, max_rows=10_000), axes=axes)
    pyplot = plt()
    if axes is None:
        fig, axes = pyplot.subplots(1, 2, figsize=(8.5, 3.4))
    else:
        fig = axes[0].figure
    r = fit.residuals(type="pearson")  # (× √w with prior weights: N(0, σ²) each)
    f = fit.fitted()
    a, b = axes
    a.scatter(f, r, s=10, alpha=0.6)
    a.axhline(0.0, color="grey", lw=0.8)
    a.set_xlabel("fitted value")
    a.set_ylabel("residual")
    a.set_title("Residuals vs fitted")
    std = r / fit.sigma if fit.sigma > 0 else r
    theo = stats.norm.ppf((np.arange(1, len(std) + 1) - 0.5) / len(std))
    b.scatter(theo, np.sort(std), s=10, alpha=0.6)
    lim = [min(theo.min(), std.min()), max(theo.max(), std.max())]
    b.plot(lim, lim, color="grey", lw=0.8)
    b.set_xlabel("normal quantile")
    b.set_ylabel("residual / sigma")
    b.set_title("Normal Q-Q")
    fig.tight_layout()
    return fig
