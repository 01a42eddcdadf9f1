"""Conformance of every engine with lme4/lmerTest on every reference case (issue 2).

One suite, parametrised over ``crossed.engines.AVAILABLE`` x the cases of
tests/data/reference/cases.json: an engine added to AVAILABLE is checked against R's answers
without touching this file. Each quantity is its own test so a failure names what differs.

Tolerances (issue 2, "How it is checked"); ``R`` is the value in the case's JSON:

* REML/ML criterion: |ours - R| <= 1e-6 |R|, and ours <= R + 1e-6 |R| (never a worse optimum);
  logLik, AIC and BIC the same; the parameter count behind AIC/BIC exactly.
* fixed effects: |ours - R| <= 1e-6 max(|R|, SE_R). The floor SE_R (R's standard error of
  that coefficient) applies to estimates that are near 0 relative to their uncertainty: they
  are compared to a millionth of their standard error.
* standard errors and sigma: 1e-4 relative; the whole vcov: |V - V_R| <= 2e-4 sqrt(V_ii V_jj)
  (what 1e-4 on the SEs implies for every entry).
* theta: |ours - R| <= 1e-3 |R| + 1e-4. theta is a ratio of SDs; the absolute floor 1e-4 is
  lme4's singularity threshold, the resolution at which a theta is "zero".
* variance components (VarCorr): 1e-4 relative, floor 1e-4 sigma_R^2 for variances and
  covariances, 1e-4 sigma_R for SDs, 1e-4 for correlations (components on the boundary).
* Satterthwaite df 1e-3 relative; p-values 1e-4 relative (no floor, as the issue states; see
  below); t values 1e-4 relative (follows from the SEs).
* conditional modes 1e-4 relative, floor 1e-4 max|mode| of the same term (modes near 0);
  conditional SDs 1e-4 relative. For a term whose variance R puts on the boundary (SD below
  1e-4 sigma_R, lme4's singular theta) modes and SDs are 0 up to the optimiser's resolution:
  floor 1e-4 sigma_R, the theta floor on the response scale.
* exact: nobs, ngroups (names, values, order), is_singular, fixef names and order, theta
  names and order, the singular-fit warning.

No test pins where an optimiser stopped. R's reference fits stop by lme4's default rule,
which leaves a flat criterion inexact; where a quantity at our optimum differs from R's,
``reference.explained_by_optimum`` requires that the difference comes from R's inexact
optimum: our criterion is at most R's + 1e-9 relative, theta agrees in every direction the
criterion determines, and the same quantity computed by our formulas at R's theta matches R
to the stated tolerance. p-values: 1e-4 relative, or what the t and df tolerances imply
(for p < 1e-5, 1e-4 on p would need t to ~1e-6). Known mismatches of other engines (their
documented limitations) are listed in KNOWN_BY_ENGINE (xfail, strict).
"""

from __future__ import annotations

import functools
import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
import crossed.engines
from crossed.engines import AVAILABLE
from reference import (
    CRIT_SLACK,
    as_array,
    as_list,
    as_matrix,
    assert_theta_well_determined,
    case_names,
    explained_by_optimum,
    fit_case,
    load_case,
    r_answers,
)

ENGINES = list(AVAILABLE)
CASES = case_names()
# InstEval (73k rows): 6-11 s for the native fit on the 2-core machines; marked slow so it
# can be deselected locally (-m "not slow") but it is part of the default run and of CI.
SLOW = {"insteval_crossed"}
# (engine, case) pairs not run at all, with the reason (the suite must stay fast)
NOT_RUN: dict[tuple[str, str], str] = {
    ("lme4", "insteval_crossed"): "lme4 takes 55-143 s on InstEval (issue 2's timing table)",
}


class _Never(Exception):
    pass


# an engine that cannot express a case, or whose software is missing, says so: skipped
_CANNOT = tuple(getattr(crossed.engines, n, _Never)
                for n in ("UnsupportedModelError", "EngineUnavailableError"))

