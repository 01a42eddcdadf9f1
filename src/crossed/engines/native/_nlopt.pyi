"""Types of the NLopt driver (``_nlopt.pyx``; its docstrings there)."""

from collections.abc import Callable, Iterable, Mapping

import numpy as np

NAMES: tuple[str, ...]

def bind(addresses: Mapping[str, int]) -> None: ...
def bound() -> bool: ...
def force_stop_address() -> int: ...
def minimize(objective: int, data: int, stop: Callable[[int, int], None], algorithm: int,
             x: np.ndarray, lower: np.ndarray, xtol_abs: np.ndarray, ftol_abs: float,
             xtol_rel: float, step: np.ndarray, maxeval: int) -> tuple[int, float]: ...

PROBE_EVALUATIONS: int

def probe(algorithms: Iterable[int]) -> np.ndarray: ...
