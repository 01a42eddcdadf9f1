"""Estimated marginal means of a GLMM on the link or the response scale, as emmeans 1.8.4.

The EMMs are computed on the link scale exactly as for an LMM (:mod:`crossed.inference.
emmeans`: reference grid, equal weights over the other factors) with asymptotic inference
(df = inf, z). With ``type="response"`` (emmeans' ``type = "response"``):

- an EMM η̂ is back-transformed to μ̂ = g⁻¹(η̂), its SE by the delta method,
  SE(μ̂) = SE(η̂)·|dμ/dη|, and its interval is the back-transformed link-scale interval;
- pairwise differences of logit (log) EMMs become odds ratios (rate ratios):
  exp(η̂ᵢ − η̂ⱼ), SE = ratio·SE(difference), interval exp(link interval), contrast labels
  ``"a / b"``; the z test and its (Tukey-adjusted) p value are the link scale's. Other
  links (probit, cloglog) have no ratio: their differences stay on the link scale, as
  emmeans reports them.

Column names follow crossed's tidy schema; ``attrs["estimate_name"]`` gives the name
emmeans prints for ``estimate`` (``prob``, ``rate``, ``odds.ratio``, ``ratio``, ``emmean``,
``estimate``). Validated against emmeans 1.8.4-1 on lme4 1.1-31 glmer fits
(``tests/data/reference/glmm/glmm.json``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from crossed.inference.emm_response import ratio_label
from crossed.inference.emmeans import EMMeans
from crossed.inference.emmeans import emmeans as _emmeans
from crossed.tables import TableDisplay, result_table

__all__ = ["GlmmEMMeans", "glmm_emmeans"]

_TYPES = ("link", "response")


def _check_type(type: str) -> str:
    if type not in _TYPES:
        raise ValueError(f"type must be 'link' or 'response', got {type!r}")
    return type


@dataclass(repr=False)  # (shown as its table: TableDisplay)
class GlmmEMMeans(TableDisplay):
    """EMMs of a GLMM (emmeans' ``emmGrid`` with a link).

    Attributes
    ----------
    emm : EMMeans
        The link-scale EMMs (asymptotic: df = inf).
    family : Family
        The fit's family (its ``link`` back-transforms).
    type : {"link", "response"}
        Default scale of :meth:`table` and :meth:`pairs`.
    offset : float
        Added to every link-scale EMM (emmeans' ``offset``).
    """

    emm: EMMeans
    family: Any
    type: str = "response"
    offset: float = 0.0

    @property
    def specs(self) -> list[str]:
        return self.emm.specs

    @property
    def by(self) -> list[str]:
        return self.emm.by

    def _response_name(self) -> str:
        return str(self.family.mean_label)

    # ------------------------------------------------------------------ display
    def describe(self) -> str:
        """A one-line description (specs, number of means, family, scale, level)."""
        by = f" by {', '.join(self.by)}" if self.by else ""
        return (f"<GlmmEMMeans of {', '.join(self.specs)}{by}: {len(self.emm.grid)} means, "
                f"{self.family}, {self.type} scale, {self.emm.level:.0%} intervals>")

    def table(self, type: str | None = None) -> pd.DataFrame:
        """The EMMs (emmeans' ``summary(emm, infer = TRUE)``).

        Parameters
        ----------
        type : {"link", "response"}, optional
            Default: this object's ``type``.

        Returns
        -------
        pandas.DataFrame
            Key columns, ``estimate`` (the link-scale EMM, or ``prob``/``rate`` on the
            response scale), ``std_error`` (delta method on the response scale), ``df``
            (inf), ``conf_low``, ``conf_high`` (z interval, back-transformed),
            ``statistic`` (z of the link-scale EMM against 0) and ``p_value``.
        """
        type = _check_type(type or self.type)
        tab = self.emm.table()
        keys = tab.drop(columns=["estimate", "std_error", "df", "conf_low", "conf_high"])
        eta = tab["estimate"].to_numpy() + self.offset
        se = tab["std_error"].to_numpy()
        lo = tab["conf_low"].to_numpy() + self.offset
        hi = tab["conf_high"].to_numpy() + self.offset
        with np.errstate(divide="ignore", invalid="ignore"):
            z = eta / se
        p = 2.0 * stats.norm.sf(np.abs(z))
        if type == "response":
            link = self.family.link
            est = link.linkinv(eta)
            se = se * np.abs(link.mu_eta(eta))
            lo, hi = link.linkinv(lo), link.linkinv(hi)
            name = self._response_name()
        else:
            est, name = eta, "emmean"
        out = pd.concat([keys.reset_index(drop=True), pd.DataFrame({
            "estimate": est, "std_error": se, "df": np.inf, "conf_low": np.minimum(lo, hi),
            "conf_high": np.maximum(lo, hi), "statistic": z, "p_value": p})], axis=1)
        out.attrs.update(tab.attrs)
        out.attrs.update(type=type, estimate_name=name, offset=self.offset)
        return result_table(out, "emmeans")

    def _ratio(self, type: str) -> bool:
        return type == "response" and self.family.link.name in ("logit", "log")

    def contrast(self, method: str | dict = "pairwise", adjust: str | None = None,
                 by: list[str] | str | None = None, ref: int = 0, level: float | None = None,
                 type: str | None = None) -> pd.DataFrame:
        """Contrasts among the EMMs (emmeans' ``contrast``), tested on the link scale.

        On the response scale with a logit or log link, pairwise-type contrasts are
        reported as ratios (see the module docstring); custom weights that do not sum to
        zero are refused there (no ratio interpretation).

        Returns
        -------
        pandas.DataFrame
            ``contrast``, the ``by`` columns, ``estimate`` (difference, or odds ratio /
            rate ratio), ``std_error``, ``df`` (inf), ``statistic`` (z ratio),
            ``p_value`` (adjusted), ``conf_low``, ``conf_high`` (adjusted intervals).
        """
        type = _check_type(type or self.type)
        tab = self.emm.contrast(method, adjust=adjust, by=by, ref=ref, level=level)
        if not self._ratio(type):
            tab.attrs.update(type="link", estimate_name="estimate")
            return result_table(tab, "emmeans")
        if isinstance(method, dict) and any(abs(float(np.sum(w))) > 1e-8
                                            for w in method.values()):
            raise ValueError("contrast weights that do not sum to zero have no ratio "
                             "interpretation: use type='link'")
        out = tab.copy()
        est = out["estimate"].to_numpy()
        ratio = np.exp(est)
        out["estimate"] = ratio
        out["std_error"] = ratio * out["std_error"].to_numpy()
        out["conf_low"] = np.exp(tab["conf_low"].to_numpy())
        out["conf_high"] = np.exp(tab["conf_high"].to_numpy())
        out["contrast"] = [ratio_label(c) for c in out["contrast"]]
        out.attrs.update(tab.attrs)
        name = "odds.ratio" if self.family.link.name == "logit" else "ratio"
        out.attrs.update(type="response", estimate_name=name)
        return result_table(out, "emmeans")

    def pairs(self, adjust: str = "tukey", reverse: bool = False,
              by: list[str] | str | None = None, type: str | None = None) -> pd.DataFrame:
        """Pairwise comparisons (emmeans' ``pairs``): odds ratios / rate ratios on the
        response scale of a logit / log model, link-scale differences otherwise; Tukey
        adjustment by default. See :meth:`contrast`."""
        return self.contrast("revpairwise" if reverse else "pairwise", adjust=adjust, by=by,
                             type=type)


def _refuse_offset_at(fit: Any, at: dict | None) -> None:
    """``at`` naming a variable that only enters a formula's ``offset(...)``: said, with
    what to pass instead (the reference grid has the fixed part's variables only)."""
    offsets = tuple(getattr(fit.design.spec, "offsets", ()))
    if not isinstance(at, dict) or not offsets:
        return
    from crossed.design.frame import expression_variables

    columns = set(fit.design.columns)
    fixed = expression_variables(fit.design.spec.fixed or "", columns)
    for expr in offsets:
        for v in sorted(expression_variables(expr, columns) & set(at) - fixed):
            raise ValueError(f"at: {v!r} enters only the offset (offset({expr})), not the "
                             f"reference grid: pass the offset's value instead, "
                             f"offset=<offset({expr}) at {v} = {at[v]!r}>")


def glmm_emmeans(fit: Any, specs: str | list[str], by: str | list[str] | None = None,
                 type: str = "response", level: float = 0.95,
                 offset: float | None = None, at: dict | None = None,
                 cov_reduce: Any = "mean") -> GlmmEMMeans:
    """Estimated marginal means of a GLMM (emmeans' ``emmeans(fit, specs, type = ...)``).

    Parameters
    ----------
    fit : GlmerFit
    specs, by : str or list of str
        As :func:`crossed.inference.emmeans.emmeans`.
    type : {"response", "link"}
        Scale of the table and of ``pairs()`` (emmeans' ``type``).
    level : float
        Confidence level.
    offset : float, optional
        Added to the linear predictor of every EMM. Default: the mean of the fit's offset
        over the rows (0 without one), which is where emmeans 1.8.4 puts a formula's
        ``offset(log(length))`` (the mean of log(length), not the log of the mean); pass 0
        for rates per unit of exposure (emmeans' ``offset = 0``). Validated for an offset
        written in the formula; for glmer's ``offset=`` argument the same default is used
        (emmeans' handling of that case was not compared).
    at : dict, optional
        Grid values per variable (emmeans' ``at``), as for an LMM
        (:func:`crossed.inference.emmeans.emmeans`): ``{"x": 1.0}`` holds a numeric
        covariate at that value (several values are averaged over unless the covariate is
        in ``specs``/``by``), a list of levels restricts a factor.
    cov_reduce : str, callable or dict
        How the other covariates enter the grid (emmeans' ``cov.reduce``; default their
        mean).

    Returns
    -------
    GlmmEMMeans
        ``table()``, ``pairs()``, ``contrast()``.
    """
    _check_type(type)
    _refuse_offset_at(fit, at)
    emm = _emmeans(fit, specs, by=by, ddf="none", level=level, at=at, cov_reduce=cov_reduce)
    if offset is None:
        off = getattr(fit.design, "offset", None)
        offset = 0.0 if off is None else float(np.mean(off))
    elif (isinstance(offset, bool | np.bool_) or not isinstance(offset, numbers.Real)
          or not np.isfinite(offset)):
        raise TypeError(f"offset must be a finite number (added to every EMM's linear "
                        f"predictor), got {offset!r}")
    return GlmmEMMeans(emm=emm, family=fit.family, type=type, offset=float(offset))
