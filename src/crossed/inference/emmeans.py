"""Estimated marginal means, their contrasts and joint tests, as emmeans 1.8.4 computes them.

The reference grid crosses every level of every factor of the fixed part with each numeric
covariate at its mean (emmeans' default ``cov.reduce = mean``). An EMM is the equally
weighted average of the grid's predictions over the factors not in ``specs``/``by``; its
linear function ℓ (a row over β) gives the estimate ℓβ̂, SE √(ℓVℓᵀ) and df per emmeans'
rules for lmer fits (``lmer.df``): Satterthwaite (lmerTest), Kenward–Roger (pbkrtest: V is
the adjusted covariance, df ``Lb_ddf``) or asymptotic (df = inf).

On a rank-deficient fit (lme4 dropped columns for an empty cell) a mean or contrast whose
linear function is not estimable (:mod:`crossed.inference.estimability`) is reported as
emmeans reports ``nonEst``: NaN estimate, SE, df, statistic, p value and interval, and a
``note`` column reading ``"nonEst"`` (present only when some row is not estimable).
Multiplicity adjustments count every contrast of the family, estimable or not, as
emmeans does (``tukey``: the number of means; others: the number of contrasts).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats

from crossed._warn import warn
from crossed.inference.adjust import adjust_p, critical_values
from crossed.inference.coefs import contrast_tests
from crossed.inference.ddf import contrast_vcov, normalise_ddf
from crossed.inference.emm_contrasts import NOTHING, contrast_weights, default_adjust
from crossed.inference.emm_response import (
    Transform,
    back_contrasts,
    back_means,
    response_transform,
)
from crossed.inference.estimability import (
    NullBasis,
    estimable_subspace,
    fit_null_basis,
    is_estimable,
    r_qr,
)
from crossed.inference.grid import (
    as_list,
    full_grid_matrix,
    grid_labels,
    involved_in_interactions,
    marginal_linfct,
    reference_grid,
)
from crossed.inference.hypotheses import TermInfo, zapsmall
from crossed.model.prior import refuse_prior
from crossed.tables import TableDisplay, result_table

if TYPE_CHECKING:
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["ESTIMATE_COLUMNS", "INTERACTION_NOTE", "JOINT_DEP_NOTE", "JOINT_EST_NOTE", "NONEST",
           "NONEST_NOTE", "EMMeans", "consec_weights", "contrast_weights", "emmeans",
           "estimate_column", "joint_f", "joint_tests", "split_specs"]

INTERACTION_NOTE = "NOTE: Results may be misleading due to involvement in interactions"
NONEST = "nonEst"
NONEST_NOTE = ("nonEst: not estimable on this rank-deficient fit (an empty cell of the "
               "design); estimate, SE, df and p value are NaN, as emmeans reports them")
JOINT_EST_NOTE = "e: df1 reduced due to non-estimability"
JOINT_DEP_NOTE = "d: df1 reduced due to linear dependence"
# the estimate's column of an EMM or contrast table: ``estimate`` on the link scale, else
# emmeans' name (back-transformed means and ratios; emtrends' ``<var>.trend``)
ESTIMATE_COLUMNS = ("estimate", "response", "prob", "rate", "odds_ratio", "ratio")


def estimate_column(table: pd.DataFrame) -> str:
    """The column of an EMM or contrast table that holds the estimate: ``estimate``, or
    emmeans' name on the response scale (``response``, ``prob``, ``rate``, ``odds_ratio``,
    ``ratio``) or of a trend (``<var>.trend``); ``"estimate"`` when none is there."""
    for c in table.columns:
        if c in ESTIMATE_COLUMNS or str(c).endswith(".trend"):
            return str(c)
    return "estimate"


@dataclass(repr=False)  # (shown as its table: TableDisplay)
class EMMeans(TableDisplay):
    """Estimated marginal means of a fit (emmeans' ``emmGrid``).

    Attributes
    ----------
    fit : LmerFit
    specs, by : list of str
        Factors whose means are estimated, and the grouping factors.
    grid : pandas.DataFrame
        One row per mean: the ``by`` and ``specs`` columns.
    linfct : numpy.ndarray
        Linear functions of β, one row per mean.
    ddf : str
        ``"satterthwaite"``, ``"kenward-roger"`` or ``"none"``.
    level : float
        Confidence level of the intervals.
    linfct_full : numpy.ndarray or None
        The same rows over every column of the fixed part, including those the fit dropped
        for rank (None when it dropped none): what estimability is checked on.
    nbasis : NullBasis or None
        The fit's null basis (:func:`crossed.inference.estimability.fit_null_basis`).
    """

    fit: LmerFit
    specs: list[str]
    by: list[str]
    grid: pd.DataFrame
    linfct: np.ndarray
    ddf: str
    level: float = 0.95
    messages: list[str] = field(default_factory=list)
    linfct_full: np.ndarray | None = field(default=None, repr=False)
    nbasis: NullBasis | None = field(default=None, repr=False)
    tran: Transform | None = None
    """The response transformation (``log(y)`` ...), for ``type="response"``."""
    type: str = "link"
    """Scale of :meth:`table` and :meth:`contrast` by default (``"link"``/``"response"``)."""
    estimate_name: str = "emmean"
    """emmeans' name of the estimate (``"emmean"``, ``"x.trend"`` for emtrends)."""

    def _type(self, type: str | None) -> str:
        t = self.type if type is None else type
        if t not in ("link", "response"):
            raise ValueError(f"type must be 'link' or 'response', got {t!r}")
        return t

    def _names_ddf(self) -> bool:
        """Whether emmeans prints the df method below the table: for an lmer grid, not
        for a glmer's (or a regridded one), whose df are Inf without a method."""
        return hasattr(self.fit, "design") and not hasattr(self.fit, "family")

    def _estimable(self, W: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Estimability of the combinations W of the means ``rows``."""
        if self.nbasis is None or self.linfct_full is None:
            return np.ones(W.shape[0], dtype=bool)
        return is_estimable(W @ self.linfct_full[rows], self.nbasis.basis)

    def _tests(self, L: np.ndarray, level: float,
               estimable: np.ndarray | None = None) -> pd.DataFrame:
        if estimable is None or estimable.all():
            return contrast_tests(self.fit, L, ddf=self.ddf, level=level)
        return _tests_with_nonest(self.fit, L, self.ddf, level, estimable)

    def table(self, type: str | None = None) -> pd.DataFrame:
        """The EMMs (emmeans' ``summary(emmeans(...))``).

        Parameters
        ----------
        type : {"link", "response"}, optional
            ``"response"`` back-transforms a transformed response (``log(y)``: see
            :mod:`crossed.inference.emm_response`); default: the scale given to
            :func:`emmeans`.

        Returns
        -------
        pandas.DataFrame
            Key columns (``by`` then ``specs``), ``estimate`` (EMM; ``response`` on the
            response scale; for :func:`crossed.inference.emtrends.emtrends` the slope,
            named as emmeans names it, ``<var>.trend``), ``std_error`` (delta method on
            the response scale), ``df``,
            ``conf_low``, ``conf_high`` (t intervals at ``attrs["conf_level"]``,
            back-transformed on the response scale). Validated against emmeans 1.8.4
            (``lmer.df = "satterthwaite"`` and ``"kenward-roger"``; ``type = "response"``).
        """
        rows = np.arange(len(self.grid))
        est = self._estimable(np.eye(len(rows)), rows)
        res = self._tests(self.linfct, self.level, est)
        out = pd.concat([self.grid.reset_index(drop=True),
                         res[["estimate", "std_error", "df", "conf_low", "conf_high"]]], axis=1)
        messages = list(self.messages)
        if not est.all():
            out["note"] = np.where(est, "", NONEST)
            messages.append(NONEST_NOTE)
        out.attrs.update(conf_level=self.level, ddf=self.ddf, messages=messages,
                         estimate_name=self.estimate_name, type="link",
                         show_ddf=self._names_ddf())
        if self._type(type) == "response" and self.tran is not None:
            out = back_means(out, self.tran)
        if self.estimate_name.endswith(".trend"):
            # emtrends: the slope column is named as emmeans names it (``Days.trend``)
            out = out.rename(columns={"estimate": self.estimate_name})
        return result_table(out, "emmeans")

    # ------------------------------------------------------------------ contrasts
    def _groups(self, by: list[str]) -> list[np.ndarray]:
        if not by:
            return [np.arange(len(self.grid))]
        keys = list(zip(*[self.grid[b] for b in by], strict=True))
        seen = list(dict.fromkeys(keys))
        return [np.array([i for i, k in enumerate(keys) if k == s]) for s in seen]

    def contrast(self, method: str | dict = "pairwise", adjust: str | None = None,
                 by: list[str] | str | None = None, ref: int | str = 0,
                 level: float | None = None, type: str | None = None) -> pd.DataFrame:
        """Contrasts among the EMMs (emmeans' ``contrast``), within each ``by`` group.

        Parameters
        ----------
        method : str or dict
            ``"pairwise"`` (first minus later levels), ``"revpairwise"``,
            ``"trt.vs.ctrl"`` (each level minus the control ``ref``), ``"trt.vs.ctrl1"``,
            ``"trt.vs.ctrlk"``, ``"consec"`` (each level minus the one before), ``"eff"``
            (each level minus the average), ``"poly"`` (orthogonal polynomials) or custom
            weights ``{name: weights over the means of a group}``
            (:mod:`crossed.inference.emm_contrasts`).
        adjust : str, optional
            Multiplicity adjustment (:mod:`crossed.inference.adjust`); emmeans' defaults:
            ``tukey`` for pairwise, ``dunnettx`` for trt.vs.ctrl, ``mvt`` for consec,
            ``fdr`` for eff, ``none`` for poly and custom weights. ``tukey`` on
            non-pairwise contrasts becomes ``sidak``, as in emmeans.
        by : list of str, optional
            Grouping factors (default: those of the EMMs).
        ref : int or str
            The control level of ``trt.vs.ctrl``: its index (0-based) or the level.
        level : float, optional
            Confidence level (default: the EMMs').
        type : {"link", "response"}, optional
            ``"response"``: ratios for a log-transformed response
            (:mod:`crossed.inference.emm_response`); default: the EMMs' ``type``.

        Returns
        -------
        pandas.DataFrame
            ``contrast`` (label such as ``"A - B"``), the ``by`` columns, ``estimate``,
            ``std_error``, ``df``, ``statistic`` (t ratio), ``p_value`` (adjusted),
            ``conf_low``, ``conf_high`` (adjusted intervals); ``note`` (``"nonEst"``) when
            some contrast is not estimable. ``attrs``: ``adjust``, ``conf_level``.
            Validated against emmeans 1.8.4 ``pairs()`` (Tukey and none) and
            ``contrast()`` with each method above (mvt: to 1e-3, R's Monte Carlo error).

        Notes
        -----
        As in emmeans, a family (``by`` group) of a single contrast is not adjusted, and the
        family size of an adjustment counts the non-estimable contrasts too.
        """
        by = self.by if by is None else as_list(by)
        level = self.level if level is None else level
        pairwise = isinstance(method, str) and method in ("pairwise", "revpairwise")
        if adjust is None:
            adjust = default_adjust(method)
        adjust = str(adjust).lower()
        if adjust == "tukey" and not pairwise:
            adjust = "sidak"
        inner = [f for f in list(self.grid.columns) if f not in by]
        frames, used, nonest = [], set(), False
        for rows in self._groups(by):
            sub = self.grid.iloc[rows]
            labels = grid_labels(sub[inner])
            raw = [" ".join(map(str, r)) for r in sub[inner].itertuples(index=False)]
            W, names = contrast_weights(method, labels, ref, raw)
            L = W @ self.linfct[rows]
            est = self._estimable(W, rows)
            if names == [NOTHING]:  # one mean: emmeans prints "(nothing)  nonEst"
                est = np.zeros(1, dtype=bool)
            res = self._tests(L, level, est)
            k = len(rows)
            fam_adjust = adjust if len(names) > 1 else "none"  # emmeans: one contrast
            used.add(fam_adjust)
            corr = self._corr(L) if fam_adjust == "mvt" else None
            res["p_value"] = adjust_p(res["statistic"], res["df"], res["p_value"],
                                      fam_adjust, k, corr=corr)
            crit = critical_values(res["df"].to_numpy(), level, fam_adjust, k, len(names),
                                   corr=corr)
            res["conf_low"] = res["estimate"] - crit * res["std_error"]
            res["conf_high"] = res["estimate"] + crit * res["std_error"]
            res.insert(0, "contrast", names)
            for j, b in enumerate(by):
                res.insert(1 + j, b, sub[b].iloc[0])
            res["note"] = np.where(est, "", NONEST)
            nonest = nonest or not est.all()
            frames.append(res)
        out = pd.concat(frames, ignore_index=True)
        if not nonest:
            out = out.drop(columns="note")
        out.attrs.update(adjust=adjust if adjust in used else "none", conf_level=level,
                         ddf=self.ddf, messages=[NONEST_NOTE] if nonest else [], type="link",
                         show_ddf=self._names_ddf())
        if self._type(type) == "response" and self.tran is not None:
            out = back_contrasts(out, self.tran)
        return result_table(out, "emmeans")

    def _corr(self, L: np.ndarray) -> np.ndarray:
        """Correlation of the estimates L β̂ (the mvt adjustment's)."""
        V = L @ contrast_vcov(self.fit, self.ddf) @ L.T
        d = np.sqrt(np.clip(np.diag(V), 1e-300, None))
        return V / np.outer(d, d)

    def pairs(self, adjust: str = "tukey", reverse: bool = False,
              by: list[str] | str | None = None, type: str | None = None) -> pd.DataFrame:
        """Pairwise differences of the EMMs (emmeans' ``pairs``); see :meth:`contrast`."""
        return self.contrast("revpairwise" if reverse else "pairwise", adjust=adjust, by=by,
                             type=type)

    def joint_tests(self) -> pd.DataFrame:
        """emmeans' ``joint_tests`` of the fit, within this object's ``by`` groups."""
        return result_table(joint_tests(self.fit, by=self.by or None, ddf=self.ddf),
                            "emmeans")

    # ------------------------------------------------------------------ display
    def describe(self) -> str:
        """A one-line description (specs, number of means, df method, level)."""
        by = f" by {', '.join(self.by)}" if self.by else ""
        return (f"<EMMeans of {', '.join(self.specs)}{by}: {len(self.grid)} means, "
                f"{self.ddf} df, {self.level:.0%} intervals>")


def _tests_with_nonest(fit: LmerFit, L: np.ndarray, ddf: str, level: float,
                       estimable: np.ndarray) -> pd.DataFrame:
    """t tests of the estimable rows of L; NaN in every column of the others."""
    cols = ["estimate", "std_error", "df", "statistic", "p_value", "conf_low", "conf_high"]
    out = pd.DataFrame(np.nan, index=range(L.shape[0]), columns=cols)
    if estimable.any():
        res = contrast_tests(fit, L[estimable], ddf=ddf, level=level)
        out.loc[np.flatnonzero(estimable), cols] = res[cols].to_numpy()
    out.attrs.update(conf_level=level, ddf=ddf)
    return out


def emmeans(fit: LmerFit, specs: str | list[str], by: str | list[str] | None = None,
            ddf: str = "satterthwaite", level: float = 0.95, at: dict | None = None,
            cov_reduce="mean", type: str = "link") -> EMMeans:
    """Estimated marginal means (emmeans' ``emmeans(fit, ~ specs, by = by)``).

    Parameters
    ----------
    fit : LmerFit
    specs : str or list of str
        Factor(s) whose means are wanted: ``"language"``, ``"language:task"``, a list, or
        ``"1"`` for the overall mean (emmeans' ``~ 1``). ``"a | b"`` is ``specs="a",
        by="b"``.
    by : str or list of str, optional
        Variables to condition on (means and contrasts within each of their levels); a
        covariate given several values by ``at`` may be one.
    ddf : {"satterthwaite", "kenward-roger", "none"}
        emmeans' ``lmer.df``.
    level : float
        Confidence level of the intervals.
    at : dict, optional
        Grid values per variable (emmeans' ``at``): ``{"num_epochs": [1, 3]}`` puts a
        covariate at those values (the means average over them unless it is in
        ``specs``/``by``), a list of levels restricts a factor.
    cov_reduce : str, callable or dict
        How other covariates enter the grid (emmeans' ``cov.reduce``): ``"mean"``
        (default), ``"min"``, ``"max"``, ``"median"``, a function of the column, or a dict
        of those per covariate.
    type : {"link", "response"}
        Scale of the table and contrasts: ``"response"`` back-transforms a response
        written ``log(y)``, ``np.log(y)``, ``sqrt(y)``, ... (ratios for log contrasts).

    Returns
    -------
    EMMeans
        ``table()``, ``pairs(adjust=...)``, ``contrast(method=...)``, ``joint_tests()``.
        Warns with emmeans' note when a factor of ``specs``/``by`` is involved in an
        interaction (the means average over the other factors of that interaction).
    """
    if not hasattr(fit, "family"):  # (a GLMM's offset is added by glmm_emmeans)
        refuse_prior(fit, "emmeans()", weights=False,
                     why="emmeans adds the mean offset to each EMM, not done here for lmer")
    specs_l, by_l = split_specs(specs, by)
    method = normalise_ddf(ddf)
    tran = _checked_type(fit, type)
    grid, X = reference_grid(fit, cov_reduce=cov_reduce, at=at)
    facs = specs_l + [b for b in by_l if b not in specs_l]
    keys, L = marginal_linfct(grid, X, facs)  # specs vary fastest, by groups contiguous
    if not facs:  # emmeans' ~ 1
        keys = pd.DataFrame({"1": ["overall"]})
    messages = []
    if involved_in_interactions(fit, facs):
        messages.append(INTERACTION_NOTE)
        warn(INTERACTION_NOTE, UserWarning)
    nb = fit_null_basis(fit)
    L_full = None
    if nb is not None:
        _, L_full = marginal_linfct(grid, full_grid_matrix(fit, nb, cov_reduce, at), facs)
    return EMMeans(fit=fit, specs=specs_l or ["1"], by=by_l, grid=keys, linfct=L,
                   ddf=method, level=level, messages=messages, linfct_full=L_full, nbasis=nb,
                   tran=tran, type=type)


def split_specs(specs, by) -> tuple[list[str], list[str]]:
    """``specs`` and ``by`` as lists; ``"a | b"`` splits into specs ``a`` and by ``b``;
    ``"1"`` (emmeans' ``~ 1``) is no factor; emmeans' one-sided formula ``"~ a"``,
    ``"~ a * b | c"`` reads as ``"a"``, ``["a", "b"]`` by ``c``."""
    if isinstance(specs, str) and specs.strip().startswith("~"):
        specs = specs.strip()[1:].strip() or "1"
    if isinstance(specs, str) and "|" in specs:
        left, _, right = specs.partition("|")
        specs = left
        by = as_list(by) + as_list(right)
    if isinstance(specs, str) and specs.strip() in ("1", "~1", "~ 1"):
        return [], as_list(by)
    return as_list(specs), as_list(by)


def _checked_type(fit: LmerFit, type: str) -> Transform | None:
    """The response transform for ``type="response"`` (None on the link scale)."""
    if type not in ("link", "response"):
        raise ValueError(f"type must be 'link' or 'response', got {type!r}")
    response = fit.design.spec.response
    tran = response_transform(response)
    if type == "response" and tran is None and response not in fit.design.columns:
        raise ValueError(f"type='response': cannot back-transform the response {response!r}; "
                         "recognised are log, log2, log10, log1p, sqrt and exp of a column "
                         "(np.log(y), log(y), sqrt(y), ...)")
    return tran


# ---------------------------------------------------------------------- joint tests
def consec_weights(k: int) -> np.ndarray:
    """emmeans' ``consec.emmc``: level i+1 minus level i (rows: contrasts)."""
    C = np.zeros((k - 1, k))
    for i in range(k - 1):
        C[i, i], C[i, i + 1] = -1.0, 1.0
    return C


def _zap(x: np.ndarray, tol: float = 1e-7) -> np.ndarray:
    return np.where(np.abs(x) < tol, 0.0, x)


def joint_f(fit: LmerFit, LL: np.ndarray, ddf: str, nb: NullBasis | None = None) -> dict:
    """emmeans' ``test(..., joint = TRUE)`` of the rows of LL.

    Rows are over every column of the fixed part when ``nb`` is given (a rank-deficient
    fit), else over the fit's coefficients. Non-estimable rows are replaced by the
    estimable combinations of the rows (note ``e``); F is computed on an orthonormal basis
    of their span (R's pivoted QR; note ``d`` when rows were dependent), denominator df
    the smallest df of the basis rows (emmeans' rule).

    Returns
    -------
    dict
        ``df1``, ``df2``, ``statistic``, ``p_value``, ``note`` (``""``, ``"d"``, ``"e"``
        or ``"d e"``) and ``L`` (the basis rows, over the same columns as LL).
    """
    LL = np.atleast_2d(np.asarray(LL, dtype=float))
    empty = np.any(np.isnan(LL), axis=1) | np.all(LL == 0, axis=1)
    LL = LL[~empty]
    flag_d, flag_e = False, bool(empty.any())
    if nb is not None and LL.shape[0] and not is_estimable(LL, nb.basis).all():
        LL = estimable_subspace(_zap(LL), nb.basis)
        flag_e = True
    none = {"df1": 0, "df2": np.nan, "statistic": np.nan, "p_value": np.nan,
            "note": "d e", "L": None}
    if LL.shape[0] == 0:
        return none
    Q, R, r, _ = r_qr(_zap(LL).T)
    if r == 0:
        return none
    if r < LL.shape[0]:
        flag_d = True
    nz = np.flatnonzero(zapsmall(np.diag(R[:r, :r])) != 0)
    r = len(nz)
    tQ_all = Q[:, nz].T
    tQ = tQ_all[:, nb.kept] if nb is not None else tQ_all
    res = contrast_tests(fit, tQ, ddf=ddf)
    z = res["estimate"].to_numpy()
    V = contrast_vcov(fit, ddf)
    F = float(z @ np.linalg.solve(tQ @ V @ tQ.T, z)) / r
    df2 = float(np.min(res["df"]))
    p = float(stats.f.sf(F, r, df2)) if np.isfinite(df2) else float(stats.chi2.sf(F * r, r))
    note = " ".join(n for n, f in (("d", flag_d), ("e", flag_e)) if f)
    return {"df1": r, "df2": df2, "statistic": F, "p_value": p, "note": note,
            "L": zapsmall(tQ_all)}


def _by_groups(keys: pd.DataFrame, by_l: list[str]) -> list[np.ndarray]:
    if not by_l:
        return [np.arange(len(keys))]
    kk = list(zip(*[keys[b] for b in by_l], strict=True))
    return [np.array([i for i, k in enumerate(kk) if k == s]) for s in dict.fromkeys(kk)]


def joint_tests(fit: LmerFit, by: str | list[str] | None = None,
                ddf: str = "satterthwaite") -> pd.DataFrame:
    """emmeans' ``joint_tests``: F tests of every model term from the reference grid.

    Covariates enter the grid at mean ± 1 (``cov.reduce = meanint``). For each set of grid
    variables contained together in some model term, the interaction of consecutive
    differences among their EMMs is tested jointly: F on an orthonormal basis of the
    contrasts, denominator df the smallest df of the basis rows (emmeans' rule).

    On a rank-deficient fit only the estimable part of each term's contrasts is tested
    (note ``e``: df1 reduced), and, as in emmeans, a ``(confounded)`` row tests what the
    estimable differences among all cells hold beyond the terms' tests. Terms with
    nothing estimable (df1 = 0) are left out.

    Returns
    -------
    pandas.DataFrame
        ``term`` (emmeans' "model term"), the ``by`` columns, ``num_df``, ``den_df``,
        ``statistic`` (F ratio, unrounded), ``p_value``, and ``note`` when some test has
        one (``"e"``: df1 reduced due to non-estimability, ``"d"``: due to linear
        dependence); sorted by the order of the term.
    """
    method = normalise_ddf(ddf)
    by_l = as_list(by)
    grid, X = reference_grid(fit, cov_reduce="meanint")
    nb = fit_null_basis(fit)
    if nb is not None:
        X = full_grid_matrix(fit, nb, cov_reduce="meanint")
    facs = [v for v in grid.columns if v not in by_l]
    info = TermInfo(fit)
    term_vars = [set(info.vars[t]) for t in info.labels]
    rows = []
    bases: dict[int, list[np.ndarray]] = {}
    for size in range(1, len(facs) + 1):
        for these in itertools.combinations(facs, size):
            if not any(set(these) <= tv for tv in term_vars):
                continue
            keys, L = marginal_linfct(grid, X, list(these) + by_l)
            for gi, g in enumerate(_by_groups(keys, by_l)):
                nlev = [len(dict.fromkeys(keys[f].iloc[g])) for f in these]
                C = np.ones((1, 1))
                for k in nlev:  # first factor fastest
                    C = np.kron(consec_weights(k), C)
                res = joint_f(fit, C @ L[g], method, nb)
                if res["L"] is not None:
                    bases.setdefault(gi, []).append(res["L"])
                row = {"term": ":".join(these)}
                for b in by_l:
                    row[b] = keys[b].iloc[g[0]]
                rows.append({**row, "num_df": res["df1"], "den_df": res["df2"],
                             "statistic": res["statistic"], "p_value": res["p_value"],
                             "note": res["note"]})
    if rows and facs:
        rows += _confounded(fit, grid, X, facs, by_l, bases, method, nb)
    out = pd.DataFrame(rows)
    if len(out):
        out = out[out["num_df"] > 0].reset_index(drop=True)
        if (out["note"] == "").all():
            out = out.drop(columns="note")
    out.attrs["ddf"] = method
    messages = []
    if "note" in out and out["note"].str.contains("e").any():
        messages.append(JOINT_EST_NOTE)
    if "note" in out and out["note"].str.contains("d").any():
        messages.append(JOINT_DEP_NOTE)
    out.attrs["messages"] = messages
    return out


def _confounded(fit: LmerFit, grid: pd.DataFrame, X: np.ndarray, facs: list[str],
                by_l: list[str], bases: dict[int, list[np.ndarray]], method: str,
                nb: NullBasis | None) -> list[dict]:
    """emmeans' ``(confounded)`` rows: the joint test of consecutive differences among all
    cells minus the terms' tests (by F·df1 difference), per ``by`` group."""
    keys, L = marginal_linfct(grid, X, facs + by_l)
    out = []
    for gi, g in enumerate(_by_groups(keys, by_l)):
        if len(g) < 2:
            continue
        ref = joint_f(fit, consec_weights(len(g)) @ L[g], method, nb)
        if ref["df1"] == 0:
            continue
        tst = {"df1": 0, "statistic": 0.0}
        if bases.get(gi):
            tst = joint_f(fit, np.vstack(bases[gi]), method, nb)
        df1 = ref["df1"] - tst["df1"]
        F = np.nan
        if df1 > 0:
            F = (ref["df1"] * ref["statistic"] - tst["df1"] * tst["statistic"]) / df1
        p = np.nan
        if df1 > 0:
            df2 = ref["df2"]
            p = float(stats.f.sf(F, df1, df2) if np.isfinite(df2) else stats.chi2.sf(F * df1, df1))
        row = {"term": "(confounded)"}
        for b in by_l:
            row[b] = keys[b].iloc[g[0]]
        out.append({**row, "num_df": df1, "den_df": ref["df2"], "statistic": F,
                    "p_value": p, "note": ""})
    return out
