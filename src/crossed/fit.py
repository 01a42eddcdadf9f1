"""The fit layer: :class:`LmerFit` (defined in the model core, ``crossed.model.result``)
and the fit-level operations that need an engine (``fit.refit``).

``from crossed.fit import LmerFit`` is the public spelling. This module provides
``LmerFit.refit`` to the method table (:func:`crossed.model.result.provide`): a refit goes
through the engine registry, which sits below this layer.
"""

from __future__ import annotations

from crossed.engines import fit_with
from crossed.model.result import LmerFit, provide

__all__ = ["LmerFit"]

provide("refit", fit_with)
