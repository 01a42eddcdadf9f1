"""Types of Satterthwaite's compiled Hessian (``_hessian.pyx``; numDeriv's scheme documented
in numderiv.py, the pseudo-inverse's rule in satterthwaite.py)."""

from collections.abc import Callable

import numpy as np

ZERO_TOL: float

def central_derivatives(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                        d: float = ..., eps: float = ..., r: int = ..., v: float = ...
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def mixed_second(fun: Callable[[np.ndarray], np.ndarray], x: np.ndarray, diag: np.ndarray,
                 f0: float, d: float = ..., eps: float = ..., r: int = ..., v: float = ...
                 ) -> np.ndarray: ...
def pinv_psd(H: np.ndarray, scaled_tol: float, tol: float
             ) -> tuple[np.ndarray, bool, int, int]: ...
