"""Types of the compiled kernels (``_core.pyx``; their docstrings there)."""

import numpy as np
import scipy.sparse as sp

def first_block_1x1(a: np.ndarray, t: float, b: np.ndarray, G: np.ndarray, root: np.ndarray,
                    H: np.ndarray) -> None: ...
def map_update(W: np.ndarray | sp.csr_matrix, g: np.ndarray, rows: np.ndarray, lo: int,
               hi: int, arr: np.ndarray, table: np.ndarray, pair: np.ndarray,
               out: np.ndarray) -> None: ...
def potrf_lower(A: np.ndarray) -> int: ...
def upper_products(a_ptr: np.ndarray, a_idx: np.ndarray, a_val: np.ndarray, pos: np.ndarray,
                   b_ptr: np.ndarray, b_idx: np.ndarray, b_val: np.ndarray, keys: np.ndarray,
                   ncls: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def searchsorted_in_buckets(keys: np.ndarray, starts: np.ndarray, query: np.ndarray,
                            width: int) -> np.ndarray: ...
def level_pairs(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, q: int,
                nlevels: int, upper: bool, total: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
def small_dense(a: np.ndarray, t0: float, t1: float, t2: float, theta: np.ndarray,
                scale_index: np.ndarray, rr: int, W: np.ndarray | sp.csr_matrix,
                rows: np.ndarray, src: np.ndarray, count: np.ndarray, arr: np.ndarray,
                Arr: np.ndarray, first: np.ndarray, L: np.ndarray
                ) -> tuple[int, float, float, float, float]: ...
