"""Likelihood-profile confidence intervals (lme4's ``profile.merMod`` + ``confint.thpr``).

The algorithm, as lme4 1.1-31 runs it (``R/profile.R``), re-implemented on crossed's PLS:

- the profile is of the **ML** deviance: a REML fit is refitted by maximum likelihood first
  (lme4's ``devfun2`` calls ``refitML``), so the intervals of a REML fit are those of its ML
  refit, as in R;
- parameters: the SDs and correlations of every random term (lme4's ``.sig01``, ``.sig02``
  ..., one term after the other in θ order, each term's lower triangle column by column),
  the residual SD ``.sigma``, then the fixed effects;
- for a variance parameter: the deviance ``ldL2 + pwrss/σ² + n log(2πσ²)`` as a function
  of (SDs, correlations, σ), with θ = chol(Σ)/σ and β profiled out; the parameter is fixed
  and the others minimised (BOBYQA, bounds SD ≥ 0, −1 ≤ cor ≤ 1, σ ≥ 0), started from the
  previous point of the profile;
- for a fixed effect β_j: its column becomes an offset x_j·β_j and the ML profiled deviance
  is minimised over θ (started from the ML θ̂);
- ζ = sign(value − estimate)·√(deviance − ML deviance); the grid steps out from the
  estimate on each side (first step ×1.01 for variance parameters, ± δ·SE for β, then steps
  of δ in ζ with δ = cutoff/8, cutoff = √χ²₀.₉₉(number of parameters), at most 100 points)
  until |ζ| passes the cutoff or a bound is reached;
- ζ is interpolated by a natural cubic spline of the parameter (``interpSpline``), inverted
  as ``backSpline`` does (a piecewise cubic Hermite inverse, quadratic end pieces), and the
  interval is where the inverse meets ±qnorm((1 + level)/2); beyond the profiled range the
  bound of the parameter (0 for an SD, ±1 for a correlation; NaN for a fixed effect).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import nlopt
import numpy as np
import pandas as pd
from scipy import stats
from scipy.interpolate import CubicSpline

from crossed._warn import warn
from crossed.engines.refit import refit_lmer
from crossed.inference.reparam import optimiser_problem
from crossed.model.pls import PLS

if TYPE_CHECKING:
    from crossed.engines.native.rescale import ColumnRescaling
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["VarParam", "back_spline", "profile", "profile_confint", "var_params"]

MAXPTS = 100
_MIXED = ("the optimiser ran on the term's covariates centred (they sit far from 0), where "
          "the intercept at 0 and its correlations are not coordinates, and the profile in "
          "the formula's columns loses its digits; centre the covariates in the data for "
          "this interval, or use method='boot'")
DEVTOL = 1e-9
MAXMULT = 10.0


# ---------------------------------------------------------------------- parameter layout
@dataclass(frozen=True)
class VarParam:
    """One SD or correlation of a random term: lme4's ``.sigNN`` name, crossed's name, the
    term, and its position (i, j) in the term's lower triangle (i == j: an SD)."""

    r_name: str
    name: str
    term: int
    i: int
    j: int

    @property
    def is_sd(self) -> bool:
        return self.i == self.j


def _term_theta(fit: LmerFit, ti: int) -> np.ndarray:
    """θ positions of term ``ti``'s lower triangle, (k, k) with -1 above the diagonal."""
    term = fit.design.random.terms[ti]
    blk = fit.design.random.blocks[term.block]
    k = len(term.columns)
    return np.asarray(blk.theta_index[term.offset: term.offset + k, term.offset: term.offset + k])


def _term_order(fit: LmerFit) -> list[int]:
    """Terms in θ order (lme4's order of the ``.sig`` parameters)."""
    terms = range(len(fit.design.random.terms))
    return sorted(terms, key=lambda t: int(_term_theta(fit, t).max()))


def var_params(fit: LmerFit) -> list[VarParam]:
    """The SD/correlation parameters in lme4's order (``.sig01`` ...), without σ.

    Names: ``sd_<column>|<group>`` and ``cor_<column j>.<column i>|<group>`` (the names of
    ``crossed.simulate.bootstrap``'s ``"sdcor"`` statistic and of ``varcorr()``'s rows)."""
    out: list[VarParam] = []
    for ti in _term_order(fit):
        term = fit.design.random.terms[ti]
        k = len(term.columns)
        for j in range(k):
            for i in range(j, k):
                if i == j:
                    name = f"sd_{term.columns[i]}|{term.group}"
                else:
                    name = f"cor_{term.columns[j]}.{term.columns[i]}|{term.group}"
                out.append(VarParam(f".sig{len(out) + 1:02d}", name, ti, i, j))
    return out


