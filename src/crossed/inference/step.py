"""Backward elimination of random and then fixed terms (lmerTest 3.1-3's ``step``).

1. Random part (``reduce_random``): ``ranova`` of the model; while some reduced model has
   p > ``alpha_random``, the one with the largest p-value is taken (its term eliminated or
   reduced, e.g. ``Days in (Days | Subject)`` leaves ``(1 | Subject)``), refitted, and
   ``ranova`` repeated on it.
2. Fixed part (``reduce_fixed``): lmerTest's ``drop1``: an F test (Satterthwaite or
   Kenward–Roger) that the coefficients of each *marginal* term are zero — terms not
   contained in a higher-order term (R's ``drop.scope``), so an interaction goes before its
   main effects; while the largest p-value exceeds ``alpha_fixed`` that term is removed and
   the model refitted.

Models are refitted from formulas on the rows the fit used (``fit.design.frame``), with
the fit's criterion, reference levels and engine.
"""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed._format import format_number_column, format_pvalues_r
from crossed.design.frame import DataError
from crossed.design.names import split_colons
from crossed.inference.anova import f_test
from crossed.inference.lrt import _droppable, random_bars, ranova
from crossed.tables import html_text_table, wrap_html

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["StepResult", "step"]

RANDOM_COLUMNS = ["term", "eliminated", "npar", "loglik", "aic", "statistic", "df", "p_value"]
FIXED_COLUMNS = ["term", "eliminated", "sum_sq", "mean_sq", "num_df", "den_df", "statistic",
                 "p_value"]


# R's column headings of lmerTest's print of a step result, and the columns printed as
# integers (blank where missing, as R prints NA in an anova table)
_RANDOM_HEAD = {"eliminated": "Eliminated", "npar": "npar", "loglik": "logLik", "aic": "AIC",
                "statistic": "LRT", "df": "Df", "p_value": "Pr(>Chisq)"}
_FIXED_HEAD = {"eliminated": "Eliminated", "sum_sq": "Sum Sq", "mean_sq": "Mean Sq",
               "num_df": "NumDF", "den_df": "DenDF", "statistic": "F value",
               "p_value": "Pr(>F)"}
_INTEGER = {"eliminated", "npar", "df", "num_df"}
_DDF_NAMES = {"satterthwaite": "Satterthwaite", "kenward-roger": "Kenward-Roger"}
_STARS = ((0.001, "***"), (0.01, "**"), (0.05, "*"), (0.1, "."))
_LEGEND = "Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1"


def _stars(p: float) -> str:
    if not np.isfinite(p):
        return ""
    return next((star for cut, star in _STARS if p < cut), "")


def step_table_cells(table: pd.DataFrame, heads: dict[str, str]) -> pd.DataFrame:
    """A step table's cells as lmerTest prints them: terms as row names, R's headings,
    ``Eliminated``/``npar``/``Df``/``NumDF`` as integers, the other numbers as R's
    ``format(x, digits = 5)`` of the column, p-values as ``format.pval(p, digits = 4)``,
    missing values blank, and the significance stars in a last, unnamed column (checked
    against R 4.2.2's ``print(step(fit))`` of lmerTest 3.1-3, sleepstudy and ham)."""
    out = {}
    for col, head in heads.items():
        vals = table[col].to_numpy(dtype=float)
        if col in _INTEGER:
            out[head] = ["" if not np.isfinite(v) else str(int(round(v))) for v in vals]
        elif col == "p_value":
            out[head] = ["" if t == "NA" else t for t in format_pvalues_r(vals, 4)]
        elif head.endswith(" value"):  # printCoefmat's test statistic: round(x, 4)
            out[head] = format_number_column(np.round(vals, 4), 5, na="")
        else:
            out[head] = format_number_column(_zapsmall(vals, 5), 5, na="")
    p = table["p_value"].to_numpy(dtype=float)
    show = bool(np.any(p[np.isfinite(p)] < 0.1))  # printCoefmat: stars only if one is < 0.1
    out[""] = [_stars(v) if show else "" for v in p]
    return pd.DataFrame(out, index=[str(t) for t in table["term"]])


