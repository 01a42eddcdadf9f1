"""Types of the compiled numDeriv scheme (``_hessian.pyx``; documented in numderiv.py)."""

from collections.abc import Callable

import numpy as np

ZERO_TOL: float

def central_derivatives(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                        d: float = ..., eps: float = ..., r: int = ..., v: float = ...
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def mixed_second(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray, diag: np.ndarray,
                 f0: float, d: float = ..., eps: float = ..., r: int = ..., v: float = ...
                 ) -> np.ndarray: ...