def _term_T(fit: LmerFit, theta: np.ndarray, ti: int) -> np.ndarray:
    term = fit.design.random.terms[ti]
    blk = fit.design.random.blocks[term.block]
    k = len(term.columns)
    return np.asarray(blk.template(theta)[term.offset: term.offset + k,
                                          term.offset: term.offset + k])


def sdcor_of(fit: LmerFit, theta: np.ndarray, sigma: float,
             params: list[VarParam]) -> np.ndarray:
    """(SDs and correlations in ``params`` order) at θ and σ."""
    out = np.empty(len(params))
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for n, vp in enumerate(params):
        if vp.term not in cache:
            T = _term_T(fit, theta, vp.term)
            S = sigma**2 * T @ T.T
            cache[vp.term] = (S, np.sqrt(np.diag(S)))
        S, sd = cache[vp.term]
        if vp.is_sd:
            out[n] = sd[vp.i]
        else:
            den = sd[vp.i] * sd[vp.j]
            out[n] = S[vp.i, vp.j] / den if den > 0 else 0.0
    return out


def theta_of(fit: LmerFit, values: np.ndarray, sigma: float,
             params: list[VarParam]) -> np.ndarray | None:
    """θ of (SDs, correlations) and σ: θ-factor = diag(sd)·chol(R)/σ per term; None where a
    correlation matrix is not positive definite or σ ≤ 0."""
    if not sigma > 0:
        return None
    theta = np.zeros(len(fit.theta))
    by_term: dict[int, list[tuple[VarParam, float]]] = {}
    for vp, v in zip(params, values, strict=True):
        by_term.setdefault(vp.term, []).append((vp, float(v)))
    for ti, entries in by_term.items():
        k = len(fit.design.random.terms[ti].columns)
        sd = np.zeros(k)
        R = np.eye(k)
        for vp, v in entries:
            if vp.is_sd:
                sd[vp.i] = v
            else:
                R[vp.i, vp.j] = R[vp.j, vp.i] = v
        C = _chol_psd(R)
        if C is None:
            return None
        T = (sd[:, None] * C) / sigma
        idx = _term_theta(fit, ti)
        for i in range(k):
            for j in range(i + 1):
                if idx[i, j] >= 0:
                    theta[idx[i, j]] = T[i, j]
    return theta


def _chol_psd(R: np.ndarray, tol: float = 1e-10) -> np.ndarray | None:
    """Lower Cholesky factor of a positive semi-definite correlation matrix (a correlation
    of ±1 gives a zero pivot, as lme4's conversion allows); None when not PSD."""
    k = len(R)
    C = np.zeros((k, k))
    for j in range(k):
        d = R[j, j] - float(C[j, :j] @ C[j, :j])
        if d < -tol:
            return None
        C[j, j] = math.sqrt(max(d, 0.0))
        for i in range(j + 1, k):
            v = R[i, j] - float(C[i, :j] @ C[j, :j])
            if C[j, j] > 0:
                C[i, j] = v / C[j, j]
            elif abs(v) > tol:
                return None
    return C


# ---------------------------------------------------------------------- optimiser
def _minimise(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
              upper: np.ndarray) -> tuple[np.ndarray, float]:
    """BOBYQA under box bounds, tight tolerances; (argmin, min)."""
    x0 = np.clip(np.asarray(x0, dtype=float), lower, upper)
    if len(x0) == 0:
        return x0, float(fun(x0))
    best: list[tuple[float, np.ndarray]] = []

    def objective(x: np.ndarray, grad: np.ndarray) -> float:
        val = float(fun(x))
        if not math.isfinite(val):
            return 1e300
        if not best or val < best[0][0]:
            best[:] = [(val, x.copy())]
        return val

    opt = nlopt.opt(nlopt.LN_BOBYQA, len(x0))
    opt.set_lower_bounds(np.where(np.isfinite(lower), lower, -np.inf))
    opt.set_upper_bounds(np.where(np.isfinite(upper), upper, np.inf))
    opt.set_min_objective(objective)
    opt.set_ftol_abs(1e-12)
    opt.set_xtol_rel(1e-10)
    opt.set_maxeval(20_000)
    step = np.maximum(0.05 * np.abs(x0), 0.02)
    step = np.minimum(step, np.where(np.isfinite(upper - lower), (upper - lower) / 4, np.inf))
    opt.set_initial_step(np.where(step > 0, step, 0.01))
    try:
        x = opt.optimize(x0)
        fmin = float(opt.last_optimum_value())
    except (nlopt.RoundoffLimited, RuntimeError, ValueError):
        if not best:
            return x0, math.nan
        fmin, x = best[0]
    if fmin >= 1e299:
        fmin = math.nan
    return np.asarray(x), fmin


