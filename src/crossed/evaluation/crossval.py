"""Cross-validated prediction error of model specifications (mixed or plain regressions).

Each specification is fitted on the training rows of every fold and predicts the held-out
rows: mixed models with their conditional modes (levels not seen in training, as in
leave-one-group-out, get the population-level prediction), formulas without random terms
by ordinary least squares on the same fixed-effects design.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossed.api import lmer
from crossed.design.fixed import build_fixed, build_response
from crossed.design.frame import DataError, encode_new, prepare
from crossed.evaluation.specs import formula_list
from crossed.formula import parse
from crossed.tables import ResultDisplay

__all__ = ["CrossValidation", "OLSFit", "cross_validate", "fold_indices", "ols"]


@dataclass(frozen=True)
class OLSFit:
    """A fixed-effects-only linear regression fitted on crossed's fixed-effects design."""

    formula: str
    beta: np.ndarray
    names: tuple[str, ...]
    levels: dict
    columns: tuple[str, ...]
    spec: object

    def predict(self, newdata: pd.DataFrame) -> np.ndarray:
        """Predictions Xβ̂ on new rows (factor levels must have been seen in training)."""
        frame = encode_new(newdata, self.levels, list(self.columns))
        for col, levels in self.levels.items():
            if col not in frame.columns:
                continue
            known = {str(v) for v in levels}
            bad = [v for v in frame[col].dropna().unique() if str(v) not in known]
            if bad:
                raise DataError(f"column {col!r} has level {bad[0]!r} not seen when fitting "
                                "(a plain regression cannot predict it)")
        return self.spec.build(frame) @ self.beta


def ols(formula: str, data: pd.DataFrame) -> OLSFit:
    """Least-squares fit of a formula without random terms (lme4 column names)."""
    spec = parse(formula)
    if spec.random:
        raise ValueError("ols() takes a formula without random terms")
    prepared = prepare(spec, data)
    y = build_response(spec, prepared.data)
    fixed = build_fixed(spec.fixed, prepared.data, caret=spec.caret, trusted=spec.trusted)
    beta, *_ = np.linalg.lstsq(fixed.X, y, rcond=None)
    return OLSFit(formula=formula, beta=beta, names=fixed.names, levels=prepared.levels,
                  columns=tuple(prepared.data.columns), spec=fixed.spec)


def fold_indices(data: pd.DataFrame, folds: int | None = 5, group: str | None = None,
                 seed: int | np.random.Generator | None = 0) -> list[np.ndarray]:
    """Test-row indices of each fold.

    ``group=None``: the rows are shuffled and split into ``folds`` parts (k-fold).
    ``group`` given and ``folds=None``: leave one group out (one fold per level).
    ``group`` and ``folds``: the levels are shuffled and split into ``folds`` parts, so all
    rows of a level are held out together.
    """
    if folds is not None and (isinstance(folds, bool | np.bool_)
                              or not isinstance(folds, numbers.Integral)):
        raise TypeError(f"folds must be a whole number >= 2 (or None with group=), got "
                        f"{folds!r}")
    rng = np.random.default_rng(seed)
    n = len(data)
    if group is None:
        if folds is None or folds < 2 or folds > n:
            raise ValueError(f"folds must be between 2 and the number of rows ({n})")
        perm = rng.permutation(n)
        return [np.sort(p) for p in np.array_split(perm, folds)]
    if group not in data.columns:
        raise ValueError(f"group column {group!r} is not in the data")
    codes, levels = pd.factorize(data[group].astype(str), sort=True)
    if len(levels) < 2:
        only = f" ({str(levels[0])!r})" if len(levels) else ""
        raise ValueError(f"group column {group!r} has {len(levels)} level{only}: holding "
                         "out a level needs two levels or more (the others are the "
                         "training rows)")
    if folds is None:
        return [np.flatnonzero(codes == k) for k in range(len(levels))]
    if folds < 2 or folds > len(levels):
        raise ValueError(f"folds must be between 2 and the number of {group} levels "
                         f"({len(levels)})")
    parts = np.array_split(rng.permutation(len(levels)), folds)
    return [np.flatnonzero(np.isin(codes, p)) for p in parts]


@dataclass(repr=False)
class CrossValidation(ResultDisplay):
    """Result of :func:`cross_validate`.

    Attributes
    ----------
    folds : pandas.DataFrame
        One row per specification and fold: ``spec``, ``formula``, ``fold``, ``n_train``,
        ``n_test``, ``mae`` (mean absolute error on the held-out rows), ``rmse``.
    summary : pandas.DataFrame
        One row per specification: ``spec``, ``formula``, ``folds``, ``mae`` (mean over
        the held-out rows of all folds), ``mae_se`` (standard error of the fold MAEs),
        ``rmse`` (root of the pooled mean squared error), ``rmse_se``, ``rank`` (by MAE).
    predictions : pandas.DataFrame
        ``row`` (position in the data), ``fold``, ``spec``, ``observed``, ``predicted``.
    """

    folds: pd.DataFrame
    summary: pd.DataFrame
    predictions: pd.DataFrame


