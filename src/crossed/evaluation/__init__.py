"""NLP-evaluation workflows (resampling, leaderboard uncertainty, evaluation-set size;
headroom normalisation, specification builders, spec comparison, cross-validation)."""

from crossed.evaluation import specs
from crossed.evaluation.adjusted import adjusted_means, interaction_effects
from crossed.evaluation.compare_specs import SpecComparison, compare_specs
from crossed.evaluation.crossval import CrossValidation, cross_validate
from crossed.evaluation.headroom import headroom
from crossed.model.result import provide

# the R-like methods of LmerFit implemented in this layer (crossed.model.result)
provide("adjusted_means", adjusted_means)
provide("interaction_effects", interaction_effects)

__all__ = [
    "CrossValidation",
    "SpecComparison",
    "adjusted_means",
    "compare_specs",
    "cross_validate",
    "headroom",
    "interaction_effects",
    "specs",
]
