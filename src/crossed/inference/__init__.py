"""Inference on fitted models: Satterthwaite and Kenward-Roger tests, ANOVA, EMMs, effect
sizes, R², likelihood-ratio tests."""

from crossed.inference.anova import anova, f_test
from crossed.inference.coefs import coef_table, contrast_tests
from crossed.inference.effect_sizes import cohens_f2, eta_squared, omega_squared
from crossed.inference.emmeans import EMMeans, emmeans, joint_tests
from crossed.inference.emtrends import emtrends
from crossed.inference.glmm import drop1, glmm_anova, r2_nakagawa_glmm, wald_anova
from crossed.inference.glmm_emmeans import GlmmEMMeans, glmm_emmeans
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
from crossed.tables import returns_table

# the R-like methods of LmerFit implemented in this layer (crossed.model.result); their
# tables are ResultTables: DataFrames that print as R prints these tables (crossed.tables)
provide("coef_table", returns_table(coef_table))
provide("anova", returns_table(anova))
# GlmerFit's (crossed.model.glmm.result)
_glmm_provide("coef_table", returns_table(glmm_coef_table))
_glmm_provide("anova", returns_table(glmm_anova))
_glmm_provide("emmeans", glmm_emmeans)
_glmm_provide("r2", returns_table(r2_nakagawa_glmm))
_glmm_provide("drop1", returns_table(drop1))
provide("emmeans", emmeans)
provide("emtrends", emtrends)
provide("eta_squared", returns_table(eta_squared))
provide("r2", returns_table(r2_nakagawa))
provide("ranova", returns_table(ranova))
provide("variance_components", returns_table(variance_components))
provide("coef", coef_levels)
provide("icc", returns_table(icc))
provide("hatvalues", hatvalues)
provide("cooks_distance", cooks_distance)
provide("influence", influence)
provide("step", step)

__all__ = [
    "EMMeans",
    "GlmmEMMeans",
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
    "drop1",
    "emmeans",
    "emtrends",
    "eta_squared",
    "f_test",
    "hatvalues",
    "icc",
    "influence",
    "glmm_anova",
    "glmm_emmeans",
    "joint_tests",
    "omega_squared",
    "r2_nakagawa",
    "r2_nakagawa_glmm",
    "ranova",
    "satterthwaite_t",
    "step",
    "variance_components",
    "wald_anova",
]
