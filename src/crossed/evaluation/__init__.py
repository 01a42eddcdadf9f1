"""Workflows on data and fits (resampling, leaderboard uncertainty, evaluation-set size;
headroom normalisation, specification builders, spec comparison, cross-validation,
missing-data ablation)."""

from crossed.evaluation import specs
from crossed.evaluation.ablation import ablation
from crossed.evaluation.adjusted import adjusted_means, interaction_effects
from crossed.evaluation.compare_specs import SpecComparison, compare_specs
from crossed.evaluation.crossval import CrossValidation, cross_validate
from crossed.evaluation.headroom import headroom

__all__ = [
    "ablation",
    "CrossValidation",
    "SpecComparison",
    "adjusted_means",
    "compare_specs",
    "cross_validate",
    "headroom",
    "interaction_effects",
    "specs",
]
