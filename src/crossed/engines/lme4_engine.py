"""The ``"lme4"`` engine (and its alias ``"pymer4"``): R's ``lme4::lmer``
(:mod:`crossed.engines.lme4`) and ``lme4::glmer`` (:mod:`crossed.engines.lme4_glmm`)
through rpy2, as one :class:`~crossed.engines.registry.FunctionEngine`.

R's lme4 expresses every design the grammar builds; when R, rpy2 or lme4 is missing,
fitting raises :class:`~crossed.engines.errors.EngineUnavailableError` naming what to
install (nothing of R is loaded until a fit).
"""

from __future__ import annotations

from crossed.engines.lme4 import fit_lme4
from crossed.engines.lme4_glmm import fit_glmm_lme4
from crossed.engines.registry import ALL_GLMMS, Capabilities, FunctionEngine

__all__ = ["ENGINE"]

ENGINE = FunctionEngine("lme4", fit_lme4, glmm_function=fit_glmm_lme4,
                        capabilities=Capabilities(glmm=ALL_GLMMS, glmm_weights=True,
                                                  glmm_offsets=True, max_nagq=25))
