"""The native optimisers: NLopt's BOBYQA and Nelder–Mead, and L-BFGS-B with the analytic
gradient (scipy).

Their settings (:class:`LmerControl`) and record (:class:`OptSummary`, :class:`Restart`)
are the model core's (``crossed.model.control``, re-exported here), as are lme4's
convergence checks (``crossed.model.convergence``). SciPy's optimisers are imported by
:func:`lbfgsb`, the one function that uses them: BOBYQA fits do not load them.

A :class:`Criterion` that carries a compiled objective (small designs:
``PLS.compiled_criterion``) is run through NLopt's C interface (``_nlopt.pyx``), the same
algorithm and settings with no Python call per evaluation (the system's NLopt where it
takes the Python package's steps bit for bit: :func:`nlopt_c_api`); any other criterion
through NLopt's Python interface."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nlopt
import numpy as np

from crossed.model.control import (
    AUTO_LBFGSB_DENSE,
    AUTO_LBFGSB_THETA,
    OPTIMIZERS,
    PIRLS_MODES,
    LmerControl,
    OptSummary,
    Restart,
)

if TYPE_CHECKING:
    from crossed.model._core import SmallCriterion
    from crossed.model.glmm._scalar import ScalarDeviance

__all__ = ["AUTO_LBFGSB_DENSE", "AUTO_LBFGSB_THETA", "NLOPT_ALGORITHMS", "OPTIMIZERS",
           "PIRLS_MODES", "SYSTEM_NLOPT", "Criterion", "LmerControl", "OptSummary", "Restart",
           "bobyqa", "lbfgsb", "nelder_mead", "nlopt_algorithm", "nlopt_c_api",
           "nlopt_library", "run_bobyqa", "run_nlopt", "use_compiled_objective"]


ROUNDOFF_LIMITED = -4  # NLopt's NLOPT_ROUNDOFF_LIMITED
_NLOPT_CODES = {
    1: "success", 2: "stopval reached", 3: "ftol reached", 4: "xtol reached",
    5: "maxeval reached", 6: "maxtime reached", -1: "failure", -2: "invalid arguments",
    -3: "out of memory", -4: "roundoff limited", -5: "forced stop",
}

NLOPT_ALGORITHMS = {"NLOPT_LN_BOBYQA": nlopt.LN_BOBYQA,
                    "NLOPT_LN_NELDERMEAD": nlopt.LN_NELDERMEAD}
"""The NLopt algorithms of the native engine, by NLopt's name (lme4's ``nloptwrap``
``algorithm``)."""


@dataclass(frozen=True)
class Criterion:
    """A criterion for the NLopt runs: ``fun`` at a point, and the same criterion as a
    compiled objective (``model._core.SmallCriterion``: small designs;
    ``model.glmm._scalar.ScalarDeviance``: a GLMM's stages with a scalar first term), which
    :func:`run_nlopt` hands to NLopt's C interface so that no evaluation calls Python."""

    fun: Callable[[np.ndarray], float]
    compiled: SmallCriterion | ScalarDeviance | None = None

    def __call__(self, theta: np.ndarray) -> float:
        """The criterion at ``theta``: the compiled one's value where there is one (the
        probes and continuations between the runs: the same criterion to rounding,
        without a factorisation in Python), else ``fun``'s."""
        compiled = self.compiled_in_use
        if compiled is not None:
            value = float(compiled(np.ascontiguousarray(theta, dtype=float)))
            if compiled.error is not None:
                error, compiled.error = compiled.error, None
                raise error
            return value
        return self.fun(theta)

    @property
    def compiled_in_use(self) -> SmallCriterion | ScalarDeviance | None:
        """The compiled criterion where the NLopt runs use it (else None): the
        derivative check then evaluates its points with it too."""
        return self.compiled if _USE_COMPILED else None


_USE_COMPILED = True
"""Whether :func:`run_nlopt` runs compiled objectives through NLopt's C interface."""


def use_compiled_objective(enabled: bool) -> None:
    """Let :func:`run_nlopt` run compiled objectives through NLopt's C interface (True,
    the default) or run NLopt's Python interface on the Python criterion (False; the same
    iterates to rounding: the compiled criterion's log is libm's)."""
    global _USE_COMPILED
    _USE_COMPILED = enabled


SYSTEM_NLOPT = ("libnlopt.so.0", "libnlopt.0.dylib")
"""The shared library of an NLopt the system installed (Debian's ``libnlopt0``, which R's
nloptr and so lme4 use; Homebrew's ``nlopt``), tried by :func:`nlopt_c_api` before the
Python package's own."""

_CHOICE: list[tuple[bool, str | None]] = []
"""(bound, library) of :func:`nlopt_c_api`, chosen once per process."""
_CHOICE_LOCK = threading.Lock()


def nlopt_c_api() -> bool:
    """Whether NLopt's C functions are bound for compiled objectives (``_nlopt.pyx``),
    from a library chosen once per process (:func:`nlopt_library`); the first call
    chooses, and a call from another thread meanwhile waits for its choice (a run in
    progress keeps the functions it started with).

    The Python package's wheels build NLopt without the compiler's optimisation: its
    BOBYQA's own arithmetic takes a third to a half of a small fit's optimiser time (a
    7-θ model: 23 against 16 ms a fit). A system NLopt (:data:`SYSTEM_NLOPT`) is bound
    instead where it takes the package's steps bit for bit on :func:`_nlopt.probe`'s
    runs, so that the estimates are the same with or without it; the environment
    variable ``CROSSED_NLOPT=package`` keeps the package's."""
    if not _CHOICE:
        with _CHOICE_LOCK:
            if not _CHOICE:
                _CHOICE.append(_bind_nlopt())
    return _CHOICE[0][0]


def _bind_nlopt() -> tuple[bool, str | None]:
    """Bind the package's NLopt, probe it, then each system library in turn, keeping the
    first whose probe is the package's bit for bit: (bound, library)."""
    import ctypes

    try:
        from crossed.engines.native import _nlopt

        package = _nlopt_addresses(ctypes.CDLL(nlopt._nlopt.__file__))
        _nlopt.bind(package)
    except (ImportError, OSError, AttributeError, TypeError, ValueError):
        return False, None
    if os.environ.get("CROSSED_NLOPT", "").strip() == "package":
        return True, nlopt._nlopt.__file__
    codes = list(NLOPT_ALGORITHMS.values())
    try:
        reference = _nlopt.probe(codes).tobytes()
    except Exception:  # (the package's functions fail on the probe: nothing to compare)
        return True, nlopt._nlopt.__file__
    for name in SYSTEM_NLOPT:
        try:
            _nlopt.bind(_nlopt_addresses(ctypes.CDLL(name)))
            same = _nlopt.probe(codes).tobytes() == reference
        except Exception:  # (a library that cannot be bound or run: not used)
            same = False
        if same:
            return True, name
        _nlopt.bind(package)
    return True, nlopt._nlopt.__file__


def _nlopt_addresses(lib: Any) -> dict[str, int]:
    """The addresses of NLopt's C functions of :data:`_nlopt.NAMES` in the loaded
    library ``lib`` (ctypes)."""
    import ctypes

    from crossed.engines.native import _nlopt

    return {name: ctypes.cast(getattr(lib, "nlopt_" + name), ctypes.c_void_p).value
            for name in _nlopt.NAMES}


def nlopt_library() -> str | None:
    """The NLopt library whose C functions the compiled NLopt runs call: a name of
    :data:`SYSTEM_NLOPT`, or the path of the Python package's extension module; None
    where none is bound (the runs use NLopt's Python interface)."""
    nlopt_c_api()
    return _CHOICE[0][1]


def nlopt_algorithm(optimizer: str) -> str:
    """NLopt's name of the algorithm ``LmerControl.optimizer`` asks for first: ``"bobyqa"``
    and ``"auto"`` -> ``"NLOPT_LN_BOBYQA"``, ``"nelder_mead"`` -> ``"NLOPT_LN_NELDERMEAD"``.

    Raises
    ------
    ValueError
        For ``"lbfgsb"``, which is not NLopt's (:func:`lbfgsb`)."""
    if optimizer in ("auto", "bobyqa"):
        return "NLOPT_LN_BOBYQA"
    if optimizer == "nelder_mead":
        return "NLOPT_LN_NELDERMEAD"
    raise ValueError(f"optimizer {optimizer!r} is not one of NLopt's algorithms "
                     f"({', '.join(repr(o) for o in ('bobyqa', 'nelder_mead'))})")


def bobyqa(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
           control: LmerControl, restart: bool = False,
           step: float | np.ndarray | None = None) -> OptSummary:
    """Minimise ``fun`` with NLopt's BOBYQA under lower bounds, logging every evaluation.

    With ``restart=True`` it continues from ``x0`` with the control's ``restart_*``
    settings (a small initial radius, no relative tolerance) instead of lme4's. ``step``:
    the initial step of a run with lme4's stopping rule (NLopt's default when None; a
    refit from its fit's θ passes smaller ones, ``engine.refit_step``).
    """
    if restart:
        return run_bobyqa(fun, x0, lower, control, xtol_abs=control.restart_xtol_abs,
                          ftol_abs=control.restart_ftol_abs, xtol_rel=0.0,
                          step=control.restart_step)
    return run_bobyqa(fun, x0, lower, control, xtol_abs=control.xtol_abs,
                      ftol_abs=control.ftol_abs, xtol_rel=control.xtol_rel, step=step)


def nelder_mead(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
                control: LmerControl) -> OptSummary:
    """Minimise ``fun`` with NLopt's Nelder–Mead (``NLOPT_LN_NELDERMEAD``) under lower bounds,
    logging every evaluation: lme4's ``nloptwrap`` with ``algorithm =
    "NLOPT_LN_NELDERMEAD"`` (allFit's ``"nloptwrap.NLOPT_LN_NELDERMEAD"``).

    The control's tolerances are lme4 1.1-31's ``nloptwrap`` defaults (``xtol_abs`` and
    ``ftol_abs`` 1e-8, ``maxeval`` 1e5, and nloptr's ``xtol_rel`` 1e-4, which nloptwrap does
    not override) and NLopt's own initial simplex (no initial step is set, as nloptr
    sets none).

    Parameters
    ----------
    fun : callable
        The criterion at a point.
    x0, lower : numpy.ndarray
        Start and lower bounds (-inf where unbounded).
    control : LmerControl
        ``xtol_abs``, ``ftol_abs``, ``xtol_rel``, ``maxeval``.

    Returns
    -------
    OptSummary
        ``optimizer`` is ``"NLOPT_LN_NELDERMEAD"``; with NLopt's code and every evaluation
        (:func:`run_nlopt`). Validated against lme4's nloptwrap Nelder–Mead refits
        (tests/engines/test_native_nelder_mead.py)."""
    return run_nlopt(fun, x0, lower, control, algorithm="NLOPT_LN_NELDERMEAD",
                     xtol_abs=control.xtol_abs, ftol_abs=control.ftol_abs,
                     xtol_rel=control.xtol_rel)


def run_bobyqa(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
               control: LmerControl, *, xtol_abs: float | np.ndarray, ftol_abs: float,
               xtol_rel: float, step: float | np.ndarray | None = None,
               maxeval: int | None = None, copy_x: bool = False,
               lowest_logged: bool = False) -> OptSummary:
    """The one BOBYQA run of the native engine (LMM and GLMM): :func:`run_nlopt` with
    ``NLOPT_LN_BOBYQA``."""
    return run_nlopt(fun, x0, lower, control, algorithm="NLOPT_LN_BOBYQA",
                     xtol_abs=xtol_abs, ftol_abs=ftol_abs, xtol_rel=xtol_rel, step=step,
                     maxeval=maxeval, copy_x=copy_x, lowest_logged=lowest_logged)


def run_nlopt(fun: Callable[[np.ndarray], float], x0: np.ndarray, lower: np.ndarray,
              control: LmerControl, *, algorithm: str, xtol_abs: float | np.ndarray,
              ftol_abs: float, xtol_rel: float, step: float | np.ndarray | None = None,
              maxeval: int | None = None, copy_x: bool = False,
              lowest_logged: bool = False) -> OptSummary:
    """The one NLopt run of the native engine (LMM and GLMM): NLopt's ``algorithm`` under
    lower bounds, every evaluation logged, a non-finite value read as 1e300.

    Parameters
    ----------
    fun : callable
        The criterion at a point (given a copy of NLopt's array when ``copy_x``).
    x0, lower : numpy.ndarray
        Start and lower bounds (-inf where unbounded).
    control : LmerControl
        Recorded in the summary; ``maxeval`` unless given.
    algorithm : str
        NLopt's name: a key of :data:`NLOPT_ALGORITHMS` (``"NLOPT_LN_BOBYQA"``,
        ``"NLOPT_LN_NELDERMEAD"``); it is the summary's ``optimizer``.
    xtol_abs, ftol_abs, xtol_rel : float
        NLopt's stopping rule; ``step``: its initial step (NLopt's default when None).
    lowest_logged : bool
        Return the lowest point logged when it is below NLopt's answer (the GLMM's stage
        criterion can be evaluated off the point NLopt reports).

    Returns
    -------
    OptSummary
        NLopt's ``ROUNDOFF_LIMITED`` (which its Python interface raises) is returned as
        code -4 with the lowest point logged.
    """
    log: list[tuple[np.ndarray, float]] = []

    def objective(x: np.ndarray, grad: np.ndarray) -> float:
        val = float(fun(x.copy() if copy_x else x))
        log.append((x.copy(), val))
        return val if math.isfinite(val) else 1e300

    def lowest() -> tuple[np.ndarray, float]:
        return min(log, key=lambda point: point[1] if math.isfinite(point[1]) else math.inf)

    if algorithm not in NLOPT_ALGORITHMS:
        raise ValueError(f"unknown NLopt algorithm {algorithm!r}; available: "
                         + ", ".join(repr(a) for a in NLOPT_ALGORITHMS))
    evaluations = maxeval if maxeval is not None else control.maxeval
    compiled = fun.compiled if isinstance(fun, Criterion) else None
    try:
        if compiled is not None and _USE_COMPILED and nlopt_c_api():
            x, code, fmin = _run_compiled(compiled, NLOPT_ALGORITHMS[algorithm], x0, lower,
                                          xtol_abs, ftol_abs, xtol_rel, step, evaluations,
                                          log)
        else:
            opt = nlopt.opt(NLOPT_ALGORITHMS[algorithm], len(x0))
            opt.set_lower_bounds(np.where(np.isfinite(lower), lower, -np.inf))
            opt.set_min_objective(objective)
            if step is not None:
                opt.set_initial_step(step)
            opt.set_xtol_abs(xtol_abs)
            opt.set_ftol_abs(ftol_abs)
            opt.set_xtol_rel(xtol_rel)
            opt.set_maxeval(evaluations)
            x = opt.optimize(np.asarray(x0, dtype=float))
            code, fmin = opt.last_optimize_result(), float(opt.last_optimum_value())
    except nlopt.RoundoffLimited:
        # NLopt's Python interface raises where its C interface returns code -4 with its
        # best point: that is the lowest criterion logged
        if not log:
            raise
        x, fmin = lowest()
        code = ROUNDOFF_LIMITED
    if lowest_logged:
        best = lowest()
        if best[1] < fmin:
            x, fmin = best
    return OptSummary(
        optimizer=algorithm, theta_start=np.asarray(x0, dtype=float).copy(),
        theta_final=np.asarray(x, dtype=float), lower=lower.copy(), fmin=float(fmin),
        feval=len(log), return_code=int(code), message=_NLOPT_CODES.get(code, str(code)),
        control=control, log=tuple(log),
    )


_NLOPT_ERRORS: dict[int, type[Exception]] = {
    -1: getattr(nlopt, "runtime_error", RuntimeError),
    -2: getattr(nlopt, "invalid_argument", ValueError), -3: MemoryError,
    -4: nlopt.RoundoffLimited, -5: nlopt.ForcedStop}
"""The exceptions NLopt's Python interface raises for its negative codes (its own
classes from NLopt 2.8 on, Python's before)."""


def _run_compiled(crit: SmallCriterion | ScalarDeviance, algorithm: int, x0: np.ndarray,
                  lower: np.ndarray, xtol_abs: float | np.ndarray, ftol_abs: float,
                  xtol_rel: float, step: float | np.ndarray | None, maxeval: int,
                  log: list[tuple[np.ndarray, float]]) -> tuple[np.ndarray, int, float]:
    """:func:`run_nlopt`'s run through NLopt's C interface on a compiled objective: the
    same settings (scalars given for every coordinate, as NLopt's Python interface does),
    every evaluation appended to ``log``; NLopt's negative codes raised as its Python
    interface raises them, an exception of the objective's fallback as it was."""
    from crossed.engines.native import _nlopt

    n = len(x0)
    x = np.array(x0, dtype=float)
    bounds = np.ascontiguousarray(np.where(np.isfinite(lower), lower, -np.inf), dtype=float)
    xtol = _per_coordinate(xtol_abs, n)
    steps = np.zeros(0) if step is None else _per_coordinate(step, n)
    address, data = crit.objective_address()
    crit.error = None
    crit.take_log()  # (a run's log is its own)
    code, fmin = _nlopt.minimize(address, data, crit.set_stop, algorithm, x, bounds, xtol,
                                 ftol_abs, xtol_rel, steps, maxeval)
    log.extend(crit.take_log())
    if crit.error is not None:
        raise crit.error
    if code < 0:
        raise _NLOPT_ERRORS.get(code, RuntimeError)(f"nlopt: {_NLOPT_CODES.get(code, code)}")
    return x, code, float(fmin)


def _per_coordinate(value: float | np.ndarray, n: int) -> np.ndarray:
    """``value`` for each of ``n`` coordinates, a new array (a scalar repeated, as NLopt's
    Python interface gives it, or a copy of ``n`` values; without broadcasting, whose
    wrapper costs more than the copy)."""
    if isinstance(value, float | int):
        return np.full(n, float(value))
    if isinstance(value, np.ndarray) and value.shape == (n,):
        return np.array(value, dtype=float)
    return np.array(np.broadcast_to(np.asarray(value, dtype=float), (n,)))


_LBFGSB_CODES = {0: 1, 1: 5, 2: 1}
LBFGSB_RESUMES = 5
"""How many times :func:`lbfgsb` resumes from a trial point below L-BFGS-B's stop."""
LBFGSB_RESUME_GAIN = 1e-10
"""... when that point is lower by more than this, relative."""


def lbfgsb(fun_grad: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray,
           lower: np.ndarray, control: LmerControl) -> OptSummary:
    """Minimise with scipy's L-BFGS-B on the criterion and its gradient under lower bounds,
    logging every evaluation (each is one criterion and one gradient evaluation).

    A bound is reached exactly (L-BFGS-B projects onto it): singular fits end with their
    theta at 0. L-BFGS-B's line search may try a point lower than the one it accepts (the
    strong Wolfe conditions ask for more than a decrease), and it can then stop above that
    trial point: at a saddle on the boundary, where a θ of 0 has a zero derivative
    (a random table of 603 rows with five crossed intercepts stopped 7.6 above BOBYQA's
    criterion that way, with the trial point 6.4 below the stop, under one BLAS kernel and
    not the other). It is then resumed from the lowest point logged, up to
    :data:`LBFGSB_RESUMES` times, so that the result is a point where L-BFGS-B's own
    convergence test holds. The result is the lowest criterion logged.

    scipy's status maps to NLopt's codes: 0 (converged) -> 1, 1 (evaluation or iteration
    limit) -> 5, and 2 (the line search found no lower criterion: the criterion's rounding
    noise exceeds what is left to gain, as NLopt's roundoff-limited BOBYQA continuations in
    ``converge.py``) -> 1 with that said in the message: lme4's derivative check at the
    point decides, as after any stop. A trial point still lower than the stop after the
    resumes gives -1 (failure).
    """
    log: list[tuple[np.ndarray, float]] = []
    k = len(x0)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        val, grad = fun_grad(np.array(x, dtype=float))
        log.append((np.array(x, dtype=float), float(val)))
        if not (math.isfinite(val) and np.all(np.isfinite(grad))):
            return 1e300, np.zeros(k)
        return float(val), np.asarray(grad, dtype=float)

    bounds = [(lo if math.isfinite(lo) else None, None) for lo in lower.tolist()]
    x0 = np.asarray(x0, dtype=float)
    start = np.maximum(x0, np.where(np.isfinite(lower), lower, -np.inf))
    from scipy.optimize import minimize  # (here only: it loads scipy.spatial too)

    resumed, below = 0, False
    while True:
        res = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxfun": max(control.maxeval - len(log), 1),
                                "maxiter": control.maxeval, "gtol": control.lbfgsb_gtol,
                                "ftol": control.lbfgsb_ftol, "maxcor": control.lbfgsb_maxcor})
        finite = [point for point in log if math.isfinite(point[1])]
        if not finite:
            break
        best_x, best_f = min(finite, key=lambda point: point[1])
        below = best_f < float(res.fun) - LBFGSB_RESUME_GAIN * max(1.0, abs(float(res.fun)))
        if not below or resumed == LBFGSB_RESUMES or len(log) >= control.maxeval:
            break
        start, resumed = best_x, resumed + 1
    x, fmin = (best_x, best_f) if finite else (res.x, math.inf)
    code = _LBFGSB_CODES.get(int(res.status), -1)
    message = res.message if isinstance(res.message, str) else str(res.message)
    if int(res.status) == 2:
        message = f"stopped at the precision limit of the criterion: {message}"
    if finite and below:
        code = -1
        message = (f"a trial point of the line search lies below L-BFGS-B's stop after "
                   f"{resumed} resumes: {message}")
    elif resumed:
        message = f"resumed {resumed} time(s) from a trial point below its stop; {message}"
    return OptSummary(
        optimizer="L-BFGS-B", theta_start=x0.copy(), theta_final=np.asarray(x).copy(),
        lower=lower.copy(), fmin=float(fmin), feval=len(log), return_code=code,
        message=f"{_NLOPT_CODES.get(code, str(code))} ({message})", control=control,
        log=tuple(log), geval=len(log),
    )
