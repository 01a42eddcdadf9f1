"""Types of the compiled gradient (``_gradient.pyx``; its docstring there)."""

import numpy as np

def dense_gradient(L: np.ndarray, theta: np.ndarray, c: float, scale_index: np.ndarray,
                   rr: int, R: int, A1: np.ndarray, A1T: np.ndarray, A11: np.ndarray,
                   Dinv: np.ndarray, T1: np.ndarray, Arr: np.ndarray, t_pos: np.ndarray,
                   t_index: np.ndarray, grad: np.ndarray) -> int: ...
