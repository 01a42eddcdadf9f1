"""Inference on fitted models: Satterthwaite and Kenward-Roger tests, ANOVA, EMMs, effect
sizes, R², likelihood-ratio tests."""

from crossed.inference.anova import anova, f_test
from crossed.inference.coefs import coef_table, contrast_tests
from crossed.inference.effect_sizes import cohens_f2, eta_squared, omega_squared
from crossed.inference.emmeans import EMMeans, emmeans, joint_tests
from crossed.inference.emtrends import emtrends
from crossed.inference.glmm_wald import glmm_coef_table
from crossed.inference.icc import icc
from crossed.inference.influence import cooks_distance, hatvalues, influence
from crossed.inference.kenward_roger import KRModel
from crossed.inference.levels import coef_levels
from crossed.inference.lrt import compare, ranova, variance_components
from crossed.inference.r2 import r2_nakagawa
from crossed.inference.satterthwaite import SatterthwaiteModel, satterthwaite_t
from crossed.inference.step import StepResult, step
from crossed.model.glmm.result import provide as _glmm_provide
from crossed.model.result import provide

# the R-like methods of LmerFit implemented in this layer (crossed.model.result)
provide("coef_table", coef_table)
_glmm_provide("coef_table", glmm_coef_table)
provide("anova", anova)
provide("emmeans", emmeans)
provide("emtrends", emtrends)
provide("eta_squared", eta_squared)
provide("r2", r2_nakagawa)
provide("ranova", ranova)
provide("variance_components", variance_components)
provide("coef", coef_levels)
provide("icc", icc)
provide("hatvalues", hatvalues)
provide("cooks_distance", cooks_distance)
provide("influence", influence)
provide("step", step)

__all__ = [
    "EMMeans",
    "KRModel",
    "SatterthwaiteModel",
    "StepResult",
    "anova",
    "coef_levels",
    "coef_table",
    "cohens_f2",
    "compare",
    "contrast_tests",
    "cooks_distance",
    "emmeans",
    "emtrends",
    "eta_squared",
    "f_test",
    "hatvalues",
    "icc",
    "influence",
    "joint_tests",
    "omega_squared",
    "r2_nakagawa",
    "ranova",
    "satterthwaite_t",
    "step",
    "variance_components",
]
