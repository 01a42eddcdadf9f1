"""Engines: one fitting back end per module, all returning :class:`crossed.fit.LmerFit`.

Engines are chosen by name and never swapped silently:

* ``"native"`` (default): crossed's blocked-Cholesky PLS with BOBYQA;
* ``"statsmodels"``: statsmodels' ``MixedLM`` (a core dependency), translated from the
  ModelSpec; raises :class:`UnsupportedModelError` for what ``MixedLM`` cannot express;
* ``"lme4"``: R's lme4 through rpy2 (``pip install crossed[r]`` and R with lme4); raises
  :class:`EngineUnavailableError` naming what to install when R or a package is missing.
"""

from __future__ import annotations

from crossed.design import Design
from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
from crossed.engines.native import LmerControl, fit_native
from crossed.fit import LmerFit

AVAILABLE = ("native", "statsmodels", "lme4")

__all__ = ["AVAILABLE", "EngineUnavailableError", "UnsupportedModelError", "fit_with"]


def fit_with(engine: str, design: Design, reml: bool, control: LmerControl | None,
             data_name: str = "data") -> LmerFit:
    """Fit ``design`` with the named engine.

    Parameters
    ----------
    engine : {"native", "statsmodels", "lme4"}
    design : Design
    reml : bool
    control : LmerControl or None
        Optimiser settings of the native engine (None for the others).
    data_name : str

    Returns
    -------
    LmerFit
    """
    if engine == "native":
        return fit_native(design, reml=reml, control=control, data_name=data_name)
    if engine == "statsmodels":
        from crossed.engines.statsmodels import fit_statsmodels

        return fit_statsmodels(design, reml=reml, control=control, data_name=data_name)
    if engine in ("lme4", "pymer4"):  # refits of a from_pymer4 fit: lme4 is what pymer4 ran
        from crossed.engines.lme4 import fit_lme4

        return fit_lme4(design, reml=reml, control=control, data_name=data_name)
    raise ValueError(f"unknown engine {engine!r}; available: {', '.join(AVAILABLE)}")
