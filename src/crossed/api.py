"""``lmer``: formula + data -> fitted model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design import Design, build_design
from crossed.design.frame import (
    DataError,
    check_binary_response,
    check_response_varies,
    used_columns,
)
from crossed.design.glm import attach, glm_inputs
from crossed.engines import get_engine
from crossed.engines.sources import is_partitioned
from crossed.fit import GlmerFit, LmerFit, fit_glmm_with, fit_with
from crossed.fit.public import as_public
from crossed.formula import FormulaError, ModelSpec, parse
from crossed.model.control import LmerControl
from crossed.model.glmm.family import Family, family_of
from crossed.model.lm import LmFit, fit_lm

__all__ = ["glmer", "lm", "lmer"]


def lmer(formula: str, data: pd.DataFrame, reml: bool = True, engine: str = "native",
         reference: dict[str, str] | None = None, na_action: str = "omit",
         control: LmerControl | None = None, data_name: str | None = None,
         trusted: bool = False, contrasts: Mapping[str, object] | None = None,
         weights: object = None, offset: object = None, client: object = None,
         progress: bool = False) -> LmerFit:
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
    weights : str or array, optional
        Prior weights (lme4's ``weights=``): a column name or one value per row; the
        residual variance of a row is σ²/w. Missing weights drop the row (counted),
        negative or zero weights are refused (lme4's criterion is infinite with a zero
        weight). The criterion includes −log|W| as lme4's.
    offset : str or array, optional
        Added to the linear predictor (lme4's ``offset=``); ``offset(x)`` terms in the
        formula too. ``fitted()`` and ``predict(include_random=False)`` include it;
        ``predict(newdata)`` evaluates ``offset(x)`` terms on ``newdata`` but adds
        nothing for ``offset=`` (as lme4's ``predict``). Methods not validated with
        weights or offsets (Kenward–Roger with weights, EMMs with an offset,
        ``extend``) raise :class:`crossed.model.prior.PriorWeightsError`.
    client : distributed.Client or str, optional
        For ``data`` larger than memory (docs/larger-than-memory.md): ``data`` may be a
        Dask DataFrame or a Parquet path or glob (local or an fsspec URL); the fit runs
        two passes over its partitions on this Dask cluster (a Client or a scheduler
        address; default: a ``LocalCluster`` sized to the machine, closed afterwards) and
        optimises the summed cross-products in this process. The result is an
        :class:`LmerFit` whose rows stayed on the cluster: row-level methods
        (``fitted``, ``residuals``, ...) raise, naming the in-memory alternative.
    progress : bool
        With partitioned data: a line on stderr as each pass over the partitions starts
        and ends.

    Returns
    -------
    LmerFit
    """
    _check_arguments(formula, reml, engine, reference, na_action, control, data_name)
    if not isinstance(trusted, bool | np.bool_):
        raise TypeError(f"trusted must be True or False, got {trusted!r}")
    spec = parse(formula, reference=reference, trusted=bool(trusted), contrasts=contrasts)
    if spec.cbind is not None:
        raise FormulaError(formula, 0, "cbind(successes, failures) is the response of a "
                                       "binomial GLMM: fit it with crossed.glmer(formula, "
                                       "data, family=\"binomial\")")
    if is_partitioned(data):
        _check_partitioned(engine, weights, offset, spec)
        return _fit_partitioned("lmer", spec, data, client, progress,
                                data_name, na_action=na_action, reml=bool(reml),
                                control=control)
    _refuse_client(client, data)
    design = model_design(spec, data, weights=weights, offset=offset, na_action=na_action)
    check_response_varies(design.y, spec.response)
    check_binary_response(design.y, spec.response)
    return fit_with(engine, design, reml=bool(reml), control=control, data_name=data_name or "data")


def _data_name(data: object) -> str:
    return str(data) if isinstance(data, str) else "data"


def _fit_partitioned(model: str, spec: ModelSpec, data: object, client: object,
                     progress: bool, data_name: str | None, *args: Any, **options: Any) -> Any:
    """The partitioned driver of ``model`` (``"lmer"`` or ``"glmer"``) on the partitions of
    ``data`` on ``client``'s cluster (:func:`~crossed.engines.dask_fit.dask_client`), as a
    public fit. (The partitioned path is imported here, by the fits that take it.)"""
    from crossed.engines.dask_fit import DaskSource, as_dask_frame, dask_client
    from crossed.engines.partitioned import (
        fit_glmer_partitioned,
        fit_lmer_partitioned,
        stderr_progress,
    )

    fit = fit_lmer_partitioned if model == "lmer" else fit_glmer_partitioned
    with dask_client(client) as c:
        source = DaskSource(as_dask_frame(data), c)
        result = fit(spec, source, *args, data_name=data_name or _data_name(data),
                     progress=stderr_progress if progress else None, **options)
    return as_public(result)


