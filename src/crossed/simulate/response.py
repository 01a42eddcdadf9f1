"""Simulating responses from a fitted model (lme4's ``simulate.merMod``), for linear
(:class:`~crossed.LmerFit`) and generalised (:class:`~crossed.GlmerFit`) mixed models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from crossed._conventions import as_generator, check_count
from crossed.model.glmm.result import GlmerResult as GlmerFit

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["Seed", "is_glmm", "random_scale", "simulate_responses"]

Seed = int | np.random.Generator | None


def is_glmm(fit: Any) -> bool:
    """Whether ``fit`` is a generalised linear mixed model (no residual σ; y from a family)."""
    return isinstance(fit, GlmerFit)


def random_scale(fit: LmerFit | GlmerFit) -> float:
    """Scale of the random effects: b = scale · Λu. σ for an LMM (lme4's relative
    covariance factor), 1 for binomial and Poisson GLMMs (no dispersion parameter)."""
    return 1.0 if is_glmm(fit) else float(fit.sigma)  # type: ignore[union-attr]


class _Draws(NamedTuple):
    """What a fit's simulations share (:func:`_draws_of`, kept on the fit): the fixed
    part Xβ̂ (+ offset) and, per random-effects block, its relative factor T at θ̂ and
    whether it is a scalar intercept (Z b is then each row's level's b)."""

    fixed: np.ndarray
    templates: tuple[np.ndarray, ...]
    intercept: tuple[bool, ...]


def _draws_of(fit: LmerFit | GlmerFit) -> _Draws:
    """The fit's :class:`_Draws`, computed once per fit (its memo ``simulation``): a
    bootstrap or power simulation draws thousands of responses from one fit."""
    def compute() -> _Draws:
        design = fit.design
        fixed = design.X @ fit.beta
        if is_glmm(fit):
            fixed = fixed + fit.offset  # type: ignore[union-attr]
        elif design.offset is not None:
            fixed = fixed + design.offset
        blocks = design.random.blocks
        return _Draws(fixed, tuple(blk.template(fit.theta) for blk in blocks),
                      tuple(bool(blk.q == 1 and blk.column_stats[0][0]) for blk in blocks))
    return cast(_Draws, fit.memo("simulation", compute))


def _linear_predictor(fit: LmerFit | GlmerFit, nsim: int, rng: np.random.Generator,
                      use_ranef: bool) -> np.ndarray:
    """(nobs, nsim) Xβ̂ + Zb* (+ offset for a GLMM); b* new draws or the conditional modes."""
    if use_ranef:
        eta = fit.eta if is_glmm(fit) else fit.fitted()  # type: ignore[union-attr]
        return np.asarray(eta, dtype=float)[:, None] + np.zeros((1, nsim))
    draws = _draws_of(fit)
    mean = draws.fixed[:, None].repeat(nsim, axis=1)
    scale = random_scale(fit)
    for blk, T, intercept in zip(fit.design.random.blocks, draws.templates, draws.intercept,
                                 strict=True):
        u = rng.standard_normal((blk.nlevels, blk.q, nsim))
        if intercept:  # b = σ t u, and Z b is each row's level's b (one product each, and
            # 1·x = x: the general sums' numbers without two einsums)
            mean += (scale * (T[0, 0] * u[:, 0]))[blk.codes]
            continue
        b = scale * np.einsum("ab,lbs->las", T, u)
        mean += np.einsum("iq,iqs->is", blk.Z, b[blk.codes])
    return mean


def _draw_family(fit: GlmerFit, eta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Responses from the fit's family at linear predictor ``eta`` (nobs, nsim), on the scale
    of ``design.y``: binomial proportions successes/trials (trials = prior weights, 1 for a
    0/1 response, as lme4's ``binomial()$simulate``), Poisson counts."""
    mu = fit.family.link.linkinv(eta)
    return fit.family.simulate(mu, np.asarray(fit.prior_weights, dtype=float), rng)


def simulate_responses(fit: LmerFit | GlmerFit, nsim: int = 1, seed: Seed = None,
                       use_ranef: bool = False) -> np.ndarray:
    """Draw responses from the fitted model.

    Parameters
    ----------
    fit : LmerFit or GlmerFit
    nsim : int
        Number of simulated response vectors.
    seed : int or numpy.random.Generator, optional
        Identical seeds give identical draws.
    use_ranef : bool
        False (lme4's default, ``re.form = NA``): new random effects for every simulation,
        b* ~ N(0, σ²ΛΛᵀ) (LMM) or N(0, ΛΛᵀ) (binomial/Poisson GLMM: no σ). True
        (``re.form = NULL``): condition on the estimated conditional modes, only the
        observation-level noise is new.

    Returns
    -------
    numpy.ndarray
        Shape (nobs, nsim). LMM: y* = Xβ̂ + Zb* + offset + ε*, ε* ~ N(0, σ̂²/w) (prior
        weights w, 1 when the fit has none), as lme4's ``simulate`` with
        ``weights=``/``offset=``. GLMM: η* = Xβ̂ + Zb* + offset, y* from the family at
        μ* = g⁻¹(η*): Bernoulli (0/1), Binomial(trials, μ*) / trials (a proportion, trials
        the prior weights, as ``design.y``), Poisson(μ*). The same model as lme4's
        ``simulate.merMod`` (distributions, not R's random stream); checked in
        ``tests/simulate/test_glmm_simulate.py`` by moments.
    """
    nsim = check_count("nsim", nsim)
    rng = as_generator(seed)
    eta = _linear_predictor(fit, nsim, rng, use_ranef)
    if is_glmm(fit):
        return _draw_family(fit, eta, rng)  # type: ignore[arg-type]
    eps = fit.sigma * rng.standard_normal((fit.design.n, nsim))  # type: ignore[union-attr]
    if fit.design.weights is not None:  # lme4: residual variance σ²/w
        eps /= np.sqrt(fit.design.weights)[:, None]
    return eta + eps
