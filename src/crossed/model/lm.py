"""A fixed-effects-only linear model (R's ``lm``), for likelihood-ratio tests of a mixed
model against the model without random effects (``anova(lmer_fit, lm_fit)``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["LmFit", "fit_lm"]


@dataclass(frozen=True, eq=False)
class LmFit:
    """An ordinary least squares fit (R's ``lm``) built on crossed's fixed-effects design.

    Attributes
    ----------
    formula : str
    fixef_names : tuple of str
        Column names of the model matrix (R's names).
    X, y : numpy.ndarray
        Model matrix and response of the rows used.
    beta : numpy.ndarray
        Least-squares coefficients.
    sigma : float
        Residual standard error √(RSS/(n − p)) (R's ``sigma(lm)``).
    loglik : float
        Maximum-likelihood log-likelihood (R's ``logLik(lm)``, ``REML = FALSE``).
    n_dropped : int
        Rows dropped for missing values.
    data_name : str
    """

    formula: str
    fixef_names: tuple[str, ...]
    X: np.ndarray
    y: np.ndarray
    beta: np.ndarray
    sigma: float
    loglik: float
    n_dropped: int = 0
    data_name: str = "data"

    def __post_init__(self) -> None:
        for arr in (self.X, self.y, self.beta):  # a frozen fit: its arrays are read-only
            if isinstance(arr, np.ndarray):
                arr.flags.writeable = False

    @property
    def reml(self) -> bool:
        """False: an lm is compared by its maximum-likelihood log-likelihood."""
        return False

    @property
    def fixef(self) -> pd.Series:
        """The coefficients with R's names (a copy: changing it leaves the fit as it is)."""
        return pd.Series(np.array(self.beta, dtype=float), index=list(self.fixef_names),
                         name="estimate")

    @property
    def nobs(self) -> int:
        return len(self.y)

    @property
    def npar(self) -> int:
        """Coefficients plus σ (R's ``attr(logLik(lm), "df")``)."""
        return len(self.beta) + 1

    @property
    def deviance(self) -> float:
        """−2 log-likelihood (what ``anova(lmer, lm)`` prints as deviance)."""
        return -2.0 * self.loglik

    @property
    def aic(self) -> float:
        return self.deviance + 2.0 * self.npar

    @property
    def bic(self) -> float:
        return float(self.deviance + np.log(self.nobs) * self.npar)

    def fitted(self) -> np.ndarray:
        return np.asarray(self.X @ self.beta)

    def residuals(self) -> np.ndarray:
        return np.asarray(self.y - self.fitted())

    def __repr__(self) -> str:
        return f"<LmFit {self.formula!r}: nobs={self.nobs}, logLik={self.loglik:.4f}>"


def fit_lm(formula: str, X: np.ndarray, y: np.ndarray, names: tuple[str, ...],
           n_dropped: int = 0, data_name: str = "data") -> LmFit:
    """Least squares of ``y`` on ``X`` (full column rank, as crossed's fixed designs are)."""
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    n, p = X.shape
    rss = float(np.sum((y - X @ beta) ** 2))
    ll = -0.5 * n * (np.log(2 * np.pi) + 1 - np.log(n) + np.log(rss))  # R's logLik.lm
    return LmFit(formula=formula, fixef_names=tuple(names), X=X, y=y, beta=np.asarray(beta),
                 sigma=float(np.sqrt(rss / (n - p))), loglik=float(ll), n_dropped=n_dropped,
                 data_name=data_name)
