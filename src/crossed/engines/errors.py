"""Errors shared by the engines."""

from __future__ import annotations

__all__ = ["EngineUnavailableError", "UnsupportedModelError"]


class UnsupportedModelError(ValueError):
    """The engine cannot express this model specification.

    The message names what is unsupported and suggests an engine that can fit it.
    """


class EngineUnavailableError(ImportError):
    """The engine's software (R, rpy2, an R package, pymer4) is not installed.

    The message says exactly what to install.
    """
