"""GLM families and links for GLMMs, as R's ``binomial()`` and ``poisson()`` objects.

Each :class:`Family` carries its :class:`Link` (``linkfun``, ``linkinv``, ``mu_eta``) and
R's ``variance``, ``dev.resids`` and ``aic``; validated against R 4.2.2's ``stats`` family
objects through lme4's ``glmer`` fits (``tests/model/glmm``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["Family", "Link", "binomial", "family_of", "poisson"]

_EPS = np.finfo(float).eps
_THRESH = 30.0
_MTHRESH = -30.0
_INVEPS = 1.0 / _EPS


def _logit_inv(eta: np.ndarray) -> np.ndarray:
    # R's C code: clamp at eta = -30/30 so mu stays within (eps, 1 - eps)
    if eta.size and _MTHRESH <= eta.min() and eta.max() <= _THRESH:
        tmp0 = np.exp(eta)
        return np.asarray(tmp0 / (1.0 + tmp0), dtype=float)
    tmp = np.where(eta < _MTHRESH, _EPS, np.where(eta > _THRESH, _INVEPS, np.exp(
        np.clip(eta, _MTHRESH, _THRESH))))
    return tmp / (1.0 + tmp)


def _logit_mu_eta(eta: np.ndarray) -> np.ndarray:
    if eta.size and _MTHRESH <= eta.min() and eta.max() <= _THRESH:
        e0 = np.exp(eta)
        return np.asarray(e0 / ((1.0 + e0) * (1.0 + e0)), dtype=float)
    e = np.exp(np.clip(eta, _MTHRESH, _THRESH))
    opexp = 1.0 + e
    out = e / (opexp * opexp)
    return np.where((eta > _THRESH) | (eta < _MTHRESH), _EPS, out)


def _logit_both(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(μ, dμ/dη) from one exponential: the same numbers as the two functions above."""
    if eta.size and _MTHRESH <= eta.min() and eta.max() <= _THRESH:
        e0 = np.exp(eta)
        ope = 1.0 + e0
        return e0 / ope, e0 / (ope * ope)
    return _logit_inv(eta), _logit_mu_eta(eta)


def _log_both(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu = np.maximum(np.exp(eta), _EPS)
    return mu, mu


def _probit_inv(eta: np.ndarray) -> np.ndarray:
    thresh = -stats.norm.ppf(_EPS)
    return np.asarray(stats.norm.cdf(np.clip(eta, -thresh, thresh)), dtype=float)


def _probit_mu_eta(eta: np.ndarray) -> np.ndarray:
    return np.asarray(np.maximum(stats.norm.pdf(eta), _EPS), dtype=float)


def _cloglog_inv(eta: np.ndarray) -> np.ndarray:
    return np.asarray(np.clip(-np.expm1(-np.exp(eta)), _EPS, 1.0 - _EPS), dtype=float)


def _cloglog_mu_eta(eta: np.ndarray) -> np.ndarray:
    eta = np.minimum(eta, 700.0)
    return np.asarray(np.maximum(np.exp(eta) * np.exp(-np.exp(eta)), _EPS), dtype=float)


@dataclass(frozen=True)
class Link:
    """A link function as R's ``make.link``: ``linkfun`` (μ → η), ``linkinv`` (η → μ) and
    ``mu_eta`` (dμ/dη), with R's clamping of extreme η."""

    name: str
    linkfun: Callable[[np.ndarray], np.ndarray]
    linkinv: Callable[[np.ndarray], np.ndarray]
    mu_eta: Callable[[np.ndarray], np.ndarray]
    both: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None

    def mu_and_mu_eta(self, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(``linkinv(eta)``, ``mu_eta(eta)``), in one pass where the link allows."""
        if self.both is not None:
            return self.both(eta)
        return self.linkinv(eta), self.mu_eta(eta)


_LINKS: dict[str, Link] = {
    "logit": Link("logit", special.logit, _logit_inv, _logit_mu_eta, _logit_both),
    "probit": Link("probit", stats.norm.ppf, _probit_inv, _probit_mu_eta),
    "cloglog": Link("cloglog", lambda mu: np.log(-np.log1p(-mu)), _cloglog_inv,
                    _cloglog_mu_eta),
    "log": Link("log", np.log, lambda eta: np.maximum(np.exp(eta), _EPS),
                lambda eta: np.maximum(np.exp(eta), _EPS), _log_both),
}


def _ylogy(y: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """y log(y / μ), 0 where y = 0 (R's y_log_y)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0)


@dataclass(frozen=True)
class Family:
    """An exponential family with a link, as R's family objects.

    Attributes
    ----------
    name : str
        ``"binomial"`` or ``"poisson"``.
    link : Link
    """

    name: str
    link: Link

    def variance(self, mu: np.ndarray) -> np.ndarray:
        """R's ``variance(mu)``: μ(1 − μ) (binomial), μ (Poisson)."""
        if self.name == "binomial":
            return mu * (1.0 - mu)
        return mu

    def dev_resids(self, y: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> np.ndarray:
        """R's ``dev.resids(y, mu, wt)``: squared deviance residuals (unsigned)."""
        if self.name == "binomial":
            return np.asarray(2.0 * wt * (_ylogy(y, mu) + _ylogy(1.0 - y, 1.0 - mu)), dtype=float)
        r = mu * wt
        pos = y > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(pos, wt * (y * np.log(np.where(pos, y, 1.0) / mu) - (y - mu)), r)
        return np.asarray(2.0 * r, dtype=float)

    def aic(self, y: np.ndarray, n: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> float:
        """R's ``aic(y, n, mu, wt, dev)``: −2 Σ log-likelihood (binomial: with ``m = n`` if
        any trials > 1 else ``wt``; Poisson: weighted by ``wt``)."""
        if self.name == "binomial":
            m = n if np.any(n > 1) else wt
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(m > 0, wt / np.where(m > 0, m, 1.0), 0.0)
            k, size = np.round(m * y), np.round(m)
            return float(-2.0 * np.sum(ratio * stats.binom.logpmf(k, size, mu)))
        return float(-2.0 * np.sum(stats.poisson.logpmf(y, mu) * wt))

    def __str__(self) -> str:
        return f"{self.name} ( {self.link.name} )"


def binomial(link: str = "logit") -> Family:
    """R's ``binomial(link)``: ``"logit"`` (default), ``"probit"`` or ``"cloglog"``."""
    if link not in ("logit", "probit", "cloglog"):
        raise ValueError(f"binomial link {link!r} is not available; use 'logit', 'probit' "
                         "or 'cloglog'")
    return Family("binomial", _LINKS[link])


def poisson(link: str = "log") -> Family:
    """R's ``poisson(link)``: ``"log"`` only."""
    if link != "log":
        raise ValueError(f"poisson link {link!r} is not available; use 'log'")
    return Family("poisson", _LINKS["log"])


def family_of(family: str | Family) -> Family:
    """A Family from a name (``"binomial"``, ``"poisson"``) or a Family."""
    if isinstance(family, Family):
        return family
    if family == "binomial":
        return binomial()
    if family == "poisson":
        return poisson()
    raise ValueError(f"family {family!r} is not available; use 'binomial', 'poisson', "
                     "cx.binomial(link=...) or cx.poisson()")