CRIT_RTOL = 1e-6
FIXEF_RTOL = 1e-6
SE_RTOL = 1e-4
SIGMA_RTOL = 1e-4
THETA_RTOL, THETA_ATOL = 1e-3, 1e-4
VC_RTOL = 1e-4
DF_RTOL = 1e-3
P_RTOL = 1e-4
T_RTOL = 1e-4
RANEF_RTOL = 1e-4
BOUNDARY_FLOOR = 1e-4  # times sigma_R: modes and SDs of a term whose theta is on the boundary
TIGHT_RTOL = 1e-4  # Satterthwaite df, t and p against the tightly converged lme4
TIGHT_THETA_RTOL, TIGHT_THETA_ATOL = 1e-4, 1e-5

# Per-engine tolerances (issue 4), overriding the names above. statsmodels: criterion 1e-5,
# fixed effects 1e-5, SEs 1e-3 (the issue); what follows from them: t values 1e-3 (t = b/SE);
# variance components and conditional modes 1e-3 (statsmodels stops at its own gradient
# tolerance in a different parameterisation: theta agrees to ~1e-4 absolute); p-values 5e-2
# relative (p's relative error is ~t^2 (df+1)/(df+t^2) times t's: the intercepts here have
# |t| of 10-70); against the tightly converged lme4 the same (df 1e-3, t 1e-3, p 5e-2, theta
# 1e-3 relative + 1e-4 absolute, lme4's singularity threshold).
TOL_BY_ENGINE: dict[str, dict[str, float]] = {
    "statsmodels": dict(CRIT_RTOL=1e-5, FIXEF_RTOL=1e-5, SE_RTOL=1e-3, T_RTOL=1e-3,
                        VC_RTOL=1e-3, RANEF_RTOL=1e-3, P_RTOL=5e-2, TIGHT_RTOL=1e-3,
                        TIGHT_THETA_RTOL=1e-3, TIGHT_THETA_ATOL=1e-4),
}


# engines whose reported vcov is not lme4's formula at their theta (docs/engines.md): a
# difference from R is theirs, never explained by where R's optimiser stopped
OWN_VCOV = {"statsmodels"}


def explained(engine: str, fit, r: dict, check) -> None:
    """``check(fit)``, or (engines using lme4's formulas) a difference explained by R's
    inexact optimum (reference.explained_by_optimum)."""
    if engine in OWN_VCOV:
        check(fit)
    else:
        explained_by_optimum(fit, r, check)


def tol(engine: str, name: str) -> float:
    """The tolerance ``name`` for ``engine`` (TOL_BY_ENGINE, else the module constant)."""
    return TOL_BY_ENGINE.get(engine, {}).get(name, globals()[name])


# (case, quantity) -> reason for the native engine; quantity is the name of the test function
# without "test_". Other engines: KNOWN_BY_ENGINE[engine][(case, quantity)].
KNOWN: dict[tuple[str, str], str] = {}
_SM_VCOV = (
    "documented statsmodels limitation (docs/engines.md): statsmodels' covariance of the fixed "
    "effects is the beta block of the inverse observed information over (beta, covariance "
    "parameters), lme4's is sigma^2 (X'V^-1 X)^-1; on this random-slope model the cross terms "
    "move the SEs by 5e-3 relative ((Intercept) 0.070722 vs R 0.070563, Homesize3 0.105909 vs "
    "0.105378), and df, t and p follow. test_agreement.py asserts the limitation: lme4's "
    "formula at statsmodels' theta gives R's SEs to 1e-4")
KNOWN_BY_ENGINE: dict[str, dict[tuple[str, str], str]] = {
    "native": KNOWN,
    "statsmodels": {("carrots_slopes", q): _SM_VCOV for q in (
        "std_errors", "vcov", "coef_table_layout", "satterthwaite_df", "t_values", "p_values")},
}
# (engine, case) -> what the engine's UnsupportedModelError says (asserted by
# test_cannot_express; the case's other tests skip with that message)
CANNOT_EXPRESS: dict[tuple[str, str], str] = {
    ("statsmodels", "blurb_ccmem_slopes"): "dense per-group matrices",
    ("statsmodels", "insteval_crossed"): "dense matrix per group",
}


