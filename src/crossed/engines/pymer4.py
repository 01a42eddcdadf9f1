"""``from_pymer4``: a fitted pymer4 ``Lmer`` model as crossed's fit result.

pymer4 fits lme4 in R through rpy2 and keeps the R model (``model.model_obj``); this module
reads lme4's estimates from that object with the lme4 engine's extraction, on a design
built by crossed from ``model.formula`` and ``model.data``, so that every downstream function
(Satterthwaite, ANOVA, EMMs, R², ...) works on it.

What lme4 fitted is read from the R model, not assumed: the levels of each factor and its
coding (the ``contrasts`` attribute of lme4's model matrix, which is where pymer4's
``fit(factors=..., ordered=...)`` puts its unnamed contrast matrices, so that lme4 names
the coefficients ``task1``, ``task2``), the family and link of a ``glmer`` fit and its
prior weights. The design is then checked against lme4's: the number of observations, the
response and the fixed-effects model matrix must be lme4's, so that a ``model.data``
changed after ``fit()`` (or ranked by ``fit(rank=True)``) is refused, not converted
silently.

Version constraints: pymer4 0.8.2 works with the R 4.2 / lme4 1.1-31 stack of Debian 12
but needs pandas < 3 (it calls ``DataFrame.applymap``); pymer4 0.9.x needs the R package
``report``, which Debian does not package (install it in R with
``install.packages('report')``). pymer4 itself is optional: this module only reads the
duck-typed attributes ``formula``, ``data``, ``fitted`` and ``model_obj``.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crossed.design import build_design
from crossed.design.frame import used_columns
from crossed.design.glm import attach, glm_inputs
from crossed.engines.errors import UnsupportedModelError
from crossed.formula import FormulaError, parse

if TYPE_CHECKING:
    from crossed.model.glmm.result import GlmerResult
    from crossed.model.result import LmerResult

__all__ = ["from_pymer4"]

# what lme4 fitted, read from the R model: the model frame's factors and their coding, the
# response, the model matrix, the family and weights, and the formula as R prints it
_R_PYMER4 = r"""
crossed_pymer4_info <- function(fit) {
  X <- lme4::getME(fit, "X")
  ctr <- attr(X, "contrasts")
  mf <- stats::model.frame(fit)
  facs <- names(mf)[vapply(mf, is.factor, logical(1))]
  glmm <- lme4::isGLMM(fit)
  fam <- if (glmm) stats::family(fit) else NULL
  list(
    nobs = stats::nobs(fit),
    y = as.numeric(lme4::getME(fit, "y")),
    X = as.numeric(X), X_names = colnames(X),
    factors = facs,
    factor_levels = lapply(facs, function(f) levels(mf[[f]])),
    factor_ordered = vapply(facs, function(f) is.ordered(mf[[f]]), logical(1)),
    contrast_factors = as.character(names(ctr)),
    contrast_strings = lapply(ctr, function(c) if (is.character(c)) c else character(0)),
    contrast_matrices = lapply(ctr, function(c) if (is.character(c)) numeric(0)
                               else as.numeric(as.matrix(c))),
    contrast_colnames = lapply(ctr, function(c) if (is.character(c) || is.null(colnames(c)))
                               character(0) else colnames(c)),
    glmm = glmm,
    family = if (glmm) fam$family else "gaussian",
    link = if (glmm) fam$link else "identity",
    nagq = if (glmm) as.integer(fit@devcomp$dims[["nAGQ"]]) else 1L,
    weights = as.numeric(stats::weights(fit)),
    formula = paste(deparse(stats::formula(fit), width.cutoff = 500L), collapse = " ")
  )
}
"""

_R_CODINGS = {"contr.treatment": "treatment", "contr.sum": "sum", "contr.helmert": "helmert",
              "contr.poly": "poly"}
_NOT_MIXED = {
    "Lm": "an ordinary regression without random effects (no lme4 fit to convert); fit "
          "it with cx.lm(formula, data), or the mixed model with cx.lmer",
    "Lm2": "a two-stage regression (one regression per group, then a test of the "
           "coefficients), not an lme4 fit; fit the mixed model with cx.lmer(formula, "
           "data), the grouping factor as a random-effects term (1 + x | group)",
}
_REFIT = ("refit the pymer4 model on the data you want (model.fit()) and convert it again, "
          "or fit it with crossed directly")


def from_pymer4(model: Any, reference: dict[str, str] | None = None,
                data_name: str | None = None) -> LmerResult | GlmerResult:
    """Convert a fitted pymer4 ``Lmer`` model (lme4 in R) into crossed's fit result (the
    model core's; ``cx.from_pymer4`` returns the public ``LmerFit``/``GlmerFit``).

    Parameters
    ----------
    model : pymer4.models.Lmer
        A fitted model (``model.fit()`` has been called), with or without ``factors=``
        (treatment, ``ordered=True`` polynomial or custom contrasts: the coding is read
        from the R model, and the coefficients keep lme4's names, e.g. ``task1``). A
        ``glmer`` fit (``family="binomial"`` or ``"poisson"``) converts too. Any object with
        ``formula`` (str), ``data`` (pandas.DataFrame), ``fitted`` (bool) and ``model_obj``
        (the R ``merMod``) is accepted.
    reference : dict, optional
        Not needed: the factor levels and their coding are lme4's. Kept for models whose
        R fit has no coding to read.
    data_name : str, optional
        What the summary's ``Data:`` line shows (default ``"model.data (pymer4)"``).

    Returns
    -------
    LmerResult or GlmerResult
        ``engine="pymer4"``; estimates, vcov, θ, σ, the criterion and u are lme4's.

    Raises
    ------
    ValueError
        When the model is not fitted or lacks the R model, or when ``model.data`` is no
        longer the data lme4 fitted (other rows or values): the message says what differs.
    UnsupportedModelError
        For a family crossed does not fit (pymer4's ``gamma``, ``inverse_gaussian``), and
        for pymer4's ``Lm`` and ``Lm2`` (not lme4 fits), naming what to fit instead.
    EngineUnavailableError
        When rpy2/R are missing (they are when pymer4 works).
    RuntimeError
        When lme4's coefficients or θ names still differ from crossed's design of the same
        formula and data.
    """
    from crossed.engines.lme4 import _r_list, assemble_fit, info_from_r, r_session

    t0 = time.perf_counter()
    kind = type(model).__name__
    if kind in _NOT_MIXED:
        raise UnsupportedModelError(f"the pymer4 model is an {kind}: {_NOT_MIXED[kind]}")
    for attr in ("formula", "data", "model_obj"):
        if not hasattr(model, attr):
            raise ValueError(f"not a pymer4 Lmer model: it has no attribute {attr!r}")
    if not getattr(model, "fitted", False) or model.model_obj is None:
        raise ValueError("the pymer4 model is not fitted: call model.fit() first")
    if not isinstance(model.data, pd.DataFrame):
        raise ValueError("model.data is not a pandas DataFrame")
    r = r_session()
    ro = r.ro
    obj = model.model_obj
    try:
        mermod = bool(r.is_mermod(obj)[0])
    except Exception:  # not an R object at all (rpy2 cannot convert it)
        mermod = False
    if not mermod:
        raise ValueError("model.model_obj is not an lme4 merMod object")
    if "crossed_pymer4_info" not in ro.globalenv:
        ro.r(_R_PYMER4)
    fitted = _fitted(_r_list(ro.globalenv["crossed_pymer4_info"](obj)))
    name = data_name if data_name is not None else "model.data (pymer4)"
    if fitted["glmm"]:
        family = _family(fitted["family"], fitted["link"], getattr(model, "family", None))
    spec = _spec(model.formula, fitted, reference)
    data = _as_fitted(model.data, fitted)
    if not fitted["glmm"]:
        design = build_design(spec, data)
        _check_data(design.y, design, fitted, spec.response)
        info = info_from_r(r.extract(obj, ro.StrVector([]), ro.FloatVector([float("nan")])))
        with _once(model):
            return assemble_fit(design, info, "pymer4", name, time.perf_counter() - t0,
                                engine_info={"r_formula_fit": obj})
    with _once(model):
        return _glmer_fit(r, obj, spec, data, fitted, family, name, t0)


@contextlib.contextmanager
def _once(model: Any) -> Iterator[None]:
    """lme4's messages are warned as the lme4 engine warns them, except those pymer4
    already reported when it fitted (``model.warnings``: R printed them then); all stay
    in the fit's messages and summary."""
    reported = [str(m).strip() for m in (getattr(model, "warnings", None) or [])
                if str(m).strip()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        text = str(w.message)
        if not any(m in text for m in reported):
            warnings.warn(w.message, stacklevel=4)


def _fitted(d: dict[str, Any]) -> dict[str, Any]:
    """Python values of ``crossed_pymer4_info``'s list."""
    def strs(x: Any) -> list[str]:
        return [str(v) for v in x]

    names = strs(d["X_names"])
    n = int(d["nobs"][0])
    contrasts: dict[str, Any] = {}
    for f, s, m, cn in zip(strs(d["contrast_factors"]), d["contrast_strings"],
                           d["contrast_matrices"], d["contrast_colnames"], strict=True):
        contrasts[f] = (str(s[0]) if len(s) else np.asarray(list(m), dtype=float),
                        strs(cn))
    return {
        "nobs": n, "y": np.asarray(list(d["y"]), dtype=float),
        "X": np.asarray(list(d["X"]), dtype=float).reshape((n, len(names)), order="F"),
        "X_names": names,
        "levels": {f: strs(lv) for f, lv in zip(strs(d["factors"]), d["factor_levels"],
                                                  strict=True)},
        "ordered": {f: bool(o) for f, o in zip(strs(d["factors"]), d["factor_ordered"],
                                                strict=True)},
        "contrasts": contrasts, "glmm": bool(d["glmm"][0]),
        "family": str(d["family"][0]), "link": str(d["link"][0]),
        "nagq": int(d["nagq"][0]), "weights": np.asarray(list(d["weights"]), dtype=float),
        "formula": str(d["formula"][0]),
    }


def _family(name: str, link: str, pymer4_family: Any) -> Any:
    from crossed.model.glmm.family import binomial, poisson

    makers = {"binomial": binomial, "poisson": poisson}
    if name not in makers:
        raise UnsupportedModelError(
            f"the pymer4 model is a glmer fit of family {pymer4_family or name!r} (R: "
            f"{name}({link})); crossed fits the binomial and Poisson families "
            "(cx.glmer(..., family='binomial' or 'poisson')), not this one")
    try:
        return makers[name](link)
    except ValueError as exc:
        raise UnsupportedModelError(
            f"the pymer4 model is a glmer fit of family {name} with link {link!r}, which "
            f"crossed does not fit ({exc})") from exc


def _spec(formula: str, fitted: dict[str, Any], reference: dict[str, str] | None) -> Any:
    """crossed's spec of the formula with lme4's coding of each factor; written as R
    prints the formula (pymer4 keeps it without spaces) where crossed reads that back."""
    codings: dict[str, Any] = {}
    for col, (coding, colnames) in fitted["contrasts"].items():
        levels = fitted["levels"].get(col)
        if isinstance(coding, str):
            if coding not in _R_CODINGS:
                raise UnsupportedModelError(
                    f"lme4 coded the factor {col!r} with {coding}, which crossed does not "
                    f"have ({', '.join(_R_CODINGS)}); refit it with one of those or a "
                    "contrast matrix")
            codings[col] = _R_CODINGS[coding]
            continue
        if levels is None:
            continue
        m = coding.reshape((len(levels), -1), order="F")
        if colnames:  # a named matrix: lme4's names are its column names
            if (np.array_equal(m, np.eye(len(levels))[:, 1:])
                    and colnames == levels[1:]):
                codings[col] = "treatment"
                continue
            raise UnsupportedModelError(
                f"lme4 coded the factor {col!r} with a contrast matrix whose columns are "
                f"named ({', '.join(colnames)}); crossed names a matrix's columns 1, 2, ...: "
                "refit with an unnamed matrix (as pymer4's factors= passes it)")
        codings[col] = tuple(tuple(float(v) for v in row) for row in m)
    spec = None
    for text in (fitted["formula"], formula):
        try:
            spec = parse(text, reference=reference, contrasts=codings or None)
        except FormulaError:
            if text == formula:
                raise
            continue
        if text is formula or _same_terms(spec, formula):
            break
    return spec


def _same_terms(spec: Any, formula: str) -> bool:
    """R's deparse of the formula reads as the formula pymer4 fitted."""
    try:
        other = parse(formula)
    except FormulaError:
        return False
    def key(sp: Any) -> str:
        return repr((sp.response, sp.fixed, sp.random, sp.offsets, sp.cbind)).replace(" ", "")

    return key(spec) == key(other)


def _as_fitted(data: pd.DataFrame, fitted: dict[str, Any]) -> pd.DataFrame:
    """``data`` with each factor of lme4's model frame as a categorical with R's levels
    (pymer4's factors= fits its copy of the data with the levels in the order given,
    each value written as a string)."""
    out = data.copy()
    for col, levels in fitted["levels"].items():
        if col not in out.columns:
            continue
        values = out[col]
        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(object)
        text = values.map(lambda v: v if pd.isna(v) else str(v))
        cat = pd.Categorical(text, categories=levels, ordered=fitted["ordered"][col])
        unknown = text.notna() & pd.isna(cat)
        if unknown.any():
            extra = sorted(set(text[unknown]))[:5]
            raise ValueError(
                f"model.data[{col!r}] has values lme4 did not fit ({', '.join(extra)}; "
                f"lme4's levels: {', '.join(levels[:10])}): model.data was changed after "
                f"fit(); {_REFIT}")
        out[col] = cat
    return out


def _check_data(y: np.ndarray, design: Any, fitted: dict[str, Any], response: str) -> None:
    """Refuse a design whose observations, response or model matrix are not lme4's."""
    n = len(y)
    if n != fitted["nobs"]:
        raise ValueError(
            f"lme4 fitted {fitted['nobs']} observations but model.data gives {n} for this "
            f"formula: model.data was changed after fit(); {_REFIT}")
    if not np.allclose(y, fitted["y"], rtol=1e-10, atol=1e-12 * (1 + np.max(np.abs(y)))):
        raise ValueError(
            f"the response {response!r} in model.data differs from the one lme4 fitted "
            f"(model.data changed after fit(), or fit(rank=True), which ranks a copy of "
            f"the data); {_REFIT}")
    X = design.X
    if (list(design.fixed.names) == fitted["X_names"] and X.shape == fitted["X"].shape
            and not np.allclose(X, fitted["X"], rtol=1e-8,
                                atol=1e-10 * (1 + np.max(np.abs(X), initial=0.0)))):
        raise ValueError(
            "the fixed-effects columns built from model.data differ from lme4's model "
            "matrix (model.data changed after fit(), or fit(rank=True), which ranks a copy "
            f"of the data); {_REFIT}")


def _glmer_fit(r: Any, obj: Any, spec: Any, data: pd.DataFrame, fitted: dict[str, Any],
               family: Any, name: str, t0: float) -> Any:
    """A pymer4 ``glmer`` fit as a :class:`GlmerResult` with lme4's numbers."""
    from crossed.engines.lme4 import (
        _checked_layout,
        _map_u,
        _num,
        _r_list,
        _report_lme4_messages,
        info_from_r,
    )
    from crossed.engines.lme4_glmm import _cond_var_u, glmm_info_in_r
    from crossed.model.glmm.result import GlmerResult

    used, _ = used_columns(spec, [str(c) for c in data.columns])
    rows, extra = glm_inputs(spec, data, used=tuple(used))
    resp = spec.response
    if spec.cbind is None and resp in rows.columns and pd.api.types.is_bool_dtype(rows[resp]):
        rows = rows.assign(**{resp: rows[resp].astype(float)})
    design = build_design(spec, rows, glmm=True)
    if spec.cbind is not None and extra.get("failures") is not None:
        trials = design.y + np.asarray(extra["failures"], dtype=float)
        y_crossed = np.divide(design.y, trials, out=np.zeros_like(design.y),
                              where=trials > 0)
        if len(trials) == fitted["nobs"] and not np.allclose(trials, fitted["weights"]):
            raise ValueError(f"the trials of {resp} in model.data differ from lme4's; "
                             f"{_REFIT}")
    else:
        y_crossed = design.y
    _check_data(y_crossed, design, fitted, resp)
    w = fitted["weights"]
    weights = None if spec.cbind is None and np.all(w == 1.0) else w
    design = attach(design, {**extra, "weights": weights}, fitted["y"])
    raw = glmm_info_in_r(obj)
    d = _r_list(raw)
    info = info_from_r(raw)
    info = _checked_layout(design, info, positional=False)
    # lme4's ranef() names the conditional variances by grouping factor: crossed's blocks
    groups = {blk.group: f".g{i}" for i, blk in enumerate(design.random.blocks)}
    postvar = {groups.get(str(g), str(g)): [_num(a) for a in pv]
               for g, pv in zip(d["postvar_groups"], d["postvar"], strict=True)}
    messages, status = _report_lme4_messages(design, info)
    u = _map_u(design, info)
    if u is None:
        raise RuntimeError("lme4's random-effect levels do not match crossed's design of "
                           f"model.data; {_REFIT}")
    return GlmerResult(
        design=design, family=family, nagq=fitted["nagq"], engine="pymer4",
        theta=info["theta"], beta=info["fixef"], u=u, deviance=info["criterion"],
        criterion=-2.0 * float(_num(d["loglik"])[0]), vcov_beta=info["vcov"],
        linear_predictor=_num(d["eta"]),
        cond_var_u=_cond_var_u(design, info["theta"], postvar), opt=None,
        is_singular=info["singular"], converged=status.converged, convergence=status,
        messages=tuple(messages), data_name=name, fit_seconds=time.perf_counter() - t0,
        engine_info={"r_optimizer": info["optimizer"], "r_feval": info["feval"],
                     "r_formula_fit": obj})

