"""Types of the compiled GLMM solve (``_scalar.pyx``; its docstring there)."""

import numpy as np

def scalar_solve(sw: np.ndarray, z: np.ndarray, c1: np.ndarray, z1: np.ndarray,
                 cr: np.ndarray, zr: np.ndarray, pinv: np.ndarray, pcol: np.ndarray,
                 pptr: np.ndarray, xptr: np.ndarray, xind: np.ndarray, xval: np.ndarray,
                 swX: np.ndarray, t1: float, tr: np.ndarray, p: int, dl: int,
                 lptr: np.ndarray, lrow: np.ndarray,
                 d: np.ndarray, r1: np.ndarray, vals: np.ndarray, vs: np.ndarray,
                 BXs: np.ndarray, M: np.ndarray, rhs: np.ndarray, u1: np.ndarray) -> int: ...
def scalar_zlu(theta: np.ndarray, tindex: np.ndarray, codes: np.ndarray, zs: np.ndarray,
               u: np.ndarray, out: np.ndarray) -> None: ...
