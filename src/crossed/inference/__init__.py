"""Inference on fitted models: Satterthwaite and Kenward-Roger tests, ANOVA, EMMs, effect
sizes, R², likelihood-ratio tests."""

from crossed.inference.coefs import coef_table, contrast_tests
from crossed.inference.satterthwaite import SatterthwaiteModel, satterthwaite_t

__all__ = ["SatterthwaiteModel", "coef_table", "contrast_tests", "satterthwaite_t"]
