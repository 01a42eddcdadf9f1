"""What every mixed-model fit reads off its design the same way (:class:`FitBase`).

:class:`~crossed.model.result.LmerFit` and :class:`~crossed.model.glmm.result.GlmerFit`
differ in their criterion and parameters (σ or a family); their names, sizes, fixed-effect
tables, information criteria and private cache are the same code, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from crossed.design import Design
    from crossed.formula import ModelSpec

__all__ = ["FitBase", "MethodTable", "read_only"]


def read_only(*arrays: Any) -> None:
    """Mark the numpy arrays among ``arrays`` (and in tuples among them) read-only, in
    place: what a frozen fit holds cannot be changed through what it exposes."""
    for arr in arrays:
        if isinstance(arr, tuple):
            read_only(*arr)
        elif isinstance(arr, np.ndarray):
            arr.flags.writeable = False


class MethodTable:
    """The methods of a fit class implemented by the layers above the model core: each
    layer registers its functions (:meth:`provide`) when it is imported, so the model core
    never imports upward.

    Parameters
    ----------
    owner : str
        The fit class's name (in error messages).
    providers : dict
        Method name -> the module that provides it (named when it was not imported).
    """

    def __init__(self, owner: str, providers: dict[str, str]):
        self.owner = owner
        self.providers = providers
        self.provided: dict[str, Callable[..., Any]] = {}

    def provide(self, name: str, function: Callable[..., Any]) -> None:
        """Register the implementation behind ``<owner>.<name>``."""
        if name not in self.providers:
            raise ValueError(f"{self.owner} has no provided method {name!r}")
        self.provided[name] = function

    def get(self, name: str) -> Callable[..., Any]:
        """The implementation behind ``<owner>.<name>``."""
        try:
            return self.provided[name]
        except KeyError:
            raise RuntimeError(f"{self.owner}.{name} is implemented in "
                               f"{self.providers[name]}, which was not imported: "
                               "import crossed") from None


class FitBase:
    """Accessors shared by the fit classes (a mixin of the frozen fit dataclasses, which
    provide ``design``, ``beta``, ``vcov_beta``, ``theta``, ``loglik``, ``npar`` and the
    private ``_cache``)."""

    design: Design
    beta: np.ndarray
    theta: np.ndarray
    vcov_beta: np.ndarray
    _cache: dict[str, Any]

    # (the fit classes define these two: what is counted and what is maximised differ)
    @property
    def npar(self) -> int:
        raise NotImplementedError

    @property
    def loglik(self) -> float:
        raise NotImplementedError

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """A quantity derived from this fit, computed once by ``compute()`` and kept in the
        fit's private cache (e.g. the Satterthwaite derivatives, ``key="satterthwaite"``).
        The cache is this instance's alone: ``replace``, copies and pickles start empty."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def spec(self) -> ModelSpec:
        return self.design.spec

    @property
    def formula(self) -> str:
        return self.design.spec.formula

    @property
    def fixef_names(self) -> tuple[str, ...]:
        return self.design.fixed.names

    @property
    def theta_names(self) -> tuple[str, ...]:
        return self.design.random.theta_names

    @property
    def fixef(self) -> pd.Series:
        """Fixed-effects estimates with lme4's names, in lme4's order (a copy: changing
        it leaves the fit as it is)."""
        return pd.Series(np.array(self.beta, dtype=float), index=list(self.fixef_names),
                         name="estimate")

    @property
    def vcov(self) -> pd.DataFrame:
        """Covariance matrix of the fixed effects, labelled like ``fixef`` (a copy)."""
        names = list(self.fixef_names)
        return pd.DataFrame(np.array(self.vcov_beta, dtype=float), index=names,
                            columns=names)

    @property
    def nobs(self) -> int:
        return self.design.n

    @property
    def n_dropped(self) -> int:
        """Rows dropped for missing values before fitting."""
        return self.design.n_dropped

    @property
    def ngroups(self) -> dict[str, int]:
        """Number of levels of each grouping factor (lme4's ``ngrps``)."""
        out: dict[str, int] = {}
        for term in self.design.random.terms:
            out.setdefault(term.group, self.design.random.blocks[term.block].nlevels)
        return out

    @property
    def aic(self) -> float:
        """−2 logLik + 2 npar (lme4's ``AIC``)."""
        return -2.0 * self.loglik + 2.0 * self.npar

    @property
    def bic(self) -> float:
        """−2 logLik + log(nobs) npar (lme4's ``BIC``)."""
        return float(-2.0 * self.loglik + np.log(self.nobs) * self.npar)
