"""``lmer``: formula + data -> fitted model."""

from __future__ import annotations

import pandas as pd

from crossed.design import build_design
from crossed.engines import fit_with
from crossed.engines.native import LmerControl
from crossed.fit import LmerFit
from crossed.formula import parse


def lmer(formula: str, data: pd.DataFrame, reml: bool = True, engine: str = "native",
         reference: dict[str, str] | None = None, na_action: str = "omit",
         control: LmerControl | None = None, data_name: str | None = None,
         trusted: bool = False) -> LmerFit:
    """Fit a linear mixed model written in lme4's formula language.

    Parameters
    ----------
    formula : str
        lme4 formula, e.g. ``"delta ~ language * task * mode + (1 | architecture)"``.
        Random terms: ``(expr | g)``, ``(expr || g)`` (independent variance per column,
        factors expanded to indicator columns), ``(1 | a/b)`` (nesting), ``(1 | a:b)``.
    data : pandas.DataFrame
        Long table; string/categorical/boolean columns are factors (treatment contrasts,
        first level = reference: sorted, or the order of a pandas Categorical).
    reml : bool
        REML (default, as lme4) or maximum likelihood.
    engine : {"native", "statsmodels", "lme4"}
        Fitting engine (docs/engines.md): crossed's own, statsmodels' ``MixedLM`` or R's
        lme4 through rpy2 (``pip install 'crossed[r]'``); all return the same result.
    reference : dict, optional
        Reference level per factor column, e.g. ``{"lr": "5e-5"}`` (R's ``relevel``).
    na_action : {"omit", "raise"}
        Rows with missing values in used columns are dropped and counted (``n_dropped``),
        or rejected.
    control : LmerControl, optional
        Optimiser settings (lme4's defaults).
    data_name : str, optional
        Name of the data shown by ``summary()``.
    trusted : bool
        Let the formula evaluate arbitrary Python expressions. By default it may use
        column names, numbers, arithmetic and a short list of functions (``I``, ``C``,
        ``log``, ``exp``, ``sqrt``, ``abs``, ``scale``, ``center``, ``poly``, ...), and
        anything else raises :class:`~crossed.FormulaError` before it is evaluated, so a
        formula from a file or a command line cannot run code.

    Returns
    -------
    LmerFit
    """
    spec = parse(formula, reference=reference, trusted=trusted)
    design = build_design(spec, data, na_action=na_action)
    return fit_with(engine, design, reml=reml, control=control, data_name=data_name or "data")
