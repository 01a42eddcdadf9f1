"""Inference on fitted models: Satterthwaite and Kenward-Roger tests, ANOVA, EMMs, effect
sizes, R², likelihood-ratio tests."""

from crossed.inference.anova import anova, f_test
from crossed.inference.coefs import coef_table, contrast_tests, r_coefficients
from crossed.inference.effect_sizes import cohens_f2, eta_squared, omega_squared
from crossed.inference.emmeans import EMMeans, emmeans, joint_tests
from crossed.inference.emtrends import emtrends
from crossed.inference.glmm import drop1, glmm_anova, r2_nakagawa_glmm, wald_anova
from crossed.inference.glmm_emmeans import GlmmEMMeans, RegridEMMeans, glmm_emmeans
from crossed.inference.glmm_wald import glmm_coef_table
from crossed.inference.icc import icc
from crossed.inference.influence import cooks_distance, hatvalues, influence
from crossed.inference.kenward_roger import KRModel
from crossed.inference.levels import coef_levels
from crossed.inference.lrt import compare, ranova, variance_components
from crossed.inference.r2 import r2_nakagawa
from crossed.inference.satterthwaite import SatterthwaiteModel, satterthwaite_t
from crossed.inference.step import StepResult, step

__all__ = [
    "EMMeans",
    "GlmmEMMeans",
    "KRModel",
    "RegridEMMeans",
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
    "glmm_coef_table",
    "glmm_emmeans",
    "joint_tests",
    "omega_squared",
    "r2_nakagawa",
    "r2_nakagawa_glmm",
    "r_coefficients",
    "ranova",
    "satterthwaite_t",
    "step",
    "variance_components",
    "wald_anova",
]
