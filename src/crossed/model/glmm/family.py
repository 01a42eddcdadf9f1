"""GLM families and links for GLMMs, as R's ``binomial()`` and ``poisson()`` objects.

Each :class:`Family` carries its :class:`Link` (``linkfun``, ``linkinv``, ``mu_eta``) and
R's ``variance``, ``dev.resids`` and ``aic``; validated against R 4.2.2's ``stats`` family
objects through lme4's ``glmer`` fits (``tests/model/glmm``). SciPy's special functions
and statistics are imported where they are used (``linkfun``, the probit link), not with
this module, which every fit imports; ``aic`` takes the binomial and Poisson log
probabilities from :func:`binom_logpmf` and :func:`poisson_logpmf` (scipy.stats' numbers,
from its special functions), so that a GLMM fit does not load ``scipy.stats`` either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, cast

import numpy as np

from crossed._warn import warn
from crossed.design.frame import DataError
from crossed.model.glmm import _scalar

__all__ = ["Binomial", "Family", "Link", "Poisson", "ResidualDeviance", "binom_logpmf",
           "binomial", "family_of", "poisson", "poisson_logpmf", "probit_threshold"]

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


def _logit(mu: np.ndarray) -> np.ndarray:
    from scipy import special

    return cast(np.ndarray, special.logit(mu))


def _probit(mu: np.ndarray) -> np.ndarray:
    from scipy import stats

    return cast(np.ndarray, stats.norm.ppf(mu))


def probit_threshold() -> float:
    """R's clamp of the probit link's η: −Φ⁻¹(eps)."""
    from scipy import stats

    return float(-stats.norm.ppf(_EPS))


def _probit_inv(eta: np.ndarray) -> np.ndarray:
    from scipy import stats

    thresh = probit_threshold()
    return np.asarray(stats.norm.cdf(np.clip(eta, -thresh, thresh)), dtype=float)


def _probit_mu_eta(eta: np.ndarray) -> np.ndarray:
    from scipy import stats

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
    kernel: int = -1
    """The link's code in the compiled PIRLS (``_scalar.LOGIT``, ...)."""

    def mu_and_mu_eta(self, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(``linkinv(eta)``, ``mu_eta(eta)``), in one pass where the link allows."""
        if self.both is not None:
            return self.both(eta)
        return self.linkinv(eta), self.mu_eta(eta)


_LINKS: dict[str, Link] = {
    "logit": Link("logit", _logit, _logit_inv, _logit_mu_eta, _logit_both, _scalar.LOGIT),
    "probit": Link("probit", _probit, _probit_inv, _probit_mu_eta, None, _scalar.PROBIT),
    "cloglog": Link("cloglog", lambda mu: np.log(-np.log1p(-mu)), _cloglog_inv,
                    _cloglog_mu_eta, None, _scalar.CLOGLOG),
    "log": Link("log", np.log, lambda eta: np.maximum(np.exp(eta), _EPS),
                lambda eta: np.maximum(np.exp(eta), _EPS), _log_both, _scalar.LOG),
}


def _ylogy(y: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """y log(y / μ), 0 where y = 0 (R's y_log_y)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0)


def _logpmf(support: np.ndarray, bad: np.ndarray, kernel: Callable[..., np.ndarray],
            *args: np.ndarray) -> np.ndarray:
    """scipy's ``rv_discrete.logpmf`` around a kernel: the kernel's value on the support,
    -inf off it, NaN for invalid parameters or a NaN count."""
    out = np.full(support.shape, -np.inf)
    out[bad] = np.nan
    out[support] = kernel(*(a[support] for a in args))
    return out


def binom_logpmf(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``scipy.stats.binom.logpmf(k, n, p)``, the same numbers from the same special
    functions, without loading ``scipy.stats`` (every binomial GLMM fit needs it: ``aic``)."""
    from scipy.special import gammaln, xlog1py, xlogy

    k, n, p = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (k, n, p)))
    valid = (n >= 0) & (n == np.round(n)) & (p >= 0) & (p <= 1)
    support = valid & (k >= 0) & (k <= n) & (np.floor(k) == k)

    def kernel(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
        combiln = gammaln(n + 1) - (gammaln(k + 1) + gammaln(n - k + 1))
        return np.asarray(combiln + xlogy(k, p) + xlog1py(n - k, -p), dtype=float)

    return _logpmf(support, ~valid | np.isnan(k), kernel, k, n, p)


def poisson_logpmf(k: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``scipy.stats.poisson.logpmf(k, mu)`` (-inf at a count that is not a whole number,
    as R's ``dpois``), without loading ``scipy.stats`` (see :func:`binom_logpmf`)."""
    from scipy.special import gammaln, xlogy

    k, mu = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (k, mu)))
    valid = mu >= 0
    support = valid & (k >= 0) & (np.floor(k) == k)

    def kernel(k: np.ndarray, mu: np.ndarray) -> np.ndarray:
        return np.asarray(xlogy(k, mu) - gammaln(k + 1) - mu, dtype=float)

    return _logpmf(support, ~valid | np.isnan(k), kernel, k, mu)


@dataclass(frozen=True)
class Family:
    """An exponential family with a link, as R's family objects: each family is a subclass
    that carries its own variance, deviance, likelihood, starting values, response checks
    and simulation, so no code outside this module asks which family it has.

    Attributes
    ----------
    name : str
        R's name (``"binomial"``, ``"poisson"``), for display and for R.
    link : Link
    """

    name: str
    link: Link
    binary_outcome: ClassVar[bool] = False
    """Whether the outcome is a proportion of trials (a 0/1 response possible)."""
    mean_label: ClassVar[str] = "mean"
    """emmeans' label of the response-scale mean (``prob``, ``rate``)."""
    kernel: ClassVar[int] = -1
    """The variance function's code in the compiled PIRLS (``_scalar.BINOMIAL``, ...)."""

    def variance(self, mu: np.ndarray) -> np.ndarray:
        """R's ``variance(mu)``."""
        raise NotImplementedError

    def dev_resids(self, y: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> np.ndarray:
        """R's ``dev.resids(y, mu, wt)``: squared deviance residuals (unsigned)."""
        raise NotImplementedError

    def aic(self, y: np.ndarray, n: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> float:
        """R's ``aic(y, n, mu, wt, dev)``: −2 Σ log-likelihood."""
        raise NotImplementedError

    def mustart(self, y: np.ndarray, wt: np.ndarray) -> np.ndarray:
        """R's ``initialize`` starting means."""
        raise NotImplementedError

    def deviance_kernel(self, y: np.ndarray, wt: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Coefficients (a, b, c) with Σ dev.resids = −2 Σ (a log μ + b log(1 − μ) − c μ)
        plus a constant fixed by the data (b or c None where the family has no such part):
        one logarithm per observation and evaluation in PIRLS."""
        raise NotImplementedError

    def check_response(self, y: np.ndarray, name: str, what: str = "response") -> None:
        """Refuse values the family cannot have (DataError naming the response)."""
        raise NotImplementedError

    def degenerate_constant(self, value: float) -> bool:
        """Whether a response equal to ``value`` in every row cannot be fitted (lme4's
        "Response is constant")."""
        return True

    def simulate(self, mu: np.ndarray, prior_weights: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
        """Responses drawn at means ``mu`` (nobs, nsim), on the scale of the fitted
        response (lme4's ``family$simulate``)."""
        raise NotImplementedError

    def distribution_variance(self, null_intercept: Callable[[], float]) -> float:
        """insight's distribution-specific variance (Nakagawa's R²); ``null_intercept()``
        gives β₀ of the null model ``y ~ 1 + (random terms)`` where the family needs it."""
        raise ValueError(f"Nakagawa's R² is available for binomial and Poisson (log) GLMMs, "
                         f"not {self}")

    def __str__(self) -> str:
        return f"{self.name} ( {self.link.name} )"


@dataclass(frozen=True)
class Binomial(Family):
    """R's ``binomial()``: y a proportion of ``wt`` trials (0/1 with ``wt = 1``)."""

    binary_outcome: ClassVar[bool] = True
    mean_label: ClassVar[str] = "prob"
    kernel: ClassVar[int] = _scalar.BINOMIAL

    def variance(self, mu: np.ndarray) -> np.ndarray:
        """μ(1 − μ)."""
        return mu * (1.0 - mu)

    def dev_resids(self, y: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> np.ndarray:
        return np.asarray(2.0 * wt * (_ylogy(y, mu) + _ylogy(1.0 - y, 1.0 - mu)), dtype=float)

    def aic(self, y: np.ndarray, n: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> float:
        """With ``m = n`` if any trials > 1, else ``wt`` (R's ``binomial()$aic``)."""
        m = n if np.any(n > 1) else wt
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(m > 0, wt / np.where(m > 0, m, 1.0), 0.0)
        k, size = np.round(m * y), np.round(m)
        return float(-2.0 * np.sum(ratio * binom_logpmf(k, size, mu)))

    def mustart(self, y: np.ndarray, wt: np.ndarray) -> np.ndarray:
        return np.asarray((wt * y + 0.5) / (wt + 1.0), dtype=float)

    def deviance_kernel(self, y: np.ndarray, wt: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        return wt * y, wt * (1.0 - y), None

    def check_response(self, y: np.ndarray, name: str, what: str = "response") -> None:
        if np.any((y < 0) | (y > 1)):
            raise DataError(f"the binomial {what} {name!r} must be proportions in [0, 1] "
                              "(successes / trials, trials = prior weights)")

    def degenerate_constant(self, value: float) -> bool:
        return value in (0.0, 1.0)  # (a constant proportion inside (0, 1) fits)

    def distribution_variance(self, null_intercept: Callable[[], float]) -> float:
        """π²/3 (logit), 1 (probit), π²/6 (cloglog): the latent residual variance."""
        table = {"logit": np.pi**2 / 3.0, "probit": 1.0, "cloglog": np.pi**2 / 6.0}
        if self.link.name not in table:
            return super().distribution_variance(null_intercept)
        return float(table[self.link.name])

    def simulate(self, mu: np.ndarray, prior_weights: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
        """Proportions successes/trials, trials = prior weights (1 for a 0/1 response)."""
        trials = np.rint(prior_weights).astype(np.int64)
        if np.any(np.abs(prior_weights - trials) > 1e-7):
            raise ValueError("simulating a binomial GLMM needs whole numbers of trials as "
                             "prior weights (lme4 rounds them with a warning; crossed "
                             "refuses)")
        successes = rng.binomial(trials[:, None], np.clip(mu, 0.0, 1.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            out = successes / np.maximum(trials, 1)[:, None]
        return np.asarray(out, dtype=float)


@dataclass(frozen=True)
class Poisson(Family):
    """R's ``poisson()``: counts."""

    mean_label: ClassVar[str] = "rate"
    kernel: ClassVar[int] = _scalar.POISSON

    def variance(self, mu: np.ndarray) -> np.ndarray:
        """μ."""
        return mu

    def dev_resids(self, y: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> np.ndarray:
        r = mu * wt
        pos = y > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(pos, wt * (y * np.log(np.where(pos, y, 1.0) / mu) - (y - mu)), r)
        return np.asarray(2.0 * r, dtype=float)

    def aic(self, y: np.ndarray, n: np.ndarray, mu: np.ndarray, wt: np.ndarray) -> float:
        return float(-2.0 * np.sum(poisson_logpmf(y, mu) * wt))

    def mustart(self, y: np.ndarray, wt: np.ndarray) -> np.ndarray:
        return np.asarray(y + 0.1, dtype=float)

    def distribution_variance(self, null_intercept: Callable[[], float]) -> float:
        """ln(1 + 1/μ), μ = exp(β₀) of the null model (log link)."""
        if self.link.name != "log":
            return super().distribution_variance(null_intercept)
        mu = float(np.exp(null_intercept()))
        if mu < 6:
            warn(f"mu of {mu:.1f} is too close to zero, estimate of r-squared may be "
                 "unreliable (performance's warning)", UserWarning)
        return float(np.log1p(1.0 / mu))

    def deviance_kernel(self, y: np.ndarray, wt: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        return wt * y, None, wt

    def check_response(self, y: np.ndarray, name: str, what: str = "response") -> None:
        if np.any(y < 0):
            raise DataError(f"negative values not allowed for the Poisson {what} "
                              f"{name!r}")

    def simulate(self, mu: np.ndarray, prior_weights: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
        if np.any(prior_weights != 1.0):
            raise ValueError("simulating a Poisson GLMM with prior weights is not defined "
                             "(lme4 ignores them with a warning; crossed refuses)")
        return rng.poisson(mu).astype(float)


class ResidualDeviance:
    """Σ R's ``dev.resids(y, μ, wt)`` for fixed rows, with one logarithm per row
    (:meth:`Family.deviance_kernel`'s coefficients and the constant they leave, fixed at
    a reference mean): what PIRLS evaluates at every step. The sum is the compiled one
    (``_scalar.residual_deviance``) that the compiled PIRLS adds up too, so that both give
    the same deviance at the same μ (at the reference mean, R's value exactly).

    Attributes
    ----------
    reference : float
        Σ dev.resids at the reference mean, from R's formula.
    coefficients : tuple
        (a, b, c) of :meth:`Family.deviance_kernel`, every row (b, c empty arrays where the
        family has no such part).
    constant : float
        Σ dev.resids = −2 (Σ a log μ + Σ b log(1 − μ) − Σ c μ) + ``constant``.
    """

    def __init__(self, family: Family, y: np.ndarray, wt: np.ndarray,
                 mu_ref: np.ndarray) -> None:
        a, b, c = family.deviance_kernel(y, wt)
        none = np.zeros(0)
        self.coefficients = (np.ascontiguousarray(a, dtype=float),
                             none if b is None else np.ascontiguousarray(b, dtype=float),
                             none if c is None else np.ascontiguousarray(c, dtype=float))
        self.reference = float(np.sum(family.dev_resids(y, mu_ref, wt)))
        self.constant = 0.0
        self.constant = self.reference - self(mu_ref)

    def __call__(self, mu: np.ndarray) -> float:
        return float(_scalar.residual_deviance(np.ascontiguousarray(mu, dtype=float),
                                               *self.coefficients) + self.constant)


def binomial(link: str = "logit") -> Family:
    """R's ``binomial(link)``: ``"logit"`` (default), ``"probit"`` or ``"cloglog"``."""
    if link not in ("logit", "probit", "cloglog"):
        raise ValueError(f"binomial link {link!r} is not available; use 'logit', 'probit' "
                         "or 'cloglog'")
    return Binomial("binomial", _LINKS[link])


def poisson(link: str = "log") -> Family:
    """R's ``poisson(link)``: ``"log"`` only."""
    if link != "log":
        raise ValueError(f"poisson link {link!r} is not available; use 'log'")
    return Poisson("poisson", _LINKS["log"])


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
