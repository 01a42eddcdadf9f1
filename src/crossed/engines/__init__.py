"""Engines: one fitting back end per module, each returning the model core's result
(:class:`~crossed.model.result.LmerResult`, :class:`~crossed.model.glmm.result.GlmerResult`).

Engines are chosen by name and never swapped silently. Each follows the
:class:`~crossed.engines.registry.Engine` protocol (``name``, ``supports(design)``,
``fit(design, reml, control)``) and is registered here, one line each:

* ``"native"`` (default): crossed's BOBYQA (or L-BFGS-B, Nelder–Mead: ``LmerControl.optimizer``)
  over the model core's profiled criterion;
* ``"statsmodels"``: statsmodels' ``MixedLM`` (a core dependency), translated from the
  ModelSpec; refuses (:class:`UnsupportedModelError`) what ``MixedLM`` cannot express;
* ``"lme4"``: R's lme4 through rpy2 (``pip install crossed[r]`` and R with lme4); raises
  :class:`EngineUnavailableError` naming what to install when R or a package is missing.
  ``"pymer4"`` selects it too (refits of a ``from_pymer4`` fit: lme4 is what pymer4 ran).
"""

from __future__ import annotations

from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
from crossed.engines.registry import (
    Engine,
    available,
    fit_glmm_with,
    fit_with,
    get_engine,
    register,
)

register("native", "crossed.engines.native.engine:ENGINE")
register("statsmodels", "crossed.engines.statsmodels:ENGINE")
register("lme4", "crossed.engines.lme4_engine:ENGINE", aliases=("pymer4",))

AVAILABLE = available()

__all__ = ["AVAILABLE", "Engine", "EngineUnavailableError", "UnsupportedModelError",
           "available", "fit_glmm_with", "fit_with", "get_engine", "register"]
