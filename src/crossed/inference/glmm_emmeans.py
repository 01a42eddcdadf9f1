"""Estimated marginal means of a GLMM on the link or the response scale, as emmeans 1.8.4.

The EMMs are computed on the link scale exactly as for an LMM (:mod:`crossed.inference.
emmeans`: reference grid, equal weights over the other factors) with asymptotic inference
(df = inf, z). As in emmeans, the link scale is the default: ``emmeans(m, ~ f)`` of a
``glmer`` fit gives logits (logs) and ``pairs()`` their differences (log odds ratios, log
rate ratios), printed with "Results are given on the logit (not the response) scale.".

With ``type="response"`` (emmeans' ``type = "response"``):

- an EMM η̂ is back-transformed to μ̂ = g⁻¹(η̂) (column ``prob`` of a binomial model,
  ``rate`` of a Poisson one, as emmeans names them), its SE by the delta method,
  SE(μ̂) = SE(η̂)·|dμ/dη|, and its interval is the back-transformed link-scale interval;
- pairwise differences of logit (log) EMMs become odds ratios (rate ratios):
  exp(η̂ᵢ − η̂ⱼ) (column ``odds_ratio`` / ``ratio``, emmeans' ``odds.ratio`` / ``ratio``),
  SE = ratio·SE(difference), interval exp(link interval), contrast labels ``"a / b"``;
  the z test and its (Tukey-adjusted) p value are the link scale's ("Tests are performed
  on the log odds ratio scale"). Other links (probit, cloglog) have no ratio: their
  differences stay on the link scale, as emmeans reports them.

:meth:`GlmmEMMeans.regrid` is emmeans' ``regrid()``: the response-scale EMMs as a new
linear grid (covariance D·V·D, D = diag(dμ/dη)), whose contrasts are differences of
probabilities (rates) with delta-method SEs, z tests and asymptotic intervals.

Column names follow crossed's tidy schema; ``attrs["estimate_name"]`` gives the name
emmeans prints for the estimate (``emmean``, ``prob``, ``rate``, ``odds.ratio``,
``ratio``, ``estimate``). Validated against emmeans 1.8.4-1 on lme4 1.1-31 glmer fits
(``tests/data/reference/glmm/glmm.json``, ``emm_scales.json``).
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

__all__ = ["GlmmEMMeans", "RegridEMMeans", "glmm_emmeans"]

_TYPES = ("link", "response")
# emmeans' names of a back-transformed mean: prob (binomial), rate (Poisson), else response
_MEAN_NAMES = {"prob": "prob", "rate": "rate"}


def _check_type(type: str) -> str:
    if type not in _TYPES:
        raise ValueError(f"type must be 'link' or 'response', got {type!r}")
    return type


def _link_scale_name(link: str, contrast: bool) -> str:
    """emmeans' name of the link scale: of a contrast of logits, "log odds ratio"."""
    if contrast and link == "logit":
        return "log odds ratio"
    return link


def _link_messages(link: str, contrast: bool) -> list[str]:
    """What emmeans 1.8.4 prints below a link-scale table of a glmer fit: "Results are
    given on the logit (not the response) scale." for EMMs and for contrasts of logit and
    log links; "Note: contrasts are still on the probit scale" for contrasts of links with
    no ratio (as emmeans prints it, on either scale)."""
    if link == "identity":
        return []
    if contrast and link not in ("logit", "log"):
        return [f"Note: contrasts are still on the {link} scale"]
    return [f"Results are given on the {_link_scale_name(link, contrast)} (not the "
            f"response) scale."]


@dataclass(frozen=True)
class _ResponseGrid:
    """The estimates and covariance a regridded EMM grid's contrasts are computed from
    (what :func:`crossed.inference.ddf.contrast_t` reads of a fit for df = inf)."""

    beta: np.ndarray
    vcov_beta: np.ndarray


