"""Types of the fixed design's compiled rank check (``_rank.pyx``; its docstrings there)."""

import numpy as np

def independent(X: np.ndarray, tol: float, gram_min: float) -> np.ndarray: ...
