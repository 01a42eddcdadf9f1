"""Likelihood-ratio tests: lmerTest's ``ranova``, lme4's ``anova(m1, m2)`` and the variance
decomposition with per-term tests.

``ranova`` (lmerTest 3.1-3): for each random term as written (``||`` and ``/`` expanded as
lme4 does, nested terms innermost first), a term with only an intercept is dropped; a term
with other columns is reduced, one droppable column term at a time (e.g. ``Days`` in
``(Days | Subject)`` leaves ``(1 | Subject)``; a term whose only column term is dropped
becomes ``(1 | g)``, merged with an existing ``(1 | g)``). Reduced models are refitted with
the same criterion (REML or ML) on the same rows, from the fitted design's arrays; when no
random term is left the reduced model is the linear model (its REML or ML log-likelihood as
R's ``logLik.lm``). LRT = 2 (ℓ_full − ℓ_reduced), df the difference in parameters.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from crossed.design.frame import DataError
from crossed.design.reduce import TermPiece, reduced_design
from crossed.engines.refit import refit_lmer
from crossed.tables import result_table

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["COMPARE_COLUMNS", "RANOVA_COLUMNS", "compare", "lm_loglik", "random_bars", "ranova",
           "variance_components"]

RANOVA_COLUMNS = ["term", "npar", "loglik", "aic", "statistic", "df", "p_value"]
COMPARE_COLUMNS = ["model", "formula", "npar", "aic", "bic", "loglik", "deviance",
                   "statistic", "df", "p_value"]


# ---------------------------------------------------------------------- written terms
def _spec_order(fit: LmerFit) -> list[int]:
    """Indices of the random-term specs in lme4's ``findbars`` order (the ModelSpec keeps
    that order: as written, the terms of a nested ``(e | a/b)`` innermost first)."""
    return list(range(len(fit.design.spec.random)))


def _term_exprs(fit: LmerFit) -> list:
    """For each lme4 term, the (MatrixSpec, columns) that built it (``||`` splits share one
    MatrixSpec)."""
    out: list = [None] * len(fit.design.random.terms)
    for bi, blk in enumerate(fit.design.random.blocks):
        members = sorted((t.offset, i) for i, t in enumerate(fit.design.random.terms)
                         if t.block == bi)
        for (_, i), ex in zip(members, blk.exprs, strict=False):
            out[i] = ex
    return out


def _structure(expr, ncols: int) -> list[tuple[str, list[int]]]:
    """(label, column positions) of each model term of a random term's left-hand side."""
    if expr is None:
        return [("1", [0])] if ncols == 1 else [(str(j), [j]) for j in range(ncols)]
    mspec = expr[0]
    if mspec.formulaic is None:  # coded without formulaic: its terms and their columns
        return [(c, list(cols)) for c, cols in mspec.direct_terms()]
    out, pos = [], 0
    for struct in expr[0].formulaic.structure:
        k = len(struct.columns)
        label = ":".join(str(f.expr).strip("`") for f in struct.term.factors)
        out.append(("1" if label == "1" else label, list(range(pos, pos + k))))
        pos += k
    return out


def random_bars(fit: LmerFit) -> list[dict]:
    """lmerTest's ``findbars`` order: one entry per lme4 term with its written lhs."""
    specs = list(fit.design.spec.random)
    terms = fit.design.random.terms
    exprs = _term_exprs(fit)
    claimed: set[int] = set()
    bars = []
    for si in _spec_order(fit):
        spec = specs[si]
        idx = [i for i, t in enumerate(terms) if t.group == spec.name and i not in claimed]
        if not idx:
            continue
        key = id(exprs[idx[0]][0]) if exprs[idx[0]] is not None else None
        mine = [i for i in idx if exprs[i] is not None and id(exprs[i][0]) == key]
        mine = mine if (spec.uncorrelated and mine) else idx[:1]
        # lmerTest lists an expanded || term as written: its intercept first
        mine = sorted(mine, key=lambda i: terms[i].columns[0] != "(Intercept)")
        for i in mine:
            claimed.add(i)
            cols = terms[i].columns
            if spec.uncorrelated:
                c = cols[0]
                lhs = "1" if c == "(Intercept)" else f"0 + {c}"
                labels = [] if lhs == "1" else [(c, [0])]
            else:
                lhs = spec.expr
                whole = exprs[i]
                labels = [lb for lb in _structure(whole, len(cols)) if lb[0] != "1"]
            bars.append({"term": i, "lhs": lhs, "group": spec.name, "labels": labels,
                         "intercept": "(Intercept)" in cols})
    return bars


