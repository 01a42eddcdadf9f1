"""The statsmodels engine: a ModelSpec translated to ``statsmodels`` ``MixedLM``.

statsmodels fits one kind of model: observations fall into independent *groups*; within a
group there is one correlated random-effects vector (``exog_re``, covariance ``cov_re``) and
any number of *variance components* (``exog_vc``), each a set of independent random effects
with one shared variance. lme4's terms are mapped onto that as follows:

* a grouping factor G is chosen such that every other grouping factor is nested in it (each
  of its levels occurs within one level of G); the finest such factor is taken. When none
  exists (crossed factors), every row goes into one group holding all data;
* a correlated vector term ``(1 + x | G)`` becomes ``exog_re`` (its columns in lme4's order);
* every scalar term ``(z | g)`` (also each term of ``||``) becomes a variance component: in
  each group, one column per level of g present in the group, holding z.

Specifications outside that (a correlated vector term on a factor in which the others are not
nested: correlated random slopes on crossed factors; two correlated vector terms) raise
:class:`~crossed.engines.errors.UnsupportedModelError`. The result is converted to lme4's
scale: θ is the relative Cholesky factor (cov_re/σ² = LLᵀ; sqrt(vcomp/σ²) for a component)
in lme4's term order, and the criterion is −2 × statsmodels' log-likelihood, which uses
lme4's constants (REML: (n − p) log 2π with σ² profiled as r²/(n − p)).

β, its covariance (the fixed-effects block of the inverse observed information that
statsmodels reports), σ and the criterion are statsmodels' own; the spherical random effects
u are derived from θ by the penalised least squares problem of the design.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from crossed._warn import warn
from crossed.design import Design, ReTerm
from crossed.engines.errors import UnsupportedModelError
from crossed.engines.registry import Capabilities, FunctionEngine
from crossed.model.control import LmerControl
from crossed.model.convergence import ConvergenceStatus
from crossed.model.result import LmerResult

__all__ = ["ENGINE", "Layout", "MAX_COST", "MAX_DENSE_ENTRIES", "POLISH", "SUGGEST",
           "build_model", "check_size", "fit_best", "fit_statsmodels", "supports",
           "theta_from_statsmodels", "translate"]

# dense entries of the per-group variance-component matrices above which statsmodels would
# need more than ~400 MB (and hours): the InstEval-sized crossed designs
MAX_DENSE_ENTRIES = 50_000_000
# work of one statsmodels score evaluation, sum over groups of n_g q_g^2 times the number
# of covariance parameters: blurb_ccmem (3 crossed intercepts, 3k rows) is 4.5e7 and takes
# ~15 s on the 2-core machines; blurb_ccmem_slopes (11 components) is 8.1e9 and took 9 min
MAX_COST = 1e9
SUGGEST = "use engine='native' (or engine='lme4')"
# statsmodels' default optimiser chain, then polishing methods (see fit_best)
POLISH = (None, "powell", "nm")


@dataclass(frozen=True)
class Layout:
    """How a design is written for ``MixedLM``.

    Attributes
    ----------
    group_block : int or None
        Index of the design block whose grouping factor is statsmodels' ``groups``; None
        puts every row into one group.
    re_term : ReTerm or None
        The correlated vector term fitted as ``exog_re`` (on the groups factor).
    vc_terms : tuple of ReTerm
        Scalar terms fitted as variance components, in lme4's order.
    """

    group_block: int | None
    re_term: ReTerm | None
    vc_terms: tuple[ReTerm, ...]

    def describe(self, design: Design) -> str:
        """The translation in words (for messages and docs)."""
        blocks = design.random.blocks
        groups = blocks[self.group_block].group if self.group_block is not None else "(all rows)"
        parts = [f"groups={groups}"]
        if self.re_term is not None:
            parts.append(f"re=[{', '.join(self.re_term.columns)}]")
        parts.append("vc=[" + ", ".join(f"{t.columns[0]}|{t.group}" for t in self.vc_terms) + "]")
        return "; ".join(parts)


def _nested_in(inner_codes: np.ndarray, n_inner: int, outer_codes: np.ndarray,
               n_outer: int) -> bool:
    """Every level of the inner factor occurs within a single level of the outer one."""
    pairs = np.unique(inner_codes.astype(np.int64) * n_outer + outer_codes)
    return len(pairs) == n_inner


def translate(design: Design) -> Layout:
    """Map the design's random terms onto statsmodels' groups / exog_re / exog_vc.

    Parameters
    ----------
    design : Design

    Returns
    -------
    Layout

    Raises
    ------
    UnsupportedModelError
        For correlated random-effects vectors statsmodels cannot express.
    """
    blocks = design.random.blocks
    terms = design.random.terms
    vector = [t for t in terms if len(t.columns) > 1]
    if len(vector) > 1:
        names = ", ".join(f"({' + '.join(t.columns)} | {t.group})" for t in vector)
        raise UnsupportedModelError(
            f"statsmodels' MixedLM allows one correlated random-effects vector (re_formula) "
            f"per model; this model has {len(vector)}: {names}. Write the slopes as "
            f"uncorrelated (||) or {SUGGEST}"
        )
    candidates = []
    for b, blk in enumerate(blocks):
        if all(_nested_in(o.codes, o.nlevels, blk.codes, blk.nlevels)
               for c, o in enumerate(blocks) if c != b):
            candidates.append(b)
    re_term = vector[0] if vector else None
    if re_term is not None:
        if re_term.block not in candidates:
            raise UnsupportedModelError(
                f"statsmodels cannot express correlated random slopes "
                f"({' + '.join(re_term.columns)} | {re_term.group}) on a grouping factor "
                "that is crossed with the model's other grouping factors: MixedLM's "
                "correlated random effects (re_formula) live within groups, and the other "
                f"factors are not nested in {re_term.group!r}. Write the slopes as "
                f"uncorrelated (||) or {SUGGEST}"
            )
        group_block = re_term.block
    elif candidates:
        group_block = max(candidates, key=lambda b: blocks[b].nlevels)
    else:
        group_block = None
    vc_terms = tuple(t for t in terms if t is not re_term)
    return Layout(group_block=group_block, re_term=re_term, vc_terms=vc_terms)


def _group_codes(design: Design, layout: Layout) -> np.ndarray:
    if layout.group_block is None:
        return np.zeros(design.n, dtype=np.int64)
    return design.random.blocks[layout.group_block].codes


def _group_rows(design: Design, layout: Layout) -> tuple[np.ndarray, list[np.ndarray]]:
    """statsmodels' group code of each row, and the rows of each group."""
    groups = _group_codes(design, layout)
    ngroups = int(groups.max()) + 1
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(ngroups + 1))
    return groups, [order[bounds[g]:bounds[g + 1]] for g in range(ngroups)]


