"""Native engine: BOBYQA over θ on the model core's profiled criterion (``crossed.model``)."""

from crossed.engines.native.engine import ConvergenceWarning, SingularFitWarning, fit_native
from crossed.engines.native.optimize import ConvergenceStatus, LmerControl, OptSummary

__all__ = ["ConvergenceStatus", "ConvergenceWarning", "LmerControl", "OptSummary",
           "SingularFitWarning", "fit_native"]
