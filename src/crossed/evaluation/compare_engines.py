"""``compare_engines``: one specification fitted by every engine, side by side."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from crossed.api import glmer, lmer
from crossed.engines import available, get_engine
from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
from crossed.fit import GlmerFit

__all__ = ["QUANTITIES", "compare_engines", "format_comparison"]

QUANTITIES = ("criterion", "fixef", "std_error", "variance", "covariance", "sigma", "theta",
              "time_s")


def _rows(fit) -> list[tuple[str, str, float]]:
    glmm = isinstance(fit, GlmerFit)
    if glmm:
        label = "-2 log-likelihood (Laplace)" if fit.nagq <= 1 else "-2 log-likelihood (AGQ)"
        rows: list[tuple[str, str, float]] = [("criterion", label, fit.criterion)]
    else:
        rows = [("criterion", "REML criterion" if fit.reml else "-2 log-likelihood",
                 fit.deviance)]
    se = np.sqrt(np.diag(fit.vcov_beta))
    for name, b in zip(fit.fixef_names, fit.beta, strict=True):
        rows.append(("fixef", name, float(b)))
    for name, s in zip(fit.fixef_names, se, strict=True):
        rows.append(("std_error", name, float(s)))
    for r in fit.varcorr().itertuples(index=False):
        if r.group == "Residual":
            continue
        if r.term2 is None or (isinstance(r.term2, float) and np.isnan(r.term2)):
            rows.append(("variance", f"{r.group} {r.term1}", float(r.variance_or_cov)))
        else:
            rows.append(("covariance", f"{r.group} {r.term1}, {r.term2}",
                         float(r.variance_or_cov)))
    if not glmm:  # a binomial or Poisson GLMM has no residual sigma
        rows.append(("sigma", "Residual", float(fit.sigma)))
    for name, t in zip(fit.theta_names, fit.theta, strict=True):
        rows.append(("theta", name, float(t)))
    return rows


def compare_engines(formula: str, data: pd.DataFrame, engines: list[str] | None = None,
                    reml: bool = True, reference: dict[str, str] | None = None,
                    na_action: str = "omit", family: Any = None, nAGQ: int = 1,
                    weights: Any = None, offset: Any = None) -> pd.DataFrame:
    """Fit one specification with several engines and put the estimates side by side.

    Parameters
    ----------
    formula : str
        lme4 formula.
    data : pandas.DataFrame
    engines : list of str, optional
        Engine names (default: every registered engine, :func:`crossed.engines.available`).
    reml : bool
        REML (default) or maximum likelihood, for every engine.
    reference : dict, optional
        Reference level per factor column.
    na_action : {"omit", "raise"}
    family : str or Family, optional
        Fit a GLMM (:func:`crossed.glmer`: ``"binomial"``, ``"poisson"``) with every engine
        instead of an LMM; ``reml`` is then not used. The criterion row is −2 log L by the
        Laplace approximation (or AGQ), lme4's ``deviance(fit)``-free ``-2 * logLik``; no
        ``sigma`` row. Engines without GLMMs (statsmodels: its ``BinomialBayesMixedGLM`` is
        variational Bayes, another estimator) are refused with their reason.
    nAGQ, weights, offset
        As :func:`crossed.glmer` (with ``family``).

    Returns
    -------
    pandas.DataFrame
        Columns ``quantity``, ``term``, one column per engine, and ``spread`` (largest minus
        smallest value across the engines that fitted). Quantities, in this order:
        ``criterion`` (REML criterion or −2 log-likelihood), ``fixef`` and ``std_error``
        per fixed effect, ``variance`` and ``covariance`` per random-effects term (lme4's
        VarCorr), ``sigma``, ``theta`` (lme4's parameterisation) and ``time_s`` (wall time
        from formula to fit). An engine that cannot fit the model (not installed, or
        cannot express it) has an all-NaN column and its message in
        ``attrs["errors"][engine]``; each engine's fit messages (singular fit, convergence,
        optimiser notes) are in ``attrs["messages"][engine]``.
    """
    engines = list(engines) if engines is not None else list(available())
    for engine in engines:
        get_engine(engine)  # ValueError naming the registered engines
    values: dict[str, dict[tuple[str, str], float]] = {}
    order: list[tuple[str, str]] = []
    errors: dict[str, str] = {}
    messages: dict[str, list[str]] = {}
    if "lme4" in engines:  # start R before timing (a few seconds, once per process)
        from crossed.engines.lme4 import r_session

        try:
            r_session()
        except EngineUnavailableError as exc:
            errors["lme4"] = str(exc)
    for engine in engines:
        if engine in errors:
            values[engine] = {}
            continue
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if family is None:
                    fit = lmer(formula, data, reml=reml, engine=engine,
                               reference=reference, na_action=na_action)
                else:
                    fit = glmer(formula, data, family=family, nAGQ=nAGQ, weights=weights,
                                offset=offset, engine=engine, reference=reference,
                                na_action=na_action)
        except (UnsupportedModelError, EngineUnavailableError) as exc:
            errors[engine] = str(exc)
            values[engine] = {}
            continue
        seconds = time.perf_counter() - t0
        rows = _rows(fit) + [("time_s", "formula to fit", seconds)]
        values[engine] = {(q, t): v for q, t, v in rows}
        for key in values[engine]:
            if key not in order:
                order.append(key)
        msgs = list(fit.messages)
        msgs += [str(w.message) for w in caught if str(w.message) not in msgs
                 and not issubclass(w.category, (DeprecationWarning, FutureWarning))]
        messages[engine] = msgs
    rank = {q: i for i, q in enumerate(QUANTITIES)}
    order.sort(key=lambda k: rank[k[0]])  # stable: terms keep their order within a quantity
    table = pd.DataFrame({"quantity": [q for q, _ in order], "term": [t for _, t in order]})
    for engine in engines:
        table[engine] = [values[engine].get(k, np.nan) for k in order]
    fitted = [e for e in engines if e not in errors]
    if fitted:
        vals = table[fitted].to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows all-NaN
            table["spread"] = np.nanmax(vals, axis=1) - np.nanmin(vals, axis=1)
    else:
        table["spread"] = np.nan
    table.attrs.update(formula=formula, reml=reml, engines=engines, errors=errors,
                       messages=messages,
                       family=None if family is None else str(getattr(family, "name", family)))
    return table


def format_comparison(table: pd.DataFrame, digits: int = 7) -> str:
    """The comparison as text: the table, then each engine's errors and messages.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`compare_engines`.
    digits : int
        Significant digits.

    Returns
    -------
    str
    """
    kind = "REML" if table.attrs.get("reml", True) else "ML"
    if table.attrs.get("family"):
        kind = f"GLMM, {table.attrs['family']}"
    lines = [f"{table.attrs.get('formula', '')}  ({kind})", ""]
    lines.append(table.to_string(index=False, na_rep="-",
                                 float_format=lambda v: f"{v:.{digits}g}"))
    for engine, msg in table.attrs.get("errors", {}).items():
        lines.append(f"\n{engine}: not fitted: {msg}")
    for engine, msgs in table.attrs.get("messages", {}).items():
        for m in msgs:
            lines.append(f"{engine}: {m}")
    return "\n".join(lines)
