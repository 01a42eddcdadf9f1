"""Hypothesis strategies for the property tests: random mixed-model data sets.

A data set has 1-3 grouping factors (``g1``, ``g2``, ``g3``), each crossed with the ones
before or nested in the previous one, 2-15 levels each with random (Dirichlet) level
frequencies, so cells are unbalanced and some are empty; optionally a numeric predictor ``x``
and a fixed factor ``trt`` (2-4 levels); a response ``y`` from random effects (some with zero
variance, so some fits are singular) and noise, on a scale from 1e-3 to 1e4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st


@dataclass(frozen=True)
class Case:
    """One random data set and the formula to fit to it.

    Attributes
    ----------
    data : pandas.DataFrame
        Columns ``y``, ``g1``.. (grouping factors, strings), optionally ``x`` and ``trt``,
        and an unused column ``junk``.
    formula : str
    groups : tuple of str
        Grouping factor columns of the formula.
    terms : tuple of str
        The grouping factor of each random term as written (``"g2"``, ``"g1:g2"``).
    trt_ref : str or None
        Reference level of ``trt`` (its first level in R's order).
    """

    data: pd.DataFrame
    formula: str
    groups: tuple[str, ...]
    terms: tuple[str, ...]
    trt_ref: str | None

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        with pd.option_context("display.max_rows", 20, "display.width", 120):
            return (f"Case(formula={self.formula!r}, n={len(self.data)}, "
                    f"levels={[self.data[g].nunique() for g in self.groups]},\n"
                    f"data=pd.DataFrame({self.data.to_dict(orient='list')!r}))")


def _level_names(prefix: str, k: int) -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(k)]


@st.composite
def cases(draw, max_factors: int = 3, slopes: bool = True) -> Case:
    """A random :class:`Case` (see the module docstring)."""
    nfac = draw(st.integers(1, max_factors))
    nlev = [draw(st.integers(2, 15)) for _ in range(nfac)]
    nested = [False] + [draw(st.booleans()) for _ in range(nfac - 1)]
    for i in range(1, nfac):  # at most ~120 levels of a nested factor
        if nested[i]:
            nlev[i] = max(2, min(nlev[i], 120 // int(np.prod(nlev[:i]))))
    has_x = draw(st.booleans())
    has_trt = draw(st.booleans())
    ntrt = draw(st.integers(2, 4))
    slope = slopes and has_x and draw(st.sampled_from(["none", "none", "corr", "uncorr"]))
    scale = 10.0 ** draw(st.integers(-3, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)

    total = 1  # number of levels of the last factor, for the number of rows
    for k, nest in zip(nlev, nested, strict=True):
        total = total * k if nest else max(total, k)
    n = int(draw(st.integers(max(12, 2 * total), max(40, 3 * total))))
    n = min(n, 400)
    # nested factors are labelled explicitly (g2 = "a01b03": unique labels, fitted as
    # (1 | g2)) or implicitly (g2 = "b03" repeats across g1: fitted as (1 | g1:g2))
    implicit = [nest and draw(st.booleans()) for nest in nested]
    cols: dict[str, np.ndarray] = {}
    labels: list[np.ndarray] = []
    terms: list[str] = []  # the grouping factor of each random term, as written
    for i, (k, nest) in enumerate(zip(nlev, nested, strict=True)):
        prob = rng.dirichlet(np.full(k, draw(st.sampled_from([0.5, 1.0, 5.0]))))
        codes = rng.choice(k, size=n, p=prob)
        codes[:2] = [0, 1]  # at least two levels
        own = np.array(_level_names("abc"[i], k), dtype=object)[codes]
        lab = labels[-1] + own if nest else own
        labels.append(lab)
        name = f"g{i + 1}"
        cols[name] = own if implicit[i] else lab
        terms.append(f"{terms[-1]}:{name}" if implicit[i] else name)
    groups = tuple(cols)
    identity = dict(zip(terms, labels, strict=True))  # the level of each row, per term
    eta = np.zeros(n)
    fixed = []
    if has_x:
        x = rng.normal(size=n) * 10.0 ** rng.integers(-1, 2)
        cols["x"] = x
        eta += 0.5 * x / x.std() if x.std() > 0 else 0.0
        fixed.append("x")
    trt_ref = None
    if has_trt:
        tl = _level_names("t", ntrt)
        tcodes = rng.integers(0, ntrt, size=n)
        trt = np.array(tl, dtype=object)[tcodes]
        cols["trt"] = trt
        eta += rng.normal(size=ntrt)[tcodes]
        fixed.append("trt")
        trt_ref = min(set(trt.tolist()))
    rand = []
    for i, g in enumerate(terms):
        sd = draw(st.sampled_from([0.0, 0.3, 1.0, 3.0]))
        lv, codes = np.unique(identity[g], return_inverse=True)
        eta += sd * rng.normal(size=len(lv))[codes]
        if i == 0 and slope and slope != "none":
            eta += sd * rng.normal(size=len(lv))[codes] * cols["x"] / max(cols["x"].std(), 1e-12)
            bar = "|" if slope == "corr" else "||"
            rand.append(f"(1 + x {bar} {g})")
        else:
            rand.append(f"(1 | {g})")
    y = (eta + rng.normal(size=n)) * scale + scale * rng.normal()
    cols["y"] = y
    cols["junk"] = rng.normal(size=n)
    data = pd.DataFrame(cols)
    formula = "y ~ " + " + ".join(fixed or ["1"]) + " + " + " + ".join(rand)
    return Case(data=data, formula=formula, groups=groups, terms=tuple(terms),
                trt_ref=trt_ref)


# ---------------------------------------------------------------- helpers for the properties
SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""Hypothesis settings shared by the property tests: reproducible (derandomized), no
per-example deadline (an occasional fit with random slopes takes ~0.3 s)."""


def random_thetas(lower: np.ndarray, seed: int, k: int = 3) -> list[np.ndarray]:
    """``k`` random theta values within ``lower`` (diagonals in [0, 2], the rest in [-1, 1])."""
    rng = np.random.default_rng(seed)
    bounded = np.isfinite(lower)
    return [np.where(bounded, rng.uniform(0.0, 2.0, len(lower)), rng.uniform(-1, 1, len(lower)))
            for _ in range(k)]


def std_errors(fit) -> np.ndarray:
    return np.sqrt(np.diag(fit.vcov_beta))


def assert_same_fit(a, b, beta_names: dict[str, str] | None = None,
                    level_names=None, scale: float = 1.0, rtol: float = 1e-3) -> None:
    """Fits ``a`` and ``b`` of the same model agree up to names (and a scale of y).

    Both are optima found by the optimiser along different rounding paths, so the estimates
    are compared with loose tolerances: fixed effects to ``rtol`` of their standard error, SEs
    and sigma to ``rtol`` relative, theta only for non-singular fits, the random effects by
    level to ``rtol`` of sigma. The criterion (deviance) must agree to 1e-7 relative, shifted
    by the known amount for a scale ``c`` of y: 2 n log c (ML), 2 (n - p) log c (REML).

    Parameters
    ----------
    beta_names : dict, optional
        Name in ``a`` -> name in ``b`` of the fixed effects (identity when omitted).
    level_names : callable, optional
        (group, level in ``a``) -> level in ``b`` (identity when omitted).
    """
    n, p = a.design.X.shape
    shift = 2.0 * (n - p if a.reml else n) * np.log(scale)
    assert b.deviance - shift == pytest.approx(a.deviance, rel=1e-7, abs=1e-6)
    names = [(beta_names or {}).get(k, k) for k in a.fixef_names]
    assert sorted(names) == sorted(b.fixef_names)
    bb = b.fixef[names].to_numpy()
    se_a = std_errors(a)
    se_b = pd.Series(std_errors(b), index=list(b.fixef_names))[names].to_numpy()
    np.testing.assert_allclose(bb / scale, a.beta, rtol=0, atol=rtol * se_a.max() + 1e-10)
    np.testing.assert_allclose(se_b / scale, se_a, rtol=rtol)
    assert b.sigma / scale == pytest.approx(a.sigma, rel=rtol)
    assert b.theta_names == a.theta_names
    if not (a.is_singular or b.is_singular):
        np.testing.assert_allclose(b.theta, a.theta, rtol=rtol, atol=rtol)
    ra, rb = a.ranef(), b.ranef()
    if level_names is not None:
        ra["level"] = [level_names(g, lv) for g, lv in zip(ra["group"], ra["level"], strict=True)]
    key = ["group", "level", "term"]
    m = ra.merge(rb, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    assert (m["_merge"] == "both").all(), m[m["_merge"] != "both"]
    np.testing.assert_allclose(m["estimate_b"] / scale, m["estimate_a"], rtol=0,
                               atol=rtol * a.sigma + 1e-10)
