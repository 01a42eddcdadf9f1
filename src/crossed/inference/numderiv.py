"""Richardson-extrapolated finite differences (the scheme of R's numDeriv).

lmerTest differentiates the deviance and vcov(β) with numDeriv's defaults; using the same
scheme keeps Satterthwaite's df within rounding of lmerTest's. The points, the differences
and the extrapolation are compiled (``_hessian.pyx``) around one call of the function on
all the points.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from crossed.inference import _hessian

__all__ = ["ZERO_TOL", "central_derivatives", "mixed_second"]

ZERO_TOL: float = _hessian.ZERO_TOL
"""Where |x| is below this, numDeriv's step is |d x| + eps rather than |d x|."""


def central_derivatives(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                        d: float = 0.1, eps: float = 1e-4, r: int = 4,
                        v: float = 2.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First and pure second derivatives of a vector-valued function along each coordinate.

    Uses the points x ± h e_i of numDeriv's ``genD`` diagonal (h = |d x_i|, plus ``eps``
    where x_i is near zero, then halved r − 1 times; Richardson-extrapolated). ``fun`` is
    evaluated once, on all of them: it maps points (m, len(x)) to values (m, n_out), x
    itself the first row, then per coordinate i and step k x + h e_i and x − h e_i.

    Returns
    -------
    f0 : numpy.ndarray
        The value at x (n_out).
    first, second : numpy.ndarray
        Shape (n_out, len(x)): ∂f/∂x_i and ∂²f/∂x_i².
    """
    return _hessian.central_derivatives(fun, np.ascontiguousarray(x, dtype=float), d, eps,
                                         r, v)


def mixed_second(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray, diag: np.ndarray,
                 f0: float, d: float = 0.1, eps: float = 1e-4, r: int = 4,
                 v: float = 2.0) -> np.ndarray:
    """Full Hessian of a scalar function given its diagonal and its value at x (numDeriv's
    ``genD`` off-diagonals); ``fun`` maps points (m, len(x)) to values (m,), evaluated
    once on all of them: per pair j < i (row by row) and step k, x + (h_i e_i + h_j e_j),
    then x − (…)."""
    return _hessian.mixed_second(fun, np.ascontiguousarray(x, dtype=float),
                                  np.ascontiguousarray(diag, dtype=float), float(f0), d, eps,
                                  r, v)