def _refuse_client(client: object, data: object) -> None:
    if client is not None:
        raise TypeError("client= is for a Dask DataFrame or a Parquet path as data; data is "
                        f"a {type(data).__name__}")


def _check_partitioned(engine: str, weights: object, offset: object, spec: ModelSpec) -> None:
    """What partitioned fits do not do (yet): said, never ignored."""
    if engine != "native":
        raise ValueError(f"engine={engine!r}: fits on partitioned data (a Dask DataFrame or "
                         "Parquet files) run on the native engine only")
    if weights is not None or offset is not None or spec.offsets:
        raise DataError("weights= and offsets are not supported on partitioned data (a Dask "
                        "DataFrame or Parquet files) yet: fit in memory")


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
    if spec.offsets or spec.cbind is not None:
        raise FormulaError(formula, 0, "lm() takes no offset() terms or cbind() response")
    from crossed.design.fixed import build_fixed, build_response
    from crossed.design.frame import prepare
    from crossed.formula.spec import check_spec

    prepared = prepare(spec, data, na_action=na_action)
    if not spec.trusted:
        check_spec(spec, columns=prepared.data_columns)
    y = build_response(spec, prepared.data)
    fixed = build_fixed(spec.fixed, prepared.data, caret=spec.caret, trusted=spec.trusted)
    return fit_lm(formula, fixed.X, y, fixed.names, n_dropped=prepared.n_dropped,
                  data_name=data_name or "data")


def glmer(formula: str, data: pd.DataFrame, family: str | Family = "binomial", nAGQ: int = 1,
          weights: object = None, offset: object = None, engine: str = "native",
          control: LmerControl | None = None, na_action: str = "omit",
          data_name: str | None = None, reference: dict[str, str] | None = None,
          trusted: bool = False, client: object = None, progress: bool = False) -> GlmerFit:
    """Fit a generalised linear mixed model as lme4's ``glmer``.

    Parameters
    ----------
    formula : str
        lme4 formula; the left side may be ``cbind(successes, failures)`` (binomial) and
        the right side may hold ``offset(expr)`` terms.
    data : pandas.DataFrame
    family : {"binomial", "poisson"} or Family
        ``cx.binomial(link="logit"|"probit"|"cloglog")``, ``cx.poisson()``.
    nAGQ : int
        1: Laplace (default); 0: lme4's nAGQ = 0; > 1: adaptive Gauss–Hermite (one scalar
        random-effects term).
    weights : str or array, optional
        Prior weights (binomial: the number of trials of a proportion response).
    offset : str or array, optional
        Added to the linear predictor (e.g. ``np.log(exposure)``).
    engine : str
        ``"native"`` (default) or an engine with GLMMs (``"lme4"``).

    client : distributed.Client or str, optional
        For ``data`` larger than memory (docs/larger-than-memory.md): ``data`` may be a
        Dask DataFrame or a Parquet path or glob; each PIRLS iteration is then one pass
        over its partitions, kept on this Dask cluster (default: a ``LocalCluster`` sized
        to the machine, closed afterwards). Laplace (``nAGQ=1``) and ``nAGQ=0``; a 0/1 or
        count response, no weights or offsets.
    progress : bool
        With partitioned data: lines on stderr as the passes go (every 50th PIRLS pass).

    Binomial responses: 0/1 numbers, booleans, a two-level factor (first level =
    failure, as R), a proportion with ``weights=`` trials, or ``cbind(s, f)``.

    Returns
    -------
    GlmerFit
    """
    _check_arguments(formula, True, engine, reference, na_action, control, data_name)
    fam = family_of(family)
    if isinstance(nAGQ, bool) or not isinstance(nAGQ, int | np.integer) or nAGQ < 0:
        raise ValueError(f"nAGQ must be a whole number >= 0, got {nAGQ!r}")
    spec = parse(formula, reference=reference, trusted=bool(trusted))
    if is_partitioned(data):
        _check_partitioned(engine, weights, offset, spec)
        if spec.cbind is not None:
            raise DataError("cbind(successes, failures) is not supported on partitioned "
                            "data yet: use a 0/1 response, or fit in memory")
        return _fit_partitioned("glmer", spec, data, client, progress,
                                data_name, fam, na_action=na_action, nagq=int(nAGQ),
                                control=control)
    _refuse_client(client, data)
    design = model_design(spec, data, weights=weights, offset=offset, na_action=na_action,
                          family=fam)
    return fit_glmm_with(engine, design, family=fam, nagq=int(nAGQ), control=control,
                         data_name=data_name or "data")


