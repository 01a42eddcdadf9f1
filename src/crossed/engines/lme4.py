"""The lme4 engine: R's ``lme4::lmer`` through rpy2, returning crossed's fit result.

Needs R (4.2 tested) with the R package lme4 (lmerTest for :func:`lmertest_tables`,
pbkrtest for its Kenward-Roger tables) and the Python package rpy2 (3.5.x for R 4.2;
rpy2 3.6 needs R >= 4.3): ``pip install 'crossed[r]'``. On Debian::

    apt-get install -y --no-install-recommends r-base-core r-cran-lme4 r-cran-lmertest \\
        r-cran-pbkrtest

Everything reported is lme4's own: β, vcov, θ, σ, the REML criterion (or −2 logLik), the
spherical random effects u, ``isSingular`` and the convergence messages. lme4 is given the
design itself: the response, each fixed-effects column and each random-effects column as a
numeric variable and each grouping factor with crossed's levels, in a formula such as
``.y ~ 0 + .x0 + .x1 + (1 + .z0_1 | .g0)``, so that it fits exactly the model of the
design (also the reduced, subset and simulated designs of ranova, refit and the bootstrap,
and ``||`` on factors, which crossed expands as afex does). lme4 keeps the terms in the
design's order (already sorted by number of levels), so θ, β and u map back by position.
:func:`lmertest_tables` instead refits the formula as written on the design's data, so that
lmerTest's ANOVA sees the model terms.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design import Design
from crossed.engines.errors import EngineUnavailableError, UnsupportedModelError
from crossed.model.control import LmerControl
from crossed.model.convergence import ConvergenceStatus
from crossed.model.result import LmerResult
from crossed.model.status import SINGULAR_MESSAGE

__all__ = ["INSTALL_R", "INSTALL_RPY2", "R_PACKAGES_DEBIAN", "assemble_fit",
           "design_to_r", "fit_lme4", "info_from_r", "lme4_issue", "lmertest_tables", "r_session",
           "to_r_frame"]

R_PACKAGES_DEBIAN = {"lme4": "r-cran-lme4", "lmerTest": "r-cran-lmertest",
                     "pbkrtest": "r-cran-pbkrtest"}
INSTALL_R = ("apt-get install -y --no-install-recommends r-base-core r-cran-lme4 "
             "r-cran-lmertest r-cran-pbkrtest (Debian/Ubuntu), or R from r-project.org "
             "and install.packages(c('lme4', 'lmerTest', 'pbkrtest')) in R")
INSTALL_RPY2 = "pip install 'crossed[r]' (rpy2 >= 3.5, < 3.6 for R 4.2; rpy2 3.6 needs R >= 4.3)"

_R_CODE = r"""
crossed_extract <- function(fit, msgs, secs) {
  cnms <- fit@cnms
  flist <- lme4::getME(fit, "flist")
  fe <- lme4::fixef(fit)
  V <- as.matrix(stats::vcov(fit))
  th <- lme4::getME(fit, "theta")
  conv <- unlist(fit@optinfo$conv$lme4$messages)
  list(
    fixef = unname(as.numeric(fe)), fixef_names = names(fe),
    vcov = as.numeric(V), theta = unname(as.numeric(th)), theta_names = names(th),
    sigma = stats::sigma(fit), reml = lme4::isREML(fit),
    criterion = if (lme4::isREML(fit)) lme4::REMLcrit(fit) else stats::deviance(fit),
    u = as.numeric(lme4::getME(fit, "u")),
    term_groups = names(cnms),
    term_columns = lapply(unname(cnms), as.character),
    term_levels = lapply(names(cnms), function(g) as.character(levels(flist[[g]]))),
    singular = lme4::isSingular(fit),
    conv_messages = if (is.null(conv)) character(0) else as.character(conv),
    messages = as.character(msgs), seconds = secs,
    optimizer = as.character(fit@optinfo$optimizer), feval = as.numeric(fit@optinfo$feval)
  )
}
crossed_lmer <- function(formula, data, REML) {
  msgs <- character(0)
  t0 <- proc.time()[["elapsed"]]
  fit <- withCallingHandlers(
    lme4::lmer(stats::as.formula(formula), data = data, REML = REML),
    warning = function(w) {
      msgs <<- c(msgs, conditionMessage(w)); invokeRestart("muffleWarning")
    },
    message = function(m) {
      msgs <<- c(msgs, trimws(conditionMessage(m))); invokeRestart("muffleMessage")
    })
  secs <- proc.time()[["elapsed"]] - t0
  list(fit = fit, info = crossed_extract(fit, msgs, secs))
}
crossed_lmertest <- function(fit, ddf, type) {
  m <- suppressMessages(lmerTest::as_lmerModLmerTest(fit))
  co <- summary(m, ddf = ddf)$coefficients
  an <- stats::anova(m, type = type, ddf = ddf)
  list(coef = as.numeric(as.matrix(co)), coef_rows = rownames(co), coef_cols = colnames(co),
       anova = as.numeric(as.matrix(an)), anova_rows = rownames(an),
       anova_cols = colnames(an))
}
crossed_is_mermod <- function(x) inherits(x, "merMod")
crossed_is_lmermod <- function(x) inherits(x, "lmerMod")
"""


_CHILD_ENV = ("LD_LIBRARY_PATH",)
"""Environment variables R's start-up changes that only child processes read."""


