"""Keyword conventions shared by every layer: random seeds and progress bars.

- ``seed=`` is always the random seed (an int, a numpy ``SeedSequence`` or ``Generator``,
  or None); :func:`as_generator` turns it into a ``Generator``.
- ``seed_col=`` is always a column of training seeds in a table.
- ``progress=`` switches progress bars (None: on only in a terminal or a Jupyter kernel;
  :func:`show_progress`).

Old spellings (``random_state=``, ``progress_bar=``, a column name given to ``seed=``) fail
with a ``TypeError`` that names the new keyword: see :func:`renamed_keywords`.
"""

from __future__ import annotations

import functools
import numbers
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["SeedLike", "as_generator", "check_count", "check_fraction", "check_seed",
           "renamed_keywords", "show_progress"]

SeedLike = int | np.random.Generator | np.random.SeedSequence | None

F = TypeVar("F", bound=Callable[..., Any])

_WHAT = {"seed": "the random seed", "seed_col": "the column of seeds",
         "progress": "progress bars on/off"}


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int, or a ValueError naming the argument (e.g. ``nsim=0``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a float strictly between 0 and 1 (a confidence level, ``alpha``), or a
    ValueError naming the argument (R's ``confint`` would return NaN or a zero-width
    interval)."""
    if (isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real)
            or not 0.0 < float(value) < 1.0):
        raise ValueError(f"{name} must be a number between 0 and 1 (e.g. 0.95), got "
                         f"{value!r}")
    return float(value)


def check_seed(seed: object) -> None:
    """Refuse what is not a random seed, naming ``seed=``: a whole number >= 0, a numpy
    SeedSequence or Generator, or None (fresh entropy). Booleans, floats, text and negative
    numbers are refused (numpy's own message names no argument)."""
    if seed is None or isinstance(seed, np.random.SeedSequence | np.random.Generator):
        return
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed= must be a whole number >= 0, a numpy Generator or "
                        f"SeedSequence, or None; got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed= must be a whole number >= 0, got {seed!r}")


def as_generator(seed: SeedLike) -> np.random.Generator:
    """A numpy Generator from an int, a SeedSequence, a Generator (used as is) or None."""
    check_seed(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a progress bar: ``None`` means only on an interactive terminal or
    in a Jupyter kernel (never in logs, pipes or CI)."""
    if progress is not None:
        return bool(progress)
    if "ipykernel" in sys.modules:
        try:
            from IPython import get_ipython

            if get_ipython() is not None:
                return True
        except ImportError:
            pass
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def renamed_keywords(seed_is_random: bool = False, **renamed: str) -> Callable[[F], F]:
    """Decorator: calls with an old keyword spelling raise a TypeError naming the new one.

    Parameters
    ----------
    seed_is_random : bool
        The function's ``seed=`` is the random seed: a string given to it (a column name,
        the old meaning) raises a TypeError pointing to ``seed_col=``.
    **renamed : str
        Old keyword -> new keyword, e.g. ``random_state="seed"``.
    """
    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renamed.items():
                if old in kwargs:
                    raise TypeError(f"{func.__name__}: {old}= is now {new}= "
                                    f"({_WHAT.get(new, new)})")
            if seed_is_random and isinstance(kwargs.get("seed"), str):
                raise TypeError(f"{func.__name__}: seed= is the random seed; name the column "
                                f"of seeds with seed_col={kwargs['seed']!r}")
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
