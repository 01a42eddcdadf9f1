"""Fit several specifications of the same question and put their answers side by side.

The point of comparing specifications is to show how the answer to one question (is
language A better than language B?) and its uncertainty change with the model: treating
architectures as random or fixed, crossing the conditions or not. One row per specification
and focus contrast, plus likelihood-ratio tests for the pairs of specifications that are
nested.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from crossed.api import lmer
from crossed.evaluation.specs import formula_list
from crossed.fit import LmerFit
from crossed.inference.lrt import compare
from crossed.tables import PValueStyle, ResultDisplay, format_frame, note_text, result_table

__all__ = ["SpecComparison", "compare_specs", "nested_in", "residual_checks",
           "simulated_checks"]

TABLE_COLUMNS = [
    "spec", "formula", "contrast", "estimate", "std_error", "df", "statistic", "p_value",
    "conf_low", "conf_high", "r2_marginal", "r2_conditional", "aic", "bic", "loglik",
    "npar", "nobs", "is_singular", "converged", "resid_normality_p", "resid_spread_p",
    "resid_max_abs", "sim_uniformity_p", "sim_dispersion_p", "sim_outliers_p",
]
CONTRAST_COLUMNS = ["spec", "contrast", "estimate", "std_error", "df", "statistic", "p_value",
                    "conf_low", "conf_high"]
_SIM_TESTS = {"uniformity": "sim_uniformity_p", "dispersion": "sim_dispersion_p",
              "outliers": "sim_outliers_p"}


def residual_checks(fit: LmerFit) -> dict[str, float]:
    """Simple checks of the conditional residuals of a fit.

    Returns
    -------
    dict
        ``resid_normality_p``: Shapiro–Wilk p-value of the residuals (scipy; the first
        5,000 when there are more); ``resid_spread_p``: p-value of Spearman's correlation
        between |residual| and the fitted value (a small p suggests the spread changes with
        the level); ``resid_max_abs``: the largest |residual| / σ̂.
    """
    r = fit.residuals(type="pearson")  # (× √w with prior weights, as lme4)
    f = fit.fitted()
    out = {"resid_normality_p": np.nan, "resid_spread_p": np.nan,
           "resid_max_abs": float(np.max(np.abs(r)) / fit.sigma) if fit.sigma > 0 else np.nan}
    if len(r) >= 3 and np.ptp(r) > 0:
        out["resid_normality_p"] = float(stats.shapiro(r[:5000]).pvalue)
    if len(r) >= 4 and np.ptp(f) > 0 and np.ptp(r) > 0:
        out["resid_spread_p"] = float(stats.spearmanr(np.abs(r), f).pvalue)
    return out


def simulated_checks(fit: LmerFit, nsim: int = 250,
                     seed: int | np.random.Generator | None = 0) -> dict[str, float]:
    """p-values of the simulated-residual (DHARMa-style) tests of ``fit.check()``.

    Returns
    -------
    dict
        ``sim_uniformity_p`` (Kolmogorov–Smirnov test of the scaled residuals against
        Uniform(0, 1)), ``sim_dispersion_p`` (observed against simulated residual variance),
        ``sim_outliers_p`` (observations outside all simulations); nominal, uncalibrated
        p-values from :func:`crossed.simulate.check`.
    """
    tests = fit.check(nsim=nsim, seed=seed).tests.set_index("test")["p_value"]
    return {col: float(tests.get(name, np.nan)) for name, col in _SIM_TESTS.items()}


def _random_signature(fit: LmerFit) -> set[tuple[str, str]]:
    return {(t.group, c) for t in fit.design.random.terms for c in t.columns}


def nested_in(small: LmerFit, big: LmerFit, tol: float = 1e-8) -> bool:
    """Whether ``small`` is a special case of ``big`` (same rows and response).

    True when ``small``'s fixed-effects columns lie in the column space of ``big``'s, every
    (grouping factor, column) of ``small``'s random terms is also in ``big``, and ``big``
    has more parameters.
    """
    if small.nobs != big.nobs or not np.array_equal(small.design.y, big.design.y):
        return False
    if small.npar >= big.npar:
        return False
    if not _random_signature(small) <= _random_signature(big):
        return False
    Xs, Xb = small.design.X, big.design.X
    if Xs.shape[1] == 0:
        return True
    coef, *_ = np.linalg.lstsq(Xb, Xs, rcond=None)
    resid = Xs - Xb @ coef
    return bool(np.max(np.abs(resid)) <= tol * max(1.0, float(np.max(np.abs(Xs)))))


@dataclass(repr=False)
class SpecComparison(ResultDisplay):
    """Side-by-side answers of several specifications (from :func:`compare_specs`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per specification and focus contrast; see :func:`compare_specs`.
    lrt : pandas.DataFrame
        Likelihood-ratio tests between nested pairs: ``smaller``, ``larger`` (spec names),
        ``npar_smaller``, ``npar_larger``, ``statistic`` (χ²), ``df``, ``p_value``,
        after maximum-likelihood refits (lme4's ``anova(m1, m2)``).
    fits : dict
        Name -> :class:`~crossed.fit.LmerFit` (as fitted, REML by default).
    emmeans : dict
        Name -> table of the focus EMMs.
    focus : str
    """

    table: pd.DataFrame
    lrt: pd.DataFrame
    fits: dict[str, LmerFit]
    emmeans: dict[str, pd.DataFrame]
    focus: str
    messages: list[str] = field(default_factory=list)

    @property
    def contrasts(self) -> pd.DataFrame:
        """The focus contrasts: one row per specification and contrast (``spec``,
        ``contrast``, ``estimate``, ``std_error``, ``df``, ``statistic``, ``p_value``,
        ``conf_low``, ``conf_high``; the columns of :attr:`table`)."""
        out = result_table(self.table[CONTRAST_COLUMNS].reset_index(drop=True), "emmeans")
        out.attrs.update(adjust=self.table.attrs.get("adjust"))
        return out

    @property
    def specs(self) -> pd.DataFrame:
        """One row per specification: its formula, R², criteria, size, flags and residual
        checks (the columns of :attr:`table` that do not vary by contrast)."""
        cols = [c for c in self.table.columns if c not in CONTRAST_COLUMNS or c == "spec"]
        out = self.table[cols].drop_duplicates("spec").reset_index(drop=True)
        return result_table(out)

    def display_tables(self) -> dict[str, pd.DataFrame]:
        tables = {f"{self.focus}: pairwise differences of the EMMs": self.contrasts,
                  "specifications": self.specs.drop(columns=["formula"])}
        if len(self.lrt):
            tables["likelihood-ratio tests of nested specifications (ML refits)"] = self.lrt
        return tables

    def summary(self) -> str:
        """A readable text version of the tables: the focus contrasts, then one row per
        specification (R², information criteria, flags, checks)."""
        spec_cols = ["spec", "r2_marginal", "r2_conditional", "aic", "bic", "is_singular",
                     "converged", "resid_normality_p", "sim_uniformity_p"]
        adjust = self.table.attrs.get("adjust", "tukey")
        lines = [f"Focus: {self.focus} (pairwise differences of its EMMs, {adjust} adjustment;"
                 " a single difference is not adjusted)", ""]
        for name, fit in self.fits.items():
            lines.append(f"  {name}: {fit.formula}")
        lines += ["", _format(self.contrasts, "emmeans"), "",
                  "Specifications (ML criteria):", _format(self.specs[spec_cols])]
        if len(self.lrt):
            lines += ["", "Likelihood-ratio tests of nested specifications (ML refits):",
                      _format(self.lrt)]
        for m in self.messages:
            lines.append(f"note: {m}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _format(df: pd.DataFrame, pvalues: PValueStyle = "r") -> str:
    return format_frame(pd.DataFrame(df), pvalues, na="").to_string(index=False)


def compare_specs(data: pd.DataFrame, formulas: Sequence[str], focus: str,
                  names: Sequence[str] | None = None, ddf: str = "satterthwaite",
                  adjust: str = "tukey", reml: bool = True,
                  reference: dict[str, str] | None = None, level: float = 0.95,
                  fits: Sequence[LmerFit] | None = None, check: bool = True,
                  nsim: int = 250, seed: int | None = 0) -> SpecComparison:
    """Fit each specification and compare the focus contrast, fit and checks side by side.

    Parameters
    ----------
    data : pandas.DataFrame
    formulas : list of str
        lme4 formulas (or :class:`~crossed.evaluation.specs.Specification` objects).
    focus : str
        The factor whose pairwise EMM contrasts are compared (e.g. ``"language"``); it must
        be in every specification's fixed part.
    names : list of str, optional
        Labels of the specifications (default ``spec_1``, ``spec_2``, ...).
    ddf : {"satterthwaite", "kenward-roger", "none"}
        Degrees of freedom of the contrasts.
    adjust : str
        Multiplicity adjustment of the pairwise contrasts (emmeans' ``tukey`` by default;
        irrelevant for a two-level focus).
    reml : bool
        Fit by REML (default) or ML.
    reference : dict, optional
        Reference levels, as :func:`crossed.lmer`.
    level : float
        Confidence level of the intervals.
    fits : list of LmerFit, optional
        Already fitted models to use instead of fitting ``formulas`` again.
    check : bool
        Also run the simulated-residual tests of ``fit.check()`` (``nsim`` simulations,
        ``seed``) on every specification.

    Returns
    -------
    SpecComparison
        ``table`` has one row per specification and contrast of the focus EMMs:
        ``spec``, ``formula``, ``contrast`` (``"en - es"``), ``estimate``, ``std_error``,
        ``df``, ``statistic`` (t), ``p_value`` (adjusted), ``conf_low``, ``conf_high``
        (EMM pairs, validated against emmeans 1.8.4 ``pairs(emmeans(fit, ~ focus))`` on
        the three exist_multi reference fits); ``r2_marginal``, ``r2_conditional``
        (Nakagawa, performance 0.10.2); ``aic``, ``bic``, ``loglik`` of the
        maximum-likelihood fit (REML fits are refitted by ML so that specifications with
        different fixed parts are comparable, as lme4's ``anova()`` does; validated against
        its table); ``npar``, ``nobs``; ``is_singular``, ``converged``; and the residual
        checks of :func:`residual_checks` (``resid_normality_p``, ``resid_spread_p``,
        ``resid_max_abs``) and, with ``check=True``, the simulated-residual tests of
        :func:`simulated_checks` (``sim_uniformity_p``, ``sim_dispersion_p``,
        ``sim_outliers_p``; NaN otherwise). ``lrt`` holds likelihood-ratio tests for every
        nested pair.
    """
    formulas = formula_list(data, formulas, "compare_specs")
    for f in formulas:
        family = getattr(f, "family", None)
        if family is not None:
            raise ValueError(f"specification {getattr(f, 'name', str(f))!r} is a {family} "
                             "GLMM: compare_specs compares linear mixed models (fit GLMMs "
                             "with crossed.glmer and compare nested ones with "
                             "crossed.compare)")
    formulas = [str(f) for f in formulas]
    names = _spec_names(formulas, names, fits)
    fitted: dict[str, LmerFit] = {}
    rows, emms, messages = [], {}, []
    for i, (name, formula) in enumerate(zip(names, formulas, strict=True)):
        fit = fits[i] if fits is not None else lmer(formula, data, reml=reml,
                                                    reference=reference)
        fitted[name] = fit
        if focus not in fit.design.columns:
            raise ValueError(f"focus {focus!r} is not a variable of specification {name!r} "
                             f"({formula})")
        emm, pairs, common = _focus_and_fit(fit, name, focus, ddf, level, adjust)
        emms[name] = emm.table()
        if len(emms[name]) < 2:
            numeric = focus not in (fit.design.levels or {})
            what = ("a numeric variable" if numeric else
                    f"a factor with the single level {str(emms[name][focus].iloc[0])!r}")
            hint = (f" (a numeric column of codes: make it a factor, e.g. --factor {focus} "
                    "on the command line)" if numeric else "")
            raise ValueError(f"focus {focus!r} is {what} in specification {name!r} "
                             f"({formula}): it has one mean and no pairwise contrast to "
                             f"compare; the focus is a factor with two levels or more{hint}")
        messages += [f"{name}: {note_text(m)}"
                     for m in emm.messages + pairs.attrs.get("messages", [])]
        if check:
            messages += _simulated_checks_into(common, fit, name, nsim, seed)
        rows += _contrast_rows(common, pairs)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    table.attrs.update(focus=focus, ddf=ddf, adjust=adjust, conf_level=level)
    lrt = _nested_lrts(fitted)
    return SpecComparison(table=table, lrt=lrt, fits=fitted, emmeans=emms, focus=focus,
                          messages=messages)


def _spec_names(formulas: list[str], names: Sequence[str] | None,
                fits: Sequence[LmerFit] | None) -> list[str]:
    """The labels of the specifications (default ``spec_1``, ...), checked with ``fits``."""
    names = list(names) if names is not None else [f"spec_{i + 1}" for i in range(len(formulas))]
    if len(names) != len(formulas):
        raise ValueError("names must have one label per formula")
    if len(set(names)) != len(names):
        raise ValueError("names must be unique")
    if fits is not None and len(fits) != len(formulas):
        raise ValueError("fits must have one fit per formula")
    for i, fit in enumerate(fits or ()):
        if not isinstance(fit, LmerFit):
            raise TypeError(f"fits[{i}] must be an LmerFit (crossed.lmer's result) of "
                            f"{formulas[i]!r}, got {type(fit).__name__}")
    return names


def _focus_and_fit(fit: LmerFit, name: str, focus: str, ddf: str, level: float,
                   adjust: str) -> tuple:
    """The focus EMMs and their pairs, and the specification's columns of the table
    (R², the ML fit's criteria, size, flags, residual checks; simulated checks NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emm = fit.emmeans(focus, ddf=ddf, level=level)
        pairs = emm.pairs(adjust=adjust)
        ml = fit.refit(reml=False) if fit.reml else fit
        r2 = fit.r2().iloc[0]
    common = {"spec": name, "formula": fit.formula,
              "r2_marginal": float(r2["marginal"]),
              "r2_conditional": float(r2["conditional"]),
              "aic": ml.aic, "bic": ml.bic, "loglik": ml.loglik, "npar": fit.npar,
              "nobs": fit.nobs, "is_singular": bool(fit.is_singular),
              "converged": bool(fit.converged)}
    common.update(residual_checks(fit))
    common.update(dict.fromkeys(_SIM_TESTS.values(), np.nan))
    return emm, pairs, common


def _simulated_checks_into(common: dict, fit: LmerFit, name: str, nsim: int,
                           seed: int | None) -> list[str]:
    """Add the simulated-residual p-values to ``common``; a failure is a message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            common.update(simulated_checks(fit, nsim=nsim, seed=seed))
    except Exception as exc:  # a failed diagnostic is reported, not fatal
        return [f"{name}: simulated residual checks failed: {exc}"]
    return []


def _contrast_rows(common: dict, pairs: pd.DataFrame) -> list[dict]:
    """One table row per focus contrast: the specification's columns and the contrast's."""
    rows = []
    for _, p in pairs.iterrows():
        row = dict(common)
        row.update({k: p[k] for k in ("contrast", "estimate", "std_error", "df",
                                      "statistic", "p_value", "conf_low", "conf_high")})
        rows.append(row)
    return rows


LRT_COLUMNS = ["smaller", "larger", "npar_smaller", "npar_larger", "statistic", "df", "p_value"]


def _nested_lrts(fits: dict[str, LmerFit]) -> pd.DataFrame:
    rows = []
    items = list(fits.items())
    for a, fa in items:
        for b, fb in items:
            if a == b or not nested_in(fa, fb):
                continue
            tab = compare(fa, fb, names=[a, b])
            last = tab.iloc[-1]
            rows.append({"smaller": a, "larger": b, "npar_smaller": int(tab["npar"].iloc[0]),
                         "npar_larger": int(last["npar"]), "statistic": float(last["statistic"]),
                         "df": float(last["df"]), "p_value": float(last["p_value"])})
    return pd.DataFrame(rows, columns=LRT_COLUMNS)