# ---------------------------------------------------------------------- the profile grid
def _nextpar(pars: np.ndarray, zetas: np.ndarray, absstep: float, lower: float,
             upper: float) -> float:
    """lme4's ``nextpar``: the step in the parameter that moves ζ by ``absstep``."""
    num = pars[1] - pars[0]
    denom = zetas[1] - zetas[0]
    if not np.isfinite(denom) or denom == 0:
        step = 1e-6
    else:
        step = absstep * num / denom
        if step < 0:
            step = 1e-6
        elif abs(step) > MAXMULT * abs(num):
            step = math.copysign(MAXMULT * abs(num), step)
    return float(min(upper, max(lower, pars[1] + np.sign(num) * step)))


def _fill(rows: list[tuple[float, float, np.ndarray]], zeta: Callable, lowcut: float,
          upcut: float, delta: float, cutoff: float) -> list[tuple[float, float, np.ndarray]]:
    """lme4's ``fillmat``: rows (par, ζ, optimised others) from two starting rows."""
    while (len(rows) < MAXPTS and lowcut < rows[-1][0] < upcut
           and np.isfinite(rows[-1][1]) and abs(rows[-1][1]) <= cutoff):
        pars = np.array([rows[-2][0], rows[-1][0]])
        zs = np.array([rows[-2][1], rows[-1][1]])
        nxt = _nextpar(pars, zs, delta, lowcut, upcut)
        rows.append(zeta(nxt, rows[-1][2]))
    return rows


@dataclass(frozen=True)
class _Profile:
    name: str
    r_name: str
    par: np.ndarray
    zeta: np.ndarray
    lower: float
    upper: float
    why_not: str | None = None
    """Why the parameter was not profiled (then ``par`` and ``zeta`` are empty)."""


def _coordinate_scales(fit: LmerFit, params: list[VarParam],
                       columns: ColumnRescaling | None) -> list[float | None]:
    """Per SD or correlation, c with (its value in the optimiser's columns) = c x (its
    value in the formula's), or None where the optimiser's columns mix it with others.

    With Z = Z′T (``engines/native/rescale.py``), Σ = T⁻¹Σ′T⁻ᵀ, and T differs from a
    diagonal matrix only in the row of a term's intercept whose covariates were centred.
    Every other column j is only scaled (b′_j = T_jj b_j): its SD by T_jj, its
    correlations with other such columns not at all. The intercept's SD and its
    correlations are not coordinates of the centred term (the intercept at 0 is a
    combination of the centred intercept and the slopes)."""
    out: list[float | None] = []
    for vp in params:
        term = fit.design.random.terms[vp.term]
        T = None if columns is None else columns.transforms[term.block]
        if T is None:
            out.append(1.0)
            continue
        i, j = term.offset + vp.i, term.offset + vp.j
        mixed = [np.count_nonzero(T[r]) > 1 for r in (i, j)]
        if any(mixed):
            out.append(None)
        else:
            out.append(float(T[i, i]) if vp.is_sd else 1.0)
    return out


def _ml_fit(fit: LmerFit) -> LmerFit:
    if not fit.reml:
        return fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return refit_lmer(fit, reml=False)