def check_size(design: Design, layout: Layout, rows: list[np.ndarray] | None = None) -> None:
    """Raise :class:`UnsupportedModelError` when statsmodels' dense per-group matrices
    would be too large (entries, or operations per gradient)."""
    if rows is None:
        _, rows = _group_rows(design, layout)
    blocks = design.random.blocks
    entries = 0
    for term in layout.vc_terms:
        codes = blocks[term.block].codes
        entries += sum(len(r) * len(np.unique(codes[r])) for r in rows)
    if entries > MAX_DENSE_ENTRIES:
        raise UnsupportedModelError(
            "statsmodels' MixedLM stores each variance component as a dense matrix per group; "
            f"for this model ({layout.describe(design)}) that is {entries:,} entries "
            f"(> {MAX_DENSE_ENTRIES:,}), beyond what it can fit in reasonable time and "
            "memory (crossed factors all fall into one group). Use engine='native' (or "
            "engine='lme4')."
        )

    q_g = np.zeros(len(rows))
    for term in layout.vc_terms:
        codes = blocks[term.block].codes
        q_g += [len(np.unique(codes[r])) for r in rows]
    nre = len(layout.re_term.columns) if layout.re_term is not None else 0
    npar = nre * (nre + 1) // 2 + len(layout.vc_terms)
    cost = float(np.sum([len(r) for r in rows] * (q_g + nre) ** 2)) * npar
    if cost > MAX_COST:
        raise UnsupportedModelError(
            "statsmodels' MixedLM works with dense per-group matrices: this model "
            f"({layout.describe(design)}) has groups of up to {int(q_g.max()) + nre} "
            f"random-effect columns and {npar} covariance parameters, an estimated "
            f"{cost:.1e} operations per gradient (limit {MAX_COST:.0e}; 8e9 took 9 minutes "
            f"for a 3,120-row table). Use engine='native' (or engine='lme4')."
        )


