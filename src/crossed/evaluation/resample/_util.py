"""Small shared helpers: random generators, progress bars, chunking."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from crossed._conventions import SeedLike, as_generator, show_progress

__all__ = ["CHUNK", "SeedLike", "as_generator", "chunks", "progress_iter", "z_value"]

#: resamples drawn per chunk; fixed so that a seed gives the same numbers whatever the size
CHUNK = 2000


def progress_iter(iterable: Iterable, total: int | None = None, desc: str = "",
                  enabled: bool | None = None) -> Iterator:
    """Wrap ``iterable`` in a tqdm bar when enabled and tqdm is installed."""
    if not show_progress(enabled):
        yield from iterable
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        yield from iterable
        return
    yield from tqdm(iterable, total=total, desc=desc, leave=False)


def chunks(n: int, size: int = CHUNK) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in pieces of ``size``."""
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def z_value(level: float) -> float:
    """Two-sided normal quantile for a confidence level (1.959964 for 0.95)."""
    from scipy.stats import norm

    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return float(norm.ppf(0.5 + level / 2))
