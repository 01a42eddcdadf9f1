"""Native engine: BOBYQA (or L-BFGS-B on the analytic gradient) over θ on the model core's
profiled criterion (``crossed.model``)."""

from crossed.engines.native.engine import fit_native
from crossed.model.control import LmerControl, OptSummary
from crossed.model.convergence import ConvergenceStatus
from crossed.model.finish import ConvergenceWarning, SingularFitWarning

__all__ = ["ConvergenceStatus", "ConvergenceWarning", "LmerControl", "OptSummary",
           "SingularFitWarning", "fit_native"]