def _zapsmall(x: np.ndarray, digits: int) -> np.ndarray:
    """R's ``zapsmall(x, digits)``: round to ``digits - log10(max |x|)`` decimals (R's
    ``round`` taking the nearest whole number of decimals)."""
    finite = np.abs(x[np.isfinite(x)])
    mx = float(finite.max()) if finite.size else 0.0
    if mx <= 0:
        return x
    return np.round(x, max(0, int(np.floor(digits - np.log10(mx) + 0.5))))


def _text_block(cells: pd.DataFrame) -> list[str]:
    rows = [[str(i)] + list(r) for i, r in zip(cells.index, cells.itertuples(index=False),
                                                   strict=True)]
    header = [""] + [str(c) for c in cells.columns]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = []
    for r in [header] + rows:
        lines.append(" ".join([r[0].ljust(widths[0])]
                              + [r[i].rjust(widths[i]) for i in range(1, len(r) - 1)]
                              + [r[-1].ljust(widths[-1])]).rstrip())
    return lines


@dataclass(frozen=True, repr=False)
class StepResult:
    """Result of :func:`step` (lmerTest's ``step_list``).

    Printed (``repr``, ``print``) and shown in a notebook as lmerTest prints it: the two
    tables under R's headings (``Eliminated``, ``npar``, ``logLik``, ``AIC``, ``LRT``,
    ``Df``, ``Pr(>Chisq)``; ``Eliminated``, ``Sum Sq``, ``Mean Sq``, ``NumDF``, ``DenDF``,
    ``F value``, ``Pr(>F)``) with integer columns as integers and significance stars,
    then the model found.

    Attributes
    ----------
    random : pandas.DataFrame
        lmerTest's "Backward reduced random-effect table": ``term``, ``eliminated`` (NaN for
        the ``<none>`` row, the elimination order, 0 for terms kept), ``npar``, ``loglik``,
        ``aic``, ``statistic`` (LRT), ``df``, ``p_value``. Eliminated rows come first, then
        the ``ranova`` rows of the final random part.
    fixed : pandas.DataFrame
        The "Backward reduced fixed-effect table": ``term``, ``eliminated``, ``sum_sq``,
        ``mean_sq``, ``num_df``, ``den_df``, ``statistic`` (F), ``p_value``: eliminated
        terms in order, then the ``drop1`` rows of the final model (``eliminated`` 0).
    model : LmerFit
        The final model (lmerTest's ``get_model(step_result)``).
    formula : str
        Its formula.
    ddf : str
        The F tests' denominator-df method (``"satterthwaite"`` or ``"kenward-roger"``).
    """

    random: pd.DataFrame
    fixed: pd.DataFrame
    model: Any
    formula: str
    messages: tuple[str, ...] = field(default=())
    ddf: str = "satterthwaite"

    def _blocks(self) -> list[tuple[str, list[str], pd.DataFrame]]:
        method = _DDF_NAMES.get(self.ddf, self.ddf)
        return [("Backward reduced random-effect table:", [],
                 step_table_cells(self.random, _RANDOM_HEAD)),
                ("Backward reduced fixed-effect table:",
                 [f"Degrees of freedom method: {method}"],
                 step_table_cells(self.fixed, _FIXED_HEAD))]

    def __repr__(self) -> str:
        lines: list[str] = []
        for title, head, cells in self._blocks():
            lines += [title] + head + [""] + _text_block(cells)
            if cells[""].str.len().gt(0).any():
                lines += ["---", _LEGEND]
            lines.append("")
        return "\n".join(lines + ["Model found:", self.formula])

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:
        parts = []
        for title, head, cells in self._blocks():
            shown = cells.reset_index(names="term")
            numeric = [False] + [True] * (shown.shape[1] - 2) + [False]
            parts.append(html_text_table(shown, numeric, title.rstrip(":"), head))
        parts.append(f'<p class="note">Model found: {html.escape(self.formula)}</p>')
        return wrap_html("".join(parts))


# ---------------------------------------------------------------------- formulas
def _bar_text(lhs: str, group: str) -> str:
    return f"({lhs} | {group})"


def _random_texts(fit: LmerFit) -> list[tuple[str, dict]]:
    """Every random term written as lmerTest's ``findbars`` sees it, with its bar."""
    return [(_bar_text(b["lhs"], b["group"]), b) for b in random_bars(fit)]


