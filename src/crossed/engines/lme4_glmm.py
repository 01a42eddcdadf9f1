"""The lme4 engine's GLMMs: R's ``lme4::glmer`` through rpy2, returning a ``GlmerResult``.

As for ``lmer`` (:mod:`crossed.engines.lme4`), lme4 is given the design itself: the
response (a proportion for the binomial family, with the trials as prior weights, which is
how lme4 stores ``cbind(successes, failures)``), every fixed-effects column and random-
effects column as a numeric variable, each grouping factor with crossed's levels, the
prior weights and the offset; θ, β and u map back by position. Everything reported is
lme4's own: θ, β, ``vcov()`` (lme4's default: from the finite-difference Hessian over
(θ, β)), the spherical modes u, ``deviance()``, ``logLik()``, ``isSingular`` and the
convergence messages (warned as the native engine warns them).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from crossed.design import Design
from crossed.engines.lme4 import (
    _checked_layout,
    _map_u,
    _num,
    _r_list,
    _report_lme4_messages,
    design_to_r,
    info_from_r,
    r_session,
)

__all__ = ["fit_glmm_lme4", "glmer_in_r", "glmm_info_in_r"]

_R_GLMER = r"""
crossed_glmer <- function(formula, data, family, link, nAGQ, w, off) {
  msgs <- character(0)
  fam <- if (family == "binomial") stats::binomial(link = link) else stats::poisson(link = link)
  args <- list(formula = stats::as.formula(formula), data = data, family = fam,
               nAGQ = nAGQ)
  if (length(w)) args$weights <- w
  if (length(off)) args$offset <- off
  t0 <- proc.time()[["elapsed"]]
  fit <- withCallingHandlers(
    do.call(lme4::glmer, args),
    warning = function(w) {
      msgs <<- c(msgs, conditionMessage(w)); invokeRestart("muffleWarning")
    },
    message = function(m) {
      msgs <<- c(msgs, trimws(conditionMessage(m))); invokeRestart("muffleMessage")
    })
  secs <- proc.time()[["elapsed"]] - t0
  list(fit = fit, info = crossed_glmm_info(fit, msgs, secs))
}
crossed_glmm_info <- function(fit, msgs, secs) {
  info <- crossed_extract(fit, msgs, secs)
  info$loglik <- as.numeric(stats::logLik(fit))
  info$eta <- as.numeric(fit@resp$eta)
  re <- lme4::ranef(fit, condVar = TRUE)
  info$postvar <- lapply(names(fit@cnms), function(g) {
    p <- attr(re[[g]], "postVar")
    if (is.list(p)) lapply(p, as.numeric) else list(as.numeric(p))
  })
  info$postvar_groups <- names(fit@cnms)
  info
}
"""


def _glmer_functions() -> Any:
    """rpy2's ``robjects`` with this module's R functions defined (once per session)."""
    ro = r_session().ro
    if "crossed_glmm_info" not in ro.globalenv:
        ro.r(_R_GLMER)
    return ro


def glmm_info_in_r(fit: object) -> object:
    """What a fitted ``glmerMod`` holds, as :func:`glmer_in_r` reads it (``info_from_r``'s
    fields, ``loglik``, ``eta``, the conditional variances), for a fit made elsewhere
    (pymer4's)."""
    ro = _glmer_functions()
    return ro.globalenv["crossed_glmm_info"](fit, ro.StrVector([]), ro.FloatVector([np.nan]))


def glmer_in_r(design: Design, family: Any, nagq: int = 1) -> tuple[object, dict[str, Any]]:
    """Fit the design with ``lme4::glmer``; the R fit and :func:`info_from_r`'s values
    (plus ``loglik``)."""
    ro = _glmer_functions()
    df, formula = design_to_r(design)
    w = getattr(design, "weights", None)
    off = getattr(design, "offset", None)
    res = ro.globalenv["crossed_glmer"](
        formula, df, family.name, family.link.name, ro.IntVector([int(nagq)]),
        ro.FloatVector([] if w is None else np.asarray(w, dtype=float).tolist()),
        ro.FloatVector([] if off is None else np.asarray(off, dtype=float).tolist()))
    d = _r_list(res[1])
    info = info_from_r(res[1])
    info["loglik"] = float(_num(d["loglik"])[0])
    info["eta"] = _num(d["eta"])
    info["postvar"] = {str(g): [_num(a) for a in pv] for g, pv in
                       zip(d["postvar_groups"], d["postvar"], strict=True)}
    return res[0], info


def _cond_var_u(design: Design, theta: np.ndarray,
                postvar: dict[str, list[np.ndarray]]) -> tuple[np.ndarray, ...]:
    """lme4's conditional covariances of b (``ranef(condVar=TRUE)``'s postVar, per term)
    as crossed's spherical blocks: C = T⁺ V_b T⁺ᵀ per level (T the block's template; the
    pseudo-inverse where θ is on the boundary, where V_b is 0 in those directions).
    Covariances between two terms of one grouping factor, which lme4 does not report,
    are 0."""
    out = []
    seen: dict[str, int] = {}
    for bi, blk in enumerate(design.random.blocks):
        V = np.zeros((blk.nlevels, blk.q, blk.q))
        for term in design.random.terms:
            if term.block != bi:
                continue
            g = f".g{bi}"
            k = len(term.columns)
            i = seen.get(g, 0)
            seen[g] = i + 1
            arr = postvar[g][i].reshape((k, k, blk.nlevels), order="F")
            sl = slice(term.offset, term.offset + k)
            V[:, sl, sl] = np.moveaxis(arr, 2, 0)
        Tp = np.linalg.pinv(blk.template(theta))
        out.append(np.einsum("ij,ljk,mk->lim", Tp, V, Tp))
    return tuple(out)


def fit_glmm_lme4(design: Design, family: Any, nagq: int = 1, control: Any = None,
                  data_name: str = "data") -> Any:
    """Fit a GLMM design with R's ``lme4::glmer`` (its defaults: bobyqa + Nelder-Mead).

    Parameters
    ----------
    design : Design
        With ``weights`` (binomial trials or prior weights) and ``offset`` when the model
        has them.
    family : Family
        ``crossed.binomial(link)`` or ``crossed.poisson()``.
    nagq : int
        lme4's ``nAGQ`` (1: Laplace).
    control : None
        Must be None (the native engine's settings).
    data_name : str

    Returns
    -------
    GlmerResult
        ``engine="lme4"``, with lme4's θ, β, vcov, u, η, conditional variances,
        ``deviance()``, criterion (−2 ``logLik``) and messages; ``engine_info`` holds
        R's time, optimiser and evaluations.
    """
    from crossed.model.glmm.result import GlmerResult

    if control is not None:
        raise ValueError("control= sets the native engine's optimiser; the lme4 engine runs "
                         "glmer's defaults (pass control=None)")
    t0 = time.perf_counter()
    _, info = glmer_in_r(design, family, nagq)
    info = _checked_layout(design, info, positional=True)
    messages, status = _report_lme4_messages(design, info)
    u = _map_u(design, info)
    if u is None:
        raise RuntimeError("lme4's random-effect levels do not match crossed's design")
    return GlmerResult(
        design=design, family=family, nagq=int(nagq), engine="lme4", theta=info["theta"],
        beta=info["fixef"], u=u, deviance=info["criterion"], criterion=-2.0 * info["loglik"],
        vcov_beta=info["vcov"], linear_predictor=info["eta"],
        cond_var_u=_cond_var_u(design, info["theta"], info["postvar"]), opt=None,
        is_singular=info["singular"], converged=status.converged, convergence=status,
        messages=tuple(messages), data_name=data_name,
        fit_seconds=time.perf_counter() - t0,
        engine_info={"r_seconds": info["seconds"], "r_optimizer": info["optimizer"],
                     "r_feval": info["feval"]})