def _restore_environment(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class _R:
    """The embedded R session: rpy2's ``robjects`` and crossed's R helper functions."""

    def __init__(self) -> None:
        if not (os.environ.get("R_HOME") or shutil.which("R")):
            raise EngineUnavailableError(
                f"the lme4 engine needs R, which was not found (no R on PATH, R_HOME unset): "
                f"install {INSTALL_R}; then {INSTALL_RPY2}"
            )
        # R's start-up (etc/ldpaths) prepends its library folders, the system's among them,
        # to LD_LIBRARY_PATH in this process's environment. R has loaded its libraries by
        # then; the variable only reaches child processes, where it makes a Python built
        # with a shared libpython load the system's libpython instead of its own (a Dask
        # worker started after an lme4 fit then fails to import ssl). It is put back.
        saved = {k: os.environ.get(k) for k in _CHILD_ENV}
        try:
            import rpy2.robjects as ro
        except ImportError as exc:
            raise EngineUnavailableError(
                f"the lme4 engine needs the Python package rpy2 ({exc}): {INSTALL_RPY2}"
            ) from exc
        except Exception as exc:  # rpy2 present but libR cannot be loaded
            raise EngineUnavailableError(
                f"rpy2 could not start R ({type(exc).__name__}: {exc}): check that R is "
                f"installed ({INSTALL_R}) and that rpy2 matches it ({INSTALL_RPY2})"
            ) from exc
        finally:
            _restore_environment(saved)
        self.ro = ro
        self.require("lme4")
        ro.r(_R_CODE)
        self.lmer = ro.globalenv["crossed_lmer"]
        self.extract = ro.globalenv["crossed_extract"]
        self.lmertest = ro.globalenv["crossed_lmertest"]
        self.is_mermod = ro.globalenv["crossed_is_mermod"]
        self.is_lmermod = ro.globalenv["crossed_is_lmermod"]

    def require(self, package: str) -> None:
        """Raise naming the Debian package (and the R command) when ``package`` is missing."""
        ok = self.ro.r(
            f"isTRUE(suppressWarnings(requireNamespace('{package}', quietly = TRUE)))")[0]
        if not ok:
            deb = R_PACKAGES_DEBIAN.get(package, f"r-cran-{package.lower()}")
            raise EngineUnavailableError(
                f"the R package {package} is not installed: apt-get install -y "
                f"--no-install-recommends {deb} (Debian/Ubuntu), or in R: "
                f"install.packages('{package}')"
            )


@functools.cache
def r_session() -> _R:
    """Start R once per process (a few seconds) and load crossed's helpers.

    Raises
    ------
    EngineUnavailableError
        Naming what to install when R, rpy2 or lme4 is missing.
    """
    return _R()


def _factor(ro, labels: np.ndarray, levels) -> object:
    return ro.FactorVector(ro.StrVector([str(v) for v in labels]),
                           levels=ro.StrVector([str(v) for v in levels]))


def _data_frame(ro, columns: list[tuple[str, object]]):
    columns = columns + [("check.names", ro.BoolVector([False])),
                         ("stringsAsFactors", ro.BoolVector([False]))]
    return ro.baseenv["data.frame"].rcall(columns, ro.globalenv)


def design_to_r(design: Design) -> tuple[object, str]:
    """The design as an R data.frame of numeric columns and factors, and its lme4 formula.

    Parameters
    ----------
    design : Design

    Returns
    -------
    data : rpy2.robjects.DataFrame
        ``.y`` (response), ``.x<j>`` (fixed-effects columns), ``.g<b>`` (grouping factor of
        block b, crossed's levels) and ``.z<i>_<j>`` (column j of random term i).
    formula : str
        e.g. ``".y ~ 0 + .x0 + .x1 + (1 + .z0_1 | .g0)"``, terms in the design's (lme4's)
        order; an intercept column of a random term is written ``1``.
    """
    ro = r_session().ro
    columns: list[tuple[str, object]] = [(".y", ro.FloatVector(design.y.tolist()))]
    xs = []
    for j in range(design.X.shape[1]):
        xs.append(f".x{j}")
        columns.append((xs[-1], ro.FloatVector(design.X[:, j].tolist())))
    blocks = design.random.blocks
    groups: dict[int, str] = {}
    terms = []
    for i, term in enumerate(design.random.terms):
        blk = blocks[term.block]
        if term.block not in groups:
            groups[term.block] = f".g{term.block}"
            labels = np.asarray(blk.levels, dtype=object)[blk.codes]
            columns.append((groups[term.block], _factor(ro, labels, blk.levels)))
        # an intercept is written as lme4's "1" (lme4 takes a slightly different path
        # for an all-ones variable: same optimum, other last digits)
        z0 = blk.Z[:, term.offset]
        zs = ["1"] if term.columns[0] == "(Intercept)" and np.all(z0 == 1.0) else ["0"]
        for j in range(1 if zs == ["1"] else 0, len(term.columns)):
            zs.append(f".z{i}_{j}")
            columns.append((zs[-1], ro.FloatVector(blk.Z[:, term.offset + j].tolist())))
        terms.append(f"({' + '.join(zs)} | {groups[term.block]})")
    formula = ".y ~ " + " + ".join(["0", *xs, *terms])
    return _data_frame(ro, columns), formula


def to_r_frame(frame: pd.DataFrame):
    """An R data.frame of a prepared frame: categoricals become factors with their levels.

    Parameters
    ----------
    frame : pandas.DataFrame
        The design's frame (used columns, factors as pandas Categoricals).

    Returns
    -------
    rpy2.robjects.DataFrame
    """
    ro = r_session().ro
    columns = []
    for name in frame.columns:
        s = frame[name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            vec = _factor(ro, s.astype(str).to_numpy(), s.cat.categories)
        elif pd.api.types.is_bool_dtype(s):
            vec = ro.BoolVector(s.to_numpy().tolist())
        elif pd.api.types.is_numeric_dtype(s):
            vec = ro.FloatVector(np.asarray(s, dtype=float).tolist())
        else:
            vec = ro.StrVector(s.astype(str).tolist())
        columns.append((str(name), vec))
    return _data_frame(ro, columns)


def _r_list(res) -> dict[str, Any]:
    return dict(zip(res.names, list(res), strict=True))


def _num(x) -> np.ndarray:
    return np.asarray(list(x), dtype=float)


def _strs(x) -> list[str]:
    return [str(v) for v in x]


def info_from_r(r_info) -> dict[str, Any]:
    """Python values of ``crossed_extract``'s list."""
    d = _r_list(r_info)
    p = len(d["fixef"])
    return {
        "fixef": _num(d["fixef"]), "fixef_names": _strs(d["fixef_names"]),
        "vcov": _num(d["vcov"]).reshape((p, p), order="F"),
        "theta": _num(d["theta"]), "theta_names": _strs(d["theta_names"]),
        "sigma": float(d["sigma"][0]), "reml": bool(d["reml"][0]),
        "criterion": float(d["criterion"][0]), "u": _num(d["u"]),
        "term_groups": _strs(d["term_groups"]),
        "term_columns": [_strs(c) for c in d["term_columns"]],
        "term_levels": [_strs(lv) for lv in d["term_levels"]],
        "singular": bool(d["singular"][0]),
        "conv_messages": _strs(d["conv_messages"]), "messages": _strs(d["messages"]),
        "seconds": float(d["seconds"][0]), "optimizer": " ".join(_strs(d["optimizer"])),
        "feval": _num(d["feval"]),
    }


def _map_u(design: Design, info: dict[str, Any]) -> tuple[np.ndarray, ...] | None:
    """lme4's u (term by term, level-major) as crossed's blocks (levels, q); None when
    the level labels do not match."""
    blocks = design.random.blocks
    out = [np.zeros((b.nlevels, b.q)) for b in blocks]
    pos = 0
    for term, levels in zip(design.random.terms, info["term_levels"], strict=True):
        k = len(term.columns)
        vals = info["u"][pos:pos + len(levels) * k].reshape(len(levels), k)
        pos += len(levels) * k
        index = {lv: i for i, lv in enumerate(blocks[term.block].levels)}
        rows = [index.get(lv, -1) for lv in levels]
        if len(levels) != blocks[term.block].nlevels or min(rows, default=0) < 0:
            return None
        out[term.block][rows, term.offset:term.offset + k] = vals
    return tuple(out)


def assemble_fit(design: Design, info: dict[str, Any], engine: str, data_name: str,
                 seconds: float, positional: bool = False,
                 engine_info: dict[str, Any] | None = None) -> LmerResult:
    """crossed's fit result from lme4's values (checked against the design's layout).

    Parameters
    ----------
    design : Design
    info : dict
        From :func:`info_from_r`.
    engine : str
        ``"lme4"`` or ``"pymer4"``.
    data_name : str
    seconds : float
        Wall time of the fit, formula to result.
    positional : bool
        lme4 fitted :func:`design_to_r`'s variables: β, θ and the terms map by position
        (their names are ``.x0``, ``.g0``, ...). Otherwise (a user's formula, pymer4) the
        names must be crossed's.

    Returns
    -------
    LmerResult

    Raises
    ------
    RuntimeError
        When lme4's fixed-effect or θ names differ from crossed's design (e.g. other
        factor levels or contrasts), so that the numbers cannot be put side by side.
    """
    info = _checked_layout(design, info, positional)
    messages, status = _report_lme4_messages(design, info)
    u = _map_u(design, info)
    fit = LmerResult(
        design=design, reml=info["reml"], engine=engine, theta=info["theta"],
        beta=info["fixef"], sigma=info["sigma"], deviance=info["criterion"],
        vcov_beta=info["vcov"],
        u=u if u is not None else tuple(np.zeros((b.nlevels, b.q))
                                        for b in design.random.blocks),
        opt=None, is_singular=info["singular"], converged=status.converged,
        messages=tuple(messages), data_name=data_name, convergence=status,
        fit_seconds=seconds, engine_info={"r_seconds": info["seconds"],
                                          "r_optimizer": info["optimizer"],
                                          "r_feval": info["feval"], **(engine_info or {})},
    )
    if u is None:  # level labels differ: conditional modes from the PLS problem at θ
        _, u_pls = fit.pls.solve(fit.factor_at_optimum)
        fit = replace(fit, u=tuple(u_pls), messages=fit.messages + (
            "u computed from theta (lme4's level labels differ from crossed's)",))
    return fit


def _checked_layout(design: Design, info: dict[str, Any], positional: bool) -> dict[str, Any]:
    """``info`` checked against the design's fixed effects and θ (by position or by name);
    by position, the design's level labels are the terms' levels."""
    if positional:
        if (len(info["fixef"]) != design.X.shape[1]
                or len(info["theta"]) != design.random.ntheta):
            raise RuntimeError(
                f"lme4 dropped columns or terms: {len(info['fixef'])} fixed effects and "
                f"{len(info['theta'])} theta for crossed's {design.X.shape[1]} and "
                f"{design.random.ntheta}"
            )
        return {**info, "term_levels": [list(design.random.blocks[t.block].levels)
                                        for t in design.random.terms]}
    if info["fixef_names"] != list(design.fixed.names):
        raise RuntimeError(
            f"lme4's fixed effects {info['fixef_names']} differ from crossed's "
            f"{list(design.fixed.names)}: check the factor levels and reference levels"
        )
    if info["theta_names"] != list(design.random.theta_names):
        raise RuntimeError(
            f"lme4's theta {info['theta_names']} differs from crossed's "
            f"{list(design.random.theta_names)}"
        )
    return info


def _report_lme4_messages(design: Design, info: dict[str, Any],
                          ) -> tuple[list[str], ConvergenceStatus]:
    """The fit's messages from lme4's, each warned once (convergence messages as
    ConvergenceWarning, the singular fit as SingularFitWarning, as the native engine
    does), and the status they amount to."""
    from crossed.model.finish import ConvergenceWarning, SingularFitWarning

    messages: list[str] = []
    if design.n_dropped:
        messages.append(f"{design.n_dropped} rows dropped for missing values")
    # lme4 lists the singular-fit message among its convergence messages: reported once
    # below, as a SingularFitWarning (as the native engine does)
    singular_msg = SINGULAR_MESSAGE
    conv = [m for m in info["conv_messages"] if not _is_singular_message(m)]
    notes = [m for m in info["messages"] if m not in conv and not _is_singular_message(m)]
    for m in notes:
        messages.append(f"lme4: {m}")
        category = UserWarning if lme4_issue(m) is None else ConvergenceWarning
        warn(f"lme4: {m}", category)
    for m in conv:
        messages.append(m)
        warn(m, ConvergenceWarning)
    status = ConvergenceStatus.combine(info["singular"], *map(lme4_issue, conv + notes))
    if info["singular"]:
        messages.append(singular_msg)
        warn(singular_msg, SingularFitWarning)
    return messages, status


# lme4's wording of each problem (its checkConv, checkHess and optwrap messages), in the
# order tried; the one place where lme4's text is read (R gives no structured status)
_LME4_ISSUES = (
    ("max|grad|", ConvergenceStatus.GRADIENT),             # checkConv, code -1
    ("max|relative grad|", ConvergenceStatus.GRADIENT),    # checkConv, code -2
    ("unable to evaluate scaled gradient", ConvergenceStatus.GRADIENT),  # code -1
    ("Gradient contains NAs", ConvergenceStatus.GRADIENT),  # code -5
    ("degenerate", ConvergenceStatus.HESSIAN),             # checkHess, code -3
    ("Problem with Hessian check", ConvergenceStatus.HESSIAN),  # checkHess, code -6
    ("MAXEVAL", ConvergenceStatus.MAX_EVALUATIONS),        # optwrap: "convergence code 5
    ("maximum number of function evaluations", ConvergenceStatus.MAX_EVALUATIONS),  # minqa
    ("converge", ConvergenceStatus.FAILED),                # any other failure to converge
)


def lme4_issue(message: str) -> ConvergenceStatus | None:
    """The problem one of lme4's warnings reports (:class:`ConvergenceStatus`), or None
    for a note that does not fail lme4's check (``Hessian is numerically singular``,
    ``Model is nearly unidentifiable``, rank-deficiency and scale notes)."""
    for wording, status in _LME4_ISSUES:
        if wording in message:
            return status
    return None


def _is_singular_message(message: str) -> bool:
    """lme4's ``boundary (singular) fit: see help('isSingular')``."""
    return message.startswith("boundary (singular) fit")


def fit_lme4(design: Design, reml: bool = True, control: LmerControl | None = None,
             data_name: str = "data") -> LmerResult:
    """Fit a design with R's ``lme4::lmer`` (its defaults: nloptwrap BOBYQA).

    Parameters
    ----------
    design : Design
    reml : bool
    control : LmerControl, optional
        Must be None (the native engine's optimiser settings).
    data_name : str

    Returns
    -------
    LmerResult
        ``engine="lme4"``; the R fit is kept for :func:`lmertest_tables`.

    Raises
    ------
    EngineUnavailableError
        When R, rpy2 or lme4 is missing (the message says what to install).
    """
    if control is not None:
        raise ValueError("control= sets the native engine's optimiser; the lme4 engine runs "
                         "lme4's defaults (pass control=None)")
    t0 = time.perf_counter()
    r = r_session()
    df, formula = design_to_r(design)
    res = r.lmer(formula, df, r.ro.BoolVector([bool(reml)]))
    info = info_from_r(res[1])
    return assemble_fit(design, info, "lme4", data_name, time.perf_counter() - t0,
                        positional=True)


def _formula_fit(fit: LmerResult):
    """lme4's fit of the formula as written on the fit's data (cached on the fit)."""
    if "r_formula_fit" in fit.engine_info:  # a pymer4 model's own R fit
        return fit.engine_info["r_formula_fit"]

    def compute():
        r = r_session()
        design = fit.design
        frame = design.frame.copy()
        if design.spec.response in frame.columns:
            frame[design.spec.response] = design.y  # a refit's or simulation's response
        res = r.lmer(design.spec.formula, to_r_frame(frame), r.ro.BoolVector([fit.reml]))
        return res[0]

    return fit.memo("r_formula_fit", compute)


_DDF = {"satterthwaite": "Satterthwaite", "kenward-roger": "Kenward-Roger"}


def _refuse_formula_refit(fit: LmerResult) -> None:
    """The formula refitted in R uses R's default coding and no weights/offset: refuse a
    fit whose coefficients would then mean something else."""
    design = fit.design
    other = [c for c, coding in design.fixed.codings if coding != "treatment"]
    if other:
        raise UnsupportedModelError(
            f"lmertest_tables(): the fit codes {other} with non-treatment contrasts "
            "(contrasts= or an ordered factor); lmerTest would refit the formula with the "
            "factors unordered and R's default coding, so its coefficients would mean "
            "something else")
    if getattr(design, "weights", None) is not None or getattr(design, "offset", None) is not None:
        raise UnsupportedModelError(
            "lmertest_tables(): the fit has prior weights or an offset, which the formula "
            "refitted in R would not get")


def lmertest_tables(fit: LmerResult, ddf: str = "satterthwaite", type: int = 3,
                    level: float = 0.95) -> dict[str, pd.DataFrame]:
    """lmerTest's coefficient table and ANOVA, computed in R, for cross-checking.

    Parameters
    ----------
    fit : LmerResult
        A fit of any engine: its formula is fitted by lme4 on the fit's data (same
        REML/ML; cached on the fit; a pymer4 model's own R fit is used as it is).
    ddf : {"satterthwaite", "kenward-roger"}
    type : {1, 2, 3}
        ANOVA type.
    level : float
        Confidence level of the coefficient table's intervals (from lmerTest's df).

    Returns
    -------
    dict
        ``"coefficients"``: term, estimate, std_error, df, statistic, p_value, conf_low,
        conf_high; ``"anova"``: term, sum_sq, mean_sq, num_df, den_df, statistic,
        p_value. Tidy tables in crossed's schema, numbers from lmerTest.
    """
    from scipy import stats

    if ddf not in _DDF:
        raise ValueError(f"ddf must be one of {sorted(_DDF)}, got {ddf!r}")
    _refuse_formula_refit(fit)
    r = r_session()
    r.require("lmerTest")
    if ddf == "kenward-roger":
        r.require("pbkrtest")
    r_fit = _formula_fit(fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _r_list(r.lmertest(r_fit, _DDF[ddf], r.ro.IntVector([int(type)])))
    rows, cols = _strs(res["coef_rows"]), _strs(res["coef_cols"])
    co = _num(res["coef"]).reshape((len(rows), len(cols)), order="F")
    est, se, df = co[:, 0], co[:, 1], co[:, 2]
    q = stats.t.ppf(0.5 + level / 2, df)
    coefs = pd.DataFrame({"term": rows, "estimate": est, "std_error": se, "df": df,
                          "statistic": co[:, 3], "p_value": co[:, 4],
                          "conf_low": est - q * se, "conf_high": est + q * se})
    coefs.attrs["conf_level"] = level
    arows, acols = _strs(res["anova_rows"]), _strs(res["anova_cols"])
    an = _num(res["anova"]).reshape((len(arows), len(acols)), order="F")
    anova = pd.DataFrame({"term": arows, "sum_sq": an[:, 0], "mean_sq": an[:, 1],
                          "num_df": an[:, 2], "den_df": an[:, 3], "statistic": an[:, 4],
                          "p_value": an[:, 5]})
    return {"coefficients": coefs, "anova": anova}
