"""Hypothesis (contrast) matrices of Type I, II and III ANOVA tests, as lmerTest builds them.

- Type I: rows of the unit upper-triangular Doolittle factor of XᵀX (sequential tests).
- Type II: lmerTest's default ``type = 2``: terms not contained in any other term get the
  identity rows of their coefficients; the others the Doolittle rows of XᵀX after moving
  the term and the terms containing it to the end.
- Type III: lmerTest's ``extract_contrasts_type3``: the full-indicator ("rank deficient")
  design of every term is projected on X, and the contrast columns of each term are
  orthogonalised against the columns of the terms containing it (higher order terms
  first). For other codings (``contrasts=``, ordered factors) lmerTest maps the
  hypotheses of the treatment-coded X to X's coefficients, and so does :func:`type3`.

Containment follows lmerTest's ``term_contain``: term A is contained in term B when A's
variables are a proper subset of B's and both have the same numeric variables.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd

from crossed.design.fixed import build_fixed, build_matrix
from crossed.design.names import split_colons
from crossed.design.rcodes import factors_attribute
from crossed.model.partitioned import RowlessDesign

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["TermInfo", "doolittle_upper", "full_indicator_design", "hypotheses", "split_term",
           "treatment_coded", "type1", "type2", "type3", "zapsmall"]


def split_term(label: str) -> list[str]:
    """Variables of a term label (``"a:b"`` -> ``["a", "b"]``), ':' inside brackets kept."""
    return [p.strip().strip("`") for p in split_colons(label)]


def _matrix_valued(var: str) -> bool:
    """A variable R's model frame holds as a matrix (``poly(x, 2)``, ``scale(x)``)."""
    return var.startswith(("poly(", "scale("))


def zapsmall(x: np.ndarray, digits: int = 7) -> np.ndarray:
    """R's ``zapsmall``: round to ``digits`` significant digits of the largest entry."""
    x = np.asarray(x, dtype=float)
    mx = np.max(np.abs(x)) if x.size else 0.0
    if mx > 0:
        d = max(0, digits - int(np.ceil(np.log10(mx))))
    else:
        d = digits
    return np.round(x, d)