def _lhs_without(bar: dict, label: str) -> str | None:
    """The left-hand side after removing ``label`` (None: the term goes)."""
    rest = [lab for lab, _ in bar["labels"] if lab != label]
    if not rest:
        return "1"
    return " + ".join((["1"] if bar["intercept"] else ["0"]) + rest)


def _reduced_random(fit: LmerFit) -> list[list[str]]:
    """The random terms of every reduced model of ``ranova``, in ``ranova``'s row order."""
    bars = _random_texts(fit)
    out = []
    for k, (_text, bar) in enumerate(bars):
        others = [t for m, (t, _) in enumerate(bars) if m != k]
        if not bar["labels"]:
            out.append(others)
            continue
        for lab, _cols in _droppable(bar["labels"]):
            lhs = _lhs_without(bar, lab)
            new = _bar_text(lhs, bar["group"])
            if lhs == "1" and new in others:  # merged with an existing (1 | g)
                out.append(others)
            else:
                out.append(others[:k] + [new] + others[k:])
    return out


def _fixed_text(fit: LmerFit, drop: str | None = None) -> str:
    """The fixed part as its R term labels, without ``drop``."""
    labels = [t for t in fit.design.fixed.term_labels if t not in ("(Intercept)", drop)]
    if "(Intercept)" in fit.design.fixed.term_labels:
        return " + ".join(labels) if labels else "1"
    return " + ".join(["0", *labels])


def _offset_terms(fit: LmerFit) -> list[str]:
    """The fit's ``offset(x)`` terms, kept in every model of the search (never dropped)."""
    return [f"offset({e})" for e in fit.design.spec.offsets]


def _formula(fit: LmerFit, fixed: str, randoms: list[str]) -> str:
    return " + ".join([f"{fit.design.spec.response} ~ {fixed}", *_offset_terms(fit),
                       *randoms])


# ---------------------------------------------------------------------- refits, drop1
def _refit(fit: LmerFit, formula: str) -> LmerFit:
    from crossed.design import build_design
    from crossed.engines import fit_with
    from crossed.formula import parse

    frame = fit.design.frame
    spec = parse(formula, reference=fit.design.spec.reference_levels or None,
                 trusted=fit.design.spec.trusted,
                 contrasts=fit.design.spec.contrast_codings or None)  # contrasts= kept
    with warnings.catch_warnings():  # (shown when the full model was fitted)
        warnings.simplefilter("ignore")
        design = build_design(spec, frame)
    if design.n != fit.design.n:
        raise DataError("step(): the number of rows in use changed between models "
                        f"({fit.design.n} → {design.n}); remove missing values first")
    # the same rows: prior weights and the offset (offset(x) terms included) carry over
    design = replace(design, weights=fit.design.weights, offset=fit.design.offset)
    control = fit.opt.control if fit.opt is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_with(fit.engine, design, reml=fit.reml, control=control,
                        data_name=fit.data_name)


def _marginal_terms(fit: LmerFit) -> list[str]:
    """R's ``drop.scope``: fixed terms whose variables are not all inside another term."""
    labels = [t for t in fit.design.fixed.term_labels if t != "(Intercept)"]
    sets = {t: set(split_colons(t)) for t in labels}
    return [t for t in labels if not any(sets[t] < sets[o] for o in labels if o != t)]


def drop1(fit: LmerFit, ddf: str = "satterthwaite") -> pd.DataFrame:
    """lmerTest's ``drop1``: F test that the coefficients of each marginal term are zero."""
    fixed = fit.design.fixed
    assign = np.asarray(fixed.assign)
    p = len(fixed.names)
    rows = []
    for term in _marginal_terms(fit):
        k = list(fixed.term_labels).index(term)
        cols = np.flatnonzero(assign == k)
        L = np.eye(p)[cols]
        r = f_test(fit, L, ddf=ddf)
        rows.append({"term": term, "sum_sq": r["sum_sq"], "mean_sq": r["mean_sq"],
                     "num_df": r["num_df"], "den_df": r["den_df"],
                     "statistic": r["statistic"], "p_value": r["p_value"]})
    return pd.DataFrame(rows, columns=[c for c in FIXED_COLUMNS if c != "eliminated"])