@dataclass(repr=False)  # (shown as its table: TableDisplay)
class RegridEMMeans(EMMeans):
    """EMMs of a GLMM regridded to the response scale (emmeans' ``regrid(emm)``).

    An :class:`~crossed.inference.emmeans.EMMeans` whose "coefficients" are the
    response-scale means μ̂ (``fit.beta``) with their delta-method covariance
    (``fit.vcov_beta`` = D·V·D) and whose linear functions are the identity: its
    :meth:`table` gives the means with symmetric z intervals, its :meth:`contrast` and
    :meth:`pairs` differences of probabilities (rates) with z tests and asymptotic
    intervals, adjusted as for any EMM grid. Validated against emmeans 1.8.4-1
    ``summary(pairs(regrid(emmeans(m, ~ f))), infer = TRUE)`` on glmer fits
    (``tests/data/reference/glmm/emm_scales.json``).
    """

    def table(self, type: str | None = None) -> pd.DataFrame:
        """The response-scale means (emmeans' ``summary(regrid(emm))``).

        Returns
        -------
        pandas.DataFrame
            Key columns, ``prob`` (binomial) / ``rate`` (Poisson) / ``response``: the
            back-transformed EMM, ``std_error`` (delta method), ``df`` (inf),
            ``conf_low``, ``conf_high`` (μ̂ ± z·SE: symmetric, as emmeans' regridded
            intervals, not back-transformed ones).
        """
        out = super().table(type)
        out = out.rename(columns={"estimate": self.estimate_name})
        out.attrs["type"] = "response"  # (regridded: a linear grid on the response scale)
        return result_table(out, "emmeans")

    def contrast(self, method: str | dict = "pairwise", adjust: str | None = None,
                 by: list[str] | str | None = None, ref: int | str = 0,
                 level: float | None = None, type: str | None = None) -> pd.DataFrame:
        """Contrasts of the response-scale means (differences of probabilities or rates):
        :meth:`crossed.inference.emmeans.EMMeans.contrast` on the regridded grid (delta-
        method SEs, z tests, asymptotic intervals; Tukey for pairs)."""
        out = super().contrast(method, adjust=adjust, by=by, ref=ref, level=level, type=type)
        out.attrs["type"] = "response"
        return out

    def joint_tests(self) -> pd.DataFrame:
        """Not available on a regridded grid (emmeans tests the model's terms)."""
        raise ValueError("joint_tests(): use the fit's emmeans (link scale), not regrid()")

    def describe(self) -> str:
        """A one-line description (specs, number of means, level)."""
        by = f" by {', '.join(self.by)}" if self.by else ""
        return (f"<RegridEMMeans of {', '.join(self.specs)}{by}: {len(self.grid)} means on "
                f"the response scale, {self.level:.0%} intervals>")


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
        Default scale of :meth:`table` and :meth:`pairs` (emmeans' default: the link).
    offset : float
        Added to every link-scale EMM (emmeans' ``offset``).
    """

    emm: EMMeans
    family: Any
    type: str = "link"
    offset: float = 0.0

    @property
    def specs(self) -> list[str]:
        return self.emm.specs

    @property
    def by(self) -> list[str]:
        return self.emm.by

    def _response_name(self) -> str:
        return _MEAN_NAMES.get(str(self.family.mean_label), "response")

    # ------------------------------------------------------------------ display
    def describe(self) -> str:
        """A one-line description (specs, number of means, family, scale, level)."""
        by = f" by {', '.join(self.by)}" if self.by else ""
        return (f"<GlmmEMMeans of {', '.join(self.specs)}{by}: {len(self.emm.grid)} means, "
                f"{self.family}, {self.type} scale, {self.emm.level:.0%} intervals>")

    def table(self, type: str | None = None, tests: bool = False) -> pd.DataFrame:
        """The EMMs (emmeans' ``summary(emm)``; with ``tests``, ``infer = TRUE``).

        Parameters
        ----------
        type : {"link", "response"}, optional
            Default: this object's ``type`` (the link scale unless asked otherwise).
        tests : bool
            Add the z test of each link-scale EMM against 0 (emmeans' ``infer = TRUE``;
            on the response scale, against 0.5 or 1).

        Returns
        -------
        pandas.DataFrame
            Key columns; ``estimate`` (the link-scale EMM, emmeans' ``emmean``) or, on the
            response scale, ``prob`` (binomial) / ``rate`` (Poisson) / ``response`` (the
            back-transformed EMM, emmeans' names); ``std_error`` (delta method on the
            response scale); ``df`` (inf); ``conf_low``, ``conf_high`` (asymptotic z
            interval, back-transformed on the response scale: emmeans' ``asymp.LCL``,
            ``asymp.UCL``); with ``tests``, ``statistic`` (z ratio) and ``p_value``.
            Validated against emmeans 1.8.4-1 on glmer fits.
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
        link = self.family.link
        if type == "response":
            est = link.linkinv(eta)
            se = se * np.abs(link.mu_eta(eta))
            lo, hi = link.linkinv(lo), link.linkinv(hi)
            name = column = self._response_name()
            scale: list[str] = []
            after = [f"Intervals are back-transformed from the {link.name} scale"]
        else:
            est, name, column = eta, "emmean", "estimate"
            scale, after = _link_messages(link.name, contrast=False), []
        cols = {column: est, "std_error": se, "df": np.inf,
                "conf_low": np.minimum(lo, hi), "conf_high": np.maximum(lo, hi)}
        if tests:
            cols.update(statistic=z, p_value=p)
        out = pd.concat([keys.reset_index(drop=True), pd.DataFrame(cols)], axis=1)
        out.attrs.update(tab.attrs)
        out.attrs.update(type=type, estimate_name=name, offset=self.offset,
                         scale_messages=scale,
                         messages=[*tab.attrs.get("messages", []), *after])
        return result_table(out, "emmeans")

    def _ratio(self, type: str) -> bool:
        return type == "response" and self.family.link.name in ("logit", "log")

    def contrast(self, method: str | dict = "pairwise", adjust: str | None = None,
                 by: list[str] | str | None = None, ref: int = 0, level: float | None = None,
                 type: str | None = None) -> pd.DataFrame:
        """Contrasts among the EMMs (emmeans' ``contrast``), tested on the link scale.

        On the link scale (the default) the contrasts are differences of logits (logs):
        log odds ratios (log rate ratios). On the response scale with a logit or log link,
        pairwise-type contrasts are reported as ratios (see the module docstring); custom
        weights that do not sum to zero are refused there (no ratio interpretation). For
        differences of probabilities use :meth:`regrid`.

        Returns
        -------
        pandas.DataFrame
            ``contrast``, the ``by`` columns, ``estimate`` (link-scale difference) or, on
            the response scale, ``odds_ratio`` (logit) / ``ratio`` (log) (emmeans'
            ``odds.ratio`` / ``ratio``), ``std_error``, ``df`` (inf), ``statistic`` (z
            ratio of the link-scale difference), ``p_value`` (adjusted), ``conf_low``,
            ``conf_high`` (adjusted asymptotic intervals, back-transformed for ratios).
            Validated against emmeans 1.8.4-1 ``summary(pairs(emm), infer = TRUE)``.
        """
        type = _check_type(type or self.type)
        tab = self.emm.contrast(method, adjust=adjust, by=by, ref=ref, level=level)
        link = self.family.link.name
        if not self._ratio(type):
            tab.attrs.update(type="link", estimate_name="estimate",
                             scale_messages=_link_messages(link, contrast=True))
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
        name = "odds.ratio" if link == "logit" else "ratio"
        out = out.rename(columns={"estimate": name.replace(".", "_")})
        out.attrs.update(tab.attrs)
        scale = _link_scale_name(link, contrast=True)
        out.attrs.update(type="response", estimate_name=name, messages=[
            *tab.attrs.get("messages", []),
            f"Intervals are back-transformed from the {scale} scale",
            f"Tests are performed on the {scale} scale"])
        return result_table(out, "emmeans")

    def pairs(self, adjust: str = "tukey", reverse: bool = False,
              by: list[str] | str | None = None, type: str | None = None) -> pd.DataFrame:
        """Pairwise comparisons (emmeans' ``pairs``): link-scale differences (log odds
        ratios, log rate ratios) by default; odds ratios / rate ratios with
        ``type="response"`` for a logit / log model. Tukey adjustment by default. See
        :meth:`contrast`; differences of probabilities: ``regrid().pairs()``."""
        return self.contrast("revpairwise" if reverse else "pairwise", adjust=adjust, by=by,
                             type=type)

    def regrid(self) -> RegridEMMeans:
        """The EMMs on the response scale as a new linear grid (emmeans' ``regrid(emm)``).

        Returns
        -------
        RegridEMMeans
            ``table()``: the probabilities (rates) μ̂ = g⁻¹(η̂), delta-method SEs and
            symmetric z intervals; ``pairs()`` / ``contrast()``: differences of
            probabilities (rates), SE √(w D V D wᵀ) (D = diag(dμ/dη), V the link-scale
            EMMs' covariance), z tests, Tukey-adjusted p values and intervals by
            default. Validated against emmeans 1.8.4-1
            ``pairs(regrid(emmeans(m, ~ f)))``.

        Raises
        ------
        ValueError
            When a mean of the grid is not estimable (a rank-deficient fit): naming it.
        """
        emm = self.emm
        k = len(emm.grid)
        est = emm._estimable(np.eye(k), np.arange(k))
        if not est.all():
            bad = ", ".join(" ".join(map(str, r)) for r in
                            emm.grid[~est].itertuples(index=False))
            raise ValueError(f"regrid(): the mean(s) {bad} are not estimable on this "
                             "rank-deficient fit (nonEst); restrict the grid with at=")
        L = emm.linfct
        fit = emm.fit
        eta = L @ np.asarray(fit.beta, dtype=float) + self.offset
        V = L @ np.asarray(fit.vcov_beta, dtype=float) @ L.T
        d = np.asarray(self.family.link.mu_eta(eta), dtype=float)
        mu = np.asarray(self.family.link.linkinv(eta), dtype=float)
        grid = _ResponseGrid(beta=mu, vcov_beta=d[:, None] * V * d[None, :])
        return RegridEMMeans(fit=grid, specs=list(emm.specs), by=list(emm.by),  # type: ignore[arg-type]
                             grid=emm.grid.copy(), linfct=np.eye(k), ddf="none",
                             level=emm.level, messages=list(emm.messages),
                             estimate_name=self._response_name())


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
                 type: str = "link", level: float = 0.95,
                 offset: float | None = None, at: dict | None = None,
                 cov_reduce: Any = "mean") -> GlmmEMMeans:
    """Estimated marginal means of a GLMM (emmeans' ``emmeans(fit, specs, type = ...)``).

    Parameters
    ----------
    fit : GlmerFit
    specs, by : str or list of str
        As :func:`crossed.inference.emmeans.emmeans`.
    type : {"link", "response"}
        Scale of the table and of ``pairs()`` (emmeans' ``type``; its default, the link
        scale: logits, log odds ratios).
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
        ``table()``, ``pairs()``, ``contrast()``, ``regrid()``.
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