def build_model(design: Design, layout: Layout):
    """The ``MixedLM`` model of a design (fixed-effects columns as in lme4).

    Parameters
    ----------
    design : Design
    layout : Layout

    Returns
    -------
    statsmodels.regression.mixed_linear_model.MixedLM

    Raises
    ------
    UnsupportedModelError
        When statsmodels' dense per-group matrices would be too large.
    """
    from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec

    blocks = design.random.blocks
    groups, rows = _group_rows(design, layout)
    check_size(design, layout, rows)

    names, colnames, mats = [], [], []
    for term in layout.vc_terms:
        blk = blocks[term.block]
        z = blk.Z[:, term.offset]
        per_group_mats, per_group_names = [], []
        for r in rows:
            levels, local = np.unique(blk.codes[r], return_inverse=True)
            m = np.zeros((len(r), len(levels)))
            m[np.arange(len(r)), local] = z[r]
            per_group_mats.append(m)
            per_group_names.append([blk.levels[lv] for lv in levels])
        names.append(f"{term.group}.{term.columns[0]}")
        colnames.append(per_group_names)
        mats.append(per_group_mats)
    exog_re = None
    if layout.re_term is not None:
        t = layout.re_term
        exog_re = blocks[t.block].Z[:, t.offset:t.offset + len(t.columns)]
    return MixedLM(design.y, design.X, groups=groups, exog_re=exog_re,
                   exog_vc=VCSpec(names, colnames, mats))


def _psd_cholesky(S: np.ndarray) -> np.ndarray:
    """Lower-triangular L with LLᵀ = S for a positive semi-definite S (zero columns where
    a pivot vanishes), diagonal non-negative: lme4's parameterisation of a singular Σ."""
    k = S.shape[0]
    L = np.zeros_like(S)
    for j in range(k):
        d = S[j, j] - L[j, :j] @ L[j, :j]
        if d <= 1e-14 * max(S[j, j], 1e-300):
            continue
        L[j, j] = np.sqrt(d)
        for i in range(j + 1, k):
            L[i, j] = (S[i, j] - L[i, :j] @ L[j, :j]) / L[j, j]
    return L


def theta_from_statsmodels(design: Design, layout: Layout, cov_re_rel: np.ndarray | None,
                           vcomp_rel: np.ndarray) -> np.ndarray:
    """lme4's θ from statsmodels' covariance parameters relative to σ².

    Parameters
    ----------
    design : Design
    layout : Layout
    cov_re_rel : numpy.ndarray or None
        ``cov_re / scale`` (k x k), for the vector term.
    vcomp_rel : numpy.ndarray
        ``vcomp / scale``, one per variance component (``layout.vc_terms`` order).

    Returns
    -------
    numpy.ndarray
        θ in lme4's order: per term, the lower triangle of its relative Cholesky factor
        column by column.
    """
    theta = np.zeros(design.random.ntheta)
    vc_index = {id(t): i for i, t in enumerate(layout.vc_terms)}
    for term in design.random.terms:
        if term is layout.re_term:
            L = _psd_cholesky(np.asarray(cov_re_rel, dtype=float))
            k = len(term.columns)
            vals = [L[r, c] for c in range(k) for r in range(c, k)]
            theta[term.theta_start:term.theta_start + len(vals)] = vals
        else:
            theta[term.theta_start] = np.sqrt(max(float(vcomp_rel[vc_index[id(term)]]), 0.0))
    return theta


def fit_best(model, reml: bool) -> tuple[object, list, str | None]:
    """Fit with statsmodels' default optimiser, then polish with Powell and Nelder-Mead.

    statsmodels' default (BFGS, falling back to L-BFGS and CG) stops short of the optimum on
    some reference cases (a random-slope model, optima on the boundary). When it had to
    retry, did not converge or warned of the boundary, each further method starts from the
    best point so far and is kept only if it raises the log-likelihood.

    Parameters
    ----------
    model : MixedLM
    reml : bool

    Returns
    -------
    result : MixedLMResults
        The fit with the highest (REML) log-likelihood.
    caught : list of warnings.WarningMessage
        Warnings raised by that fit.
    method : str or None
        The polishing method that produced it (None: statsmodels' default).
    """
    best, best_caught, best_method = None, [], None
    for method in POLISH:
        start = best.params_object if best is not None else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                res = model.fit(reml=reml, method=method, start_params=start)
            except (np.linalg.LinAlgError, ValueError):
                if best is None:
                    raise
                continue
        if best is None or (np.isfinite(res.llf) and res.llf > best.llf + 1e-12 * abs(best.llf)):
            best, best_caught, best_method = res, list(caught), method
        if method is None and not _needs_polish(best, best_caught):
            break
    return best, best_caught, best_method


