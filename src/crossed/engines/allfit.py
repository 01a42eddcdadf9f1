"""lme4's ``allFit``: the same model refitted with every optimiser crossed has.

A reviewer's "is this a convergence artefact?" is answered by fitting the model again with
each optimiser and comparing criteria and estimates: where they agree to the optimiser's
tolerance, the estimates do not depend on where one optimiser stopped. crossed's native
engine has three optimisers for LMMs, NLopt's BOBYQA (lme4's default), L-BFGS-B on the
analytic gradient and NLopt's Nelder–Mead (lme4's ``nloptwrap`` with ``NLOPT_LN_NELDERMEAD``),
and two for GLMMs, BOBYQA and Nelder–Mead in both stages (no L-BFGS-B: crossed has no
analytic gradient of the GLMM criterion); each runs with crossed's continuations after
lme4's stopping rule (``LmerControl.restarts``, the default) and without them
(``restarts=0``: for an LMM, lme4's own path for BOBYQA and Nelder–Mead, whose stop is
lme4's). Every refit starts from the same start as the original fit (the native engine's
start, lme4's θ = 1 for a GLMM), on the same design (no formula parsing), with the fit's
other settings.

Of lme4 1.1-31's allFit optimisers crossed runs the two of NLopt (the same library,
algorithm, settings and start): ``"nloptwrap.NLOPT_LN_BOBYQA"`` and
``"nloptwrap.NLOPT_LN_NELDERMEAD"``. minqa's ``bobyqa``, lme4's own ``Nelder_Mead``,
``nlminbwrap`` and optimx's ``L-BFGS-B`` and ``nlminb`` are other implementations, which
crossed does not have; its L-BFGS-B works on the analytic gradient, not optimx's finite
differences.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from crossed.engines.refit import refit_glmer
from crossed.model.control import LmerControl
from crossed.tables import ResultDisplay, result_table

__all__ = ["ALLFIT_COLUMNS", "GLMM_OPTIMIZERS", "LME4_NAMES", "LMM_OPTIMIZERS", "AllFit",
           "all_fit", "optimizer_settings"]

ALLFIT_COLUMNS = ["optimizer", "lme4_optimizer", "criterion", "loglik", "converged",
                  "singular", "feval", "seconds", "messages"]


@dataclass(frozen=True, repr=False)
class AllFit(ResultDisplay):
    """The refits of :func:`all_fit` and their comparison (lme4's ``summary(allFit(m))``).

    Attributes
    ----------
    fits : dict of str to fit
        Each refit (the class of the original fit), by optimiser label; a refit that raised
        is absent here and listed in ``errors``.
    table : pandas.DataFrame
        One row per optimiser (lme4's ``$llik`` and ``$msgs``): ``optimizer`` (crossed's
        label: the ``LmerControl.optimizer`` name, ``"bobyqa"``, ``"lbfgsb"``,
        ``"nelder_mead"``, alone for a refit with crossed's continuations and with
        ``" (restarts=0)"`` for one without), ``lme4_optimizer`` (the name lme4's allFit
        gives the refit with the same NLopt algorithm from the same start:
        ``"nloptwrap.NLOPT_LN_BOBYQA"`` for ``"bobyqa (restarts=0)"``,
        ``"nloptwrap.NLOPT_LN_NELDERMEAD"`` for ``"nelder_mead (restarts=0)"``; for an LMM
        lme4's own path, for a GLMM the same algorithm in both stages with the native
        engine's stage settings; empty where lme4 has no such refit: crossed's
        continuations, L-BFGS-B on the analytic gradient), ``criterion`` (the
        REML criterion −2ℓ_R of a REML fit, the deviance −2ℓ of an ML fit, lme4's
        ``deviance()`` of a GLMM), ``loglik``, ``converged`` (lme4's derivative check
        passed), ``singular`` (lme4's ``isSingular``), ``feval`` (criterion evaluations),
        ``seconds`` (wall time of the refit), ``messages`` (the fit's convergence and
        singularity messages and any warning, joined by "; ").
    fixef : pandas.DataFrame
        lme4's ``$fixef``: ``optimizer``, then one column per fixed effect (the
        coefficients' names).
    sdcor : pandas.DataFrame
        lme4's ``$sdcor``: ``optimizer``, then one column per SD and correlation of the
        random effects (``"Subject.(Intercept)"``, ``"Subject.Days.(Intercept)"``,
        ``"Subject.Days"``) and, for an LMM, ``"sigma"`` (lme4's names).
    errors : dict of str to str
        Optimisers whose refit raised, with the error's message.
    """

    fits: dict[str, Any] = field(repr=False)
    table: pd.DataFrame
    fixef: pd.DataFrame
    sdcor: pd.DataFrame
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def best(self) -> str:
        """The optimiser with the lowest criterion among the refits that converged (among
        all refits when none did)."""
        t = self.table
        ok = t[t["converged"].astype(bool)]
        t = ok if len(ok) else t
        return str(t.loc[t["criterion"].idxmin(), "optimizer"])

    def spread(self) -> pd.Series:
        """Largest minus smallest value over the converged refits, per criterion, fixed
        effect and SD/correlation: how much the estimates depend on the optimiser."""
        ok = self.table["converged"].astype(bool).to_numpy()
        parts = [self.table.loc[ok, ["criterion"]], self.fixef.loc[ok].drop(
            columns="optimizer"), self.sdcor.loc[ok].drop(columns="optimizer")]
        both = pd.concat(parts, axis=1)
        return both.max() - both.min()

    def display_tables(self) -> dict[str, pd.DataFrame]:
        return {"allFit": self.table, "fixef": self.fixef, "sdcor": self.sdcor}

    def __repr__(self) -> str:
        out = [str(result_table(self.table)), "", "Fixed effects:",
               str(result_table(self.fixef)), "", "SDs and correlations:",
               str(result_table(self.sdcor))]
        out += [f"{k}: error: {v}" for k, v in self.errors.items()]
        return "\n".join(out)


LMM_OPTIMIZERS = ("bobyqa", "lbfgsb", "nelder_mead")
"""The optimisers :func:`all_fit` runs on an LMM (``LmerControl.optimizer`` names)."""
GLMM_OPTIMIZERS = ("bobyqa", "nelder_mead")
"""... and on a GLMM (the GLMM engine has no L-BFGS-B: no analytic gradient)."""
LME4_NAMES = {"bobyqa (restarts=0)": "nloptwrap.NLOPT_LN_BOBYQA",
              "nelder_mead (restarts=0)": "nloptwrap.NLOPT_LN_NELDERMEAD"}
"""lme4 allFit's name of the refit that runs the same NLopt algorithm, by crossed's label."""


def optimizer_settings(fit: Any) -> dict[str, LmerControl]:
    """The optimisers :func:`all_fit` runs on ``fit``, by label: BOBYQA, L-BFGS-B and
    Nelder–Mead (LMMs) or BOBYQA and Nelder–Mead (GLMMs), each with the fit's
    continuations and with ``restarts=0``."""
    control = fit.opt.control if fit.opt is not None else LmerControl()
    names = GLMM_OPTIMIZERS if hasattr(fit, "family") else LMM_OPTIMIZERS
    out = {}
    for name in names:
        out[name] = replace(control, optimizer=name)
        out[f"{name} (restarts=0)"] = replace(control, optimizer=name, restarts=0)
    return out


def _sdcor_row(fit: Any) -> dict[str, float]:
    """lme4's ``$sdcor`` names and values of one fit (``as.data.frame(VarCorr(m))``)."""
    row: dict[str, float] = {}
    for r in fit.varcorr().itertuples(index=False):
        t1, t2 = r.term1, r.term2
        if r.group == "Residual":
            row["sigma"] = float(r.sd_or_cor)
            continue
        name = f"{r.group}.{t1}" if not isinstance(t2, str) or t2 == "" else \
            f"{r.group}.{t2}.{t1}"
        row[name] = float(r.sd_or_cor)
    return row


def all_fit(fit: Any) -> AllFit:
    """Refit ``fit`` with every optimiser crossed has (lme4's ``allFit``).

    Parameters
    ----------
    fit : LmerFit or GlmerFit
        A fit of the native engine.

    Returns
    -------
    AllFit
        The refits and the tables ``table`` (criteria, convergence, messages), ``fixef``
        and ``sdcor``: see :class:`AllFit`. Convergence failures and singular fits are
        reported in the table, never retried. Validated against lme4 1.1-31's refits with
        each of its optimisers (``allFit``'s loop) on sleepstudy, a singular
        ``(1 + x | g)``, carrots with two grouping factors and cbpp's binomial GLMM: every
        crossed optimiser whose refit converges reaches the lowest criterion of R's
        converged refits within 1e-6, relative, and the refits without continuations stop
        where lme4's nloptwrap refits with the same NLopt algorithm stop (within 1e-6; the
        GLMM's Nelder–Mead as ``glmerControl(optimizer = "nloptwrap", optCtrl =
        list(algorithm = "NLOPT_LN_NELDERMEAD"))``, whose deviance it matches within 1e-6)
        (tests/engines/test_allfit.py).

    Raises
    ------
    ValueError
        For a fit of another engine (``"lme4"``, ``"statsmodels"``): their optimisers are
        theirs, not crossed's.
    """
    if getattr(fit, "engine", "native") != "native":
        raise ValueError(f"all_fit refits with crossed's native optimisers; this fit is of "
                         f"the {fit.engine!r} engine (fit it with engine='native')")
    glmm = hasattr(fit, "family")
    fits: dict[str, Any] = {}
    errors: dict[str, str] = {}
    rows, fixef, sdcor = [], [], []
    for label, control in optimizer_settings(fit).items():
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if glmm:
                    new = refit_glmer(fit, control=control)
                else:
                    new = _refit_lmm(fit, control)
            except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
                errors[label] = str(exc)
                continue
        seconds = time.perf_counter() - start
        fits[label] = new
        notes = list(dict.fromkeys([*new.messages, *(str(w.message) for w in caught)]))
        crit = float(new.deviance)
        rows.append({"optimizer": label, "lme4_optimizer": LME4_NAMES.get(label, ""),
                     "criterion": crit, "loglik": float(new.loglik),
                     "converged": bool(new.converged), "singular": bool(new.is_singular),
                     "feval": int(new.opt.feval) if new.opt is not None else -1,
                     "seconds": seconds, "messages": "; ".join(notes)})
        fixef.append({"optimizer": label, **{str(k): float(v) for k, v in new.fixef.items()}})
        sdcor.append({"optimizer": label, **_sdcor_row(new)})
    table = pd.DataFrame(rows, columns=ALLFIT_COLUMNS)
    table.attrs["messages"] = [
        f"criterion: {'the deviance' if glmm or not fit.reml else 'the REML criterion'}; "
        f"every refit from the same start on the same design"]
    return AllFit(fits=fits, table=result_table(table),
                  fixef=result_table(pd.DataFrame(fixef)),
                  sdcor=result_table(pd.DataFrame(sdcor)), errors=errors)


def _refit_lmm(fit: Any, control: LmerControl) -> Any:
    """The LMM on its stored design with ``control`` (same engine, criterion, data name)."""
    from crossed.engines.registry import fit_with

    out = fit_with(fit.engine, fit.design, reml=fit.reml, control=control,
                   data_name=fit.data_name)
    return fit.like(out)