# ---------------------------------------------------------------------- step
def step(fit: LmerFit, ddf: str = "satterthwaite", alpha_random: float = 0.1,
         alpha_fixed: float = 0.05, reduce_random: bool = True, reduce_fixed: bool = True,
         keep: list[str] | None = None) -> StepResult:
    """Backward elimination of random, then fixed terms (lmerTest's ``step``).

    Parameters
    ----------
    fit : LmerFit
    ddf : {"satterthwaite", "kenward-roger"}
        Denominator df of the F tests of the fixed terms.
    alpha_random, alpha_fixed : float
        Terms with p-values above these are eliminated (lmerTest's defaults 0.1, 0.05).
    reduce_random, reduce_fixed : bool
        False keeps that part as it is (its table is still computed).
    keep : list of str, optional
        Fixed terms never eliminated (e.g. ``["Product"]``).

    Returns
    -------
    StepResult
        ``random`` and ``fixed`` elimination tables, the final ``model`` and its
        ``formula``. Validated against lmerTest 3.1-3 (ham: three random intercepts and a
        three-way fixed interaction; sleepstudy with a random slope).

    Raises
    ------
    DataError
        When the fit kept no copy of its rows (``design.frame``) to refit from.
    ValueError
        When every random term is eliminated (lmerTest then continues with an ``lm``, which
        crossed does not reduce: fit it with :func:`crossed.lm` / statsmodels).
    """
    if fit.design.frame is None:
        raise DataError("step() refits models from the fitted rows, which this fit did not "
                        "keep (design.frame is None)")
    keep = list(keep or [])
    bad = [k for k in keep if k not in fit.design.fixed.term_labels]
    if bad:
        raise ValueError(f"step(): keep names no fixed term: {', '.join(bad)}; the terms are "
                         f"{', '.join(fit.design.fixed.term_labels[1:])}")
    a_rand = alpha_random if reduce_random else 1.0
    a_fix = alpha_fixed if reduce_fixed else 1.0

    # random part
    model = fit
    ran = ranova(model)
    eliminated = [ran.iloc[[0]]]
    while True:
        p = ran["p_value"].to_numpy(dtype=float)[1:]
        above = np.isfinite(p) & (p > a_rand)
        if not above.any():
            break
        remove = int(np.nanargmax(np.where(np.isfinite(p), p, -np.inf)))
        eliminated.append(ran.iloc[[1 + remove]])
        randoms = _reduced_random(model)[remove]
        if not randoms:
            raise ValueError("step(): every random term was eliminated; lmerTest continues "
                             "with a linear model, which crossed.step does not reduce")
        model = _refit(model, _formula(model, _fixed_text(model), randoms))
        ran = ranova(model)
    red = pd.concat(eliminated, ignore_index=True)
    rtab = pd.concat([red.assign(eliminated=[np.nan] + list(range(1, len(red)))),
                      ran.iloc[1:].assign(eliminated=0.0)], ignore_index=True)
    rtab = rtab[RANDOM_COLUMNS]

    # fixed part
    drops = []
    aov = drop1(model, ddf=ddf)
    while len(aov):
        consider = aov[~aov["term"].isin(keep)]
        p = consider["p_value"].to_numpy(dtype=float)
        above = np.isfinite(p) & (p > a_fix)
        if not above.any():
            break
        row = consider.iloc[[int(np.nanargmax(np.where(np.isfinite(p), p, -np.inf)))]]
        drops.append(row)
        term = str(row["term"].iloc[0])
        randoms = [t for t, _ in _random_texts(model)]
        model = _refit(model, _formula(model, _fixed_text(model, drop=term), randoms))
        aov = drop1(model, ddf=ddf)
    parts = []
    if drops:
        dd = pd.concat(drops, ignore_index=True)
        parts.append(dd.assign(eliminated=np.arange(1, len(dd) + 1, dtype=float)))
    parts.append(aov.assign(eliminated=0.0))
    ftab = pd.concat(parts, ignore_index=True)[FIXED_COLUMNS]
    formula = _formula(model, _fixed_text(model), [t for t, _ in _random_texts(model)])
    return StepResult(random=rtab, fixed=ftab, model=model, formula=formula, ddf=ddf)
