"""The lazy matplotlib import shared by the figure modules."""

from __future__ import annotations

__all__ = ["plt"]


def plt():
    """``matplotlib.pyplot``, with a clear error when matplotlib is not installed."""
    try:
        import matplotlib.pyplot as pyplot
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install crossed[plots]") from exc
    return pyplot