def doolittle_upper(M: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """tᵀ of lmerTest's ``doolittle(M)$L``: unit upper-triangular U with M = Uᵀ D U."""
    n = M.shape[0]
    L = np.eye(n)
    U = np.zeros((n, n))
    for i in range(n):
        U[i, :] = M[i, :] - L[i, :i] @ U[:i, :]
        if i + 1 < n:
            col = M[i + 1:, i] - L[i + 1:, :i] @ U[:i, i]
            L[i + 1:, i] = 0.0 if abs(U[i, i]) < eps else col / U[i, i]
    L[np.abs(L) < eps] = 0.0
    return L.T


class TermInfo:
    """Fixed-effects terms of a fit: labels, columns of X, variables and containment."""

    def __init__(self, fit: LmerFit):
        fd = fit.design.fixed
        self.fit = fit
        self.names = list(fd.names)
        self.has_intercept = "(Intercept)" in fd.term_labels
        labels = list(fd.term_labels)
        self.labels = [t for t in labels if t != "(Intercept)"]
        self.col_term = [labels[a] for a in fd.assign]
        self.cols = {t: [j for j, c in enumerate(self.col_term) if c == t] for t in self.labels}
        self.vars = {t: split_term(t) for t in self.labels}
        levels = fit.design.levels
        # R's terms "factors" attribute (x in x:f is 2, coded by indicators, when f is
        # not a main effect); lmerTest's containment reads the 1s alone
        codes = factors_attribute([tuple(self.vars[t]) for t in self.labels])
        self.coded = {t: [v for v in self.vars[t] if code[v] == 1]
                      for t, code in zip(self.labels, codes, strict=True)}
        # R's dataClasses "numeric": not factors, nor the matrices poly() and scale() return
        self.numerics = {t: {v for v in vs if v not in levels and not _matrix_valued(v)}
                         for t, vs in self.coded.items()}
        self.contained = {t: [u for u in self.labels if self._contains(t, u)]
                          for t in self.labels}

    def _contains(self, a: str, b: str) -> bool:
        """lmerTest's ``term_contain``: b has a's coded variables and more, and the same
        numeric ones."""
        va, vb = set(self.coded[a]), set(self.coded[b])
        return va <= vb and len(vb - va) > 0 and self.numerics[a] == self.numerics[b]


def _terms_and_gram(fit: LmerFit) -> tuple[TermInfo, np.ndarray, int]:
    """The fit's terms, XᵀX of its fixed-effects matrix and that matrix's number of
    columns (a fit on partitioned data: the summed XᵀX, no rows needed)."""
    if isinstance(fit.design, RowlessDesign):
        G = np.asarray(fit.pls.xtx)
    else:
        X = fit.design.X
        G = X.T @ X
    return TermInfo(fit), G, G.shape[1]


def _structure(fit: LmerFit) -> tuple[pd.DataFrame | None, np.ndarray]:
    """Rows and their fixed-effects matrix spanning the model's columns: the data's; for a
    fit on partitioned data, its design's made-up ``structure`` rows (Type III contrasts
    depend on the columns' span only)."""
    design = fit.design
    if isinstance(design, RowlessDesign):
        frame = design.structure
        return frame, (np.zeros((0, len(fit.beta))) if frame is None
                       else design.fixed.spec.build(frame))
    return design.frame, design.X


def type1(fit: LmerFit) -> dict[str, np.ndarray]:
    """lmerTest's ``get_contrasts_type1``: sequential hypotheses per term."""
    info, G, p = _terms_and_gram(fit)
    U = np.ones((1, 1)) if p == 1 else doolittle_upper(G)
    return {t: U[info.cols[t], :] for t in info.labels}


def _marginal(info: TermInfo, p: int) -> dict[str, np.ndarray]:
    eye = np.eye(p)
    return {t: eye[info.cols[t], :] for t in info.labels}


def type2(fit: LmerFit) -> dict[str, np.ndarray]:
    """lmerTest's default Type II (``get_contrasts_type2_unfolded``)."""
    info, G, p = _terms_and_gram(fit)
    if p <= 1 or len(info.labels) <= 1:
        return type1(fit)
    out = {}
    marg = _marginal(info, p)
    for t in info.labels:
        if not info.contained[t]:
            out[t] = marg[t]
            continue
        moved = [j for u in [t] + info.contained[t] for j in info.cols[u]]
        rest = [j for j in range(p) if j not in moved]
        order = rest + moved
        U = doolittle_upper(G[np.ix_(order, order)])
        rows = [i for i, j in enumerate(order) if info.col_term[j] == t]
        back = np.argsort(order)  # columns back to X's order
        out[t] = U[rows][:, back]
    return out


def _indicator(frame: pd.DataFrame, var: str, levels: dict) -> tuple[np.ndarray, list[str]]:
    """Full indicator columns of a factor, or the numeric column of a covariate."""
    if var in levels:
        codes = pd.Categorical(frame[var], categories=levels[var]).codes
        mat = (codes[:, None] == np.arange(len(levels[var]))[None, :]).astype(float)
        return mat, [f"{var}{lv}" for lv in levels[var]]
    if var in frame.columns:
        return frame[var].to_numpy(dtype=float)[:, None], [var]
    mat, names, _ = build_matrix(f"0 + {var}", frame, caret="^" in var)
    return mat, list(names)


def full_indicator_design(fit: LmerFit) -> tuple[np.ndarray, list[str]]:
    """lmerTest's ``get_rdX``: per term ``model.matrix(~ 0 + term)``, intercept first."""
    info = TermInfo(fit)
    frame = _structure(fit)[0]
    if frame is None:
        raise ValueError("the fit keeps no data columns; Type III needs them (refit with "
                         "crossed.lmer)")
    levels = fit.design.levels
    mats, names = [], []
    if info.has_intercept:
        mats.append(np.ones((len(frame), 1)))
        names.append("(Intercept)")
    for t in info.labels:
        block, bnames = np.ones((len(frame), 1)), [""]
        for v in info.vars[t]:
            m, nm = _indicator(frame, v, levels)
            # R: the first factor varies fastest
            block = np.concatenate([block * m[:, [k]] for k in range(m.shape[1])], axis=1)
            bnames = [f"{b}:{x}" if b else x for x in nm for b in bnames]
        mats.append(block)
        names.extend(bnames)
    return np.column_stack(mats), names


def _resid(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return y - x @ coef


class _WithFixed:
    """A fit seen with another fixed-effects design (same data, other contrast coding)."""

    def __init__(self, fit: LmerFit, design: object):
        self._fit = fit
        self.design = design

    def __getattr__(self, name: str) -> object:
        return getattr(self._fit, name)


def treatment_coded(fit: LmerFit) -> LmerFit:
    """The fit seen with its fixed part rebuilt with treatment contrasts for every factor
    (lmerTest's ``get_model_matrix(model, type = "remake", contrasts = "contr.treatment")``
    made full rank)."""
    design = fit.design
    if design.frame is None:
        raise ValueError("the fit keeps no data columns; Type III under a non-treatment "
                         "coding needs them (refit with crossed.lmer)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = build_fixed(design.spec.fixed, design.frame, caret=design.spec.caret,
                            codings={}, trusted=design.spec.trusted)
    return cast("LmerFit", _WithFixed(fit, replace(design, fixed=fixed)))


def type3(fit: LmerFit) -> dict[str, np.ndarray]:
    """lmerTest's ``get_contrasts_type3``: for treatment-coded X directly; for any other
    coding (``contrasts=``, ordered factors) the hypotheses of the treatment-coded X mapped
    to X's coefficients by ``zapsmall(ginv(X_treatment) X)``, as lmerTest does, so the
    tests are those of treatment coding."""
    info = TermInfo(fit)
    p = len(fit.beta)
    if p <= 1 or len(info.labels) <= 1:
        return type1(fit)
    X = _structure(fit)[1]
    if fit.design.fixed.codings:
        treat = treatment_coded(fit)
        mapping = zapsmall(np.linalg.pinv(treat.design.X) @ X)
        return {t: L @ mapping for t, L in type3(treat).items()}
    rdX, rdnames = full_indicator_design(fit)
    coef, *_ = np.linalg.lstsq(X, rdX, rcond=None)  # ginv(X) %*% rdX, X full rank
    L = zapsmall(coef.T)  # rows: rdX columns, columns: X columns
    order = sorted(info.labels, key=lambda t: -len(info.vars[t]))
    for t in order:
        contains = info.contained[t]
        if contains:
            xc = [j for u in contains for j in info.cols[u]]
            if info.cols[t] and xc:
                L[:, info.cols[t]] = zapsmall(_resid(L[:, xc], L[:, info.cols[t]]))
    index = {nm: i for i, nm in enumerate(rdnames)}
    rows = []
    for nm in info.names:
        if nm not in index:
            raise ValueError(f"cannot match the model column {nm!r} to the full indicator "
                             "design (Type III needs treatment-coded factors)")
        rows.append(index[nm])
    L = L[rows, :]
    out = {}
    for t in info.labels:
        Lt = L[:, info.cols[t]].T
        out[t] = Lt[np.sum(np.abs(Lt), axis=1) > 1e-8]
    return out


def hypotheses(fit: LmerFit, type: int | str = 3) -> dict[str, np.ndarray]:
    """Contrast matrix (rows over the fixed effects) of each fixed term for an ANOVA type."""
    key = str(type).upper()
    key = {"I": "1", "II": "2", "III": "3"}.get(key, key)
    if key == "1":
        return type1(fit)
    if key == "2":
        return type2(fit)
    if key == "3":
        return type3(fit)
    raise ValueError(f"unknown ANOVA type {type!r}; use 1, 2 or 3")
