"""Refusals for consumers of a fit that do not handle prior weights or offsets.

lmer's ``weights=`` and ``offset=`` (``crossed.lmer``) change what several methods must
compute; a method that has not been validated with them against R calls
:func:`refuse_prior` so that it raises rather than returning a plausible wrong number.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PriorWeightsError", "has_prior", "refuse_prior"]


class PriorWeightsError(ValueError):
    """A method that does not support prior weights or an offset was given such a fit."""


def has_prior(obj: Any) -> tuple[bool, bool]:
    """Whether ``obj`` (a fit or a design) has prior weights and an offset."""
    design = getattr(obj, "design", obj)
    return (getattr(design, "weights", None) is not None,
            getattr(design, "offset", None) is not None)


def refuse_prior(obj: Any, what: str, weights: bool = True, offset: bool = True,
                 why: str = "") -> None:
    """Raise :class:`PriorWeightsError` naming ``what`` when ``obj`` has prior weights
    (``weights=True``) or an offset (``offset=True``)."""
    w, o = has_prior(obj)
    found = [name for name, flag, on in (("prior weights (weights=)", w, weights),
                                         ("an offset (offset= or offset(x))", o, offset))
             if flag and on]
    if found:
        raise PriorWeightsError(f"{what} does not support a fit with {' and '.join(found)}"
                                + (f": {why}" if why else "")
                                + "; fit without them to use it")
