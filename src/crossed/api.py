"""``lmer``: formula + data -> fitted model."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from crossed.design import build_design
from crossed.design.frame import check_response_varies
from crossed.engines import fit_with, get_engine
from crossed.engines.native import LmerControl
from crossed.fit import LmerFit
from crossed.formula import parse
from crossed.model.lm import LmFit, fit_lm

__all__ = ["lm", "lmer"]


def lmer(formula: str, data: pd.DataFrame, reml: bool = True, engine: str = "native",
         reference: dict[str, str] | None = None, na_action: str = "omit",
         control: LmerControl | None = None, data_name: str | None = None,
         trusted: bool = False, contrasts: Mapping[str, object] | None = None) -> LmerFit:
    """Fit a linear mixed model written in lme4's formula language.

    Parameters
    ----------
    formula : str
        lme4 formula, e.g. ``"delta ~ language * task * mode + (1 | architecture)"``.
        Random terms: ``(expr | g)``, ``(expr || g)`` (independent variance per column,
        factors expanded to indicator columns), ``(1 | a/b)`` (nesting), ``(1 | a:b)``.
    data : pandas.DataFrame
        Long table; string/categorical/boolean columns are factors (treatment contrasts,
        first level = reference: sorted, or the order of a pandas Categorical). Levels are
        R's labels: ``308``, ``308.0`` and ``"308"`` in one column are one level. An
        *ordered* categorical gets polynomial contrasts (``contr.poly``: columns ``.L``,
        ``.Q``, ``.C``, ``^4``, ...), as in R. Nullable ``Int64``/``Float64`` columns
        are numbers, ``pd.NA`` a missing value. Dates and durations may define groups but
        are refused as predictors; infinite values are refused; predictors on very
        different scales give lme4's "consider rescaling" warning.
    reml : bool
        REML (default, as lme4) or maximum likelihood. Must be True or False (a string
        such as ``"FALSE"`` or None raises a TypeError rather than being read as truthy).
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
    contrasts : dict, optional
        Contrast coding per factor of the fixed part (lme4's ``contrasts``), e.g.
        ``{"lr": "sum"}``: ``"treatment"`` (R's ``contr.treatment``, columns named by
        level), ``"sum"`` and ``"helmert"`` (columns ``lr1``, ``lr2``, ...), ``"poly"``
        (``lr.L``, ``lr.Q``, ...) or a matrix with one row per level and one column per
        contrast (columns ``lr1``, ...). Estimated marginal means, Type III ANOVA (mapped
        to treatment coding, as lmerTest does) and effect sizes do not depend on it.

    Returns
    -------
    LmerFit
    """
    _check_arguments(formula, reml, engine, reference, na_action, control, data_name)
    if not isinstance(trusted, bool | np.bool_):
        raise TypeError(f"trusted must be True or False, got {trusted!r}")
    spec = parse(formula, reference=reference, trusted=bool(trusted), contrasts=contrasts)
    design = build_design(spec, data, na_action=na_action)
    check_response_varies(design.y, spec.response)
    return fit_with(engine, design, reml=bool(reml), control=control, data_name=data_name or "data")


def _check_arguments(formula: object, reml: object, engine: object, reference: object,
                     na_action: object, control: object, data_name: object) -> None:
    """Refuse arguments of the wrong type or value, naming the argument."""
    if not isinstance(formula, str):
        raise TypeError(f"formula must be a string such as 'y ~ x + (1 | g)', got "
                        f"{type(formula).__name__}")
    if not isinstance(reml, bool | np.bool_):
        raise TypeError(f"reml must be True or False, got {reml!r}")
    get_engine(engine)  # ValueError naming the registered engines
    if not isinstance(na_action, str) or na_action not in ("omit", "raise"):
        raise ValueError(f"na_action must be 'omit' or 'raise', got {na_action!r}")
    if reference is not None:
        if not isinstance(reference, Mapping):
            raise TypeError("reference must be a dict {column: level}, got "
                            f"{type(reference).__name__}")
        for column, level in reference.items():
            if not isinstance(column, str):
                raise TypeError(f"reference: column names must be strings, got {column!r}")
            if not isinstance(level, str | int | float | bool | np.number | np.bool_):
                raise TypeError(f"reference: the level of {column!r} must be a string or a "
                                f"number, got {level!r}")
    if control is not None and not isinstance(control, LmerControl):
        raise TypeError(f"control must be an LmerControl, got {type(control).__name__}")
    if data_name is not None and not isinstance(data_name, str):
        raise TypeError(f"data_name must be a string, got {type(data_name).__name__}")


def lm(formula: str, data: pd.DataFrame, reference: dict[str, str] | None = None,
       na_action: str = "omit", data_name: str | None = None,
       trusted: bool = False) -> LmFit:
    """Fit a linear model without random effects (R's ``lm``), to compare a mixed model
    with: ``cx.compare(mixed_fit, cx.lm("y ~ x", data))`` is lme4's ``anova(lmer, lm)``.

    The fixed part is built exactly as :func:`lmer` builds it (same factor coding, names,
    allow-list and missing-value handling). Only the log-likelihood and coefficients are
    provided: use statsmodels for a full linear-model toolkit.

    Returns
    -------
    LmFit
        ``beta``/``fixef``, ``sigma``, ``loglik`` (maximum likelihood, R's ``logLik(lm)``),
        ``npar`` (coefficients + 1), ``aic``, ``bic``, ``nobs``.
    """
    if not isinstance(formula, str):
        raise TypeError(f"formula must be a string such as 'y ~ x', got {type(formula).__name__}")
    if not isinstance(trusted, bool | np.bool_):
        raise TypeError(f"trusted must be True or False, got {trusted!r}")
    if not isinstance(na_action, str) or na_action not in ("omit", "raise"):
        raise ValueError(f"na_action must be 'omit' or 'raise', got {na_action!r}")
    spec = parse(formula, reference=reference, trusted=bool(trusted))
    if spec.random:
        raise ValueError("lm(): the formula has random-effects terms; use lmer()")
    from crossed.design.fixed import build_fixed, build_response
    from crossed.design.frame import prepare
    from crossed.formula.spec import check_spec

    prepared = prepare(spec, data, na_action=na_action)
    if not spec.trusted:
        check_spec(spec, columns={str(c) for c in data.columns})
    y = build_response(spec.response, prepared.data)
    fixed = build_fixed(spec.fixed, prepared.data, caret="^" in spec.formula)
    return fit_lm(formula, fixed.X, y, fixed.names, n_dropped=prepared.n_dropped,
                  data_name=data_name or "data")
