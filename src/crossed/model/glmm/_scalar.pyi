"""Types of the compiled GLMM solve (``_scalar.pyx``; its docstring there)."""

import numpy as np

# (each module holds its own copy of this class, compiled from model/_objective.pxi)
from crossed.model._core import LoggedObjective as LoggedObjective

def scalar_solve(sw: np.ndarray, z: np.ndarray, c1: np.ndarray, z1: np.ndarray,
                 cr: np.ndarray, zr: np.ndarray, pinv: np.ndarray, pcol: np.ndarray,
                 pptr: np.ndarray, xptr: np.ndarray, xind: np.ndarray, xval: np.ndarray,
                 swX: np.ndarray, t1: float, tr: np.ndarray, p: int, dl: int,
                 lptr: np.ndarray, lrow: np.ndarray,
                 d: np.ndarray, r1: np.ndarray, vals: np.ndarray, vs: np.ndarray,
                 BXs: np.ndarray, M: np.ndarray, rhs: np.ndarray, u1: np.ndarray) -> int: ...
def scalar_zlu(u: np.ndarray, c1: np.ndarray, z1: np.ndarray, t1: float, cr: np.ndarray,
               zr: np.ndarray, tr: np.ndarray, out: np.ndarray) -> None: ...
def vector_columns(theta: np.ndarray, target: np.ndarray, source: np.ndarray,
                   tindex: np.ndarray, zraw: np.ndarray, zr: np.ndarray) -> None: ...

LOGIT: int
PROBIT: int
CLOGLOG: int
LOG: int
BINOMIAL: int
POISSON: int

def residual_deviance(mu: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray
                      ) -> float: ...

class ScalarDeviance(LoggedObjective):
    evaluations: int
    exact: bool
    def __init__(self, structure: object, y: np.ndarray, wt: np.ndarray,
                 offset: np.ndarray, lp0: np.ndarray, k: int, joint: bool, link: int,
                 thresh: float, variance: int, dev_a: np.ndarray, dev_b: np.ndarray,
                 dev_c: np.ndarray, dev_const: float, aic_const: float, tol: float,
                 maxit: int, exact: bool, max_polish: int, eta_tol: float,
                 mapping: tuple[np.ndarray, ...] | None = ...) -> None: ...
    def values(self, points: np.ndarray) -> np.ndarray: ...
    def start_from(self, lp0: np.ndarray) -> None: ...
    def state(self, x: np.ndarray, eta: np.ndarray, mu: np.ndarray, me: np.ndarray,
              u: np.ndarray, beta: np.ndarray, root: np.ndarray, sw: np.ndarray
              ) -> tuple[int, int, float]: ...
    def mapped(self, points: np.ndarray) -> np.ndarray: ...
