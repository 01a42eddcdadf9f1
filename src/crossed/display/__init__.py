"""Display of fits (formatting only): the text R prints for ``summary()`` of an lmer fit
(:mod:`crossed.display.lmer`, lmerTest's layout) and of a glmer fit
(:mod:`crossed.display.glmm`), the notebook view of both (:func:`fit_html`), the APA-style
write-up of ``fit.report()`` (:mod:`crossed.display.apa`) and the publication tables
(:mod:`crossed.display.publication`: ``cx.regression_table`` ...)."""

from crossed.display.glmm import format_glmer_summary
from crossed.display.lmer import (
    fit_html,
    format_cell,
    format_correlation,
    format_fixed_effects,
    format_pvalue,
    format_random_effects,
    format_summary,
    r_abbreviate,
    signif_stars,
    summary_of,
)

__all__ = ["fit_html", "format_cell", "format_correlation", "format_fixed_effects",
           "format_glmer_summary", "format_pvalue", "format_random_effects",
           "format_summary", "r_abbreviate", "signif_stars", "summary_of"]
