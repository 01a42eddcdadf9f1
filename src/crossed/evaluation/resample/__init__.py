"""Leaderboard uncertainty by resampling (``crossed.resample``).

* :func:`variance_components` — between-task, seed, bootstrap and within-task SDs with SEs;
* :func:`aggregates` — mean / geometric mean / median over tasks with SEs and intervals;
* :func:`pairwise_differences` — differences between systems, resampled SDs, effect sizes;
* :func:`rank_distribution` — share of resamples at each rank;
* :func:`eval_size` — ranking stability on subsets of an evaluation set (Kendall τ,
  weighted τ, ASO agreement) and the smallest stable size;
* :func:`aso` — Almost Stochastic Order ε_min;
* :func:`leave_one_task_out` — performance prediction for unseen languages;
* :func:`analyze` — all of the leaderboard analyses at once;
* :func:`read_table` — the published result tables (XQuAD, FLORES-200, OpenNER, EA-MT).

Every stochastic function takes a seed (int or numpy Generator): ``seed=`` is always the
random seed and a column of training seeds is ``seed_col=``; progress bars are switched
with ``progress=``. The old spellings (``random_state=``, ``progress_bar=``, a column name
given to ``seed=``) raise a TypeError that names the new keyword.
"""

from crossed.evaluation.resample.aggregates import (
    AGGREGATES,
    Resamples,
    aggregate,
    aggregates,
    resample_aggregates,
    summarize_resamples,
)
from crossed.evaluation.resample.aso import aso, aso_batch, aso_matrix, violation_ratio
from crossed.evaluation.resample.evalsize import (
    STRATEGIES,
    EvalSizeResult,
    eval_size,
    kendall_tau_b,
)
from crossed.evaluation.resample.io import read_table
from crossed.evaluation.resample.languages import language_features
from crossed.evaluation.resample.pairwise import (
    difference_matrix,
    differences_from_resamples,
    pairwise_differences,
)
from crossed.evaluation.resample.pipeline import LeaderboardAnalysis, analyze
from crossed.evaluation.resample.prediction import (
    PredictionResult,
    leave_one_task_out,
    prediction_frame,
)
from crossed.evaluation.resample.ranks import rank_distribution, rank_table, ranks_from_resamples
from crossed.evaluation.resample.table import (
    ScoreTable,
    as_score_table,
    from_items,
    from_replicates,
    from_summary,
)
from crossed.evaluation.resample.variance import VarianceComponents, variance_components

__all__ = [
    "AGGREGATES",
    "STRATEGIES",
    "EvalSizeResult",
    "LeaderboardAnalysis",
    "PredictionResult",
    "Resamples",
    "ScoreTable",
    "VarianceComponents",
    "aggregate",
    "aggregates",
    "analyze",
    "as_score_table",
    "aso",
    "aso_batch",
    "aso_matrix",
    "difference_matrix",
    "differences_from_resamples",
    "eval_size",
    "from_items",
    "from_replicates",
    "from_summary",
    "kendall_tau_b",
    "language_features",
    "leave_one_task_out",
    "pairwise_differences",
    "prediction_frame",
    "rank_distribution",
    "rank_table",
    "ranks_from_resamples",
    "read_table",
    "resample_aggregates",
    "summarize_resamples",
    "variance_components",
    "violation_ratio",
]