def params(quantity: str, only: set[str] | None = None) -> list:
    """(engine, case) parameters for one quantity, with the slow and known-mismatch marks."""
    out = []
    for engine in ENGINES:
        known = KNOWN_BY_ENGINE.get(engine, {})
        for case in CASES:
            if only is not None and case not in only:
                continue
            marks = []
            if case in SLOW:
                marks.append(pytest.mark.slow)
            if (engine, case) in NOT_RUN:
                marks.append(pytest.mark.skip(reason=NOT_RUN[(engine, case)]))
            elif (case, quantity) in known:
                marks.append(pytest.mark.xfail(strict=True, reason=known[(case, quantity)]))
            out.append(pytest.param(engine, case, marks=marks, id=f"{engine}-{case}"))
    return out


def cases_with(key: str) -> set[str]:
    return {c for c in CASES if r_answers(c).get(key) is not None}


@functools.cache
def _fitted(engine: str, case: str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = fit_case(case, engine=engine)
        except _CANNOT as exc:
            return None, exc
    return fit, tuple(caught)


def fitted(engine: str, case: str) -> tuple[crossed.LmerFit, tuple[warnings.WarningMessage, ...]]:
    """Each (engine, case) is fitted once per session; the warnings it raised are kept.

    An engine that raises UnsupportedModelError / EngineUnavailableError is skipped, with
    its message as the reason (DESIGN.md: engines say clearly what they cannot do).
    """
    fit, caught = _fitted(engine, case)
    if fit is None:
        if isinstance(caught, crossed.EngineUnavailableError) and os.environ.get("CI"):
            pytest.fail(f"CI must provide engine {engine!r}: {caught}")
        pytest.skip(f"engine {engine!r} cannot fit {case}: {caught}")
    return fit, caught


def r_se(r: dict) -> np.ndarray:
    return np.sqrt(np.diag(as_matrix(r["vcov"])))


def assert_close(ours, theirs, rtol, atol=0.0, what="", labels=None):
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs R {theirs.shape}"
    tol = rtol * np.abs(theirs) + atol
    bad = ~(np.abs(ours - theirs) <= tol)
    if np.any(bad):
        idx = np.flatnonzero(bad.ravel())
        lab = [str(labels[i]) if labels is not None else str(i) for i in idx]
        detail = "; ".join(
            f"{lb}: ours {o:.10g} R {t:.10g} (|diff| {abs(o - t):.2e}, tol {tl:.2e})"
            for lb, o, t, tl in zip(lab, ours.ravel()[idx], theirs.ravel()[idx],
                                    np.broadcast_to(tol, theirs.shape).ravel()[idx],
                                    strict=True))
        raise AssertionError(f"{what} differs from R: {detail}")


# ---------------------------------------------------------------- criterion and likelihood
@pytest.mark.parametrize("engine,case", params("criterion"))
def test_criterion(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)
    assert fit.reml == r["reml"]
    crit_rtol = tol(engine, "CRIT_RTOL")
    assert_close(fit.deviance, r["deviance"], crit_rtol, what="REML/ML criterion")
    # never a worse optimum than lme4's (lower is better): at most 1e-9 relative above it for
    # engines that optimise lme4's criterion to its optimum (issue 14), under any BLAS kernel
    slack = CRIT_SLACK if engine not in TOL_BY_ENGINE else crit_rtol
    assert fit.deviance <= r["deviance"] + slack * abs(r["deviance"]), (
        f"criterion {fit.deviance!r} worse than lme4's {r['deviance']!r} by more than {slack}")


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow] if c in SLOW else [])
                                  for c in CASES])
def test_criterion_at_r_theta(case):
    """The profiled criterion itself (no optimiser) reproduces R's at R's theta (1e-8).

    Engine independent: the penalised least squares problem of the design (LmerFit.pls).
    """
    from crossed.model.pls import profiled_deviance

    fit, _ = fitted("native", case)
    r = r_answers(case)
    n, p = fit.design.X.shape
    dev = profiled_deviance(fit.pls.factor(as_array(r["theta"])), n, p, fit.reml)
    assert_close(dev, r["deviance"], 1e-8, what="criterion at R's theta")