def profile(fit: LmerFit, which: list[str] | None = None) -> list[_Profile]:
    """ζ profiles of the parameters (lme4's ``profile(fit)``; see the module docstring).

    ``which``: lme4 names (``.sig01``, ``.sigma``, fixed-effect names) to profile, None
    for all. Returns one profile per parameter: the parameter values and ζ, sorted."""
    ml = _ml_fit(fit)
    design = ml.design
    n = design.n
    # the deviance is minimised over the optimiser's (centred, scaled) random-effects
    # columns (reparam.py): the formula's SDs and correlations of a slope on a year span
    # orders of magnitude and a correlation of -1 + 1e-9, where BOBYQA's inner
    # minimisations stopped anywhere (σ's interval was 1.68 to 1.77 where it is 1.67);
    # ldL2 and the pwrss are the same on orthogonalised X columns
    problem = optimiser_problem(ml)
    pls, theta_hat, blocks, columns = problem.pls, problem.theta, problem.blocks, problem.columns
    params = var_params(ml)
    nvp = len(params)
    scales = _coordinate_scales(ml, params, columns) + [1.0]  # (σ: the same)
    base = ml.deviance
    estimates = np.append(sdcor_of(ml, ml.theta, ml.sigma, params), ml.sigma)
    opt_vp = np.append(sdcor_of(ml, theta_hat, ml.sigma, params), ml.sigma)
    lower = np.array([0.0 if p.is_sd else -1.0 for p in params] + [0.0])
    upper = np.array([math.inf if p.is_sd else 1.0 for p in params] + [math.inf])
    names = [p.r_name for p in params] + [".sigma"]
    labels = [p.name for p in params] + ["sigma"]
    fe = list(ml.fixef_names)
    nptot = nvp + 1 + len(fe)
    cutoff = math.sqrt(stats.chi2.ppf(0.99, nptot))
    delta = cutoff / 8.0
    wanted = set(names + fe) if which is None else set(which)
    out: list[_Profile] = []

    def dd(values: np.ndarray) -> float:
        sig = float(values[-1])
        theta = theta_of(ml, values[:-1], sig, params)
        if theta is None:
            return math.inf
        f = pls.factor(theta)
        if not f.ok:
            return math.inf
        return float(f.ldL2 + f.pwrss / sig**2 + n * math.log(2 * math.pi * sig**2))

    def check_dev(dev: float) -> float:
        diff = dev - base
        if diff < -1e-6 * max(1.0, abs(base)):
            warn(f"profiling found a deviance {-diff:.3g} below the ML fit's: the fit may "
                 "not have converged; the intervals use the lower value's profile")
        return max(diff, DEVTOL)

    for w, (nm, lab) in enumerate(zip(names, labels, strict=True)):
        if nm not in wanted and lab not in wanted:
            continue
        scale = scales[w]
        if scale is None:
            out.append(_Profile(lab, nm, np.empty(0), np.empty(0), lower[w], upper[w],
                                why_not=_MIXED))
            continue
        pw = float(estimates[w])
        others = [k for k in range(nvp + 1) if k != w]

        def zeta(xx: float, start: np.ndarray, w: int = w, pw: float = pw,
                 others: list[int] = others, scale: float = scale
                 ) -> tuple[float, float, np.ndarray]:
            def fn(x: np.ndarray) -> float:
                v = np.empty(nvp + 1)
                v[w] = scale * xx
                v[others] = x
                return dd(v)
            x, fval = _minimise(fn, start, lower[others], upper[others])
            if not math.isfinite(fval):
                return (xx, math.nan, start)
            return (xx, math.copysign(math.sqrt(check_dev(fval)), xx - pw), x)

        start0 = opt_vp[others]
        shift = 1e-3 if pw == 0 else pw * 1.01
        first = zeta(shift, start0)
        origin = (pw, 0.0, start0)
        up = _fill([origin, first], zeta, lower[w], upper[w], delta, cutoff)
        down = _fill([first, origin], zeta, lower[w], upper[w], delta, cutoff) \
            if pw > lower[w] else [first, origin]
        out.append(_collect(lab, nm, up + down, lower[w], upper[w]))

    se = np.sqrt(np.diag(ml.vcov_beta))
    y0 = design.y if design.offset is None else design.y - design.offset
    tlow = np.asarray(design.random.theta_lower, dtype=float)
    tup = np.full(len(tlow), math.inf)
    for j, nm in enumerate(fe):
        if nm not in wanted:
            continue
        est = float(ml.beta[j])
        xj = design.X[:, j]
        Xdrop = np.delete(design.X, j, axis=1)

        def fe_zeta(fw: float, start: np.ndarray, xj: np.ndarray = xj,
                    Xdrop: np.ndarray = Xdrop, est: float = est
                    ) -> tuple[float, float, np.ndarray]:
            # (prior weights and the offset of lmer's weights=/offset= kept)
            p1 = PLS.weighted(blocks, Xdrop, y0 - xj * fw, design.weights)
            th, fval = _minimise(lambda t: p1.objective(t, False), theta_hat, tlow, tup)
            if not math.isfinite(fval):
                return (fw, math.nan, start)
            return (fw, math.copysign(math.sqrt(check_dev(fval)), fw - est), th)

        first = fe_zeta(est + delta * se[j], theta_hat)
        origin = (est, 0.0, theta_hat)
        up = _fill([origin, first], fe_zeta, -math.inf, math.inf, delta, cutoff)
        down = _fill([first, origin], fe_zeta, -math.inf, math.inf, delta, cutoff)
        out.append(_collect(nm, nm, up + down, math.nan, math.nan))
    return out


