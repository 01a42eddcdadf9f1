"""Engines: one fitting back end per module, all returning :class:`crossed.fit.LmerFit`.

Engines are chosen by name and never swapped silently.
"""

from __future__ import annotations

from crossed.design import Design
from crossed.engines.native import LmerControl, fit_native
from crossed.fit import LmerFit

AVAILABLE = ("native",)
PLANNED = ("statsmodels", "lme4")


def fit_with(engine: str, design: Design, reml: bool, control: LmerControl | None,
             data_name: str = "data") -> LmerFit:
    """Fit ``design`` with the named engine."""
    if engine == "native":
        return fit_native(design, reml=reml, control=control, data_name=data_name)
    if engine in PLANNED:
        raise NotImplementedError(
            f"engine {engine!r} is not available in this version of crossed; "
            "use engine='native'"
        )
    raise ValueError(f"unknown engine {engine!r}; available: {', '.join(AVAILABLE)}")
