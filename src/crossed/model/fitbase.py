"""What every mixed-model fit of the model core shares (:class:`FitBase`).

:class:`~crossed.model.result.LmerResult` and
:class:`~crossed.model.glmm.result.GlmerResult` differ in their criterion and parameters
(σ or a family); their frozen state (read-only arrays, pickles and copies with an empty
cache), names, sizes, fixed-effect tables, information criteria, variance components,
conditional modes and linear predictor on new data are the same code, here. The public fit
classes (:class:`crossed.fit.LmerFit`, :class:`crossed.fit.GlmerFit`) subclass these
results and add the methods implemented by the layers above the model core.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from crossed.design.glm import newdata_offset
from crossed.model.status import ConvergenceStatus
from crossed.tables import result_table

if TYPE_CHECKING:
    from collections.abc import Mapping

    from crossed.design import Design
    from crossed.formula import ModelSpec

__all__ = ["FitBase", "read_only"]


def read_only(*arrays: Any) -> None:
    """Mark the numpy arrays among ``arrays`` (and in tuples among them) read-only, in
    place: what a frozen fit holds cannot be changed through what it exposes."""
    for arr in arrays:
        if isinstance(arr, tuple):
            read_only(*arr)
        elif isinstance(arr, np.ndarray):
            arr.flags.writeable = False


F = TypeVar("F", bound="FitBase")


class FitBase:
    """The state and accessors shared by the fit results (a base of the frozen fit
    dataclasses, which declare the fields ``design``, ``theta``, ``beta``, ``vcov_beta``,
    ``u``, ``converged``, ``is_singular``, ``convergence``, ``engine_info`` and the private
    ``_cache``)."""

    design: Design
    beta: np.ndarray
    theta: np.ndarray
    vcov_beta: np.ndarray
    u: tuple[np.ndarray, ...]
    is_singular: bool
    converged: bool
    convergence: ConvergenceStatus | None
    engine_info: Mapping[str, Any]
    _cache: dict[str, Any]

    # ------------------------------------------------------------------ frozen state
    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_info", MappingProxyType(dict(self.engine_info)))
        if self.convergence is None:  # a fit built without one (user code, older callers)
            status = (ConvergenceStatus.combine(self.is_singular) if self.converged
                      else ConvergenceStatus.FAILED)
            object.__setattr__(self, "convergence", status)
        read_only(*self._frozen_arrays())  # a frozen result: its arrays are read-only too

    def _frozen_arrays(self) -> tuple[Any, ...]:
        """The arrays made read-only at construction."""
        return (self.theta, self.beta, self.vcov_beta, *self.u)

    def __getstate__(self) -> dict[str, Any]:
        """State for pickle and copy: the fields, with an empty cache (never shared)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        state["engine_info"] = dict(self.engine_info)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["engine_info"] = MappingProxyType(dict(state.get("engine_info", {})))
        state.setdefault("_cache", {})
        self.__dict__.update(state)
        read_only(*self._frozen_arrays())  # (unpickled arrays are writable)

    @classmethod
    def from_result(cls: type[F], result: FitBase) -> F:
        """``result`` as an instance of ``cls``, a subclass of its class with the same
        fields (the public :class:`crossed.LmerFit` of an engine's
        :class:`~crossed.model.result.LmerResult`): its fields and derived quantities, the
        cache copied (not shared), no array copied."""
        if type(result) is cls:
            return result
        if not issubclass(cls, type(result)):
            raise TypeError(f"a {type(result).__name__} is not a base of {cls.__name__}")
        out = object.__new__(cls)
        out.__dict__.update(result.__dict__)
        object.__setattr__(out, "_cache", dict(result._cache))
        return out

    def like(self, result: F) -> F:
        """``result`` (a fit of the same kind: a refit of this one) as an instance of this
        fit's class, so that refits of a :class:`crossed.LmerFit` are ``LmerFit`` too;
        returned as is when it already has this class or this class is not a subclass of
        its class (:meth:`from_result`)."""
        if type(result) is type(self) or not isinstance(self, type(result)):
            return result
        return type(self).from_result(result)

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

    # ------------------------------------------------------------------ names and sizes
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

    # ------------------------------------------------------------------ random effects
    def _residual_sd(self) -> float | None:
        """σ where the model has a residual variance (LMMs), else None (GLMMs)."""
        return None

    def _templates(self) -> list[np.ndarray]:
        return [b.template(self.theta) for b in self.design.random.blocks]

    @cached_property
    def _b(self) -> list[np.ndarray]:
        """Conditional modes b = Λu per block, each (levels, q)."""
        return [u @ T.T for u, T in zip(self.u, self._templates(), strict=True)]

    def _cond_var(self) -> list[np.ndarray]:
        """Conditional covariance of b per block and level, each (levels, q, q)."""
        raise NotImplementedError

    def varcorr(self) -> pd.DataFrame:
        """Variance components, as ``as.data.frame(VarCorr(fit))``.

        Returns
        -------
        pandas.DataFrame
            One row per variance, then per covariance of each term, then (linear mixed
            models) the residual: ``group`` (grouping factor or ``"Residual"``), ``term1``,
            ``term2`` (None for a variance), ``variance_or_cov`` (lme4's ``vcov``) and
            ``sd_or_cor`` (lme4's ``sdcor``: SD for a variance, correlation for a
            covariance). A GLMM has no residual row. Validated against lme4 1.1-31 on the
            reference cases.
        """
        sigma = self._residual_sd()
        s2 = 1.0 if sigma is None else sigma**2
        rows: list[tuple[str, str | None, str | None, float, float]] = []
        for term in self.design.random.terms:
            blk = self.design.random.blocks[term.block]
            k = len(term.columns)
            T = blk.template(self.theta)[term.offset: term.offset + k, term.offset: term.offset + k]
            S = s2 * T @ T.T
            sd = np.sqrt(np.diag(S))
            for i in range(k):
                rows.append((term.group, term.columns[i], None, S[i, i], sd[i]))
            for j in range(k):
                for i in range(j + 1, k):
                    cor = S[i, j] / (sd[i] * sd[j]) if sd[i] > 0 and sd[j] > 0 else np.nan
                    rows.append((term.group, term.columns[j], term.columns[i], S[i, j], cor))
        if sigma is not None:
            rows.append(("Residual", None, None, s2, sigma))
        out = pd.DataFrame(rows, columns=["group", "term1", "term2", "variance_or_cov",
                                          "sd_or_cor"])
        # a missing label in a column of labels is NaN, as pandas 3's string columns show
        # it, under pandas 2 too (its object columns kept None)
        for col in ("term1", "term2"):
            if out[col].notna().any():
                out[col] = out[col].where(out[col].notna(), np.nan)
        return result_table(out)

    def ranef(self, condvar: bool = True) -> pd.DataFrame:
        """Conditional modes of the random effects with their conditional SDs.

        Parameters
        ----------
        condvar : bool
            Add the ``cond_sd`` column (lme4's ``ranef(fit, condVar = TRUE)``).

        Returns
        -------
        pandas.DataFrame
            Long form: ``group``, ``level``, ``term`` (column of the random term),
            ``estimate`` (conditional mode, lme4's ``ranef``) and ``cond_sd`` (square root
            of the diagonal of lme4's ``condVar``: σ² Λ (ΛᵀZᵀZΛ + I)⁻¹ Λᵀ given β̂ for a
            linear mixed model, Λ (ΛᵀZᵀWZΛ + I)⁻¹ Λᵀ at the optimum's working weights for a
            GLMM). Validated against lme4 1.1-31's ``ranef(fit, condVar = TRUE)``.
        """
        if not isinstance(condvar, bool | np.bool_):
            raise TypeError(f"condvar must be True or False, got {condvar!r}")
        cond = self._cond_var() if condvar else None
        frames = []
        for bi, blk in enumerate(self.design.random.blocks):
            b = self._b[bi]
            levels = np.array(blk.levels, dtype=object)
            sd = (np.sqrt(np.maximum(np.diagonal(cond[bi], axis1=1, axis2=2), 0.0))
                  if cond is not None else None)
            for j, name in enumerate(blk.column_names):
                frame = pd.DataFrame({"group": blk.group, "level": levels, "term": name,
                                      "estimate": b[:, j]})
                if sd is not None:
                    frame["cond_sd"] = sd[:, j]
                frames.append(frame)
        return result_table(pd.concat(frames, ignore_index=True))

    # ------------------------------------------------------------------ linear predictor
    def _random_part(self, blocks_codes: list[np.ndarray], Zs: list[np.ndarray]) -> np.ndarray:
        """Zb̂ on rows given by each block's level codes (−1: a new level, 0) and Z."""
        n = len(blocks_codes[0]) if blocks_codes else 0
        out = np.zeros(n)
        for b, codes, Z in zip(self._b, blocks_codes, Zs, strict=True):
            valid = codes >= 0
            out[valid] += np.einsum("ij,ij->i", Z[valid], b[codes[valid]])
        return out

    def _fitted_eta(self) -> np.ndarray:
        """The fitted linear predictor Xβ̂ + Zb̂ (+ offset) on the data fitted."""
        raise NotImplementedError

    def _eta(self, newdata: pd.DataFrame | None, include_random: bool,
             allow_new_levels: bool, offset: object) -> np.ndarray:
        """The linear predictor of :meth:`predict` (NaN where a predictor is missing)."""
        for name, flag in (("include_random", include_random),
                           ("allow_new_levels", allow_new_levels)):
            if not isinstance(flag, bool | np.bool_):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        if newdata is None:
            if include_random:
                return self._fitted_eta()
            pop: np.ndarray = self.design.X @ self.beta
            if self.design.offset is not None:  # lme4's predict(re.form = NA) adds it
                pop = pop + self.design.offset
            return pop
        new = self.design.encode(newdata, include_random=include_random,
                                 allow_new_levels=allow_new_levels)
        out = np.full(len(new.rows), np.nan)  # rows with a missing predictor: NaN (R's NA)
        pred = new.X @ self.beta
        terms = newdata_offset(self.design, newdata, offset)
        if terms is not None:
            pred = pred + terms[new.rows]
        if include_random:
            pred = pred + self._random_part(new.codes, new.Z)
        out[new.rows] = pred
        return out
