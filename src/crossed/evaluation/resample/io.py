"""Readers for published result tables (the ``shared/data/real`` files and their like).

Each reader returns a :class:`ScoreTable` built from the file's summary columns. The formats
are recognised from their columns by :func:`read_table`:

========== ============================================ =======================================
format     file                                         columns used
========== ============================================ =======================================
xquad      xquad_llm_f1.jsonl (4 LLMs × 12 languages)   Model, Language, F1, SD_seed,
                                                        SD_boot_avg, SD_boot_stderr
flores     flores200_llm_mt.jsonl (3 LLMs × 16 dirs)    model, lang_pair, {metric}_mean,
                                                        {metric}_seed_sd, {metric}_boot_sd,
                                                        n_seeds (metric: bleu, chrf, comet)
openner    openner_seed_boot_sd.jsonl (6 × 61)          Model, Task, Mean, SD (seed), SD (boot)
ea_mt      ea_mt_submissions.jsonl (50 × 10)            team_name + submission_name, language,
                                                        {metric}_score, {metric}_score_std_dev
                                                        (metric: overall, comet, meta)
long       any CSV/JSONL with system/task/seed columns  see :func:`read_table`
========== ============================================ =======================================

The OpenNER means are over 10 seeds (per the data's README); XQuAD's over 5 seeds. The
EA-MT shared task publishes one run per submission with a bootstrap SD (``*_std_dev``), so
its seed SD is unknown (NaN) and its within-task SD is the bootstrap SD.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from crossed._conventions import renamed_keywords
from crossed.evaluation.resample.table import ScoreTable, from_replicates, from_summary

__all__ = ["FORMATS", "detect_format", "read_ea_mt", "read_flores", "read_frame", "read_openner",
           "read_table", "read_xquad"]

FORMATS = ("xquad", "flores", "openner", "ea_mt", "long")


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a ``.jsonl``, ``.json``, ``.csv`` or ``.csv.gz`` file into a DataFrame."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return pd.read_json(path, lines=True)
    if name.endswith((".json", ".json.gz")):
        return pd.read_json(path)
    return pd.read_csv(path)


def detect_format(df: pd.DataFrame) -> str:
    """Which of :data:`FORMATS` a table is, judged by its columns."""
    cols = set(df.columns)
    if {"Model", "Language", "F1", "SD_seed"} <= cols:
        return "xquad"
    if {"model", "lang_pair"} <= cols and any(c.endswith("_seed_sd") for c in cols):
        return "flores"
    if {"Model", "Task", "Mean", "SD (seed)"} <= cols:
        return "openner"
    if {"team_name", "submission_name", "language"} <= cols:
        return "ea_mt"
    return "long"


def read_xquad(df: pd.DataFrame) -> ScoreTable:
    """XQuAD F1 of LLMs per language, with seed SD, mean bootstrap SD and its SE."""
    return from_summary(df, "F1", "Model", "Language", seed_sd="SD_seed", boot_sd="SD_boot_avg",
                        n_seeds=5, boot_sd_se="SD_boot_stderr")


def read_flores(df: pd.DataFrame, metric: str = "bleu") -> ScoreTable:
    """FLORES-200 translation scores per direction; ``metric`` is bleu, chrf or comet."""
    metric = metric.lower()
    if f"{metric}_mean" not in df.columns:
        raise ValueError(f"no metric {metric!r} in this table (bleu, chrf, comet)")
    return from_summary(df, f"{metric}_mean", "model", "lang_pair",
                        seed_sd=f"{metric}_seed_sd", boot_sd=f"{metric}_boot_sd",
                        n_seeds="n_seeds" if "n_seeds" in df.columns else None)


def read_openner(df: pd.DataFrame) -> ScoreTable:
    """OpenNER F1 of fine-tuned encoders per dataset (mean over 10 seeds)."""
    return from_summary(df, "Mean", "Model", "Task", seed_sd="SD (seed)", boot_sd="SD (boot)",
                        n_seeds=10)


def read_ea_mt(df: pd.DataFrame, metric: str = "overall") -> ScoreTable:
    """EA-MT shared-task submissions per target language; metric overall, comet or meta.

    Systems are ``team_name / submission_name``; submissions lacking some language are
    dropped (with a warning) so that every kept system covers every language.
    """
    metric = metric.lower()
    col = f"{metric}_score"
    if col not in df.columns:
        raise ValueError(f"no metric {metric!r} in this table (overall, comet, meta)")
    df = df.assign(system=df["team_name"].astype(str) + " / " + df["submission_name"].astype(str))
    df = df.drop_duplicates(["system", "language"])
    return from_summary(df, col, "system", "language", boot_sd=f"{col}_std_dev")


@renamed_keywords(seed="seed_col")
def read_table(path: str | Path | pd.DataFrame, fmt: str | None = None,
               metric: str | None = None, score: str | None = None, system: str = "system",
               task: str = "task", seed_col: str | None = None,
               boot: str | None = None) -> ScoreTable:
    """Read a result table into a :class:`ScoreTable`, recognising the known formats.

    Parameters
    ----------
    path : path or DataFrame
        The file (``.jsonl``, ``.json``, ``.csv``, ``.csv.gz``) or a DataFrame.
    fmt : str, optional
        One of :data:`FORMATS`; detected from the columns when omitted.
    metric : str, optional
        Which score of a multi-metric table (flores: bleu/chrf/comet; ea_mt:
        overall/comet/meta).
    score, system, task, seed_col, boot : str, optional
        Column names for a long table of replications (``fmt="long"``); ``score`` defaults
        to the last numeric column.
    """
    df = path if isinstance(path, pd.DataFrame) else read_frame(path)
    fmt = fmt or detect_format(df)
    if fmt == "xquad":
        return read_xquad(df)
    if fmt == "flores":
        return read_flores(df, metric or "bleu")
    if fmt == "openner":
        return read_openner(df)
    if fmt == "ea_mt":
        return read_ea_mt(df, metric or "overall")
    if fmt != "long":
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    if score is None:
        numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
                   and c not in (system, task, seed_col, boot)]
        if not numeric:
            raise ValueError("no numeric score column; name it with score=")
        score = numeric[-1]
    for col in (system, task):
        if col not in df.columns:
            raise ValueError(f"column {col!r} not in the table; name the system/task columns")
    if seed_col is None and "seed" in df.columns:
        seed_col = "seed"
    return from_replicates(df, score, system, task, seed_col=seed_col, boot=boot)