@pytest.mark.parametrize("engine,case", params("loglik_aic_bic"))
def test_loglik_aic_bic(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)
    crit_rtol = tol(engine, "CRIT_RTOL")
    assert_close(fit.loglik, r["loglik"], crit_rtol, what="logLik")
    assert_close(fit.aic, r["aic"], crit_rtol, what="AIC")
    assert_close(fit.bic, r["bic"], crit_rtol, what="BIC")
    # the parameter count (fixed effects + theta + sigma) exactly
    assert round((fit.aic + 2 * fit.loglik) / 2) == round((r["aic"] + 2 * r["loglik"]) / 2)
    assert fit.bic + 2 * fit.loglik == pytest.approx(r["bic"] + 2 * r["loglik"], rel=1e-8)


# ---------------------------------------------------------------- fixed effects
@pytest.mark.parametrize("engine,case", params("fixef_names"))
def test_fixef_names(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)
    assert list(fit.fixef.index) == as_list(r["fixef_names"])
    assert list(fit.vcov.index) == list(fit.vcov.columns) == as_list(r["fixef_names"])


@pytest.mark.parametrize("engine,case", params("fixef"))
def test_fixef(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)
    est = np.array([row["Estimate"] for row in r["coef_satterthwaite"]])
    scale = np.maximum(np.abs(est), r_se(r))
    assert isinstance(fit.fixef, pd.Series)

    def check(fit):
        assert_close(fit.fixef.to_numpy(), est, 0.0, tol(engine, "FIXEF_RTOL") * scale,
                     what="fixef", labels=list(fit.fixef.index))
    explained(engine, fit, r, check)


@pytest.mark.parametrize("engine,case", params("std_errors"))
def test_std_errors(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)

    def check(fit):
        assert_close(np.sqrt(np.diag(fit.vcov.to_numpy())), r_se(r), tol(engine, "SE_RTOL"),
                     what="standard errors", labels=list(fit.fixef.index))
    explained(engine, fit, r, check)


@pytest.mark.parametrize("engine,case", params("vcov"))
def test_vcov(engine, case):
    fit, _ = fitted(engine, case)
    V = fit.vcov.to_numpy()
    VR = as_matrix(as_matrix(r_answers(case)["vcov"]))
    np.testing.assert_allclose(V, V.T, rtol=1e-12, atol=0)
    d = np.sqrt(np.outer(np.diag(VR), np.diag(VR)))

    def check(fit):
        assert_close(fit.vcov.to_numpy(), VR, 0.0, 2 * tol(engine, "SE_RTOL") * d, what="vcov")
    explained(engine, fit, r_answers(case), check)


@pytest.mark.parametrize("engine,case", params("sigma"))
def test_sigma(engine, case):
    fit, _ = fitted(engine, case)

    def check(fit):
        assert_close(fit.sigma, r_answers(case)["sigma"], tol(engine, "SIGMA_RTOL"),
                     what="sigma")
    explained(engine, fit, r_answers(case), check)


# ---------------------------------------------------------------- random-effects parameters
@pytest.mark.parametrize("engine,case", params("theta_names"))
def test_theta_names(engine, case):
    fit, _ = fitted(engine, case)
    assert list(fit.theta_names) == as_list(r_answers(case)["theta_names"])
    assert len(fit.theta) == len(fit.theta_names)


@pytest.mark.parametrize("engine,case", params("theta"))
def test_theta(engine, case):
    fit, _ = fitted(engine, case)

    def check(fit):
        assert_close(fit.theta, as_array(r_answers(case)["theta"]), tol(engine, "THETA_RTOL"),
                     tol(engine, "THETA_ATOL"), what="theta", labels=list(fit.theta_names))
    explained(engine, fit, r_answers(case), check)


def _r_group(name: str, ours: str) -> bool:
    """R's VarCorr names: ':' -> '.' and '.1', '.2', ... suffixes for the terms of ``||``."""
    if name == ours:
        return True
    return re.sub(r"\.\d+$", "", name) in (ours, ours.replace(":", "."))


