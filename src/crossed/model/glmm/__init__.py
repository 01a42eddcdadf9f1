"""Generalised linear mixed models: families, PIRLS + Laplace/AGQ, the fit result."""

from crossed.model.glmm.family import Family, Link, binomial, family_of, poisson

__all__ = ["Family", "Link", "binomial", "family_of", "poisson"]
