"""Inference on fitted models: Satterthwaite and Kenward-Roger tests, ANOVA, EMMs, effect
sizes, R², likelihood-ratio tests."""

from crossed.inference.anova import anova, f_test
from crossed.inference.coefs import coef_table, contrast_tests
from crossed.inference.effect_sizes import cohens_f2, eta_squared, omega_squared
from crossed.inference.emmeans import EMMeans, emmeans, joint_tests
from crossed.inference.glmm import drop1, glmm_anova, r2_nakagawa_glmm, wald_anova
from crossed.inference.glmm_emmeans import GlmmEMMeans, glmm_emmeans
from crossed.inference.glmm_wald import glmm_coef_table
from crossed.inference.kenward_roger import KRModel
from crossed.inference.lrt import compare, ranova, variance_components
from crossed.inference.r2 import r2_nakagawa
from crossed.inference.satterthwaite import SatterthwaiteModel, satterthwaite_t
from crossed.model.glmm.result import provide as _glmm_provide
from crossed.model.result import provide

# the R-like methods of LmerFit implemented in this layer (crossed.model.result)
provide("coef_table", coef_table)
_glmm_provide("coef_table", glmm_coef_table)
# GlmerFit's (crossed.model.glmm.result)
_glmm_provide("anova", glmm_anova)
_glmm_provide("emmeans", glmm_emmeans)
_glmm_provide("r2", r2_nakagawa_glmm)
_glmm_provide("drop1", drop1)
provide("anova", anova)
provide("emmeans", emmeans)
provide("eta_squared", eta_squared)
provide("r2", r2_nakagawa)
provide("ranova", ranova)
provide("variance_components", variance_components)

__all__ = [
    "EMMeans",
    "GlmmEMMeans",
    "KRModel",
    "SatterthwaiteModel",
    "anova",
    "coef_table",
    "cohens_f2",
    "compare",
    "contrast_tests",
    "drop1",
    "emmeans",
    "eta_squared",
    "f_test",
    "glmm_anova",
    "glmm_emmeans",
    "joint_tests",
    "omega_squared",
    "r2_nakagawa",
    "r2_nakagawa_glmm",
    "ranova",
    "satterthwaite_t",
    "variance_components",
    "wald_anova",
]