@pytest.mark.parametrize("engine,case", params("varcorr"))
def test_varcorr(engine, case):
    fit, _ = fitted(engine, case)
    r = r_answers(case)
    def check(fit):
        vc = fit.varcorr()
        assert list(vc.columns) == ["group", "term1", "term2", "variance_or_cov", "sd_or_cor"]
        rows = r["varcorr"]
        assert len(vc) == len(rows), vc
        s2 = r["sigma"] ** 2
        vc_rtol = tol(engine, "VC_RTOL")
        for (_, ours), theirs in zip(vc.iterrows(), rows, strict=True):
            label = f"{theirs['grp']}/{theirs.get('var1')}/{theirs.get('var2')}"
            assert _r_group(theirs["grp"], ours["group"]), (ours["group"], theirs["grp"])
            t1, t2 = theirs.get("var1"), theirs.get("var2")
            assert (ours["term1"] if pd.notna(ours["term1"]) else None) == t1, label
            assert (ours["term2"] if pd.notna(ours["term2"]) else None) == t2, label
            is_cor = t2 is not None
            assert_close(ours["variance_or_cov"], theirs["vcov"], vc_rtol, vc_rtol * s2,
                         what=f"variance/covariance {label}")
            assert_close(ours["sd_or_cor"], theirs["sdcor"], vc_rtol,
                         vc_rtol if is_cor else vc_rtol * r["sigma"], what=f"sd/cor {label}")
    explained(engine, fit, r, check)


# ---------------------------------------------------------------- counts and flags
@pytest.mark.parametrize("engine,case", params("nobs"))
def test_nobs(engine, case):
    fit, _ = fitted(engine, case)
    assert fit.nobs == r_answers(case)["nobs"]
    assert len(fit.fitted()) == fit.nobs


@pytest.mark.parametrize("engine,case", params("ngroups"))
def test_ngroups(engine, case):
    fit, _ = fitted(engine, case)
    theirs = r_answers(case)["ngrps"]
    assert dict(fit.ngroups) == dict(theirs)
    assert list(fit.ngroups) == list(theirs)  # lme4's order of the grouping factors


@pytest.mark.parametrize("engine,case", params("singular"))
def test_singular(engine, case):
    fit, caught = fitted(engine, case)
    r = r_answers(case)
    if engine in DEFAULT_STOP_ONLY and fit.is_singular is not bool(r["singular"]):
        # lme4's own default stop (the lme4 engine) on a flat criterion: the flag may differ
        # from the reference's only where this stop is the inexact one (above native's
        # optimum, whose flag is R's) and consistent with this fit's own theta
        native, _ = fitted("native", case)
        assert native.is_singular is bool(r["singular"])
        assert fit.deviance > native.deviance
        bounded = np.isfinite(fit.design.random.theta_lower)
        assert fit.is_singular is bool(np.any(fit.theta[bounded] < 1e-4))
        return
    assert fit.is_singular is bool(r["singular"])
    warned = [w for w in caught if issubclass(w.category, crossed.SingularFitWarning)]
    assert bool(warned) is bool(r["singular"]), [str(w.message) for w in caught]
    assert any("singular" in m for m in fit.messages) is bool(r["singular"])


@pytest.mark.parametrize("engine,case", params("converged"))
def test_converged(engine, case):
    """lme4 reported no convergence problem on any case: neither may we."""
    fit, caught = fitted(engine, case)
    r_msgs = as_list(r_answers(case).get("optimizer_messages"))
    r_converged = not any("converge" in m for m in r_msgs)
    assert fit.converged is r_converged, fit.messages
    conv = [str(w.message) for w in caught if issubclass(w.category, crossed.ConvergenceWarning)]
    assert (not conv) is r_converged, conv


