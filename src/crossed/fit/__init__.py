"""The fit layer: the public fit classes and the paths that hand fits to users.

* :class:`LmerFit` (``lmer.py``) and :class:`GlmerFit` (``glmer.py``): the model core's
  frozen results (:class:`~crossed.model.result.LmerResult`,
  :class:`~crossed.model.glmm.result.GlmerResult`, sharing
  :class:`~crossed.model.fitbase.FitBase`) with the R-like methods, each calling the
  inference, simulate or display layer below;
* ``public.py``: engines' results as these classes (``fit_with``, ``fit_glmm_with``,
  ``from_pymer4``, ``specify``).

Refits go through :mod:`crossed.engines.refit` and keep the class of the fit.
"""

from crossed.engines.refit import refit_glmer, refit_lmer
from crossed.fit.glmer import GlmerFit
from crossed.fit.lmer import LmerFit
from crossed.fit.public import as_public, fit_glmm_with, fit_with, from_pymer4, specify

__all__ = ["GlmerFit", "LmerFit", "as_public", "fit_glmm_with", "fit_with", "from_pymer4",
           "refit_glmer", "refit_lmer", "specify"]
