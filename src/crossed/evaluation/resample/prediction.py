"""Performance prediction for unseen tasks (languages), judged by leave-one-task-out.

For each task in turn, every model is trained on the other tasks and predicts each
system's score on the held-out one from the task's features (language family, script,
translation direction, training-data size, ...). Models:

* ``baseline`` — the system's average score over the training tasks;
* ``linear`` — least squares on system indicators and the features (categorical features
  one-hot coded with the training levels; a level unseen in training codes as all zeros);
* ``gbm`` — gradient boosting (scikit-learn's ``GradientBoostingRegressor``, an optional
  dependency) on the same columns;
* ``mixed`` — a linear mixed model fitted with :func:`crossed.lmer`: system and features
  as fixed effects and a random intercept per ``group`` (language family); a held-out
  task whose family was seen gets that family's conditional mode, an unseen family 0.

Reported: mean absolute error per held-out task and overall.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample._util import SeedLike, as_generator, progress_iter
from crossed.evaluation.resample.table import drop_missing
from crossed.tables import ResultDisplay

__all__ = ["MODELS", "PredictionResult", "leave_one_task_out", "prediction_frame"]

MODELS = ("baseline", "linear", "gbm", "mixed")


@dataclass(frozen=True, repr=False)
class PredictionResult(ResultDisplay):
    """Result of :func:`leave_one_task_out`.

    Attributes
    ----------
    predictions : DataFrame
        ``task`` (held out), ``system``, ``model``, ``actual``, ``predicted``,
        ``error`` (predicted − actual).
    mae_by_task : DataFrame
        ``task``, ``model``, ``mae`` (mean |error| over systems), ``n``.
    mae : DataFrame
        ``model``, ``mae`` over all held-out predictions, ``mae_sd_tasks`` (SD across tasks
        of the per-task MAE), ``n``.
    """

    predictions: pd.DataFrame
    mae_by_task: pd.DataFrame
    mae: pd.DataFrame


class _Encoder:
    """System indicators + numeric features + one-hot categorical features (train levels)."""

    def __init__(self, train: pd.DataFrame, system: str, numeric: list[str],
                 categorical: list[str]):
        self.system = system
        self.numeric = numeric
        self.systems = sorted(train[system].astype(str).unique())
        self.levels = {c: sorted(train[c].astype(str).unique())[1:] for c in categorical}

    def __call__(self, df: pd.DataFrame) -> np.ndarray:
        cols = [np.ones(len(df))]
        sys_ = df[self.system].astype(str).to_numpy()
        cols += [(sys_ == s).astype(float) for s in self.systems[1:]]
        cols += [df[c].to_numpy(float) for c in self.numeric]
        for c, lv in self.levels.items():
            v = df[c].astype(str).to_numpy()
            cols += [(v == level).astype(float) for level in lv]
        return np.column_stack(cols)


def _independent(X: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Indices of a maximal set of linearly independent columns, kept in order."""
    keep: list[int] = []
    for j in range(X.shape[1]):
        cand = keep + [j]
        if np.linalg.matrix_rank(X[:, cand], tol=tol * max(1.0, np.abs(X).max())) == len(cand):
            keep = cand
    return np.array(keep, dtype=np.int64)


def _fit_predict(model: str, train: pd.DataFrame, test: pd.DataFrame, score: str, system: str,
                 numeric: list[str], categorical: list[str], group: str | None,
                 rng: np.random.Generator, gbm_params: dict) -> np.ndarray:
    if model == "baseline":
        means = train.groupby(system)[score].mean()
        return test[system].map(means).to_numpy(float)
    enc = _Encoder(train, system, numeric, categorical)
    Xtr, Xte = enc(train), enc(test)
    y = train[score].to_numpy(float)
    if model == "linear":
        beta, *_ = np.linalg.lstsq(Xtr, y, rcond=None)
        return Xte @ beta
    if model == "gbm":
        try:
            from sklearn.ensemble import GradientBoostingRegressor
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("the 'gbm' predictor needs scikit-learn: "
                              "pip install scikit-learn (or crossed[predict])") from exc
        params = {"n_estimators": 100, "max_depth": 2, "learning_rate": 0.1, **gbm_params}
        est = GradientBoostingRegressor(random_state=int(rng.integers(2**31 - 1)), **params)
        return est.fit(Xtr[:, 1:], y).predict(Xte[:, 1:])
    if model == "mixed":
        if group is None:
            raise ValueError("the 'mixed' predictor needs a group column (e.g. family)")
        from crossed.api import lmer

        keep = _independent(Xtr)
        names = [f"x{j}" for j in range(len(keep))]
        frame = pd.DataFrame(Xtr[:, keep], columns=names).assign(
            y_=y, g_=train[group].astype(str).to_numpy())
        new = pd.DataFrame(Xte[:, keep], columns=names).assign(
            g_=test[group].astype(str).to_numpy())
        rhs = " + ".join(["0"] + names)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = lmer(f"y_ ~ {rhs} + (1 | g_)", frame)
        return np.asarray(fit.predict(new, include_random=True, allow_new_levels=True), float)
    raise ValueError(f"unknown model {model!r}; one of {', '.join(MODELS)}")


