"""The figure functions refuse what they cannot draw with a message naming the argument
(tests of crossed.plots.emmeans, .ranef and .design; the drawing itself: test_mpl.py and
tests/simulate/test_plots.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")

import crossed as cx  # noqa: E402
from crossed.plots.design import interaction_plot  # noqa: E402
from crossed.plots.emmeans import plot_emmeans  # noqa: E402
from crossed.plots.ranef import caterpillar  # noqa: E402


def _fit(groups: int = 8):
    rng = np.random.default_rng(1)
    d = pd.DataFrame({"f": np.resize(["a", "b"], 16 * groups),
                      "g": np.repeat([f"g{i}" for i in range(groups)], 16)})
    d["y"] = rng.normal(size=len(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("y ~ f + (1 | g)", d), d


def _close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_plot_emmeans_takes_the_emm_object_and_names_missing_columns():
    fit, _ = _fit()
    _close(plot_emmeans(fit.emmeans("f")))  # before: AttributeError (no .columns)
    with pytest.raises(ValueError, match="no column 'estimate', 'conf_low', 'conf_high'"):
        plot_emmeans(pd.DataFrame({"a": [1.0]}))  # before: KeyError: 'estimate'
    with pytest.raises(TypeError, match="plot_emmeans\\(\\) takes a table"):
        plot_emmeans([1, 2])


def test_plot_emmeans_draws_an_emtrends_table_by_its_trend_column():
    fit, d = _fit()
    d["x"] = np.tile(np.arange(16.0), len(d) // 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trends = cx.lmer("y ~ f * x + (1 | g)", d).emtrends("f", var="x")
    tab = trends.table()
    assert "x.trend" in tab.columns and "estimate" not in tab.columns
    fig = plot_emmeans(trends)  # before: ValueError: the table has no column 'estimate'
    points = fig.axes[0].containers[0].lines[0].get_xdata()
    np.testing.assert_allclose(np.asarray(points, dtype=float), tab["x.trend"])
    _close(fig)


def test_caterpillar_takes_a_fit_and_names_the_groups_it_has():
    fit, _ = _fit()
    _close(caterpillar(fit, "g"))  # before: TypeError ('LmerFit' object is not subscriptable)
    with pytest.raises(ValueError, match=r"no conditional modes for 'zz'.*g / \(Intercept\)"):
        caterpillar(fit.ranef(), "zz")


def test_caterpillar_says_when_it_leaves_levels_out():
    fit, _ = _fit(groups=12)
    fig = caterpillar(fit.ranef(), "g", max_levels=6)
    assert "the 3 lowest and 3 highest of 12 levels" in fig.axes[0].get_title()
    _close(fig)


def test_interaction_plot_names_a_missing_or_non_numeric_column():
    _, d = _fit()
    with pytest.raises(ValueError, match="x='zz' is not a column"):  # before: KeyError
        interaction_plot(d, "y", "zz")
    with pytest.raises(ValueError, match="the response 'f' must be numeric"):
        interaction_plot(d, "f", "g")  # before: pandas' TypeError on mean of strings
    with pytest.raises(TypeError, match="takes a pandas DataFrame"):
        interaction_plot(d.to_dict("list"), "y", "f")