def _needs_polish(result, caught: list) -> bool:
    """The default optimiser had to retry, did not converge, or ended near the boundary."""
    if not result.converged:
        return True
    text = " ".join(str(w.message) for w in caught)
    return "Retrying" in text or "boundary" in text or "failed" in text


def fit_statsmodels(design: Design, reml: bool = True, control: LmerControl | None = None,
                    data_name: str = "data") -> LmerResult:
    """Fit a design with statsmodels' ``MixedLM`` and return lme4-scaled results.

    Parameters
    ----------
    design : Design
    reml : bool
        REML (default) or maximum likelihood.
    control : LmerControl, optional
        Must be None: the optimiser settings are the native engine's; statsmodels runs with
        its defaults (BFGS, then L-BFGS and CG if BFGS does not converge).
    data_name : str

    Returns
    -------
    LmerResult
        ``engine="statsmodels"``; β, vcov, σ and the criterion are statsmodels'.

    Raises
    ------
    UnsupportedModelError
        When statsmodels cannot express the random-effects structure.
    """
    from crossed.model.finish import finish_fit
    from crossed.model.pls import PLS

    if control is not None:
        raise ValueError("control= sets the native engine's optimiser; the statsmodels "
                         "engine runs statsmodels' defaults (pass control=None)")
    t0 = time.perf_counter()
    layout = translate(design)
    model = build_model(design, layout)
    result, caught, method = fit_best(model, reml)
    sm_messages = [f"statsmodels: {w.message}" for w in caught
                   if not issubclass(w.category, (DeprecationWarning, FutureWarning))]
    if method is not None:
        sm_messages.append(f"statsmodels: optimum from method={method!r} (started from the "
                           "default optimiser's end point, which it improved)")
    scale = float(result.scale)
    cov_re_rel = (np.asarray(result.cov_re, dtype=float) / scale
                  if layout.re_term is not None else None)
    vcomp_rel = np.asarray(result.vcomp, dtype=float) / scale
    theta = theta_from_statsmodels(design, layout, cov_re_rel, vcomp_rel)
    k_fe = design.X.shape[1]
    beta = np.asarray(result.fe_params, dtype=float)
    vcov = np.asarray(result.cov_params(), dtype=float)[:k_fe, :k_fe]
    vcov = 0.5 * (vcov + vcov.T)
    deviance = -2.0 * float(result.llf)

    pls = PLS.of(design)
    f = pls.factor(theta)
    # finish_fit gives u (and the singularity check) at statsmodels' θ; lme4's derivative
    # checks are the native optimiser's and are not run here
    base = finish_fit(design, pls, f, theta, deviance, reml, "statsmodels", None,
                      LmerControl(check_conv=False), None, data_name)
    converged = bool(result.converged)
    # statsmodels says whether it converged, not why not
    status = ConvergenceStatus.combine(base.is_singular,
                                       None if converged else ConvergenceStatus.FAILED)
    messages = list(base.messages) + sm_messages
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, FutureWarning)):
            warn(w.message, w.category)
    return replace(base, beta=beta, sigma=float(np.sqrt(scale)), deviance=deviance,
                   vcov_beta=vcov, converged=converged, messages=tuple(messages),
                   convergence=status, fit_seconds=time.perf_counter() - t0,
                   engine_info={"statsmodels_result": result, "statsmodels_layout": layout})


def supports(design: Design) -> str | None:
    """None, or why MixedLM cannot fit ``design`` (the :class:`UnsupportedModelError`
    message fitting would raise: a structure it cannot express, or a prohibitive cost)."""
    try:
        check_size(design, translate(design))
    except UnsupportedModelError as exc:
        return str(exc)
    return None


ENGINE = FunctionEngine(
    "statsmodels", fit_statsmodels, supports, capabilities=Capabilities(glmm_refusal=(
        "the 'statsmodels' engine does not fit GLMMs: statsmodels' BinomialBayesMixedGLM "
        "and PoissonBayesMixedGLM are variational Bayes methods, not lme4's maximum "
        "likelihood (Laplace/adaptive Gauss-Hermite) estimator, so their numbers would "
        "differ; use engine='native' or 'lme4'")))
