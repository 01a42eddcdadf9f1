"""Hypothesis tests applied to every refit of a simulation (power, ablation).

A test is set up once on the original fit (its contrast rows over the fixed effects, the
columns of the term to drop) and then applied to each refit, which may have lost
fixed-effect columns (rows removed) or have a new response. Each application returns one
row: ``status`` ("ok", "non_estimable"), ``estimate``, ``std_error``, ``df``, ``statistic``,
``p_value``.

- :func:`fixed` — t test of one coefficient (lmerTest's ``summary`` table).
- :func:`emm_contrast` — a contrast of estimated marginal means (emmeans' ``pairs`` or
  ``contrast``), estimability checked as emmeans does on rank-deficient refits.
- :func:`lrt` — likelihood-ratio test dropping a fixed-effect term (both models refitted
  by maximum likelihood, as ``anova(reduced, full)`` in lme4).
- any callable ``f(fit) -> p_value`` or ``-> dict`` with at least ``p_value``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

if TYPE_CHECKING:
    from crossed.fit import LmerFit

RESULT_KEYS = ("estimate", "std_error", "df", "statistic", "p_value")
ESTIMABLE_TOL = 1e-8


def _nan_row(status: str) -> dict:
    return {"status": status, **dict.fromkeys(RESULT_KEYS, np.nan)}


def _t_row(fit: LmerFit, L: np.ndarray, ddf: str) -> dict:
    """t test of the single contrast row ``L`` (over ``fit``'s fixed effects)."""
    L = np.atleast_2d(L)
    if ddf == "satterthwaite":
        from crossed.inference.satterthwaite import satterthwaite_t

        est, se, df = satterthwaite_t(fit, L)
    elif ddf == "none":
        est = L @ fit.beta
        se = np.sqrt(np.einsum("ij,jk,ik->i", L, fit.vcov_beta, L))
        df = np.array([np.inf])
    else:
        from crossed.inference.kenward_roger import kr_t

        est, se, df = kr_t(fit, L)
    est, se, df = float(est[0]), float(se[0]), float(df[0])
    t = est / se if se > 0 else np.nan
    p = float(2.0 * stats.t.sf(abs(t), df)) if np.isfinite(t) else np.nan
    return {"status": "ok", "estimate": est, "std_error": se, "df": df, "statistic": t,
            "p_value": p}


@dataclass
class ContrastTest:
    """A t test of one linear function of the fixed effects, set up on a fit.

    Attributes
    ----------
    name : str
        Label shown in result tables.
    weights : dict
        Coefficient name -> weight (over the original fit's fixed effects).
    ddf : str
        ``"satterthwaite"``, ``"kenward-roger"`` or ``"none"``.
    X : numpy.ndarray, optional
        The original fixed-effects matrix, used to check estimability when a refit on a
        subset of rows has lost columns.
    """

    name: str
    weights: dict[str, float]
    ddf: str = "satterthwaite"
    X: np.ndarray | None = field(default=None, repr=False)
    names: tuple[str, ...] = ()

    def __call__(self, fit: LmerFit, rows: np.ndarray | None = None) -> dict:
        refit_names = fit.fixef_names
        missing = [n for n in self.weights if n not in refit_names and self.weights[n] != 0]
        if missing and not self._estimable(rows):
            return _nan_row("non_estimable")
        L = np.array([self.weights.get(n, 0.0) for n in refit_names])
        return _t_row(fit, L, self.ddf)

    def estimate(self, fit: LmerFit, rows: np.ndarray | None = None) -> float:
        """The contrast's estimate only (no standard error or df); NaN if not estimable."""
        missing = [n for n in self.weights if n not in fit.fixef_names and self.weights[n] != 0]
        if missing and not self._estimable(rows):
            return np.nan
        return float(sum(self.weights.get(n, 0.0) * b
                         for n, b in zip(fit.fixef_names, fit.beta, strict=True)))

    def _estimable(self, rows: np.ndarray | None) -> bool:
        """emmeans' rule: L is estimable if it is orthogonal to the null space of X[rows]."""
        if self.X is None or rows is None:
            return False
        X = self.X[np.asarray(rows)]
        L = np.array([self.weights.get(n, 0.0) for n in self.names])
        _, s, vt = np.linalg.svd(X, full_matrices=True)
        rank = int(np.sum(s > max(X.shape) * np.finfo(float).eps * (s[0] if len(s) else 1)))
        null = vt[rank:]
        if null.shape[0] == 0:
            return True
        return bool(np.max(np.abs(null @ L)) <= ESTIMABLE_TOL * max(1.0, np.max(np.abs(L))))


def fixed(term: str, ddf: str = "satterthwaite") -> Callable[[LmerFit], ContrastTest]:
    """t test of one fixed-effect coefficient (lmerTest's ``summary`` row).

    Parameters
    ----------
    term : str
        Coefficient name as in ``fit.fixef`` (e.g. ``"lr1e-5"``).
    ddf : {"satterthwaite", "kenward-roger", "none"}
    """
    from crossed.inference.coefs import normalise_ddf

    method = normalise_ddf(ddf)

    def setup(fit: LmerFit) -> ContrastTest:
        if term not in fit.fixef_names:
            raise ValueError(f"{term!r} is not a fixed-effect coefficient; the model has "
                             + ", ".join(fit.fixef_names))
        return ContrastTest(name=term, weights={term: 1.0}, ddf=method, X=fit.design.X,
                            names=fit.fixef_names)

    setup.label = term  # type: ignore[attr-defined]
    return setup


def emm_contrast(specs: str | list[str], contrast: str | dict | None = None,
                 ddf: str = "satterthwaite") -> Callable[[LmerFit], ContrastTest]:
    """A contrast of estimated marginal means, tested with ``ddf`` (emmeans' ``pairs``).

    Parameters
    ----------
    specs : str or list of str
        Factor(s) of the means, e.g. ``"language"``.
    contrast : str or dict, optional
        A contrast label of ``fit.emmeans(specs).pairs()`` (e.g. ``"en - es"``), or custom
        weights ``{name: weights over the means}``. Default: the first pairwise difference.
    ddf : {"satterthwaite", "kenward-roger", "none"}

    Notes
    -----
    The contrast's row over β is computed once on the original fit (emmeans' reference grid,
    equal weights); estimate, SE and df on a refit are those of ``emmeans(refit, specs)``
    with the same contrast (validated in ``tests/simulate/test_simtests.py`` against
    :func:`crossed.inference.emmeans.emmeans` on refits).
    """
    from crossed.inference.coefs import normalise_ddf

    method = normalise_ddf(ddf)

    def setup(fit: LmerFit) -> ContrastTest:
        from crossed.inference.emmeans import _contrast_weights, _labels, emmeans

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            emm = emmeans(fit, specs, ddf=method)
        labels = _labels(emm.grid)
        if isinstance(contrast, dict):
            W, names = _contrast_weights(contrast, labels, 0)
        else:
            W, names = _contrast_weights("pairwise", labels, 0)
        k = 0
        if isinstance(contrast, str):
            if contrast not in names:
                raise ValueError(f"contrast {contrast!r} not among {names}")
            k = names.index(contrast)
        row = W[k] @ emm.linfct
        weights = dict(zip(fit.fixef_names, row.tolist(), strict=True))
        return ContrastTest(name=names[k], weights=weights, ddf=method, X=fit.design.X,
                            names=fit.fixef_names)

    setup.label = f"emm {specs}"  # type: ignore[attr-defined]
    return setup


#: engines that can refit a reduced design by maximum likelihood
LRT_ENGINES = ("native", "statsmodels", "lme4", "pymer4")


@dataclass
class LikelihoodRatioTest:
    """Likelihood-ratio test of a fixed-effect term: full vs reduced, both fitted by ML.

    Both models are fitted with the engine of the fit the test is applied to (``fit.engine``).

    Attributes
    ----------
    name : str
        The term label (``"lr"``, ``"language:task"``).
    control : LmerControl, optional
        Optimiser settings of the native engine's ML refits (default: the fit's).
    """

    name: str
    control: Any = None

    def __call__(self, fit: LmerFit, rows: np.ndarray | None = None) -> dict:
        from crossed.engines import fit_with

        check_lrt_engine(fit.engine)
        design = fit.design
        fx = design.fixed
        labels = fx.term_labels
        drop = np.array([labels[a] == self.name for a in fx.assign], dtype=bool)
        if not drop.any():
            return _nan_row("non_estimable")
        keep = np.flatnonzero(~drop)
        reduced_fixed = replace(fx, X=fx.X[:, keep], names=tuple(fx.names[i] for i in keep),
                                assign=tuple(fx.assign[i] for i in keep))
        control = None
        if fit.engine == "native":
            control = self.control or (fit.opt.control if fit.opt is not None else None)
            if control is None:
                from crossed.engines.native import LmerControl

                control = LmerControl()
        full = fit if not fit.reml else fit_with(fit.engine, design, False, control)
        reduced = fit_with(fit.engine, replace(design, fixed=reduced_fixed), False, control)
        stat = max(reduced.deviance - full.deviance, 0.0)
        df = int(drop.sum())
        return {"status": "ok", "estimate": np.nan, "std_error": np.nan, "df": float(df),
                "statistic": float(stat), "p_value": float(stats.chi2.sf(stat, df))}


def check_lrt_engine(engine: str) -> None:
    """A clear error when ``engine`` cannot refit the reduced model of a likelihood-ratio test."""
    if engine not in LRT_ENGINES:
        raise ValueError(f"lrt refits the full and reduced models with the fit's own engine, "
                         f"and engine {engine!r} cannot refit a design; use a fit from one of "
                         f"{', '.join(LRT_ENGINES)}")


def lrt(term: str, control: Any = None) -> Callable[[LmerFit], LikelihoodRatioTest]:
    """Likelihood-ratio (chi-square) test dropping the fixed-effect term ``term``.

    Parameters
    ----------
    term : str
        A term label of the fixed part (``"lr"``, ``"language"``, ``"language:task"``);
        every column of that term is removed. Both models are refitted by maximum
        likelihood with the fit's own engine (``fit.engine``). Validated against
        ``cx.compare`` / lme4's ``anova(reduced, full)`` (ML refits).
    control : LmerControl, optional
        Optimiser settings of the ML refits (default: the fit's); native engine only.
    """

    def setup(fit: LmerFit) -> LikelihoodRatioTest:
        if term not in fit.design.fixed.term_labels:
            raise ValueError(f"{term!r} is not a fixed-effect term; the terms are "
                             + ", ".join(fit.design.fixed.term_labels))
        check_lrt_engine(fit.engine)
        if control is not None and fit.engine != "native":
            raise ValueError(f"control= sets the native engine's optimiser; this fit's engine "
                             f"is {fit.engine!r} (pass control=None)")
        return LikelihoodRatioTest(name=term, control=control)

    setup.label = f"LRT {term}"  # type: ignore[attr-defined]
    return setup


@dataclass
class CallableTest:
    """Wraps a user function ``f(fit)`` returning a p-value or a dict with ``p_value``."""

    func: Callable
    name: str = "custom"

    def __call__(self, fit: LmerFit, rows: np.ndarray | None = None) -> dict:
        out = self.func(fit)
        if isinstance(out, dict):
            row = _nan_row("ok")
            row.update({k: out[k] for k in out})
            return row
        row = _nan_row("ok")
        row["p_value"] = float(out)
        return row


def bind_test(test: Any, fit: LmerFit) -> Callable[..., dict]:
    """Set a test up on ``fit``: a factory from this module, a coefficient name or a callable.

    A string is a coefficient name (t test, Satterthwaite) or, failing that, a fixed-effect
    term label (likelihood-ratio test).
    """
    if isinstance(test, str):
        if test in fit.fixef_names:
            return fixed(test)(fit)
        if test in fit.design.fixed.term_labels:
            return lrt(test)(fit)
        raise ValueError(f"{test!r} is neither a coefficient ({', '.join(fit.fixef_names)}) "
                         f"nor a term ({', '.join(fit.design.fixed.term_labels)})")
    if isinstance(test, ContrastTest | LikelihoodRatioTest | CallableTest):
        return test
    if callable(test) and hasattr(test, "label"):
        return test(fit)
    if callable(test):
        return CallableTest(test, getattr(test, "__name__", "custom"))
    raise TypeError(f"cannot use {test!r} as a test")


def label_of(bound: Any) -> str:
    return str(getattr(bound, "name", "custom"))
