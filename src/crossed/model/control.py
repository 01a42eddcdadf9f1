"""The optimiser's settings and record: :class:`LmerControl` (lme4's ``lmerControl()``),
:class:`OptSummary` (what the optimiser was asked and what it did) and :class:`Restart`
(one continuation after lme4's stopping rule).

Part of the model core: every engine takes an ``LmerControl`` and a fit keeps its
``OptSummary``; the native engine's optimisers (``crossed.engines.native.optimize``) fill
them in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from crossed.model.status import ConvergenceStatus

__all__ = ["AUTO_LBFGSB_DENSE", "AUTO_LBFGSB_THETA", "OPTIMIZERS", "PIRLS_MODES", "LmerControl",
           "OptSummary", "Restart"]


OPTIMIZERS = ("auto", "bobyqa", "lbfgsb", "nelder_mead")
PIRLS_MODES = ("lme4", "exact", "auto")
AUTO_LBFGSB_THETA = 5
"""``optimizer="auto"`` runs L-BFGS-B from this many θ on, BOBYQA below (see LmerControl)."""
AUTO_LBFGSB_DENSE = 1000
"""... and with fewer θ where each evaluation factors a dense matrix of at least this order
and every block after the first is scalar (see LmerControl)."""


@dataclass(frozen=True)
class LmerControl:
    """Optimiser settings; the defaults are lme4's (``lmerControl()`` with ``nloptwrap``).

    Attributes
    ----------
    optimizer : str
        ``"bobyqa"`` (NLopt's LN_BOBYQA, lme4's default: lme4's path), ``"lbfgsb"``
        (scipy's L-BFGS-B on the analytic gradient of the criterion, ``model/gradient.py``;
        its own tolerances ``lbfgsb_gtol`` and ``lbfgsb_ftol``; at a stop on the boundary a
        second-order probe decides whether it continues, see ``converge.py``) or
        ``"auto"`` (default): L-BFGS-B for models with at least
        ``AUTO_LBFGSB_THETA`` (5) variance parameters, where BOBYQA's evaluations grow as
        the square of their number (blurb CCMEM + 8 slopes: ~1,500 BOBYQA evaluations, ~70
        L-BFGS-B evaluations with gradients), BOBYQA below, where it needs few evaluations
        and one costs a fraction of a gradient. Also L-BFGS-B with fewer θ where each
        evaluation factors a dense matrix of order ``AUTO_LBFGSB_DENSE`` (1,000) or more
        and the blocks after the first are scalar: there BLAS sets the cost, a gradient
        costs about three evaluations (the inverse of the factor, ``model/inverse.py``)
        and L-BFGS-B needs a fifth of BOBYQA's evaluations (InstEval, r = 1,145: 14
        against 76, the same criterion to 1e-13). With a later block of several columns
        the gradient costs more and L-BFGS-B's iterations save less (a third): slower.
        :attr:`OptSummary.optimizer` says which ran.
        Where ``"auto"``'s L-BFGS-B fit ends with a correlation of ±1 (a diagonal θ of a
        correlated block at its bound beside a nonzero θ), BOBYQA also runs from lme4's
        start and the lower criterion is kept (``engine.py``; the criterion is often
        bimodal in that correlation's sign: exist_multi with two correlated slopes).
        ``"nelder_mead"``: NLopt's Nelder–Mead simplex (``NLOPT_LN_NELDERMEAD``) under the
        same lower bounds, from the same start, with the same ``xtol_abs``, ``ftol_abs``,
        ``xtol_rel`` and ``maxeval`` (lme4 1.1-31's ``nloptwrap`` defaults) and NLopt's
        own initial simplex: lme4's ``lmerControl(optimizer = "nloptwrap", optCtrl =
        list(algorithm = "NLOPT_LN_NELDERMEAD"))``, allFit's
        ``"nloptwrap.NLOPT_LN_NELDERMEAD"``. After it run lme4's derivative check and the
        continuations exactly as after ``"bobyqa"`` (BOBYQA from Nelder–Mead's best point
        with the ``restart_*`` settings, the face probes, L-BFGS-B from a far θ; none with
        ``restarts=0``, which gives lme4's Nelder–Mead path). It is there mainly for
        :meth:`all_fit` (a second derivative-free algorithm); it needs more evaluations
        than BOBYQA.
        GLMMs (``cx.glmer(..., control=LmerControl(optimizer=...))``, both stages, as
        lme4's ``glmerControl(optimizer=...)``): ``"auto"`` and ``"bobyqa"`` run BOBYQA,
        ``"nelder_mead"`` Nelder–Mead, each with the GLMM engine's stage settings (initial
        steps, tolerances, β's coordinates: ``engines/native/glmer.py``); ``"lbfgsb"`` is
        refused (the GLMM criterion has no analytic gradient in crossed).
    xtol_abs, ftol_abs : float
        Absolute tolerances on theta and on the criterion (1e-8 each in lme4).
    xtol_rel : float
        Relative tolerance on theta: 1e-4, the default of R's ``nloptr``, which lme4's
        ``nloptwrap`` does not override, so lme4 stops on it too.
    maxeval : int
        Maximum number of criterion evaluations.
    check_conv : bool
        Run lme4's gradient/Hessian check at the optimum (costs about 2k² evaluations;
        from ``CHECK_GRADIENT_THETA`` θ on, 2k + 1 exact gradients: ``converge.py``).
    conv_tol : float
        Tolerance on the scaled gradient (lme4's ``check.conv.grad``, 2e-3).
    singular_tol : float
        A bounded theta below this marks the fit singular (lme4's ``isSingular``, 1e-4).
    restarts : int
        How many times the optimiser may continue after lme4's stopping rule (default 3; 0
        gives lme4's path and nothing more). It continues, from its best point with the
        ``restart_*`` tolerances, when lme4's derivative check fails (``check_conv``) or a
        bounded theta ends below ``edge_tol`` (near the boundary, where the singular/not
        singular decision depends on where the optimiser happened to stop). See
        ``engines/native/converge.py``.
    edge_tol : float
        A bounded theta below this (but the fit not yet re-optimised) triggers one restart,
        from the same point with every such theta moved to ``edge_start`` (off its bound:
        the optimum may lie on another face of the boundary, as lme4's ``restart_edge``
        looks for).
    edge_start : float
        Where that restart starts the thetas near their bound.
    restart_step : float
        BOBYQA's initial trust-region radius on a restart.
    restart_xtol_abs, restart_ftol_abs : float
        The restart's absolute tolerances on theta and on the criterion (its relative
        tolerance on theta is 0: it stops on these alone).
    lbfgsb_gtol : float
        L-BFGS-B stops when every component of the projected gradient is at most this.
    lbfgsb_ftol : float
        ... or when a step lowers the criterion by at most this, relative.
    lbfgsb_maxcor : int
        How many past steps L-BFGS-B's Hessian approximation keeps (scipy's ``maxcor``).
        20: on blurb CCMEM + 8 slopes (11 θ) 56 evaluations instead of 68 with scipy's
        default 10, the criterion as low; over 16 fits of 5 to 11 θ (REML and ML) 8% fewer
        evaluations in all, none with a higher criterion than 10 gave (beyond 1e-12
        relative).
    pirls : str
        GLMMs only: where PIRLS stops at each evaluation of the criterion. ``"lme4"``
        (default): lme4's ``tolPwrss`` rule (the penalised deviance changes by less than
        1e-7, relatively), lme4's criterion and numbers. The rule leaves η up to about
        √1e-7 from the conditional modes, and the criterion carries that error at first
        order (log|L|² moves with the working weights): 5.6e-4 on cbpp, 0.027 on a
        2,700-row binary item table, and where the number of PIRLS iterations changes the
        criterion jumps, which can make a false minimum (grouseticks' null model, 0.017).
        ``"exact"``: PIRLS goes on until η has settled, so the criterion is the Laplace
        (or AGQ) deviance at the modes, a smooth function, and the fit is the Laplace
        approximation's optimum (not lme4's numbers: ~1e-3 apart on such tables).
        ``"auto"``: lme4's rule, then, where its error at the optimum exceeds
        ``pirls_limit``, the fit continues from there with ``"exact"``. Every fit
        measures the error at its optimum (``engine_info["pirls_error"]``) and, above
        ``pirls_limit``, says it in its messages.
    pirls_limit : float
        The size of that error (deviance units, the χ² scale of likelihood-ratio tests;
        either sign) above which a fit reports it and ``"auto"`` continues with
        ``"exact"``.
    """

    optimizer: str = "auto"
    xtol_abs: float = 1e-8
    ftol_abs: float = 1e-8
    xtol_rel: float = 1e-4
    maxeval: int = 100_000
    check_conv: bool = True
    conv_tol: float = 2e-3
    singular_tol: float = 1e-4
    restarts: int = 3
    edge_tol: float = 1e-3
    edge_start: float = 0.1
    restart_step: float = 1e-2
    restart_xtol_abs: float = 1e-10
    restart_ftol_abs: float = 1e-12
    lbfgsb_gtol: float = 1e-5
    lbfgsb_ftol: float = 1e-12
    lbfgsb_maxcor: int = 20
    pirls: str = "lme4"
    pirls_limit: float = 1e-3

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; available: "
                             + ", ".join(repr(o) for o in OPTIMIZERS))
        if self.pirls not in PIRLS_MODES:
            raise ValueError(f"unknown pirls mode {self.pirls!r}; available: "
                             + ", ".join(repr(o) for o in PIRLS_MODES))
        for name in ("xtol_abs", "ftol_abs", "xtol_rel", "conv_tol", "singular_tol",
                     "edge_tol", "edge_start", "restart_xtol_abs", "restart_ftol_abs",
                     "lbfgsb_gtol", "lbfgsb_ftol", "pirls_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise ValueError(f"LmerControl.{name} must be a finite number >= 0, "
                                 f"got {value!r}")
        if not (isinstance(self.restart_step, (int, float)) and self.restart_step > 0):
            raise ValueError(f"LmerControl.restart_step must be > 0, got {self.restart_step!r}")
        for name in ("maxeval", "restarts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"LmerControl.{name} must be an integer >= 0, got {value!r}")
        maxcor = self.lbfgsb_maxcor
        if isinstance(maxcor, bool) or not isinstance(maxcor, (int, np.integer)) or maxcor < 1:
            raise ValueError(f"LmerControl.lbfgsb_maxcor must be an integer >= 1, got {maxcor!r}")
        if not isinstance(self.check_conv, (bool, np.bool_)):
            raise TypeError(f"LmerControl.check_conv must be True or False, "
                            f"got {self.check_conv!r}")


@dataclass(frozen=True)
class OptSummary:
    """What the optimiser was asked and what it did.

    Attributes
    ----------
    optimizer : str
    theta_start, theta_final : numpy.ndarray
    lower : numpy.ndarray
    fmin : float
        Criterion at ``theta_final``.
    feval : int
        Number of criterion evaluations by the optimiser.
    return_code : int
        NLopt's code (positive: converged by a tolerance); L-BFGS-B's outcome in the same
        codes (1 converged, 5 evaluation limit, -4 line search failed at the precision
        limit, -1 other failure).
    message : str
    log : tuple of (theta, criterion)
        Every evaluation in order.
    gradient, hessian : numpy.ndarray or None
        Finite-difference derivatives of the criterion at the optimum over the parameters
        not on a boundary (``free``); None when the check was skipped.
    free : numpy.ndarray
        Boolean mask of parameters off their bound at the optimum.
    restarts : tuple of Restart
        The continuations after lme4's stopping rule, in order (empty when lme4's rule
        was enough); ``feval`` and ``log`` include their evaluations.
    status : ConvergenceStatus or None
        lme4's verdict at ``theta_final`` (:class:`ConvergenceStatus`); None for a bare
        :func:`bobyqa` run, whose result has not been checked.
    geval : int
        Number of gradient evaluations (L-BFGS-B: one with each criterion evaluation;
        BOBYQA: 0), over all continuations.
    probes : int
        Criterion evaluations of the second-order test at L-BFGS-B's stops on the boundary
        (``converge.py``); ``feval`` and ``log`` include them.
    rescaled : str
        Empty, or how the optimiser's parametrisation differs from the formula's: random
        slopes far from zero centred and scaled (``rescale.py``). Then ``theta_start``,
        ``log``, the derivatives, ``free`` and ``status`` are in the optimiser's θ′, and
        ``theta_final`` and ``fmin`` are the formula's θ and the criterion there.
    """

    optimizer: str
    theta_start: np.ndarray
    theta_final: np.ndarray
    lower: np.ndarray
    fmin: float
    feval: int
    return_code: int
    message: str
    control: LmerControl
    log: tuple[tuple[np.ndarray, float], ...] = field(repr=False, default=())
    gradient: np.ndarray | None = None
    hessian: np.ndarray | None = None
    free: np.ndarray | None = None
    restarts: tuple[Restart, ...] = ()
    status: ConvergenceStatus | None = None
    geval: int = 0
    probes: int = 0
    rescaled: str = ""


@dataclass(frozen=True)
class Restart:
    """One continuation of the optimiser after lme4's stopping rule.

    Attributes
    ----------
    reason : str
        Why it continued (the failed check's message, or the theta near its bound).
    fmin_before, fmin_after : float
        Criterion at the start and at the end of the continuation (never larger).
    feval : int
        Criterion evaluations of this continuation.
    return_code : int
        NLopt's code for the continuation.
    geval : int
        Gradient evaluations of this continuation.
    optimizer : str
        The optimiser that ran it.
    """

    reason: str
    fmin_before: float
    fmin_after: float
    feval: int
    return_code: int
    geval: int = 0
    optimizer: str = "NLOPT_LN_BOBYQA"
