"""The lazy matplotlib import shared by the figure modules."""

from __future__ import annotations

__all__ = ["plt", "readable_ticks"]


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
