"""``from_pymer4``: a fitted pymer4 ``Lmer`` model as crossed's fit result.

pymer4 fits lme4 in R through rpy2 and keeps the R model (``model.model_obj``); this module
reads lme4's estimates from that object with the lme4 engine's extraction, on a design
built by crossed from ``model.formula`` and ``model.data``, so that every downstream function
(Satterthwaite, ANOVA, EMMs, R², ...) works on it.

Version constraints: pymer4 0.8.2 works with the R 4.2 / lme4 1.1-31 stack of Debian 12
but pins pandas < 3; pymer4 0.9.x needs the R package ``report``, which Debian does not
package (install it in R with ``install.packages('report')``). pymer4 itself is optional:
this module only reads the duck-typed attributes ``formula``, ``data``, ``fitted`` and
``model_obj``.
"""

from __future__ import annotations

import time
from typing import Any

from crossed.design import build_design
from crossed.engines.errors import UnsupportedModelError
from crossed.formula import parse
from crossed.model.result import LmerResult

__all__ = ["from_pymer4"]


def from_pymer4(model: Any, reference: dict[str, str] | None = None,
                data_name: str = "data") -> LmerResult:
    """Convert a fitted pymer4 ``Lmer`` model (lme4 in R) into an :class:`LmerResult`.

    Parameters
    ----------
    model : pymer4.models.Lmer
        A fitted linear mixed model (``model.fit()`` has been called). Any object with
        ``formula`` (str), ``data`` (pandas.DataFrame), ``fitted`` (bool) and ``model_obj``
        (the R ``lmerMod``) is accepted.
    reference : dict, optional
        Reference levels, when the R model used non-default ones (pymer4's ``factors=``).
    data_name : str

    Returns
    -------
    LmerResult
        ``engine="pymer4"``; estimates, vcov, θ, σ, the criterion and u are lme4's.

    Raises
    ------
    ValueError
        When the model is not fitted or lacks the R model.
    UnsupportedModelError
        For a generalised model (``glmer``): crossed fits linear mixed models.
    EngineUnavailableError
        When rpy2/R are missing (they are when pymer4 works).
    RuntimeError
        When lme4's coefficients or θ names differ from crossed's design of the same
        formula and data (e.g. other factor levels or contrasts).
    """
    from crossed.engines.lme4 import assemble_fit, info_from_r, r_session

    t0 = time.perf_counter()
    for attr in ("formula", "data", "model_obj"):
        if not hasattr(model, attr):
            raise ValueError(f"not a pymer4 Lmer model: it has no attribute {attr!r}")
    if not getattr(model, "fitted", False) or model.model_obj is None:
        raise ValueError("the pymer4 model is not fitted: call model.fit() first")
    r = r_session()
    obj = model.model_obj
    if not bool(r.is_mermod(obj)[0]):
        raise ValueError("model.model_obj is not an lme4 merMod object")
    if not bool(r.is_lmermod(obj)[0]):
        family = getattr(model, "family", "non-gaussian")
        raise UnsupportedModelError(
            f"the pymer4 model is a generalised linear mixed model (glmer, family "
            f"{family!r}); crossed handles linear mixed models (lmer) only"
        )
    design = build_design(parse(model.formula, reference=reference), model.data)
    info = info_from_r(r.extract(obj, r.ro.StrVector([]), r.ro.FloatVector([float("nan")])))
    return assemble_fit(design, info, "pymer4", data_name, time.perf_counter() - t0,
                        engine_info={"r_formula_fit": obj})
