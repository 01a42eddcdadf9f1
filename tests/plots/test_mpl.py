"""Every text a figure of crossed draws is literal (``crossed.plots._mpl.literal_text``):
names with ``$``, ``\\``, ``_``, ``^`` are neither mathtext nor LaTeX."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")

from crossed.plots.design import interaction_plot  # noqa: E402
from crossed.plots.emmeans import plot_emmeans  # noqa: E402
from crossed.plots.ranef import caterpillar  # noqa: E402

NAMES = ["$\\frac{$", "a_b^c", "C:\\data"]


def _texts(fig) -> list[str]:
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(Text)]


def _save(fig) -> None:
    fig.savefig(io.BytesIO(), format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_interaction_plot_draws_level_and_column_names_literally():
    d = pd.DataFrame({"$x_1$": NAMES * 4, "y^2": np.arange(12.0), "t": ["p", "$q"] * 6})
    fig = interaction_plot(d, "y^2", "$x_1$", trace="t")
    texts = _texts(fig)
    for name in [*NAMES, "$x_1$", "mean y^2", "$q"]:
        assert name in texts
    _save(fig)


def test_emmeans_and_caterpillar_plots_draw_names_literally():
    tab = pd.DataFrame({"f": NAMES, "estimate": [0.0, 1.0, 2.0], "conf_low": [-1.0, 0, 1],
                        "conf_high": [1.0, 2, 3]})
    fig = plot_emmeans(tab, "f")
    assert set(NAMES) <= set(_texts(fig))
    _save(fig)
    re_ = pd.DataFrame({"group": "g_1", "level": NAMES, "term": "(Intercept)",
                        "estimate": [0.1, -0.2, 0.3], "cond_sd": [0.1, 0.1, 0.1]})
    fig = caterpillar(re_, "g_1")
    assert set(NAMES) <= set(_texts(fig))
    _save(fig)


def test_literal_even_with_usetex_in_the_users_rc():
    tab = pd.DataFrame({"f": NAMES, "estimate": [0.0, 1.0, 2.0], "conf_low": [-1.0, 0, 1],
                        "conf_high": [1.0, 2, 3]})
    with mpl.rc_context({"text.usetex": True}):
        fig = plot_emmeans(tab, "f")
        from matplotlib.text import Text

        labels = [t for t in fig.findobj(Text) if t.get_text() in NAMES]
        assert labels and not any(t.get_usetex() or t.get_parse_math() for t in labels)
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_numeric_tick_labels_keep_mathtext():
    import matplotlib.pyplot as plt

    from crossed.plots._mpl import literal_text

    fig, ax = plt.subplots()
    ax.plot([1, 100, 10000], [1, 2, 3])
    ax.set_xscale("log")
    ax.set_title("$x$")
    literal_text(fig)
    assert not ax.title.get_parse_math()
    assert all(t.get_parse_math() for t in ax.get_xticklabels())
    _save(fig)


def test_texts_the_user_drew_on_the_given_axes_keep_their_mathtext():
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    a.set_title("$R^2$ by model")
    tab = pd.DataFrame({"f": NAMES, "estimate": [0.0, 1.0, 2.0], "conf_low": [-1.0, 0, 1],
                        "conf_high": [1.0, 2, 3]})
    plot_emmeans(tab, "f", ax=b)
    assert a.title.get_parse_math()            # the user's
    assert not b.yaxis.label.get_parse_math()  # crossed's: the factor's name
    _save(fig)
