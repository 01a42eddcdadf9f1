"""Adjusted means of the systems and their interaction effects with datasets: computed on a
fit, so they live in the inference layer (:mod:`crossed.inference.adjusted`); re-exported
here, where the evaluation workflows use them."""

from crossed.inference.adjusted import adjusted_means, grand_mean, interaction_effects

__all__ = ["adjusted_means", "grand_mean", "interaction_effects"]
