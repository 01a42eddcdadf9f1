"""Contrast families of emmeans 1.8.4 (``pairwise.emmc``, ``trt.vs.ctrl.emmc``, ...): the
weights over the means of one group, their labels and emmeans' default adjustment.

=================  ============================================  ===========  ==========
method             contrasts                                     labels       adjustment
=================  ============================================  ===========  ==========
``pairwise``       every earlier level minus every later level   ``A - B``    tukey
``revpairwise``    the reverse, listed by the later level        ``B - A``    tukey
``trt.vs.ctrl``    each level minus the control (``ref``)        ``B - A``    dunnettx
``trt.vs.ctrl1``   same, control the first level                 ``B - A``    dunnettx
``trt.vs.ctrlk``   same, control the last level                  ``A - C``    dunnettx
``consec``         each level minus the one before               ``B - A``    mvt
``eff``            each level minus the average of all levels    ``A effect`` fdr
``poly``           orthogonal polynomials, integer weights       ``linear``   none
dict               custom weights ``{name: weights}``            its names    none
=================  ============================================  ===========  ==========
"""

from __future__ import annotations

import numpy as np

from crossed.design.contrasts import poly_matrix

__all__ = ["DEFAULT_ADJUST", "METHODS", "NOTHING", "contrast_weights", "default_adjust",
           "poly_weights", "resolve_ref"]

NOTHING = "(nothing)"
DEFAULT_ADJUST = {"pairwise": "tukey", "revpairwise": "tukey", "trt.vs.ctrl": "dunnettx",
                  "trt.vs.ctrl1": "dunnettx", "trt.vs.ctrlk": "dunnettx", "consec": "mvt",
                  "eff": "fdr", "poly": "none"}
METHODS = tuple(DEFAULT_ADJUST)
_DEGREES = ["linear", "quadratic", "cubic", "quartic"] + [f"degree {d}" for d in range(5, 21)]


def default_adjust(method: object) -> str:
    """emmeans' default multiplicity adjustment of a contrast method (none for weights)."""
    return DEFAULT_ADJUST.get(method, "none") if isinstance(method, str) else "none"


def poly_weights(k: int) -> tuple[np.ndarray, list[str]]:
    """emmeans' ``poly.emmc``: orthogonal polynomial contrasts of degree 1..min(6, k-1),
    each scaled to the smallest integers (rows: contrasts)."""
    M = poly_matrix(k)[:, : min(6, k - 1)]
    rows = []
    for j in range(M.shape[1]):
        con = M[:, j].copy()
        con = con / np.min(con[con > 0.01])
        z = np.max(np.abs(con - np.round(con)))
        while z > 0.05:
            con = con / z
            z = np.max(np.abs(con - np.round(con)))
        rows.append(np.round(con))
    return np.vstack(rows), _DEGREES[: M.shape[1]]


def resolve_ref(ref: object, labels: list[str], levels: list[str] | None = None) -> int:
    """The control's position: an index (0-based) or a level (label as shown, or level)."""
    k = len(labels)
    if isinstance(ref, str):
        for names in (levels or [], labels):
            if ref in names:
                return list(names).index(ref)
        raise ValueError(f"ref {ref!r} is not one of the levels ({', '.join(labels)})")
    if (isinstance(ref, bool | np.bool_) or not isinstance(ref, int | np.integer)
            or not 0 <= ref < k):
        raise ValueError(f"ref must be the index of the control level, from 0 to "
                         f"{k - 1} ({', '.join(labels)}), or its label; got {ref!r}")
    return int(ref)


def _custom(method: dict, k: int) -> tuple[np.ndarray, list[str]]:
    if not method:
        raise ValueError("contrast weights: the dict is empty; give {name: weights}")
    rows, names = [], []
    for name, w in method.items():
        try:
            w = np.asarray(w, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"contrast {name!r}: weights must be numbers, got "
                             f"{w!r}") from None
        if len(w) != k:
            raise ValueError(f"contrast {name!r} has {len(w)} weights for {k} means")
        rows.append(w)
        names.append(str(name))
    return np.vstack(rows), names


def _pairs(k: int, labels: list[str], reverse: bool) -> tuple[list, list[str]]:
    rows, names = [], []
    for i in range(k):
        for j in range(i + 1, k):
            w = np.zeros(k)
            if reverse:
                w[j], w[i] = 1.0, -1.0
                names.append(f"{labels[j]} - {labels[i]}")
            else:
                w[i], w[j] = 1.0, -1.0
                names.append(f"{labels[i]} - {labels[j]}")
            rows.append(w)
    if reverse:  # emmeans lists them by the later level
        order = sorted(range(len(rows)), key=lambda r: (
            np.flatnonzero(rows[r] > 0)[0], np.flatnonzero(rows[r] < 0)[0]))
        rows, names = [rows[o] for o in order], [names[o] for o in order]
    return rows, names


def contrast_weights(method, labels: list[str], ref: object = 0,
                     levels: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Weights (rows: contrasts, columns: the means of one group) and labels.

    Parameters
    ----------
    method : str or dict
        One of :data:`METHODS` or custom weights ``{name: weights}``.
    labels : list of str
        emmeans' labels of the means (``grid_labels``).
    ref : int or str
        The control of ``trt.vs.ctrl``: index (0-based) or level.
    levels : list of str, optional
        The raw levels behind ``labels`` (to find ``ref`` by level).
    """
    k = len(labels)
    if isinstance(method, dict):
        return _custom(method, k)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown contrast method {method!r}; use one of "
                         f"{', '.join(METHODS)} or a dict of weights")
    rows: list = []
    names: list[str] = []
    if method in ("pairwise", "revpairwise"):
        rows, names = _pairs(k, labels, method == "revpairwise")
    elif method.startswith("trt.vs.ctrl"):
        r = 0 if method == "trt.vs.ctrl1" else k - 1 if method == "trt.vs.ctrlk" else \
            resolve_ref(ref, labels, levels)
        for i in range(k):
            if i != r:
                w = np.zeros(k)
                w[i], w[r] = 1.0, -1.0
                rows.append(w)
                names.append(f"{labels[i]} - {labels[r]}")
    elif method == "consec":
        for i in range(k - 1):
            w = np.zeros(k)
            w[i + 1], w[i] = 1.0, -1.0
            rows.append(w)
            names.append(f"{labels[i + 1]} - {labels[i]}")
    elif method == "eff":
        for i in range(k):
            w = np.full(k, -1.0 / k)
            w[i] += 1.0
            rows.append(w)
            names.append(f"{labels[i]} effect")
    elif k > 1:  # poly
        W, names = poly_weights(k)
        rows = list(W)
    if not rows:  # a single mean has no contrasts
        return np.zeros((1, k)), [NOTHING]
    return np.vstack(rows), names