@renamed_keywords(seed_is_random=True, random_state="seed", progress_bar="progress")
def leave_one_task_out(data: pd.DataFrame, score: str = "score", system: str = "system",
                       task: str = "task", numeric: list[str] | tuple[str, ...] = (),
                       categorical: list[str] | tuple[str, ...] = (),
                       group: str | None = "family", models=MODELS, seed: SeedLike = None,
                       gbm_params: dict | None = None,
                       progress: bool | None = None) -> PredictionResult:
    """Leave-one-task-out MAE of score predictors for unseen tasks (languages).

    Parameters
    ----------
    data : DataFrame
        One row per system × task with the score and the task's features.
    score, system, task : str
        Column names.
    numeric, categorical : sequences of str
        Feature columns (numeric as is; categorical one-hot coded).
    group : str, optional
        Grouping column of the mixed model's random intercept (language family).
    models : sequence of str
        Any of ``baseline``, ``linear``, ``gbm``, ``mixed``.
    seed : int or numpy Generator, optional
        Seeds gradient boosting.
    gbm_params : dict, optional
        Extra ``GradientBoostingRegressor`` arguments (defaults: 100 trees of depth 2,
        learning rate 0.1).

    Returns
    -------
    PredictionResult
    """
    rng = as_generator(seed)
    numeric, categorical = list(numeric), list(categorical)
    need = [score, system, task, *numeric, *categorical] + ([group] if group else [])
    missing = [c for c in need if c not in data.columns]
    if missing:
        raise ValueError(f"columns not in the data: {missing}")
    df = drop_missing(data, list(dict.fromkeys(need)), system).reset_index(drop=True)
    tasks = list(pd.unique(df[task]))
    if len(tasks) < 3:
        raise ValueError("leave-one-task-out needs at least 3 tasks")
    parts = []
    for t in progress_iter(tasks, total=len(tasks), desc="leave-one-task-out", enabled=progress):
        test = df[df[task] == t]
        train = df[df[task] != t]
        for model in models:
            pred = _fit_predict(model, train, test, score, system, numeric, categorical,
                                group, rng, gbm_params or {})
            parts.append(pd.DataFrame({"task": t, "system": test[system].to_numpy(),
                                       "model": model, "actual": test[score].to_numpy(float),
                                       "predicted": pred}))
    preds = pd.concat(parts, ignore_index=True)
    preds["error"] = preds["predicted"] - preds["actual"]
    preds["abs_error"] = preds["error"].abs()
    by_task = (preds.groupby(["task", "model"], sort=False)
               .agg(mae=("abs_error", "mean"), n=("abs_error", "size")).reset_index())
    overall = (preds.groupby("model", sort=False).agg(mae=("abs_error", "mean"),
                                                      n=("abs_error", "size")).reset_index())
    overall["mae_sd_tasks"] = overall["model"].map(by_task.groupby("model")["mae"].std())
    overall = overall[["model", "mae", "mae_sd_tasks", "n"]]
    return PredictionResult(predictions=preds.drop(columns="abs_error"), mae_by_task=by_task,
                            mae=overall)


def prediction_frame(table, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long system × task frame of a ScoreTable joined with :func:`language_features`.

    Adds ``n_tasks_language``: how many tasks of the table share the task's language (a
    proxy for the training data available in it).
    """
    from crossed.evaluation.resample.languages import language_features

    df = table.to_frame()[["system", "task", "mean"]].rename(columns={"mean": "score"})
    feats = language_features(df["task"].unique())
    feats["n_tasks_language"] = feats.groupby("language")["task"].transform("size")
    out = df.merge(feats, on="task", how="left")
    if extra is not None:
        out = out.merge(extra, on="task", how="left")
    return out