# ---------------------------------------------------------------- conditional modes
@pytest.mark.parametrize("engine,case", params("ranef", only=cases_with("ranef")))
def test_ranef(engine, case):
    fit, _ = fitted(engine, case)
    def check(fit):
        re_tab = fit.ranef()
        assert list(re_tab.columns) == ["group", "level", "term", "estimate", "cond_sd"]
        groups = r_answers(case)["ranef"]
        sigma = r_answers(case)["sigma"]
        ranef_rtol = tol(engine, "RANEF_RTOL")
        assert list(dict.fromkeys(re_tab["group"])) == [g["group"] for g in groups]
        for g in groups:
            terms = as_list(g["terms"])
            levels = as_list(g["levels"])
            values = np.asarray(g["values"], dtype=float).reshape(len(levels), len(terms))
            csd = np.asarray(g["cond_sd"], dtype=float).reshape(len(levels), len(terms))
            sub = re_tab[re_tab["group"] == g["group"]]
            assert list(dict.fromkeys(sub["term"])) == terms
            for j, term in enumerate(terms):
                rows = sub[sub["term"] == term]
                assert [str(v) for v in rows["level"]] == levels, f"{g['group']}/{term} levels"
                if _on_boundary(case, g["group"], term):
                    mode_floor = sd_floor = BOUNDARY_FLOOR * sigma
                else:
                    mode_floor, sd_floor = ranef_rtol * np.max(np.abs(values[:, j])), 0.0
                assert_close(rows["estimate"].to_numpy(), values[:, j], ranef_rtol, mode_floor,
                             what=f"conditional modes {g['group']}/{term}", labels=levels)
                assert_close(rows["cond_sd"].to_numpy(), csd[:, j], ranef_rtol, sd_floor,
                             what=f"conditional SDs {g['group']}/{term}", labels=levels)
    explained(engine, fit, r_answers(case), check)


def _on_boundary(case: str, group: str, term: str) -> bool:
    """R's SD of this random effect is below 1e-4 sigma (theta on lme4's boundary)."""
    r = r_answers(case)
    for row in r["varcorr"]:
        if _r_group(row["grp"], group) and row.get("var1") == term and row.get("var2") is None:
            return row["sdcor"] < 1e-4 * r["sigma"]
    raise AssertionError(f"no VarCorr row for {group}/{term}")


# ---------------------------------------------------------------- lmerTest's coefficient table
def _coef_table(engine, case, ddf):
    fit, _ = fitted(engine, case)
    return fit, fit.coef_table(ddf=ddf)


def _check_coef_table(engine, case, check):
    """``check(table)`` on our Satterthwaite table, explained by R's optimum where it fails."""
    fit, _ = fitted(engine, case)
    explained(engine, fit, r_answers(case), lambda f: check(f.coef_table(ddf="satterthwaite")))


def _p_tolerance(engine, col, t_rtol: float | None = None,
                 df_rtol: float | None = None) -> np.ndarray:
    """1e-4 relative, or what the t and df tolerances imply for p, whichever is larger
    (for p < 1e-5, 1e-4 on p would need t and df to ~1e-6)."""
    from scipy import stats

    t, df, p = np.abs(col["t value"]), col["df"], col["Pr(>|t|)"]
    t_rtol = tol(engine, "T_RTOL") if t_rtol is None else t_rtol
    df_rtol = tol(engine, "DF_RTOL") if df_rtol is None else df_rtol
    implied = np.zeros_like(p)
    for st in (1 - t_rtol, 1 + t_rtol):
        for sd in (1 - df_rtol, 1 + df_rtol):
            implied = np.maximum(implied, np.abs(2 * stats.t.sf(t * st, df * sd) - p))
    return np.maximum(tol(engine, "P_RTOL") * p, implied)


def _r_coefs(case: str) -> tuple[list[str], dict[str, np.ndarray]]:
    rows = r_answers(case)["coef_satterthwaite"]
    cols = {k: np.array([row[k] for row in rows], dtype=float)
            for k in ("Estimate", "Std. Error", "df", "t value", "Pr(>|t|)")}
    return [row["term"] for row in rows], cols


@pytest.mark.parametrize("engine,case", params("coef_table_layout"))
def test_coef_table_layout(engine, case):
    fit, tab = _coef_table(engine, case, "satterthwaite")
    terms, col = _r_coefs(case)
    assert list(tab.columns) == ["term", "estimate", "std_error", "df", "statistic", "p_value",
                                 "conf_low", "conf_high"]
    assert list(tab["term"]) == terms
    assert tab.attrs.get("conf_level") == 0.95
    # estimates and SEs are those of fixef/vcov (compared with R in test_fixef/test_std_errors)
    _check_coef_table(engine, case, lambda tab: assert_close(
        tab["std_error"], col["Std. Error"], tol(engine, "SE_RTOL"), what="std_error",
        labels=terms))


