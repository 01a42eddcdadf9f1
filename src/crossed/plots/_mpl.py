"""The lazy matplotlib import shared by the figure modules."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["checked_table", "literal_labels", "literal_text", "plt", "readable_ticks"]

_F = TypeVar("_F", bound=Callable[..., Any])

# while a figure is built: every text is drawn as written (no mathtext, no LaTeX)
_LITERAL_RC = {"text.parse_math": False, "text.usetex": False}


def plt():
    """``matplotlib.pyplot``, with a clear error when matplotlib is not installed."""
    try:
        import matplotlib.pyplot as pyplot
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install crossed[plots]") from exc
    return pyplot


def readable_ticks(fig, wrap: int = 18, chars_per_inch: float = 11.0) -> None:
    """Keep the category labels of every x axis of ``fig`` from overlapping: labels longer
    than ``wrap`` characters are wrapped onto several lines, and when the labels still need
    more width than the axis has they are rotated (45°, anchored at their right end; 90°
    when even that does not fit)."""
    import textwrap

    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        if not labels or not any(labels):
            continue
        rotation = ax.get_xticklabels()[0].get_rotation()
        if rotation:  # already rotated by the figure's code
            continue
        wrapped = ["\n".join(textwrap.wrap(s, wrap, break_long_words=True)) or s
                   for s in labels]
        widest = max(max((len(p) for p in s.split("\n")), default=0) for s in wrapped)
        width_in = ax.get_position().width * fig.get_size_inches()[0]
        per_label = width_in * chars_per_inch / max(len(labels), 1)
        ticks = ax.get_xticks()
        if len(ticks) != len(wrapped):
            continue
        ax.set_xticks(ticks)
        if widest <= per_label:
            ax.set_xticklabels(wrapped)
        elif max(len(s) for s in labels) * 0.7 <= per_label * 2.5:
            ax.set_xticklabels(wrapped, rotation=45, ha="right", rotation_mode="anchor")
        else:
            ax.set_xticklabels(labels, rotation=90)


def _labels_are_text(axis) -> bool:
    """Whether an axis's tick labels are strings given by the data or the code (categories,
    fixed labels), rather than numbers matplotlib's own formatters write (possibly as
    mathtext: a log axis's ``$\\mathdefault{10^{2}}$``)."""
    from matplotlib.ticker import LogFormatter, ScalarFormatter

    return not isinstance(axis.get_major_formatter(), ScalarFormatter | LogFormatter)


def literal_text(fig, keep: frozenset[int] | set[int] = frozenset()) -> None:
    """Draw every text of ``fig`` literally: level names and column names such as
    ``$\\frac{$``, ``a_b^c`` or ``C:\\data`` are not parsed as mathtext or LaTeX (which
    fails, or shows something else). Tick labels that matplotlib formats from numbers keep
    the rcParams' behaviour (a log axis's ``10^2`` is mathtext); texts whose ``id`` is in
    ``keep`` (the user's own, on other axes of a figure a function was given axes of) are
    left as they are."""
    import matplotlib as mpl
    from matplotlib.text import Text

    ticks: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            literal = _labels_are_text(axis)
            major = axis.get_major_ticks(len(axis.get_majorticklocs()))
            minor = axis.get_minor_ticks(len(axis.get_minorticklocs()))
            for tick in (*major, *minor):
                for label in (tick.label1, tick.label2):
                    ticks.add(id(label))
                    label.set_parse_math(not literal and mpl.rcParams["text.parse_math"])
                    label.set_usetex(not literal and mpl.rcParams["text.usetex"])
    for text in fig.findobj(Text):
        if id(text) not in ticks and id(text) not in keep:
            text.set_parse_math(False)
            text.set_usetex(False)


def _given_axes(args: tuple, kwargs: dict) -> list[Any]:
    """The axes a figure function was given (``ax=``, ``axes=``, a list or array of them)."""
    import numpy as np
    from matplotlib.axes import Axes

    found: list[Any] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, list | tuple):
            items = value
        elif isinstance(value, np.ndarray) and value.dtype.kind == "O":
            items = value.flat  # (plt.subplots' array of axes)
        else:
            items = [value]
        for item in items:
            if isinstance(item, Axes) and item not in found:
                found.append(item)
    return found


def literal_labels(function: _F) -> _F:
    """A figure function whose texts are all drawn literally (:func:`literal_text`): it
    runs with mathtext and LaTeX off (its own layout draws the texts), and the figure (or
    the axes' figure) it returns keeps them off; texts on other axes of a figure whose
    axes it was given are the user's and keep theirs."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib as mpl
        from matplotlib.text import Text

        given = _given_axes(args, kwargs)
        # the axes handed over are the function's to draw on (their texts literal from
        # the start: its own layout draws them); other texts of their figures, the user's
        mine = {id(t) for ax in given for t in ax.findobj(Text)}
        keep = {id(t) for ax in given for t in ax.figure.findobj(Text)} - mine
        for ax in given:
            for t in ax.findobj(Text):
                t.set_parse_math(False)
                t.set_usetex(False)
        with mpl.rc_context(_LITERAL_RC):
            out = function(*args, **kwargs)
        fig = out if hasattr(out, "axes") and hasattr(out, "savefig") else getattr(
            out, "figure", None)
        if fig is not None:
            literal_text(fig, keep=keep)
        return out

    return wrapper  # type: ignore[return-value]


def checked_table(table: Any, columns: tuple[str, ...], who: str, what: str) -> Any:
    """``table`` as a DataFrame with ``columns``: an object with a ``table()`` method (an
    EMM object) gives its table; anything else, or missing columns, is refused naming
    ``who``'s argument and the columns.

    Parameters
    ----------
    table : DataFrame or object with ``table()``
    columns : tuple of str
        Columns the figure needs.
    who : str
        The figure function (for the message).
    what : str
        What the table should be, e.g. ``"fit.emmeans(...).table()"``.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame) and callable(getattr(table, "table", None)):
        table = table.table()
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{who}() takes a table ({what}), got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{who}(): the table has no column {', '.join(map(repr, missing))} "
                         f"(it should be {what}; its columns: "
                         f"{', '.join(map(str, table.columns))})")
    return table
