"""The Laplace deviance at many (θ, β) points at once, for one scalar random-effects term.

The finite-difference gradient and Hessian of lme4's convergence checks and ``vcov``
evaluate the criterion at 2m + 2m(m − 1) fixed points. With a single scalar term each
point's PIRLS (β fixed, started from the stage's ``lp0`` as lme4) is run side by side with
the others: the same arithmetic, element by element, as :meth:`GlmmProblem.pirls` (the same
per-level sums in the same order, the same per-point dot products), each point with its
own convergence test (lme4's, and η settled when ``prob.exact``), step halvings and
failures, so that every value is the one :meth:`GlmmProblem.deviance` returns for that
point, bit for bit; only the Python overhead per point and iteration goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed.model.glmm.pirls import ETA_TOL, MAX_POLISH

if TYPE_CHECKING:
    from crossed.model.glmm.pirls import GlmmProblem

__all__ = ["laplace_many"]


def laplace_many(prob: GlmmProblem, points: list[np.ndarray]) -> np.ndarray:
    """``[prob.deviance(x) for x in points]`` (Laplace, one scalar term), side by side.

    Parameters
    ----------
    prob : GlmmProblem
        With a single scalar random-effects term (``prob.scalar1``).
    points : list of numpy.ndarray
        (θ, β) vectors.

    Returns
    -------
    numpy.ndarray
        The Laplace deviance at each point (inf where its PIRLS failed, as ``deviance``).
    """
    assert prob.scalar1
    P = len(points)
    prob.evaluations += P
    if not P:
        return np.zeros(0)
    codes, nl, zc, ti, ones = prob._s1
    p = prob.p
    both = prob.family.link.mu_and_mu_eta
    pars = [np.asarray(x, dtype=float) for x in points]
    k = len(pars[0]) - p
    t = np.array([float(x[ti]) for x in pars])
    fixed = np.stack([prob.offset + prob.X @ x[k:] for x in pars])
    lp0 = prob.lp0
    eta0 = prob.offset + (prob.eta_start - prob.offset if lp0 is None else lp0)
    eta = np.tile(eta0, (P, 1))
    mu, me = both(eta)
    u = np.zeros((P, nl))
    old = np.full(P, np.inf)
    dlast = np.ones((P, nl))
    out = np.full(P, np.inf)
    active = np.ones(P, dtype=bool)
    polish = np.zeros(P, dtype=int)
    keys = codes[None, :] + nl * np.arange(P)[:, None]

    def rel(rows: np.ndarray, U: np.ndarray, MU: np.ndarray) -> np.ndarray:
        return np.array([prob.resdev(MU[i]) + float(U[i] @ U[i]) for i in range(len(rows))])

    def linpred(rows: np.ndarray, U: np.ndarray) -> np.ndarray:
        g = (t[rows][:, None] * U)[:, codes]
        out: np.ndarray = fixed[rows] + (g if ones else zc * g)
        return out

    with np.errstate(all="ignore"):
        for _ in range(prob.maxit):
            A = np.flatnonzero(active)
            if not len(A):
                break
            m = len(A)
            me_a = me[A]
            w = prob.wt * me_a * me_a / prob.family.variance(mu[A])
            sw = np.sqrt(w)
            z = eta[A] - fixed[A] + (prob.y - mu[A]) / me_a
            w = sw * sw
            wz = w if ones else w * zc
            kk = keys[:m].ravel()
            tt = t[A]
            d = (tt * tt)[:, None] * np.bincount(
                kk, weights=(wz if ones else wz * zc).ravel(), minlength=m * nl
            ).reshape(m, nl) + 1.0
            ru = tt[:, None] * np.bincount(kk, weights=(wz * z).ravel(),
                                           minlength=m * nl).reshape(m, nl)
            u_new = ru / d
            dlast[A] = d
            eta_new = linpred(A, u_new)
            mu_new, me_new = both(eta_new)
            pdev = rel(A, u_new, mu_new)
            ok = np.isfinite(pdev) & (np.abs(old[A] - pdev) < prob.tol * np.abs(pdev))
            if prob.exact:  # η settled too (pirls.settled, point by point)
                moved = np.max(np.abs(eta_new - eta[A]), axis=1)
                still = moved <= ETA_TOL * (1.0 + np.max(np.abs(eta_new), axis=1))
                conv = ok & (still | (polish[A] >= MAX_POLISH))
            else:
                conv = ok
            polish[A[ok & ~conv]] += 1  # lme4's test passed, η not yet settled: go on
            halves = np.zeros(m, dtype=int)
            u_a = u[A]
            while True:
                need = ~ok & (~np.isfinite(pdev) | (pdev > old[A])) & (halves < 20)
                if not need.any():
                    break
                h = np.flatnonzero(need)
                u_new[h] = 0.5 * (u_a[h] + u_new[h])
                eta_new[h] = linpred(A[h], u_new[h])
                mh, eh = both(eta_new[h])
                mu_new[h], me_new[h] = mh, eh
                pdev[h] = rel(A[h], u_new[h], mh)
                halves[h] += 1
            failed = ~ok & (~np.isfinite(pdev) | (pdev - old[A] > prob.tol))
            u[A], eta[A], mu[A], me[A] = u_new, eta_new, mu_new, me_new
            old[A] = pdev
            for j in np.flatnonzero(conv):
                i = A[j]
                ld = float(np.sum(np.log(dlast[i])))
                out[i] = prob.resdev(mu[i]) + prob._aic_const + float(u[i] @ u[i]) + ld
            active[A[conv | failed]] = False
    return out
