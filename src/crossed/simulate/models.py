"""Models to simulate from: user-specified parameters and extended designs (simr's
``makeLmer`` and ``extend``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.design import build_design
from crossed.formula import parse
from crossed.model.prior import refuse_prior
from crossed.simulate.response import is_glmm

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["extend", "specify"]


def _theta_from_varcorr(design, varcorr: Mapping[str, Any], sigma: float) -> np.ndarray:
    theta = np.zeros(design.random.ntheta)
    groups = [t.group for t in design.random.terms]
    for term in design.random.terms:
        k = len(term.columns)
        key_col = f"{term.group}.{term.columns[0]}"
        if k == 1 and key_col in varcorr:
            value = varcorr[key_col]
        elif term.group in varcorr and groups.count(term.group) == 1:
            value = varcorr[term.group]
        elif term.group in varcorr:
            raise ValueError(f"group {term.group!r} has several terms; give each as "
                             f"'{term.group}.<column>' (e.g. {key_col!r})")
        else:
            raise ValueError(f"no variance given for the random term of {term.group!r} "
                             f"({', '.join(term.columns)}); keys: group names "
                             f"{sorted(set(groups))}")
        arr = np.atleast_2d(np.asarray(value, dtype=float))
        if k == 1:
            if arr.size != 1 or arr[0, 0] < 0:
                raise ValueError(f"the SD of {term.group!r} must be one number >= 0")
            T = arr / sigma  # an SD
        else:
            if arr.shape != (k, k):
                raise ValueError(f"the covariance of {term.group!r} must be {k} x {k} "
                                 f"({', '.join(term.columns)})")
            T = np.linalg.cholesky(0.5 * (arr + arr.T)) / sigma
        pos = term.theta_start
        for c in range(k):
            for r in range(c, k):
                theta[pos] = T[r, c]
                pos += 1
    return theta


def specify(formula: str, data: pd.DataFrame, fixef: Mapping[str, float],
            varcorr: Mapping[str, Any], sigma: float, reml: bool = True,
            reference: dict[str, str] | None = None) -> LmerFit:
    """A model with parameters given by the user, to simulate from (simr's ``makeLmer``).

    Parameters
    ----------
    formula : str
        lme4 formula. The response column may be absent from ``data`` (it is filled with
        zeros: only the design matters).
    data : pandas.DataFrame
        The design: one row per observation to simulate.
    fixef : mapping
        Coefficient name -> value, for every column of the fixed part (lme4's names, e.g.
        ``{"(Intercept)": 70, "lr1e-5": -1.2, ...}``).
    varcorr : mapping
        Random-effect SDs by grouping factor (``{"dataset": 2.0, "model:dataset": 1.0}``);
        a covariance matrix for a vector-valued term (``(1 + x | g)``); for ``||`` terms,
        one SD per ``"group.column"`` key.
    sigma : float
        Residual SD.
    reml : bool
        Criterion of the refits.
    reference : dict, optional
        Reference levels, as :func:`crossed.lmer`.

    Returns
    -------
    LmerFit
        With the given β, θ (Λ = chol(Σ)/σ, lme4's parameterisation) and σ. ``vcov_beta``
        is the covariance of the GLS estimate of β on this design at these parameters,
        σ² (R_XᵀR_X)⁻¹ (lme4's ``vcov`` at θ and σ; it does not depend on the response).
        ``deviance`` is the criterion at these parameters when ``data`` holds the
        response: the REML criterion at (θ, σ) (``reml=True``) or −2 log-likelihood at
        (θ, β, σ); without a response it is NaN (and so are ``loglik``, ``aic``, ``bic``),
        as the fit's ``messages`` say. Use it with :func:`power_sim`, :func:`power_curve`,
        :func:`extend` or ``simulate``.
    """
    from crossed.model.result import LmerResult as LmerFit

    if (isinstance(sigma, bool | np.bool_) or not isinstance(sigma, int | float | np.number)
            or not np.isfinite(sigma) or sigma <= 0):
        raise ValueError(f"sigma must be a positive number, got {sigma!r}")
    spec = parse(formula, reference=reference)
    frame = data.copy()
    has_response = spec.response in frame.columns or not spec.response.isidentifier()
    if not has_response:
        frame[spec.response] = 0.0
    design = build_design(spec, frame)
    names = list(design.fixed.names)
    missing = [n for n in names if n not in fixef]
    extra = [n for n in fixef if n not in names]
    if missing or extra:
        raise ValueError(f"fixef must give every coefficient: missing {missing}, unknown "
                         f"{extra}; the coefficients are {names}")
    bad = [n for n in names if isinstance(fixef[n], bool | np.bool_)
           or not isinstance(fixef[n], int | float | np.number) or not np.isfinite(fixef[n])]
    if bad:
        raise ValueError(f"fixef[{bad[0]!r}] must be a finite number, got {fixef[bad[0]]!r}")
    beta = np.array([float(fixef[n]) for n in names])
    theta = _theta_from_varcorr(design, varcorr, sigma)
    if has_response:
        deviance, vcov = _criterion_and_vcov(design, theta, beta, float(sigma), reml)
    else:  # vcov does not depend on the response; any non-degenerate one will do
        stand_in = np.random.default_rng(0).standard_normal(design.n)
        _, vcov = _criterion_and_vcov(design.with_response(stand_in), theta, beta,
                                      float(sigma), reml)
    messages = ["parameters specified by the user"]
    if not has_response:
        deviance = np.nan
        messages.append(f"no response column {spec.response!r} in the data: deviance, "
                        "logLik, AIC and BIC are not available (NaN)")
    u = tuple(np.zeros((b.nlevels, b.q)) for b in design.random.blocks)
    bounded = np.isfinite(design.random.theta_lower)
    return LmerFit(design=design, reml=reml, engine="native", theta=theta, beta=beta,
                   sigma=float(sigma), deviance=deviance, vcov_beta=vcov,
                   u=u, opt=None, is_singular=bool(np.any(theta[bounded] < 1e-4)),
                   converged=True, messages=tuple(messages), data_name="specified")


def _criterion_and_vcov(design, theta: np.ndarray, beta: np.ndarray, sigma: float,
                        reml: bool) -> tuple[float, np.ndarray]:
    """The REML criterion at (θ, σ) or −2 log-likelihood at (θ, β, σ), and σ²(R_XᵀR_X)⁻¹,
    from the penalised least squares factorisation at θ."""
    from crossed.model.pls import PLS, deviance_at

    n, p = design.X.shape
    pls = PLS(design.random.blocks, design.X, design.y)
    f = pls.factor(theta)
    if not f.ok:
        raise ValueError("the specified variances give a system that is not positive "
                         "definite; check varcorr and sigma")
    if reml:
        dev = deviance_at(f, sigma, n, p, reml=True)
    else:  # r²(θ, β) = r²(θ) + ‖R_X (β − β̂_θ)‖²
        beta_hat, _ = pls.solve(f)
        Lx = pls.rx_factor(f)  # R_X, lower (dense or sparse path)
        extra = float(np.sum((Lx.T @ (beta - beta_hat)) ** 2))
        s2 = sigma * sigma
        dev = f.ldL2 + (f.pwrss + extra) / s2 + n * np.log(2.0 * np.pi * s2)
    Ri = pls.rx_inverse(f)
    return float(dev), sigma**2 * (Ri.T @ Ri)


def _plain_frame(fit: LmerFit) -> pd.DataFrame:
    frame = fit.design.frame
    if frame is None:
        raise ValueError("the fit keeps no data columns; extend needs them")
    return frame.copy()


def extend(fit: LmerFit, along: str | None = None, within: str | list[str] | None = None,
           n: int = 10, new_fixef: Mapping[str, float] | None = None) -> LmerFit:
    """The same model on a larger design, keeping its parameters (simr's ``extend``).

    Parameters
    ----------
    fit : LmerFit
        Fitted (or :func:`specify`-d) model.
    along : str, optional
        A factor column (``"dataset"``, ``"model"``, ``"seed"``, ``"language"``): new
        levels are added, each a copy of the rows of an existing level (cycling through
        them), labelled ``"<level>.<copy>"``, until there are ``n`` levels. New levels of a
        grouping factor get new random effects when simulating; a factor of the fixed part
        gets new coefficients, whose values must be given in ``new_fixef``.
    within : str or list of str, optional
        Instead, add rows within each combination of these columns (copies of its rows,
        cycling) until each has ``n`` rows (simr's ``within``).
    n : int
        Target number of levels (``along``) or rows per combination (``within``).
    new_fixef : mapping, optional
        Values of the coefficients the new levels of a fixed-part factor create (lme4
        names, e.g. ``{"seed20.2": 0.0, "seed47.2": 0.0}``); the error message lists them.

    Returns
    -------
    LmerFit or GlmerFit
        Parameters (β, θ, σ) of ``fit``; conditional modes of existing levels kept, new
        levels 0. ``deviance`` and ``vcov`` still describe the original data. A GLMM (0/1
        or count response; not with prior weights or an offset) gets its linear predictor
        on the new rows; its conditional variances are not recomputed (set to the prior's,
        identity on the spherical scale).
    """
    refuse_prior(fit, "extend()", why="the new rows would need weights/offset values")
    if (along is None) == (within is None):
        raise ValueError("give exactly one of along= or within=")
    glmm = is_glmm(fit)
    if glmm and (fit.design.weights is not None or fit.design.offset is not None):
        raise ValueError("extend: a GLMM with prior weights (binomial trials, cbind) or an "
                         "offset cannot be extended yet: the new rows would need them")
    frame = _plain_frame(fit)
    design = fit.design
    if along is not None:
        if along not in frame.columns:
            raise ValueError(f"{along!r} is not a column of the model's data "
                             f"({', '.join(frame.columns)})")
        col = frame[along]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            raise ValueError(f"{along!r} is not a factor column")
        levels = [lv for lv in col.cat.categories if (col == lv).any()]
        m = len(levels)
        if n <= m:
            raise ValueError(f"{along!r} already has {m} levels; n must be larger")
        parts = [frame]
        new_levels = []
        for j in range(m, n):
            src = levels[j % m]
            label = f"{src}.{j // m + 1}"
            new_levels.append(label)
            block = frame[col == src].copy()
            block[along] = label
            parts.append(block)
        out = pd.concat(parts, ignore_index=True)
        out[along] = pd.Categorical(out[along].astype(str),
                                    categories=[str(v) for v in levels] + new_levels)
    else:
        within_l = [within] if isinstance(within, str) else list(within)
        parts = []
        for _, grp in frame.groupby(within_l, observed=True, sort=False):
            reps = -(-n // len(grp))
            parts.append(pd.concat([grp] * reps).iloc[:n])
        out = pd.concat(parts, ignore_index=True)
    for c in out.columns:  # keep category order (and reference levels) of the fit
        if c in design.levels and c != along:
            out[c] = pd.Categorical(out[c], categories=list(design.levels[c]))
    new = build_design(design.spec, out)
    beta, vcov = fit.beta, fit.vcov_beta
    if new.fixed.names != design.fixed.names:
        beta, vcov = _extended_beta(fit, new.fixed.names, new_fixef or {})
    u = []
    for blk_old, blk_new, u_old in zip(design.random.blocks, new.random.blocks, fit.u,
                                       strict=True):
        index = {lv: i for i, lv in enumerate(blk_old.levels)}
        un = np.zeros((blk_new.nlevels, blk_new.q))
        for i, lv in enumerate(blk_new.levels):
            if lv in index:
                un[i] = u_old[index[lv]]
        u.append(un)
    what = f"along {along} to {n} levels" if along else f"within {within} to {n} rows"
    extra: dict[str, Any] = {}
    if glmm:  # the GLMM's stored linear predictor and conditional variances, on the new rows
        eta = new.X @ beta
        for blk, un in zip(new.random.blocks, u, strict=True):
            b = un @ blk.template(fit.theta).T
            eta = eta + np.einsum("iq,iq->i", blk.Z, b[blk.codes])
        extra = {"linear_predictor": eta,
                 "cond_var_u": tuple(np.repeat(np.eye(b.q)[None], b.nlevels, axis=0)
                                     for b in new.random.blocks)}
    return replace(fit, design=new, beta=beta, vcov_beta=vcov, u=tuple(u),
                   messages=fit.messages + (f"design extended {what}",), **extra)


def _extended_beta(fit: LmerFit, names: tuple[str, ...],
                   new_fixef: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """β over the extended design's columns: old values, and ``new_fixef`` for new ones."""
    old = dict(zip(fit.fixef_names, fit.beta, strict=True))
    lost = [nm for nm in old if nm not in names]
    if lost:
        raise ValueError(f"the extended design lost fixed-effect columns {lost}")
    added = [nm for nm in names if nm not in old]
    missing = [nm for nm in added if nm not in new_fixef]
    if missing:
        raise ValueError(f"the new levels create fixed-effect columns {added}; give their "
                         f"values with new_fixef= (missing: {missing})")
    beta = np.array([old[nm] if nm in old else float(new_fixef[nm]) for nm in names])
    idx = {nm: i for i, nm in enumerate(fit.fixef_names)}
    vcov = np.full((len(names), len(names)), np.nan)
    for a, na in enumerate(names):
        for b, nb in enumerate(names):
            if na in idx and nb in idx:
                vcov[a, b] = fit.vcov_beta[idx[na], idx[nb]]
    return beta, vcov