def _droppable(labels: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
    """R's ``drop.scope``: terms whose variables are not all inside another term's."""
    out = []
    for lab, cols in labels:
        vs = set(lab.split(":"))
        if not any(vs < set(other.split(":")) for other, _ in labels if other != lab):
            out.append((lab, cols))
    return out


def _reductions(fit: LmerFit) -> list[tuple[str, list[TermPiece]]]:
    """Name and kept random columns of every reduced model of ``ranova``."""
    terms = fit.design.random.terms
    full = [TermPiece(i, tuple(range(len(t.columns))), t.group) for i, t in enumerate(terms)]
    out = []
    for bar in random_bars(fit):
        i = bar["term"]
        others = [p for p in full if p.term != i]
        name = f"({bar['lhs']} | {bar['group']})"
        if not bar["labels"]:
            out.append((name, others))
            continue
        for lab, cols in _droppable(bar["labels"]):
            if len(bar["labels"]) == 1:
                # new lhs "1": keep the intercept column, or add an intercept term
                if bar["intercept"]:
                    j = list(terms[i].columns).index("(Intercept)")
                    pieces = others + [TermPiece(i, (j,), bar["group"])]
                elif any(terms[p.term].columns == ("(Intercept)",) and p.group == bar["group"]
                         for p in others):
                    pieces = others
                else:
                    pieces = others + [TermPiece(-1, (0,), bar["group"])]
            else:
                keep = tuple(c for c in range(len(terms[i].columns)) if c not in cols)
                pieces = others + [TermPiece(i, keep, bar["group"])]
            out.append((f"{lab} in {name}", sorted(pieces, key=lambda p: (p.term < 0, p.term))))
    return out


def lm_loglik(X: np.ndarray, y: np.ndarray, reml: bool, weights: np.ndarray | None = None,
              offset: np.ndarray | None = None) -> tuple[float, int]:
    """R's ``logLik.lm`` (REML or ML) and its df (p + 1), with ``lm``'s prior ``weights``
    (the ½ Σ log w term and weighted residuals, as R) and ``offset``."""
    n, p = X.shape
    if offset is not None:
        y = y - offset
    sw = np.ones(n) if weights is None else np.sqrt(np.asarray(weights, dtype=float))
    Q, R = np.linalg.qr(X * sw[:, None])
    yw = y * sw
    res = yw - Q @ (Q.T @ yw)
    N = n - p if reml else n
    ll = 0.5 * (2.0 * float(np.sum(np.log(sw)))
                - N * (np.log(2 * np.pi) + 1 - np.log(N) + np.log(np.sum(res**2))))
    if reml:
        ll -= float(np.sum(np.log(np.abs(np.diag(R)))))
    return float(ll), p + 1


def _refit(fit: LmerFit, pieces: list[TermPiece]) -> tuple[float, int]:
    from crossed.engines import fit_with

    if not pieces:
        return lm_loglik(fit.design.X, fit.design.y, fit.reml, weights=fit.design.weights,
                         offset=fit.design.offset)
    design = reduced_design(fit.design, pieces)
    control = fit.opt.control if fit.opt is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        red = fit_with(fit.engine, design, reml=fit.reml, control=control)
    return red.loglik, red.npar


def ranova(fit: LmerFit) -> pd.DataFrame:
    """Likelihood-ratio test of each random term (lmerTest's ``ranova``).

    Returns
    -------
    pandas.DataFrame
        First row ``"<none>"`` (the full model), then one row per reduced model, named as
        lmerTest names them (``"(1 | plate)"``, ``"Days in (Days | Subject)"``): ``npar``,
        ``loglik`` (REML log-likelihood for REML fits), ``aic`` (−2ℓ + 2 npar),
        ``statistic`` (LRT), ``df``, ``p_value`` (χ²). Validated against lmerTest 3.1-3.
    """
    rows = [{"term": "<none>", "npar": fit.npar, "loglik": fit.loglik,
             "aic": -2 * fit.loglik + 2 * fit.npar, "statistic": np.nan, "df": np.nan,
             "p_value": np.nan}]
    for name, pieces in _reductions(fit):
        ll, npar = _refit(fit, pieces)
        lrt = 2.0 * (fit.loglik - ll)
        df = fit.npar - npar
        rows.append({"term": name, "npar": npar, "loglik": ll, "aic": -2 * ll + 2 * npar,
                     "statistic": lrt, "df": df,
                     "p_value": float(stats.chi2.sf(lrt, df)) if df > 0 else np.nan})
    out = pd.DataFrame(rows, columns=RANOVA_COLUMNS)
    out.attrs["reml"] = fit.reml
    return out


# ---------------------------------------------------------------------- compare
def _response(fit: object) -> np.ndarray:
    """The response of a mixed fit (its design's) or of an ``LmFit``."""
    design = getattr(fit, "design", None)
    sums = getattr(design, "response_sums", None)
    if sums is not None:  # (a fit on partitioned data: Σ y and Σ y² of the levels pass)
        return np.asarray(sums, dtype=float)
    return np.asarray(design.y if design is not None else fit.y)


def _same_weights(fits: tuple, names: list[str]) -> None:
    """Refuse to compare likelihoods of fits with different prior weights (``cx.lm`` has
    none): their likelihoods are of different models of the residual variance."""
    base = getattr(getattr(fits[0], "design", None), "weights", None)
    for nm, f in zip(names[1:], fits[1:], strict=True):
        w = getattr(getattr(f, "design", None), "weights", None)
        same = (w is None and base is None) or (
            w is not None and base is not None and np.array_equal(w, base))
        if not same:
            raise DataError(f"compare(): {names[0]!r} and {nm!r} have different prior weights "
                            "(weights=; cx.lm has none): their likelihood-ratio test would "
                            "compare different residual variances; fit both with the same "
                            "weights")


def compare(*fits: LmerFit, names: list[str] | None = None, refit: bool = True) -> pd.DataFrame:
    """Likelihood-ratio comparison of models fitted to the same rows (lme4's ``anova(m1, m2)``).

    Parameters
    ----------
    *fits : LmerFit, GlmerFit or LmFit
        Two or more fits of the same response on the same rows: all LMMs (an ``LmFit``,
        :func:`crossed.lm`, among them is compared by its maximum-likelihood
        log-likelihood, as lme4's ``anova(lmer_fit, lm_fit)`` does; the mixed fits are
        refitted by ML), or all GLMMs of one family and link (ML fits, never refitted).
    names : list of str, optional
        Labels of the models (default ``model_1``, ``model_2``, ... in argument order).
    refit : bool
        Refit REML fits by maximum likelihood first (lme4's default, needed when the fixed
        effects differ).

    Returns
    -------
    pandas.DataFrame
        Models sorted by number of parameters: ``model``, ``formula``, ``npar``, ``aic``,
        ``bic``, ``loglik``, ``deviance`` (−2ℓ), ``statistic`` (χ² = 2·max(0, ℓ_i − ℓ_{i−1})
        against the previous row), ``df`` (difference in npar), ``p_value``.
        ``attrs["refit"]``: whether ML refits were used. Validated against lme4 1.1-31.

    Raises
    ------
    DataError
        When the fits do not use the same rows (number of observations or response differ).
    """
    if len(fits) < 2:
        raise ValueError("compare() needs at least two fits")
    for i, f in enumerate(fits):
        if not ((hasattr(f, "design") or hasattr(f, "y")) and hasattr(f, "loglik")):
            raise TypeError(f"compare() takes fitted models (LmerFit, LmFit); argument "
                            f"{i + 1} is {type(f).__name__}")
    if isinstance(names, str) or (names is not None and not hasattr(names, "__iter__")):
        raise TypeError(f"names must be a list of labels, one per fit, got {names!r}")
    if not isinstance(refit, bool | np.bool_):
        raise TypeError(f"refit must be True or False, got {refit!r}")
    names = list(names) if names is not None else [f"model_{i + 1}" for i in range(len(fits))]
    if len(names) != len(fits):
        raise ValueError("names must have one label per fit")
    base = fits[0]
    for nm, f in zip(names[1:], fits[1:], strict=True):
        if f.nobs != base.nobs or not np.array_equal(_response(f), _response(base)):
            raise DataError(
                f"models were not all fitted to the same rows: {names[0]!r} has {base.nobs} "
                f"observations, {nm!r} has {f.nobs}"
                + ("" if f.nobs != base.nobs else " with a different response")
                + "; refit them on the same data (e.g. drop missing values first)")
    glmm = [hasattr(f, "family") for f in fits]
    if any(glmm) and not all(glmm):
        raise TypeError("compare() takes either linear mixed models (lmer) or GLMMs "
                        "(glmer), not both: their likelihoods are not comparable")
    if all(glmm) and len({(f.family.name, f.family.link.name) for f in fits}) > 1:
        raise ValueError("compare() of GLMMs needs one family and link: got "
                         + ", ".join(str(f.family) for f in fits))
    _same_weights(fits, names)
    # GLMMs are fitted by maximum likelihood: nothing to refit (lme4's anova.merMod)
    use_ml = refit and any(getattr(f, "reml", False) for f in fits)
    used = []
    for f in fits:
        if use_ml and getattr(f, "reml", False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = refit_lmer(f, reml=False)
        used.append(f)
    order = sorted(range(len(used)), key=lambda i: used[i].npar)
    rows, prev = [], None
    for i in order:
        f = used[i]
        ll = f.loglik
        row = {"model": names[i], "formula": f.formula, "npar": f.npar, "aic": f.aic,
               "bic": f.bic, "loglik": ll, "deviance": -2.0 * ll, "statistic": np.nan,
               "df": np.nan, "p_value": np.nan}
        if prev is not None:
            chisq = 2.0 * max(0.0, ll - prev.loglik)
            df = f.npar - prev.npar
            row.update(statistic=chisq, df=df,
                       p_value=float(stats.chi2.sf(chisq, df)) if df > 0 else np.nan)
        rows.append(row)
        prev = f
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    out.attrs["refit"] = use_ml
    out.attrs["na"] = ""  # the first model has no test: R's anova prints those cells blank
    title = ("Models refitted with ML" if use_ml else "Models") + ": likelihood-ratio tests"
    return result_table(out, title=title)


# ---------------------------------------------------------------------- variance components
def variance_components(fit: LmerFit, test: bool = True) -> pd.DataFrame:
    """Variance of every random term, its share and its likelihood-ratio test.

    Returns
    -------
    pandas.DataFrame
        One row per variance (covariances are left out) and a ``Residual`` row: ``group``,
        ``term`` (column of the random term), ``variance``, ``sd``, ``share`` (variance over
        the sum of all variances, residual included: the proportions cross-classified
        evaluation papers report), ``share_random`` (over the random-effect variances only;
        NaN for the residual), and from :func:`ranova` ``statistic``, ``df``,
        ``p_value`` of the test dropping that variance (the whole term for an intercept-only
        term, the column for a slope; NaN where lmerTest has no such test, e.g. the
        intercept of a term with slopes, and for the residual). ``test=False`` skips the
        refits.
    """
    vc = fit.varcorr()
    vc = vc[vc["term2"].isna()].reset_index(drop=True)
    total = float(vc["variance_or_cov"].sum())
    out = pd.DataFrame({
        "group": vc["group"], "term": vc["term1"].where(vc["group"] != "Residual", None),
        "variance": vc["variance_or_cov"], "sd": vc["sd_or_cor"],
        "share": vc["variance_or_cov"] / total if total > 0 else np.nan,
    })
    rand = vc["group"] != "Residual"
    total_random = float(vc.loc[rand, "variance_or_cov"].sum())
    out["share_random"] = np.where(rand, vc["variance_or_cov"] / total_random
                                   if total_random > 0 else np.nan, np.nan)
    out["statistic"] = np.nan
    out["df"] = np.nan
    out["p_value"] = np.nan
    if test:
        tab = ranova(fit).set_index("term")
        lookup = {}
        for bar in random_bars(fit):
            name = f"({bar['lhs']} | {bar['group']})"
            if not bar["labels"]:
                lookup[(bar["group"], "(Intercept)")] = name
            else:
                cols = fit.design.random.terms[bar["term"]].columns
                for lab, pos in bar["labels"]:
                    for p in pos:
                        lookup[(bar["group"], cols[p])] = f"{lab} in {name}"
        for i, r in out.iterrows():
            key = lookup.get((r["group"], r["term"]))
            if key is not None and key in tab.index:
                out.loc[i, ["statistic", "df", "p_value"]] = tab.loc[
                    key, ["statistic", "df", "p_value"]].to_numpy(dtype=float)
    return out
