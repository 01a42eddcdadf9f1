"""Simulating responses from a fitted model (lme4's ``simulate.merMod``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed._conventions import as_generator

if TYPE_CHECKING:
    from crossed.fit import LmerFit

__all__ = ["Seed", "simulate_responses"]

Seed = int | np.random.Generator | None


def simulate_responses(fit: LmerFit, nsim: int = 1, seed: Seed = None,
                       use_ranef: bool = False) -> np.ndarray:
    """Draw responses from the fitted model.

    Parameters
    ----------
    fit : LmerFit
    nsim : int
        Number of simulated response vectors.
    seed : int or numpy.random.Generator, optional
        Identical seeds give identical draws.
    use_ranef : bool
        False (lme4's default, ``re.form = NA``): new random effects b ~ N(0, σ²ΛΛᵀ) for
        every simulation. True (``re.form = NULL``): condition on the estimated conditional
        modes, only the residuals are new.

    Returns
    -------
    numpy.ndarray
        Shape (nobs, nsim): y* = Xβ̂ + Zb* + ε*, ε* ~ N(0, σ̂²I).
    """
    from crossed._conventions import check_count

    nsim = check_count("nsim", nsim)
    rng = as_generator(seed)
    design = fit.design
    n = design.n
    if use_ranef:
        mean = fit.fitted()[:, None] + np.zeros((1, nsim))
    else:
        mean = np.repeat((design.X @ fit.beta)[:, None], nsim, axis=1)
        for blk in design.random.blocks:
            T = blk.template(fit.theta)
            u = rng.standard_normal((blk.nlevels, blk.q, nsim))
            b = fit.sigma * np.einsum("ab,lbs->las", T, u)
            mean += np.einsum("iq,iqs->is", blk.Z, b[blk.codes])
    return mean + fit.sigma * rng.standard_normal((n, nsim))