def model_design(spec: ModelSpec, data: pd.DataFrame, weights: object = None,
                 offset: object = None, na_action: str = "omit",
                 family: Family | None = None) -> Design:
    """The one pipeline's data stage, for LMMs (``family=None``) and GLMMs: the spec's
    design on ``data``, with prior weights and the offset (``weights=``, ``offset=``, the
    spec's ``offset(...)`` terms) and, for a GLMM, the response as lme4 stores it
    (``cbind``'s proportion with the trials as weights, a two-level factor as 0/1).

    Rows with a missing value in any of them are dropped once, counted and reported."""
    if family is None and weights is None and offset is None and not spec.offsets:
        return build_design(spec, data, na_action=na_action)
    used, _ = used_columns(spec, [str(c) for c in data.columns])
    data, extra = glm_inputs(spec, data, weights=weights, offset=offset, used=tuple(used),
                             na_action=na_action)
    if family is None:
        if extra["weights"] is not None and np.any(extra["weights"] == 0):
            raise DataError(f"zero weights in {extra['weights_name']!r}: lme4's criterion is "
                            "infinite then; drop those rows")
        return attach(build_design(spec, data, na_action=na_action), extra, None)
    data = _glm_response(spec.response, data, family, spec.cbind is not None)
    design = build_design(spec, data, na_action=na_action, glmm=True)
    y, w = _glm_y(design.y, extra, family, spec.successes, spec.cbind is not None)
    extra["weights"] = w
    return attach(design, extra, y)


def _glm_response(response: str, data: pd.DataFrame, fam: Family, cbind: bool
                  ) -> pd.DataFrame:
    """A boolean or two-level factor binomial response as 0/1 (R: first level = failure)."""
    if cbind or response not in data.columns or not fam.binary_outcome:
        return data
    col = data[response]
    if pd.api.types.is_bool_dtype(col):
        return data.assign(**{response: col.astype(float)})
    if isinstance(col.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(col):
        levels = (list(col.cat.categories) if isinstance(col.dtype, pd.CategoricalDtype)
                  else sorted(col.dropna().unique(), key=str))
        if len(levels) != 2:
            raise DataError(f"binomial response {response!r} has {len(levels)} "
                            f"level{'' if len(levels) == 1 else 's'} "
                            f"({', '.join(map(str, levels[:5]))}); a factor response needs "
                            "two (the first is failure)")
        vals = np.where(col.isna(), np.nan, (col == levels[1]).astype(float))
        return data.assign(**{response: vals})
    return data


def _glm_y(y: np.ndarray, extra: dict[str, object], fam: Family, response: str,
           cbind: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The response and prior weights as lme4 stores them; bad values refused."""
    w = extra["weights"]
    w = None if w is None else np.asarray(w, dtype=float)
    if fam.binary_outcome:
        if cbind:
            fail = np.asarray(extra["failures"], dtype=float)
            if np.any(y < 0) or np.any(fail < 0):
                raise DataError(f"cbind({response}, ...): negative counts of successes or "
                                "failures")
            trials = y + fail
            prop = np.divide(y, trials, out=np.zeros_like(y), where=trials > 0)
            w = trials if w is None else trials * w
            return prop, w
        if np.any((y < 0) | (y > 1)):
            raise DataError(f"binomial response {response!r} has values outside [0, 1] "
                            f"(e.g. {y[(y < 0) | (y > 1)][0]:g}): use 0/1, a proportion with "
                            "weights= trials, or cbind(successes, failures)")
        if w is None and np.any((y != 0) & (y != 1)):
            raise DataError(f"binomial response {response!r} holds proportions but no "
                            "weights= gives the number of trials; pass weights= or use "
                            "cbind(successes, failures)")
        if w is not None and np.any(np.abs(w * y - np.round(w * y)) > 1e-3):
            warn("non-integer #successes in a binomial glm!")
        return y, w
    if np.any(y < 0):
        raise DataError(f"negative values not allowed for the Poisson family: response "
                        f"{response!r}")
    if np.any(np.abs(y - np.round(y)) > 1e-8):
        warn(f"non-integer counts in the Poisson response {response!r}")
    return y, w
