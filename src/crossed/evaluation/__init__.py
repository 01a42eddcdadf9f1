"""Workflows on data and fits (resampling, leaderboard uncertainty, evaluation-set size;
headroom normalisation, specification builders, spec comparison, cross-validation,
missing-data ablation, selection of the random-effects structure)."""

from crossed.evaluation import specs
from crossed.evaluation.ablation import ablation
from crossed.evaluation.adjusted import adjusted_means, interaction_effects
from crossed.evaluation.compare_specs import SpecComparison, compare_specs
from crossed.evaluation.crossval import CrossValidation, cross_validate
from crossed.evaluation.headroom import headroom
from crossed.evaluation.random_selection import RandomSelection, select_random

__all__ = [
    "ablation",
    "CrossValidation",
    "RandomSelection",
    "SpecComparison",
    "adjusted_means",
    "compare_specs",
    "cross_validate",
    "headroom",
    "interaction_effects",
    "select_random",
    "specs",
]
