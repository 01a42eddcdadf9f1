"""A defensible random-effects structure: backward selection from the maximal model.

``select_random`` starts from the maximal model (as given, or built from the design: every
fixed term that varies within a grouping factor's levels as a slope of that factor, Barr
et al. 2013) and reduces it as buildmer and Matuschek et al. (2017) describe: correlations
are dropped before slopes, slopes one at a time (the least supported first), intercepts
last. Each candidate model is written from the parsed :class:`~crossed.formula.ModelSpec`
(its random terms rebuilt as :class:`~crossed.formula.RandomTermSpec` objects from the
model terms the design found in them, then written with ``ModelSpec.to_formula`` and
parsed by the public parser), never by editing the formula's text.

Strategies
----------
``"lrt"``
    At each step every candidate reduction of the current stage is fitted and the one with
    the largest likelihood-ratio p-value is dropped while p > ``alpha`` (0.20, Matuschek et
    al.'s recommendation); LMMs are compared on REML fits (lmerTest's ``ranova`` and
    buildmer's default: the fixed part is the same), GLMMs on the Laplace (or AGQ)
    likelihood. The χ² reference ignores the boundary (conservative, as ``ranova``).
``"aic"``
    The candidate with the lowest AIC is dropped while AIC does not increase.
``"rePCA"``
    The current model's :func:`~crossed.inference.repca.re_pca` is read: a grouping factor
    whose cumulative proportion of variance reaches 1 − ``tol`` before its last component
    (or whose variance is zero) is reduced (its correlations first, then its slope with
    the least variance, then its intercept) until no factor is over-parametrised (Bates et
    al. 2015).
``"maximal-converging"``
    The largest model of the backward sequence (correlations, then slopes with the least
    variance first, then intercepts) whose fit converges without a singular fit (Barr et
    al.'s "keep it maximal" with their fallback).

Stages: while a correlated term of two or more columns is left, the candidates are the
correlations; then the slopes (a term only after every term containing it, R's
``drop.scope``); then the intercepts of grouping factors without slopes. A stage whose best
candidate is kept passes to the next. The last random term is never dropped (the final
model stays a mixed model). Fits that fail to converge or are singular are reported in the
steps table, never retried.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from crossed.display.apa import apa_number, apa_p
from crossed.formula import ModelSpec, RandomTermSpec, parse
from crossed.tables import ResultDisplay, result_table

__all__ = ["CANDIDATE_COLUMNS", "STEP_COLUMNS", "STRATEGIES", "RandomSelection", "select_random"]

STRATEGIES = ("lrt", "aic", "rePCA", "maximal-converging")
STEP_COLUMNS = ["step", "model", "n_params", "criterion", "test", "statistic", "df",
                "p_value", "converged", "singular", "decision"]
CANDIDATE_COLUMNS = ["step", "reduction", "model", "n_params", "criterion", "statistic", "df",
                     "p_value", "aic", "converged", "singular", "chosen"]


# ---------------------------------------------------------------------- the structure
@dataclass(frozen=True)
class _Term:
    """One model term of a random term's left side: its text (as the design's formula
    engine writes it) and the variables it involves."""

    text: str
    variables: frozenset[str]


@dataclass(frozen=True)
class _Bar:
    """One random term ``(lhs | g)`` or ``(lhs || g)`` of a candidate structure."""

    factors: tuple[str, ...]
    name: str
    intercept: bool
    terms: tuple[_Term, ...]
    correlated: bool

    @property
    def ncols_terms(self) -> int:
        return int(self.intercept) + len(self.terms)

    @property
    def lhs(self) -> str:
        parts = ["1" if self.intercept else "0", *(t.text for t in self.terms)]
        return " + ".join(parts)

    def written(self) -> str:
        bar = "|" if self.correlated or self.ncols_terms == 1 else "||"
        return f"({self.lhs} {bar} {self.name})"

    def as_spec(self) -> RandomTermSpec:
        return RandomTermSpec(expr=self.lhs, factors=self.factors, name=self.name,
                              uncorrelated=not self.correlated and self.ncols_terms > 1)


def _terms_of(expr: str, data: pd.DataFrame, spec: ModelSpec) -> tuple[bool, list[_Term]]:
    """The intercept and the model terms of a random term's left side, as the design
    layer reads them (:func:`crossed.design.fixed.build_matrix`: the terms it coded
    itself, or formulaic's term structure)."""
    from crossed.design.fixed import build_matrix

    _, _, mspec = build_matrix(expr, data, caret=spec.caret, trusted=spec.trusted)
    if mspec.formulaic is None:  # (its terms: "1", columns, variables joined by ":")
        return "1" in mspec.plain, [_Term(c, frozenset(c.split(":"))) for c in mspec.plain
                                    if c != "1"]
    intercept, terms = False, []
    for struct in mspec.formulaic.structure:
        factors = [str(f.expr) for f in struct.term.factors]
        if not factors or factors == ["1"]:
            intercept = True
            continue
        terms.append(_Term(str(struct.term), frozenset(factors)))
    return intercept, terms


def _structure(spec: ModelSpec, data: pd.DataFrame) -> tuple[_Bar, ...]:
    bars = []
    for t in spec.random:
        intercept, terms = _terms_of(t.expr, data, spec)
        bars.append(_Bar(t.factors, t.name, intercept, tuple(terms), not t.uncorrelated))
    return tuple(bars)


def _with_structure(spec: ModelSpec, bars: tuple[_Bar, ...]) -> ModelSpec:
    """``spec`` with the random terms ``bars``, through the public parser (its formula
    written by ``ModelSpec.to_formula``)."""
    new = replace(spec, random=tuple(b.as_spec() for b in bars))
    return parse(new.to_formula(), reference=spec.reference_levels, trusted=spec.trusted,
                 contrasts=spec.contrast_codings or None)


# ---------------------------------------------------------------------- reductions
@dataclass(frozen=True)
class _Reduction:
    stage: str  # "correlation", "slope", "intercept"
    bars: tuple[_Bar, ...]
    what: str  # words: "the correlation in (1 + x | g)"
    group: str
    term: str | None = None  # the slope's text


def _droppable(bar: _Bar) -> list[_Term]:
    """R's ``drop.scope`` within a term: terms not contained in another of its terms."""
    return [t for t in bar.terms
            if not any(t.variables < o.variables for o in bar.terms if o is not t)]


def _merge(bars: list[_Bar]) -> tuple[_Bar, ...]:
    """Remove empty terms and a second ``(1 | g)`` on the same factor."""
    out: list[_Bar] = []
    for b in bars:
        if b.ncols_terms == 0:
            continue
        if not b.terms and any(o.name == b.name and o.intercept and not o.terms for o in out):
            continue
        out.append(b)
    return tuple(out)


def _reductions(bars: tuple[_Bar, ...]) -> dict[str, list[_Reduction]]:
    out: dict[str, list[_Reduction]] = {"correlation": [], "slope": [], "intercept": []}
    for i, b in enumerate(bars):
        rest_before, rest_after = list(bars[:i]), list(bars[i + 1:])
        if b.correlated and b.ncols_terms >= 2:
            new = replace(b, correlated=False)
            out["correlation"].append(_Reduction(
                "correlation", _merge([*rest_before, new, *rest_after]),
                f"the correlations of {b.written()}", b.name))
        for t in _droppable(b):
            new = replace(b, terms=tuple(o for o in b.terms if o is not t))
            cand = _merge([*rest_before, new, *rest_after])
            if cand:
                out["slope"].append(_Reduction("slope", cand,
                                               f"the slope of {t.text} in {b.written()}",
                                               b.name, t.text))
        slopes_on_group = any(o.terms for o in bars if o.name == b.name)
        if b.intercept and not b.terms and not slopes_on_group and len(bars) > 1:
            cand = _merge([*rest_before, *rest_after])
            out["intercept"].append(_Reduction("intercept", cand,
                                                f"the random intercept {b.written()}", b.name))
    return out


# ---------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class _Fitted:
    fit: Any
    formula: str
    messages: tuple[str, ...]

    @property
    def loglik(self) -> float:
        return float(self.fit.loglik)

    @property
    def npar(self) -> int:
        return int(self.fit.npar)

    @property
    def aic(self) -> float:
        return -2.0 * self.loglik + 2.0 * self.npar


class _Fitter:
    def __init__(self, data: pd.DataFrame, family: Any, reml: bool,
                 fit_args: Mapping[str, Any]):
        self.data, self.family, self.reml, self.args = data, family, reml, dict(fit_args)
        self.cache: dict[str, _Fitted] = {}

    def __call__(self, spec: ModelSpec) -> _Fitted:
        formula = spec.to_formula()
        if formula in self.cache:
            return self.cache[formula]
        from crossed.api import glmer, lmer

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.family is None:
                fit = lmer(formula, self.data, reml=self.reml, **self.args)
            else:
                fit = glmer(formula, self.data, family=self.family, **self.args)
        msgs = tuple(dict.fromkeys([*fit.messages, *(str(w.message) for w in caught)]))
        out = _Fitted(fit, formula, msgs)
        self.cache[formula] = out
        return out


def _variance_share(fitted: _Fitted, name: str, term: str | None,
                    data: pd.DataFrame) -> float:
    """The least variance one of a random term's columns adds to the linear predictor
    (relative to σ² for an LMM): min over its columns of var(column's effects) × mean(z²)
    (a column at zero variance, the direction a singular fit has lost, gives 0). ``term``
    None: the intercept."""
    fit = fitted.fit
    block = next((b for b in fit.design.random.blocks if b.group == name), None)
    if block is None:
        return 0.0
    lam = block.template(np.asarray(fit.theta, dtype=float))
    var = np.sum(lam**2, axis=1)
    zz = np.mean(block.Z**2, axis=0)
    cols = list(block.column_names)
    if term is None:
        idx = [j for j, c in enumerate(cols) if c == "(Intercept)"]
    else:
        from crossed.design.fixed import build_matrix
        _, names, _ = build_matrix(f"0 + {term}", data, caret=fit.spec.caret,
                                   trusted=fit.spec.trusted)
        idx = [j for j, c in enumerate(cols) if c in names]
    return float(np.min(var[idx] * zz[idx])) if idx else 0.0


def _least_variance(fitted: _Fitted, reductions: list[_Reduction],
                    data: pd.DataFrame) -> _Reduction:
    def share(r: _Reduction) -> float:
        if r.stage == "correlation":
            return 0.0
        return _variance_share(fitted, r.group, r.term, data)
    return min(reductions, key=share)


# ---------------------------------------------------------------------- maximal model
def _design_maximal(spec: ModelSpec, data: pd.DataFrame) -> ModelSpec:
    """Every fixed term that varies within a grouping factor's levels as a slope of that
    factor, in one correlated term per factor (Barr et al. 2013's maximal model)."""
    from crossed.design import build_design

    if not spec.random:
        raise ValueError("maximal='design' needs the grouping factors: give at least one "
                         "random term, e.g. 'y ~ x + (1 | g)'")
    design = build_design(spec, data)
    fixed = design.fixed
    bars: list[RandomTermSpec] = []
    seen: set[str] = set()
    for t in spec.random:
        if t.name in seen:
            continue
        seen.add(t.name)
        block = next(b for b in design.random.blocks if b.group == t.name)
        codes = block.codes
        slopes = []
        for k, label in enumerate(fixed.term_labels):
            if label == "(Intercept)":
                continue
            cols = [j for j, a in enumerate(fixed.assign) if a == k]
            X = fixed.X[:, cols]
            frame = pd.DataFrame(X).assign(_g=codes)
            within = (frame.groupby("_g").nunique() > 1).to_numpy().any()
            if within:
                slopes.append(label)
        expr = " + ".join(["1", *slopes])
        bars.append(RandomTermSpec(expr=expr, factors=t.factors, name=t.name))
    new = replace(spec, random=tuple(bars))
    return parse(new.to_formula(), reference=spec.reference_levels, trusted=spec.trusted,
                 contrasts=spec.contrast_codings or None)


# ---------------------------------------------------------------------- the result
def _apa_p(p: float) -> str:
    return "p " + apa_p(p)  # (APA's rules, as every sentence of fit.report())


def _state(row: Any) -> str:
    return ("did not converge" if not row.converged else "was singular" if row.singular
            else "converged without a singular fit")


def _apa_alpha(a: float) -> str:
    return apa_number(a, 2, bounded=True) if a < 1 else f"{a:g}"


@dataclass(frozen=True, repr=False)
class RandomSelection(ResultDisplay):
    """The steps and the final model of :func:`select_random`.

    Attributes
    ----------
    strategy : str
        ``"lrt"``, ``"aic"``, ``"rePCA"`` or ``"maximal-converging"``.
    maximal : str
        The maximal model's formula.
    steps : pandas.DataFrame
        One row per step (step 0: the maximal model): ``step``; ``model`` (the formula of
        the model fitted at this step: the candidate tested); ``n_params`` (fixed effects,
        θ and σ); ``criterion`` (−2 log-likelihood: the REML criterion of a REML fit);
        ``test`` (``"LRT vs step k"``, ``"AIC vs step k"``, ``"rePCA of step k"``,
        ``"convergence"``); ``statistic`` (χ²; the AIC difference, candidate minus current;
        the smallest proportion of variance of the reduced factor's components; NaN for
        the maximal model); ``df`` (parameters removed); ``p_value`` (χ² test; NaN where no
        test); ``converged`` and ``singular`` (the fit's own flags, lme4's checks);
        ``decision`` (``"start"``, ``"drop the correlations of (1 + x | g)"``,
        ``"keep the slope of x in (1 + x | g)"`` ...: what the step decided).
    fit : LmerFit or GlmerFit
        The final model's fit.
    candidates : pandas.DataFrame
        ``"lrt"`` and ``"aic"``: every candidate reduction fitted at each step, of which
        the step's row is the best: ``step``, ``reduction`` (what it removes), ``model``,
        ``n_params``, ``criterion``, ``statistic`` (χ² against the current model), ``df``,
        ``p_value``, ``aic``, ``converged``, ``singular``, ``chosen`` (the one the step
        tested). Empty for the other strategies (one model per step).
    alpha : float
        The LRT's level (``"lrt"``).
    reml : bool
        Whether the LMMs were compared on REML fits.
    messages : tuple of str
        Notes: the fits' warnings (convergence, singular fits) by step.
    """

    strategy: str
    maximal: str
    steps: pd.DataFrame
    fit: Any = field(repr=False)
    candidates: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    alpha: float = 0.2
    reml: bool = True
    messages: tuple[str, ...] = ()

    @property
    def formula(self) -> str:
        """The final model's formula."""
        return str(self.fit.spec.to_formula())

    def display_tables(self) -> dict[str, pd.DataFrame]:
        return {"steps": self.steps}  # (the candidates: on request, ``.candidates``)

    def __repr__(self) -> str:
        return "\n".join([f"Random-effects selection ({self.strategy}) from {self.maximal}",
                          str(result_table(self.steps)), f"Final model: {self.formula}"])

    def _structure_words(self, formula: str) -> str:
        """The random terms of ``formula`` as the parsed spec holds them."""
        spec = parse(formula, trusted=self.fit.spec.trusted)
        return " + ".join(f"({t.expr} {'||' if t.uncorrelated else '|'} {t.name})"
                          for t in spec.random)

    def methods_sentence(self) -> str:
        """One APA-style sentence for a methods section: how the random-effects structure
        was chosen, from which maximal model, what each step dropped or kept (with its
        test), and the final structure."""
        glmm = hasattr(self.fit, "family")
        nagq = int(getattr(self.fit, "nagq", 1))
        lik = (f"the adaptive Gauss–Hermite likelihood (nAGQ = {nagq})" if glmm and nagq > 1
               else "the Laplace-approximated likelihood" if glmm
               else "REML fits" if self.reml else "maximum-likelihood fits")
        how = {
            "lrt": f"backward likelihood-ratio tests on {lik} (α = {_apa_alpha(self.alpha)}; "
                   "Matuschek et al., 2017)",
            "aic": f"backward elimination by AIC on {lik}",
            "rePCA": "principal components of the random effects (lme4's rePCA; Bates et "
                     "al., 2015), removing dimensions without variance",
            "maximal-converging": "keeping the largest model of the backward sequence that "
                                  "converged without a singular fit (Barr et al., 2013)",
        }[self.strategy]
        maximal = self._structure_words(self.maximal)
        final = self._structure_words(self.formula)
        parts = []
        for row in self.steps.iloc[1:].itertuples():
            dec = f"step {row.step} {row.decision}"
            if row.test.startswith("LRT"):
                parts.append(f"{dec} (χ²({int(row.df)}) = {apa_number(row.statistic)}, "
                             f"{_apa_p(row.p_value)})")
            elif row.test.startswith("AIC"):
                parts.append(f"{dec} (ΔAIC = {apa_number(row.statistic)})")
            elif row.test.startswith("rePCA"):
                parts.append(f"{dec} (its smallest component carried "
                             f"{100 * row.statistic:.1f}% of the variance)")
            else:
                parts.append(f"{dec}, and the fit {_state(row)}")
        if self.strategy == "maximal-converging":
            parts.insert(0, f"the maximal model's fit {_state(self.steps.iloc[0])}")
        lead = (f"The random-effects structure was selected by {how} from the maximal model "
                f"{maximal}")
        if not parts:
            return f"{lead}; no reduction was needed, so the final structure was {final}."
        return f"{lead}: {'; '.join(parts)}. The final random-effects structure was {final}."


# ---------------------------------------------------------------------- the selection
def _row(step: int, fitted: _Fitted, test: str, statistic: float, df: float, p: float,
         decision: str) -> dict[str, Any]:
    return {"step": step, "model": fitted.formula, "n_params": fitted.npar,
            "criterion": -2.0 * fitted.loglik, "test": test, "statistic": statistic,
            "df": df, "p_value": p, "converged": bool(fitted.fit.converged),
            "singular": bool(fitted.fit.is_singular), "decision": decision}


def select_random(formula: str, data: pd.DataFrame, strategy: str = "lrt",
                  family: Any = None, maximal: str | None = None, alpha: float = 0.2,
                  reml: bool = True, tol: float = 1e-4,
                  reference: dict[str, str] | None = None, control: Any = None,
                  max_steps: int = 100,
                  fit_options: Mapping[str, Any] | None = None) -> RandomSelection:
    """Select the random-effects structure by backward reduction of the maximal model.

    Parameters
    ----------
    formula : str
        lme4 formula of the maximal model (``maximal=None``), or of the fixed part and
        the grouping factors (``maximal="design"``).
    data : pandas.DataFrame
    strategy : {"lrt", "aic", "rePCA", "maximal-converging"}
        How to reduce (module docstring).
    family : str or Family, optional
        A GLMM's family (``"binomial"``, ``"poisson"``); None: a linear mixed model.
    maximal : {None, "design"}
        None: ``formula`` is the maximal model. ``"design"``: it is built from the design,
        every fixed term that varies within a grouping factor's levels (a within-unit
        factor or covariate) as a correlated slope of that factor, beside its intercept.
    alpha : float
        Level of the LRTs (``"lrt"``; 0.2 as Matuschek et al. 2017 recommend).
    reml : bool
        LMMs: compare REML fits (default, as lmerTest's ``ranova`` and buildmer) or ML
        fits. GLMMs are always compared on their (Laplace/AGQ) likelihood.
    tol : float
        ``"rePCA"``: a component is without variance when the cumulative proportion reaches
        1 − ``tol`` before it.
    reference : dict, optional
        Reference levels (as :func:`crossed.lmer`).
    control : LmerControl, optional
        Optimiser settings of every fit.
    max_steps : int
        Bound on the number of reductions.
    fit_options : dict, optional
        More keyword arguments of every fit (:func:`crossed.lmer` or :func:`crossed.glmer`:
        ``weights``, ``offset``, ``nAGQ``, ``na_action``, ``engine`` ...).

    Returns
    -------
    RandomSelection
        ``steps`` (one row per step: ``step``, ``model``, ``n_params``, ``criterion``,
        ``test``, ``statistic``, ``df``, ``p_value``, ``converged``, ``singular``,
        ``decision``), ``fit`` (the final model), ``maximal`` and ``methods_sentence()``.
        The LRTs are ``ranova``'s statistics (2 Δℓ, χ² with the difference in
        parameters as df). Validated against lme4 1.1-31 fits of every step's model (and
        of every candidate of grouseticks' steps) in R: sleepstudy, carrots with two
        grouping factors (REML) and grouseticks' Poisson GLMM, −2ℓ to 1e-4
        (tests/evaluation/test_random_selection.py).

    Raises
    ------
    ValueError
        An unknown strategy, a formula without random terms, or a bad ``alpha``/``tol``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of "
                         + ", ".join(repr(s) for s in STRATEGIES))
    if maximal not in (None, "design"):
        raise ValueError(f"maximal must be None (the formula is the maximal model) or "
                         f"'design', got {maximal!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"tol must be in (0, 1), got {tol!r}")
    if not isinstance(reml, bool):
        raise TypeError(f"reml must be True or False, got {reml!r}")
    spec = parse(formula, reference=reference)
    if not spec.random:
        raise ValueError(f"the formula {formula!r} has no random terms to select from")
    if maximal == "design":
        spec = _design_maximal(spec, data)
    args: dict[str, Any] = dict(fit_options or {})
    for key in ("reml", "family", "formula", "data"):
        if key in args:
            raise ValueError(f"fit_options: give {key!r} as select_random's own argument")
    if reference:
        args["reference"] = reference
    if control is not None:
        args["control"] = control
    fitter = _Fitter(data, family, reml and family is None, args)
    bars = _structure(spec, data)
    try:
        current = fitter(_with_structure(spec, bars))
    except ValueError as exc:
        if maximal != "design":
            raise
        raise type(exc)(f"the maximal model built from the design, {spec.to_formula()}, "
                        f"cannot be fitted ({exc}); give a smaller maximal model as the "
                        "formula") from exc
    current_step = 0
    rows = [_row(0, current, "", np.nan, np.nan, np.nan, "start (maximal model)")]
    messages = [f"step 0: {m}" for m in current.messages]
    stages = ["correlation", "slope", "intercept"]
    stage = 0
    candidates: list[dict[str, Any]] = []
    for _ in range(max_steps):
        if strategy == "rePCA":
            done = _repca_step(fitter, spec, bars, current, current_step, rows, tol)
        elif strategy == "maximal-converging":
            done = _converging_step(fitter, spec, bars, current, rows)
        else:
            done = None
            while stage < len(stages):
                cands = _reductions(bars)[stages[stage]]
                if cands:
                    done = _test_step(fitter, spec, cands, current, current_step, rows,
                                      strategy, alpha, candidates)
                    if done is not None:
                        break
                stage += 1
            if stage >= len(stages):
                done = None
        if done is None:
            break
        bars, current = done
        current_step = len(rows) - 1
        messages += [f"step {current_step}: {m}" for m in current.messages]
    steps = pd.DataFrame(rows, columns=STEP_COLUMNS)
    steps.attrs["messages"] = [
        "criterion: -2 log-likelihood (" + ("REML" if fitter.reml else "ML"
                                            if family is None else "Laplace/AGQ") + ")"]
    return RandomSelection(strategy=strategy, maximal=rows[0]["model"],
                           steps=result_table(steps), fit=current.fit,
                           candidates=result_table(pd.DataFrame(
                               candidates, columns=CANDIDATE_COLUMNS)), alpha=float(alpha),
                           reml=fitter.reml, messages=tuple(messages))


def _test_step(fitter: _Fitter, spec: ModelSpec, cands: list[_Reduction], current: _Fitted,
               current_step: int, rows: list[dict[str, Any]], strategy: str,
               alpha: float, candidates: list[dict[str, Any]]
               ) -> tuple[tuple[_Bar, ...], _Fitted] | None:
    """Fit every candidate, record the best; the new (bars, fit) if it is dropped, else
    None (its row says "keep")."""
    scored = []
    for r in cands:
        fitted = fitter(_with_structure(spec, r.bars))
        stat = 2.0 * (current.loglik - fitted.loglik)
        df = current.npar - fitted.npar
        p = float(stats.chi2.sf(max(stat, 0.0), df)) if df > 0 else np.nan
        scored.append((r, fitted, stat, df, p))
    if strategy == "lrt":
        r, fitted, stat, df, p = max(scored, key=lambda s: (s[4], -s[2]))
        drop = p > alpha
        test, value = f"LRT vs step {current_step}", stat
    else:
        r, fitted, stat, df, p = min(scored, key=lambda s: s[1].aic)
        value = fitted.aic - current.aic
        drop = value <= 0
        test = f"AIC vs step {current_step}"
    for c, cf, cstat, cdf, cp in scored:
        candidates.append({
            "step": len(rows), "reduction": c.what, "model": cf.formula, "n_params": cf.npar,
            "criterion": -2.0 * cf.loglik, "statistic": cstat, "df": cdf, "p_value": cp,
            "aic": cf.aic, "converged": bool(cf.fit.converged),
            "singular": bool(cf.fit.is_singular), "chosen": c is r})
    rows.append(_row(len(rows), fitted, test, value, df, p,
                     f"{'dropped' if drop else 'kept'} {r.what}"))
    return (r.bars, fitted) if drop else None


def _repca_step(fitter: _Fitter, spec: ModelSpec, bars: tuple[_Bar, ...], current: _Fitted,
                current_step: int, rows: list[dict[str, Any]],
                tol: float) -> tuple[tuple[_Bar, ...], _Fitted] | None:
    from crossed.inference.repca import deficient_groups, re_pca

    table = re_pca(current.fit)
    groups = deficient_groups(table, tol)
    if not groups:
        return None
    group = groups[0]
    red = _reductions(bars)
    for stage in ("correlation", "slope", "intercept"):
        cands = [r for r in red[stage] if r.group == group]
        if cands:
            r = _least_variance(current, cands, fitter.data)
            break
    else:
        return None
    fitted = fitter(_with_structure(spec, r.bars))
    prop = table[table.group == group].proportion.to_numpy()
    smallest = float(np.nanmin(prop)) if np.isfinite(prop).any() else 0.0
    rows.append(_row(len(rows), fitted, f"rePCA of step {current_step}", smallest, np.nan,
                     np.nan, f"dropped {r.what}"))
    return r.bars, fitted


def _converging_step(fitter: _Fitter, spec: ModelSpec, bars: tuple[_Bar, ...],
                     current: _Fitted,
                     rows: list[dict[str, Any]]) -> tuple[tuple[_Bar, ...], _Fitted] | None:
    if current.fit.converged and not current.fit.is_singular:
        return None
    red = _reductions(bars)
    for stage in ("correlation", "slope", "intercept"):
        if red[stage]:
            r = _least_variance(current, red[stage], fitter.data)
            break
    else:
        return None
    fitted = fitter(_with_structure(spec, r.bars))
    rows.append(_row(len(rows), fitted, "convergence", np.nan, np.nan, np.nan,
                     f"dropped {r.what}"))
    return r.bars, fitted
