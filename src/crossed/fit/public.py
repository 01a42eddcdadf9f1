"""The model core's results as the public fit classes: what the engines return
(:class:`~crossed.model.result.LmerResult`, :class:`~crossed.model.glmm.result.GlmerResult`)
becomes :class:`~crossed.fit.LmerFit` / :class:`~crossed.fit.GlmerFit` here, for every path
that hands a fit to users (``cx.lmer``, ``cx.glmer``, ``cx.from_pymer4``, ``cx.specify``).
Refits keep the class of the fit they come from (:meth:`FitBase.like
<crossed.model.fitbase.FitBase.like>`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

import pandas as pd

from crossed.design import Design
from crossed.engines import registry
from crossed.engines.pymer4 import from_pymer4 as _from_pymer4
from crossed.fit.glmer import GlmerFit
from crossed.fit.lmer import LmerFit
from crossed.model.control import LmerControl
from crossed.model.glmm.result import GlmerResult
from crossed.model.result import LmerResult

__all__ = ["as_public", "fit_glmm_with", "fit_with", "from_pymer4", "specify"]


@overload
def as_public(result: LmerResult) -> LmerFit: ...
@overload
def as_public(result: GlmerResult) -> GlmerFit: ...
def as_public(result: LmerResult | GlmerResult) -> LmerFit | GlmerFit:
    """``result`` as the public fit class (the same fields and cache; no copy of arrays)."""
    if isinstance(result, GlmerResult):
        return GlmerFit.from_result(result)
    return LmerFit.from_result(result)


def fit_with(engine: str, design: Design, reml: bool, control: LmerControl | None,
             data_name: str = "data") -> LmerFit:
    """Fit ``design`` with the named engine, as an :class:`LmerFit`
    (:func:`crossed.engines.registry.fit_with`, whose arguments and errors these are)."""
    return as_public(registry.fit_with(engine, design, reml=reml, control=control,
                                       data_name=data_name))


def fit_glmm_with(engine: str, design: Design, family: Any = "binomial", nagq: int = 1,
                  control: Any = None, data_name: str = "data") -> GlmerFit:
    """Fit a GLMM ``design`` with the named engine, as a :class:`GlmerFit`
    (:func:`crossed.engines.registry.fit_glmm_with`, whose arguments and errors these
    are)."""
    return as_public(registry.fit_glmm_with(engine, design, family=family, nagq=nagq,
                                            control=control, data_name=data_name))


def from_pymer4(model: Any, reference: dict[str, str] | None = None,
                data_name: str | None = None) -> LmerFit | GlmerFit:
    """A fitted pymer4 ``Lmer`` model (lme4 in R) as an :class:`LmerFit` (a ``glmer`` fit
    as a :class:`GlmerFit`); see :func:`crossed.engines.pymer4.from_pymer4` for the
    parameters and errors."""
    return as_public(_from_pymer4(model, reference=reference, data_name=data_name))


def specify(formula: str, data: pd.DataFrame, fixef: Mapping[str, float],
            varcorr: Mapping[str, Any], sigma: float, reml: bool = True,
            reference: dict[str, str] | None = None) -> LmerFit:
    """A model with parameters given by the user, to simulate from (simr's ``makeLmer``),
    as an :class:`LmerFit`; see :func:`crossed.simulate.specify` for the parameters."""
    from crossed.simulate.models import specify as _specify
    return as_public(_specify(formula, data, fixef=fixef, varcorr=varcorr, sigma=sigma,
                              reml=reml, reference=reference))
