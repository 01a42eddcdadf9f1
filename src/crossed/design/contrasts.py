"""Contrast codings of factors, as R's ``contr.treatment``, ``contr.sum``, ``contr.helmert``
and ``contr.poly`` build them, with R's column names.

``lmer(..., contrasts={"lr": "sum"})`` and ordered pandas Categoricals (R's default
``contr.poly``) reach formulaic by rewriting each bare use of the column in the formula as
``C(column, cx_contr_<i>)``, where ``cx_contr_<i>`` is a
:class:`~crossed.design.formulaic_contrasts.RCoding` placed in the evaluation context
(:func:`~crossed.design.formulaic_contrasts.rewrite_formula`).
formulaic keeps that text in its model spec, so new data (predictions, reference grids) is
coded the same way. Term labels and column names are translated back to R's: ``recipe1``,
``recipe2`` (sum, Helmert, a matrix without column names), ``temperature.L``, ``.Q``,
``.C``, ``^4`` (poly), the level labels (treatment; the full indicator coding R uses where a
term needs it, such as ``0 + f``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from crossed.formula.spec import CODINGS, normalise_coding

__all__ = ["CODINGS", "CONTEXT_PREFIX", "alias_column", "contrast_matrix",
           "normalise_coding", "poly_matrix", "wrapped_column"]

CONTEXT_PREFIX = "cx_contr_"
_ALIAS = re.compile(r"^C\((.*), " + CONTEXT_PREFIX + r"\d+\)$", re.S)


def poly_matrix(n: int) -> np.ndarray:
    """R's ``contr.poly(n)``: orthonormal polynomials in the scores 1..n (columns: degree
    1..n-1), each with a positive leading coefficient (R's ``make.poly``)."""
    x = np.arange(1, n + 1, dtype=float)
    V = np.vander(x - x.mean(), n, increasing=True)
    Q, R = np.linalg.qr(V)
    Z = Q * np.diag(R)[None, :]
    Z = Z / np.sqrt(np.sum(Z * Z, axis=0))[None, :]
    return np.asarray(Z[:, 1:])


def _poly_names(k: int) -> list[str]:
    return [{1: ".L", 2: ".Q", 3: ".C"}.get(d, f"^{d}") for d in range(1, k + 1)]


def contrast_matrix(coding: str | tuple[tuple[float, ...], ...], levels: Sequence[str],
                    column: str = "") -> tuple[np.ndarray, list[str]]:
    """The coding matrix (levels x columns) and R's column suffixes of one factor."""
    n = len(levels)
    if not isinstance(coding, str):
        m = np.asarray(coding, dtype=float)
        if m.shape[0] != n:
            raise ValueError(f"contrasts[{column!r}]: the matrix has {m.shape[0]} rows for "
                             f"{n} levels ({', '.join(map(str, levels[:10]))})")
        full = np.column_stack([np.ones(n), m])
        if m.shape[1] != n - 1 or np.linalg.matrix_rank(full) < n:
            raise ValueError(f"contrasts[{column!r}]: the matrix must have {n - 1} columns "
                             "which, with a column of ones, span all levels")
        return m, [str(j) for j in range(1, m.shape[1] + 1)]
    if coding == "treatment":
        return np.eye(n)[:, 1:], list(levels[1:])
    if coding == "sum":
        m = np.eye(n, n - 1)
        m[-1, :] = -1.0
        return m, [str(j) for j in range(1, n)]
    if coding == "helmert":
        m = np.zeros((n, n - 1))
        for j in range(n - 1):
            m[: j + 1, j] = -1.0
            m[j + 1, j] = j + 1.0
        return m, [str(j) for j in range(1, n)]
    if n > 95:
        raise ValueError(f"contrasts[{column!r}]: polynomial contrasts need fewer than 96 "
                         f"levels, as in R (got {n})")
    return poly_matrix(n), _poly_names(n - 1)


def alias_column(expr: str) -> str | None:
    """The column of a factor expression written by
    :func:`~crossed.design.formulaic_contrasts.rewrite_formula`, else None."""
    return wrapped_column(_ALIAS, expr)


def wrapped_column(pattern: re.Pattern[str], expr: str) -> str | None:
    """The column (backticks removed) that ``pattern``'s first group finds in a ``C(...)``
    wrapping of it, else None."""
    m = pattern.match(expr)
    if m is None:
        return None
    name = m.group(1).strip()
    return name[1:-1] if name.startswith("`") and name.endswith("`") else name