@pytest.mark.parametrize("engine,case", params("satterthwaite_df"))
def test_satterthwaite_df(engine, case):
    terms, col = _r_coefs(case)
    _check_coef_table(engine, case, lambda tab: assert_close(
        tab["df"], col["df"], tol(engine, "DF_RTOL"), what="Satterthwaite df", labels=terms))


@pytest.mark.parametrize("engine,case", params("t_values"))
def test_t_values(engine, case):
    terms, col = _r_coefs(case)
    _check_coef_table(engine, case, lambda tab: assert_close(
        tab["statistic"], col["t value"], tol(engine, "T_RTOL"), what="t value", labels=terms))


@pytest.mark.parametrize("engine,case", params("p_values"))
def test_p_values(engine, case):
    terms, col = _r_coefs(case)
    _check_coef_table(engine, case, lambda tab: assert_close(
        tab["p_value"], col["Pr(>|t|)"], 0.0, _p_tolerance(engine, col), what="p-value",
        labels=terms))


@pytest.mark.parametrize("engine,case", params("coef_table_consistency"))
def test_coef_table_consistency(engine, case):
    """Internal consistency of both tables: t = est/se, p and CI from t(df) / normal."""
    from scipy import stats

    fit, tab = _coef_table(engine, case, "satterthwaite")
    np.testing.assert_allclose(tab["estimate"], fit.fixef.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(tab["std_error"], np.sqrt(np.diag(fit.vcov)), rtol=1e-10)
    np.testing.assert_allclose(tab["statistic"], tab["estimate"] / tab["std_error"], rtol=1e-12)
    np.testing.assert_allclose(tab["p_value"], 2 * stats.t.sf(np.abs(tab["statistic"]), tab["df"]),
                               rtol=1e-10)
    q = stats.t.ppf(0.975, tab["df"])
    np.testing.assert_allclose(tab["conf_low"], tab["estimate"] - q * tab["std_error"], rtol=1e-10)
    np.testing.assert_allclose(tab["conf_high"], tab["estimate"] + q * tab["std_error"], rtol=1e-10)
    assert np.all(tab["df"] > 0)
    none = fit.coef_table(ddf="none")
    assert np.all(np.isinf(none["df"]))
    np.testing.assert_allclose(none["p_value"], 2 * stats.norm.sf(np.abs(none["statistic"])),
                               rtol=1e-10, atol=1e-300)
    z = stats.norm.ppf(0.975)
    np.testing.assert_allclose(none["conf_high"], none["estimate"] + z * none["std_error"],
                               rtol=1e-10)


# ---------------------------------------------------------------- tightly converged lme4
TIGHT = {f"tight_{c}": c for c in ("carrots_slopes", "blurb_ccmem_slopes", "sleepstudy_ml",
                                    "penicillin_crossed", "exist_mono_nested", "ner_crossed")}
# extra.R's lmerControl(optCtrl = ...) for the tight_* entries
TIGHT_CONTROL = {"xtol_abs": 1e-13, "ftol_abs": 1e-15, "xtol_rel": 0.0, "maxeval": 1_000_000}
TIGHT_KNOWN: dict[str, str] = {}  # native engine


TIGHT_KNOWN_BY_ENGINE = {
    "native": TIGHT_KNOWN,
    "statsmodels": {"tight_carrots_slopes": _SM_VCOV},
}
# engines that stop by their own default rule (they take no tight settings): where their
# numbers differ from the tight optimum's, their optimum must be the inexact one
DEFAULT_STOP_ONLY = {"lme4"}


def _tight_marks(engine: str, name: str) -> list:
    known = TIGHT_KNOWN_BY_ENGINE.get(engine, {})
    if name not in known or (engine, TIGHT[name]) in CANNOT_EXPRESS:
        return []
    return [pytest.mark.xfail(strict=True, reason=known[name])]


@pytest.mark.parametrize("engine,name", [
    pytest.param(e, n, id=f"{e}-{n}", marks=_tight_marks(e, n)) for e in ENGINES for n in TIGHT])
def test_matches_tightly_converged_lme4(engine, name, extra):
    """Against lme4 rerun with xtol_abs 1e-13, ftol_abs 1e-15, xtol_rel 0 (extra.R), where
    R's default stopping leaves the reference itself inexact: criterion and fixef 1e-6, theta
    1e-4. The native engine runs with the same settings; the others with their defaults."""
    if engine == "native":
        fit = fit_case(TIGHT[name], control=crossed.LmerControl(**TIGHT_CONTROL))
    else:
        fit, _ = fitted(engine, TIGHT[name])
    t = extra[name]
    if engine in DEFAULT_STOP_ONLY:
        try:
            _check_tight(engine, fit, t)
        except AssertionError as first:
            # lme4's default stop (the lme4 engine) is inexact: never below the tight optimum,
            # theta equal in every well-determined direction
            assert fit.deviance >= t["deviance"] - CRIT_SLACK * abs(t["deviance"]), first
            assert_theta_well_determined(fit, as_array(t["theta"]), t["deviance"])
        return
    _check_tight(engine, fit, t)


def _check_tight(engine, fit, t):
    crit_rtol, rtol = tol(engine, "CRIT_RTOL"), tol(engine, "TIGHT_RTOL")
    assert fit.deviance <= t["deviance"] + crit_rtol * abs(t["deviance"])
    assert_close(fit.deviance, t["deviance"], crit_rtol, what="criterion")
    scale = np.maximum(np.abs(as_array(t["fixef"])), as_array(t["se"]))
    assert_close(fit.fixef.to_numpy(), as_array(t["fixef"]), 0.0,
                 tol(engine, "FIXEF_RTOL") * scale, "fixef", list(fit.fixef.index))
    assert_close(fit.theta, as_array(t["theta"]), tol(engine, "TIGHT_THETA_RTOL"),
                 tol(engine, "TIGHT_THETA_ATOL"), "theta", list(fit.theta_names))
    # Satterthwaite against the tight optimum: df and t 1e-4; p 1e-4 or what df and t's 1e-4
    # imply (p's relative error is ~t^2 times t's: tight_penicillin_crossed's p = 3.6e-7
    # moves by 1.1e-4 between two optima whose criteria differ by 1e-10)
    tab = fit.coef_table()
    rows = t["coef_satterthwaite"]
    terms = [row["term"] for row in rows]
    assert list(tab["term"]) == terms
    assert_close(tab["df"], [row["df"] for row in rows], rtol, what="df", labels=terms)
    assert_close(tab["statistic"], [row["t value"] for row in rows], rtol, what="t", labels=terms)
    col = {k: np.array([row[k] for row in rows], dtype=float)
           for k in ("t value", "df", "Pr(>|t|)")}
    assert_close(tab["p_value"], col["Pr(>|t|)"], 0.0,
                 _p_tolerance(engine, col, t_rtol=rtol, df_rtol=rtol), what="p", labels=terms)




def test_engine_list_is_the_public_one():
    assert "native" in ENGINES
    with pytest.raises(ValueError, match="unknown engine"):
        case = load_case("dyestuff")
        crossed.lmer(case.formula, case.data, engine="no-such-engine")


@pytest.mark.parametrize("engine,case", [
    pytest.param(e, c, id=f"{e}-{c}", marks=[pytest.mark.slow] if c in SLOW else [])
    for (e, c) in CANNOT_EXPRESS if e in ENGINES])
def test_cannot_express(engine, case):
    """The cases an engine cannot fit raise UnsupportedModelError with its own message."""
    fit, exc = _fitted(engine, case)
    assert fit is None and isinstance(exc, crossed.UnsupportedModelError), (fit, exc)
    assert CANNOT_EXPRESS[(engine, case)] in str(exc)
    assert "engine='native'" in str(exc)  # and it suggests another engine