def _fit_predict(formula: str, train: pd.DataFrame, test: pd.DataFrame,
                 reml: bool) -> np.ndarray:
    if parse(formula).random:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = lmer(formula, train, reml=reml)
        return fit.predict(test, include_random=True, allow_new_levels=True)
    return ols(formula, train).predict(test)


def cross_validate(data: pd.DataFrame, formulas: Sequence[str], folds: int | None = 5,
                   group: str | None = None, names: Sequence[str] | None = None,
                   seed: int | np.random.Generator | None = 0,
                   reml: bool = True) -> CrossValidation:
    """k-fold or leave-one-group-out prediction error (MAE, RMSE) of each specification.

    Parameters
    ----------
    data : pandas.DataFrame
    formulas : list of str
        lme4 formulas; a formula without random terms is a plain regression (OLS).
    folds : int or None
        Number of folds; with ``group`` and ``folds=None``, leave one group out.
    group : str, optional
        Hold out whole levels of this column (e.g. ``"dataset"``).
    names : list of str, optional
        Labels of the specifications (default ``spec_1``, ...).
    seed : int or numpy.random.Generator
        Randomness of the split (identical seeds give identical folds).
    reml : bool
        REML or ML for the mixed models.

    Returns
    -------
    CrossValidation
        ``folds``, ``summary`` and ``predictions`` tables (see the class). Rows with a
        missing response are left out. The same folds are used for every specification.
        Validated by the tests against a direct NumPy least-squares computation (OLS) and
        against refitting the mixed model on each training split by hand.
    """
    formulas = [str(f) for f in formula_list(data, formulas, "cross_validate")]
    names = list(names) if names is not None else [f"spec_{i + 1}" for i in range(len(formulas))]
    if len(names) != len(formulas):
        raise ValueError("names must have one label per formula")
    responses = {parse(f).response for f in formulas}
    if len(responses) != 1:
        raise ValueError(f"the formulas have different responses: {sorted(responses)}")
    response = responses.pop()
    data = data[data[response].notna()].reset_index(drop=True) if response in data.columns \
        else data.reset_index(drop=True)
    splits = fold_indices(data, folds=folds, group=group, seed=seed)
    y = pd.to_numeric(data[response]).to_numpy(dtype=float) if response in data.columns \
        else None
    fold_rows, pred_frames = [], []
    for k, test_idx in enumerate(splits):
        mask = np.zeros(len(data), dtype=bool)
        mask[test_idx] = True
        train, test = data[~mask], data[mask]
        for name, formula in zip(names, formulas, strict=True):
            pred = _fit_predict(formula, train, test, reml)
            obs = y[mask] if y is not None else lmer_response(formula, test)
            err = obs - pred
            fold_rows.append({"spec": name, "formula": formula, "fold": k,
                              "n_train": int((~mask).sum()), "n_test": int(mask.sum()),
                              "mae": float(np.mean(np.abs(err))),
                              "rmse": float(np.sqrt(np.mean(err**2)))})
            pred_frames.append(pd.DataFrame({"row": test_idx, "fold": k, "spec": name,
                                             "observed": obs, "predicted": pred}))
    per_fold = pd.DataFrame(fold_rows)
    preds = pd.concat(pred_frames, ignore_index=True)
    rows = []
    for name, formula in zip(names, formulas, strict=True):
        f = per_fold[per_fold["spec"] == name]
        p = preds[preds["spec"] == name]
        err = p["observed"] - p["predicted"]
        k = len(f)
        rows.append({"spec": name, "formula": formula, "folds": k,
                     "mae": float(np.mean(np.abs(err))),
                     "mae_se": float(f["mae"].std(ddof=1) / np.sqrt(k)) if k > 1 else np.nan,
                     "rmse": float(np.sqrt(np.mean(err**2))),
                     "rmse_se": float(f["rmse"].std(ddof=1) / np.sqrt(k)) if k > 1 else np.nan})
    summary = pd.DataFrame(rows)
    summary["rank"] = summary["mae"].rank(method="min").astype(int)
    summary.attrs.update(folds=folds, group=group)
    return CrossValidation(folds=per_fold, summary=summary, predictions=preds)


def lmer_response(formula: str, data: pd.DataFrame) -> np.ndarray:
    """The response of ``formula`` evaluated on ``data`` (e.g. ``log(score)``)."""
    spec = parse(formula)
    prepared = prepare(spec, data, na_action="raise")
    return build_response(spec, prepared.data)
