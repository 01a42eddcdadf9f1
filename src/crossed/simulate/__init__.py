"""Simulation: responses from fitted models, refits, and the analyses built on them."""

from crossed.simulate.response import as_generator, simulate_responses

__all__ = ["as_generator", "simulate_responses"]