def _collect(name: str, r_name: str, rows: list[tuple[float, float, np.ndarray]],
             lower: float, upper: float) -> _Profile:
    seen: dict[float, float] = {}
    for par, z, _ in rows:
        if np.isfinite(z):
            seen.setdefault(par, z)
    par = np.array(sorted(seen))
    return _Profile(name, r_name, par, np.array([seen[p] for p in par]), lower, upper)


# ---------------------------------------------------------------------- splines
def back_spline(par: np.ndarray, zeta: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The inverse of the natural interpolating spline ζ(par), as R's
    ``backSpline(interpSpline(zeta ~ par))`` builds it; NaN outside the profiled ζ range.

    Raises ValueError when ζ is not monotone (R: "spline must be monotone")."""
    nk = len(par)
    if nk < 4:
        raise ValueError("must have at least 4 points")
    cs = CubicSpline(par, zeta, bc_type="natural")
    slope = cs(par, 1)
    kdiff = np.diff(par)
    bkn = np.asarray(zeta, dtype=float)
    adiff = np.diff(bkn)
    if np.all(adiff < 0):
        rev = True
    elif np.all(adiff > 0):
        rev = False
    else:
        raise ValueError("spline must be monotone")
    b = np.zeros((nk, 4))
    b[:, 0] = par
    b[:, 1] = 1.0 / slope
    for i in range(nk - 1):
        a = adiff[i]
        A = np.array([[a**2, a**3], [2 * a, 3 * a**2]])
        rhs = np.array([kdiff[i] - a * b[i, 1], b[i + 1, 1] - b[i, 1]])
        b[i, 2:4] = np.linalg.solve(A, rhs)
    b[nk - 1, 1:] = np.nan
    if nk > 2:
        b[0, 3] = b[nk - 2, 3] = 0.0
        a0 = adiff[0]
        b[0, 1:3] = np.linalg.solve(np.array([[a0, a0**2], [1.0, 2 * a0]]),
                                    np.array([kdiff[0], 1.0 / slope[1]]))
        al = adiff[nk - 2]
        b[nk - 2, 2] = (kdiff[nk - 2] - al * b[nk - 2, 1]) / al**2
    if b[0, 2] > 0:
        b[0, 2] = 0.0
        b[0, 1] = kdiff[0] / adiff[0]
    if b[nk - 2, 2] < 0:
        b[nk - 2, 2] = 0.0
        b[nk - 2, 1] = kdiff[nk - 2] / adiff[nk - 2]
    knots = bkn
    if rev:
        knots, b = knots[::-1], b[::-1]

    def predict(z: np.ndarray) -> np.ndarray:
        z = np.atleast_1d(np.asarray(z, dtype=float))
        out = np.full(len(z), np.nan)
        for m, v in enumerate(z):
            if v == knots[0]:
                i = 0
            else:
                i = int(np.searchsorted(knots, v, side="left")) - 1
                if i < 0 or i >= nk - 1:
                    continue
            d = v - knots[i]
            out[m] = b[i, 0] + d * (b[i, 1] + d * (b[i, 2] + d * b[i, 3]))
        return out

    return predict


def profile_confint(fit: LmerFit, level: float = 0.95,
                    which: list[str] | None = None) -> pd.DataFrame:
    """Profile intervals (lme4's ``confint(fit, method = "profile")``).

    Returns
    -------
    pandas.DataFrame
        ``parameter`` (lme4's name), ``term`` (crossed's), ``conf_low``, ``conf_high``.
    """
    a = (1.0 - level) / 2.0
    z = stats.norm.ppf([a, 1.0 - a])
    rows = []
    for pr in profile(fit, which):
        if pr.why_not is not None:
            warn(f"no profile interval for {pr.r_name} ({pr.name}): {pr.why_not}")
            rows.append({"parameter": pr.r_name, "term": pr.name, "conf_low": math.nan,
                         "conf_high": math.nan})
            continue
        try:
            lo, hi = back_spline(pr.par, pr.zeta)(z)
        except ValueError:
            if len(pr.zeta) > 1 and np.min(np.diff(pr.zeta)) < -1e-2:
                warn(f"non-monotonic profile for {pr.r_name}: no interval")
                lo = hi = math.nan
            else:
                warn(f"bad spline fit for {pr.r_name}: falling back to linear interpolation")
                lo, hi = (float(np.interp(v, pr.zeta, pr.par, left=np.nan, right=np.nan))
                          for v in z)
        if not np.isfinite(lo):
            lo = pr.lower
        if not np.isfinite(hi):
            hi = pr.upper
        rows.append({"parameter": pr.r_name, "term": pr.name, "conf_low": float(lo),
                     "conf_high": float(hi)})
    return pd.DataFrame(rows, columns=["parameter", "term", "conf_low", "conf_high"])
