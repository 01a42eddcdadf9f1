"""Hypothesis tests applied to every refit of a simulation (power, ablation).

A test is set up once on the original fit (its contrast rows over the fixed effects, the
columns of the term to drop) and then applied to each refit, which may have lost
fixed-effect columns (rows removed) or have a new response. Each application returns one
row: ``status`` ("ok", "non_estimable"), ``estimate``, ``std_error``, ``df``, ``statistic``,
``p_value``.

- :func:`fixed` — t test of one coefficient (lmerTest's ``summary`` table).
- :func:`emm_contrast` — a contrast of estimated marginal means (emmeans' ``pairs`` or
  ``contrast``), or with more than two means and no contrast named, the joint F test that
  all are equal; estimability checked as emmeans does on rank-deficient refits.
- :func:`lrt` — likelihood-ratio test dropping a fixed-effect term (both models refitted
  by maximum likelihood, as ``anova(reduced, full)`` in lme4).
- any callable ``f(fit) -> p_value`` or ``-> dict`` with at least ``p_value``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import special, stats

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["CallableTest", "ContrastTest", "JointContrastTest", "LRT_ENGINES",
           "LikelihoodRatioTest", "RESULT_KEYS", "bind_test", "check_lrt_engine", "emm_contrast",
           "fixed", "label_of", "lrt"]

RESULT_KEYS = ("estimate", "std_error", "df", "statistic", "p_value")


def _ddf_for(fit: Any, ddf: str | None) -> str:
    """The df method of a test on ``fit``: None means Satterthwaite for an LMM and the Wald
    z test (``"none"``: df = inf, R's ``summary(glmer fit)``) for a GLMM, which has no
    finite-sample df; Satterthwaite or Kenward–Roger on a GLMM is refused."""
    from crossed.inference.ddf import normalise_ddf
    from crossed.simulate.response import is_glmm

    if is_glmm(fit):
        if ddf is not None and normalise_ddf(ddf) != "none":
            raise ValueError(f"ddf={ddf!r} is for linear mixed models; a GLMM's tests are "
                             "Wald z tests (use ddf=None or 'none')")
        return "none"
    return normalise_ddf("satterthwaite" if ddf is None else ddf)


def _nan_row(status: str) -> dict:
    return {"status": status, **dict.fromkeys(RESULT_KEYS, np.nan)}


def _t_row(fit: LmerFit, L: np.ndarray, ddf: str) -> dict:
    """t test of the single contrast row ``L`` (over ``fit``'s fixed effects)."""
    from crossed.inference.ddf import contrast_t

    est, se, df = contrast_t(fit, L, ddf)
    est, se, df = float(est[0]), float(se[0]), float(df[0])
    t = est / se if se > 0 else np.nan
    # (Student's t upper tail, the function scipy.stats.t.sf evaluates, without the
    # distribution's argument handling: one test per replicate of a power simulation)
    p = float(2.0 * special.stdtr(df, -abs(t))) if np.isfinite(t) else np.nan
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
        """emmeans' rule (:mod:`crossed.inference.estimability`): L is estimable on the
        subset when it is orthogonal to the null space of X[rows]."""
        from crossed.inference.estimability import is_estimable, nonest_basis

        if self.X is None or rows is None:
            return False
        X = self.X[np.asarray(rows)]
        L = np.array([self.weights.get(n, 0.0) for n in self.names])
        return bool(is_estimable(L, nonest_basis(X))[0])


def fixed(term: str, ddf: str | None = None) -> Callable[[LmerFit], ContrastTest]:
    """t test of one fixed-effect coefficient (lmerTest's ``summary`` row), or for a GLMM
    the Wald z test (``summary(glmer fit)``'s ``Pr(>|z|)``, simr's default for glmer).

    Parameters
    ----------
    term : str
        Coefficient name as in ``fit.fixef`` (e.g. ``"lr1e-5"``).
    ddf : {"satterthwaite", "kenward-roger", "none"}, optional
        Default: Satterthwaite for an LMM, z (``"none"``) for a GLMM.
    """
    from crossed.inference.ddf import normalise_ddf

    if ddf is not None:
        normalise_ddf(ddf)

    def setup(fit: LmerFit) -> ContrastTest:
        method = _ddf_for(fit, ddf)
        if term not in fit.fixef_names:
            raise ValueError(f"{term!r} is not a fixed-effect coefficient; the model has "
                             + ", ".join(fit.fixef_names))
        return ContrastTest(name=term, weights={term: 1.0}, ddf=method, X=fit.design.X,
                            names=fit.fixef_names)

    setup.label = term  # type: ignore[attr-defined]
    return setup


@dataclass
class JointContrastTest:
    """A joint F test that several linear functions of the fixed effects are all zero.

    emmeans' ``test(contrast(emm, "consec"), joint = TRUE)``: F on an orthonormal basis of
    the rows, denominator df the smallest df of the basis rows. A refit on which not every
    direction is estimable (emmeans would reduce df1) is reported as ``non_estimable``.

    Attributes
    ----------
    name : str
        Label shown in result tables.
    L : numpy.ndarray
        Rows over the original fit's fixed effects (``names``).
    ddf : str
    X : numpy.ndarray, optional
        The original fixed-effects matrix (estimability on subsets).
    names : tuple of str
    df1 : int
        Numerator df on the original fit.
    """

    name: str
    L: np.ndarray = field(repr=False)
    ddf: str = "satterthwaite"
    X: np.ndarray | None = field(default=None, repr=False)
    names: tuple[str, ...] = ()
    df1: int = 0

    def __call__(self, fit: LmerFit, rows: np.ndarray | None = None) -> dict:
        from crossed.inference.emmeans import joint_f
        from crossed.inference.estimability import NullBasis, nonest_basis

        refit_names = tuple(fit.fixef_names)
        L, nb = self.L, None
        if refit_names != tuple(self.names):
            if self.X is None or rows is None:
                return _nan_row("non_estimable")
            kept = np.array([self.names.index(n) for n in refit_names], dtype=int)
            basis = nonest_basis(self.X[np.asarray(rows)])
            if basis is None:
                L = self.L[:, kept]
            else:
                nb = NullBasis(spec=None, kept=kept, basis=basis)
        res = joint_f(fit, L, self.ddf, nb)
        if res["df1"] < self.df1:
            return _nan_row("non_estimable")
        return {"status": "ok", "estimate": np.nan, "std_error": np.nan, "df": res["df2"],
                "statistic": res["statistic"], "p_value": res["p_value"]}


def emm_contrast(specs: str | list[str], contrast: str | dict | Sequence[float] | None = None,
                 ddf: str | None = None) -> Callable[[LmerFit], Any]:
    """A contrast of estimated marginal means, tested with ``ddf`` (emmeans' ``pairs``).

    Parameters
    ----------
    specs : str or list of str
        Factor(s) of the means, e.g. ``"language"``.
    contrast : str, dict or sequence of float, optional
        Which contrast to test: a label of ``fit.emmeans(specs).pairs()`` (e.g.
        ``"en - es"``), weights over the means (a sequence, or ``{name: weights}``; a dict
        of several contrasts is tested jointly). Default: with two means their difference
        (t test); with more, the joint F test that all the means are equal (emmeans'
        ``test(contrast(emm, "consec"), joint = TRUE)``, the ``joint_tests`` row of the
        factor). The test's label (``name``, shown by power and ablation summaries) says
        which: ``"en - es"`` or ``"model: all 4 means equal (joint F, df1 = 3)"``.
    ddf : {"satterthwaite", "kenward-roger", "none"}, optional
        Default: Satterthwaite for an LMM; for a GLMM the asymptotic z (chi-square) test on
        the link scale, as emmeans does for glmer fits (``"none"``).

    Returns
    -------
    callable
        A test factory; bound to a fit it gives a :class:`ContrastTest` (t test:
        ``estimate``, ``std_error``, ``df``, ``statistic`` = t) or a
        :class:`JointContrastTest` (F test: ``df`` = denominator df, ``statistic`` = F, no
        estimate).

    Raises
    ------
    ValueError
        An unknown contrast label, weights of the wrong length, or a contrast that is not
        estimable on the fit (an empty cell).

    Notes
    -----
    The contrast's row over β is computed once on the original fit (emmeans' reference grid,
    equal weights); estimate, SE and df on a refit are those of ``emmeans(refit, specs)``
    with the same contrast (validated in ``tests/simulate/test_simtests.py`` against
    :func:`crossed.inference.emmeans.emmeans` on refits).
    """
    from crossed.inference.ddf import normalise_ddf

    if ddf is not None:
        normalise_ddf(ddf)
    specs_label = specs if isinstance(specs, str) else ":".join(specs)

    def setup(fit: LmerFit) -> ContrastTest | JointContrastTest:
        method = _ddf_for(fit, ddf)
        from crossed.inference.emmeans import consec_weights, contrast_weights, emmeans
        from crossed.inference.grid import grid_labels

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            emm = emmeans(fit, specs, ddf=method)
        labels = grid_labels(emm.grid)
        k_means = len(labels)
        if k_means < 2:  # a numeric covariate (one mean at its average): no contrast
            raise ValueError(f"emm_contrast({specs_label!r}) has a single mean: there is "
                             "nothing to contrast; name a factor, or test a coefficient")
        if isinstance(contrast, dict):
            W, names = contrast_weights(contrast, labels, 0)
        elif contrast is not None and not isinstance(contrast, str):
            W, names = contrast_weights({"custom": list(contrast)}, labels, 0)
        elif contrast is None and k_means > 2:
            W, names = consec_weights(k_means), [f"{specs_label}: all {k_means} means equal "
                                          f"(joint F, df1 = {k_means - 1})"]
        else:
            W, names = contrast_weights("pairwise", labels, 0)
            if isinstance(contrast, str):
                if contrast not in names:
                    raise ValueError(f"contrast {contrast!r} not among {names}")
                W, names = W[[names.index(contrast)]], [contrast]
            W, names = W[:1], names[:1]
        est = emm._estimable(W, np.arange(k_means))
        if not est.all():
            raise ValueError(f"contrast {names[0]!r} of {specs_label!r} is not estimable on "
                             "this rank-deficient fit (an empty cell); choose another")
        rows = W @ emm.linfct
        if W.shape[0] == 1:
            weights = dict(zip(fit.fixef_names, rows[0].tolist(), strict=True))
            return ContrastTest(name=names[0], weights=weights, ddf=method, X=fit.design.X,
                                names=fit.fixef_names)
        name = names[0] if contrast is None else f"{specs_label}: {', '.join(names)} (joint F)"
        return JointContrastTest(name=name, L=rows, ddf=method, X=fit.design.X,
                                 names=tuple(fit.fixef_names), df1=W.shape[0])

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
        from crossed.engines import fit_glmm_with, fit_with
        from crossed.simulate.response import is_glmm

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
        if is_glmm(fit):  # no REML: the full fit is the ML fit; −2 log L = criterion
            control = self.control or (fit.opt.control if fit.opt is not None else None)
            g = fit  # type: Any
            reduced_g = fit_glmm_with(g.engine, replace(design, fixed=reduced_fixed),
                                      family=g.family, nagq=g.nagq, control=control,
                                      data_name=g.data_name)
            stat = max(reduced_g.criterion - g.criterion, 0.0)
            df = int(drop.sum())
            return {"status": "ok", "estimate": np.nan, "std_error": np.nan,
                    "df": float(df), "statistic": float(stat),
                    "p_value": float(stats.chi2.sf(stat, df))}
        if fit.engine == "native":
            control = self.control or (fit.opt.control if fit.opt is not None else None)
            if control is None:
                from crossed.model.control import LmerControl

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
        row = _nan_row("ok")
        if isinstance(out, dict):
            row.update({k: out[k] for k in out})
        else:
            row["p_value"] = out
        p = row["p_value"]
        # a p value that is no probability (NaN, 2, a string) fails the replicate, naming
        # it, rather than counting as "not significant"
        if row.get("status") != "ok":  # a dict may say "non_estimable" (p is NaN then)
            return row
        if (isinstance(p, bool | np.bool_) or not isinstance(p, int | float | np.number)
                or not 0.0 <= float(p) <= 1.0):
            raise ValueError(f"the test function {self.name!r} returned the p value {p!r}; "
                             "expected a number from 0 to 1")
        row["p_value"] = float(p)
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
    if isinstance(test, ContrastTest | JointContrastTest | LikelihoodRatioTest | CallableTest):
        return test
    if callable(test) and hasattr(test, "label"):
        return test(fit)
    if callable(test):
        return CallableTest(test, getattr(test, "__name__", "custom"))
    raise TypeError(f"cannot use {test!r} as a test")


def label_of(bound: Any) -> str:
    return str(getattr(bound, "name", "custom"))
