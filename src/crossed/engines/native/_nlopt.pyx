# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""NLopt's C interface with a compiled objective: an optimiser run whose evaluations make
no Python call.

NLopt's Python interface calls a Python function per evaluation; for a small design the
call and its array conversions cost more than the evaluation itself (sleepstudy: 12 µs
per evaluation, the compiled criterion 2 µs). Here NLopt's own C functions, the ones its
Python extension module exports (their addresses are bound once, :func:`bind`, from
``optimize.nlopt_c_api``), run the same algorithm with the same settings on a C objective
(``model._core.SmallCriterion``): the same iterates for the same values.

The orchestration (settings, the log, codes and errors) stays in
``optimize.run_nlopt``; this module only makes the calls.
"""

import numpy as np

ctypedef double (*objective_t)(unsigned, const double *, double *, void *) noexcept
ctypedef void *opt_t

ctypedef opt_t (*create_t)(int, unsigned) noexcept nogil
ctypedef void (*destroy_t)(opt_t) noexcept nogil
ctypedef int (*set_objective_t)(opt_t, objective_t, void *) noexcept nogil
ctypedef int (*set_vector_t)(opt_t, const double *) noexcept nogil
ctypedef int (*set_double_t)(opt_t, double) noexcept nogil
ctypedef int (*set_int_t)(opt_t, int) noexcept nogil
ctypedef int (*optimize_t)(opt_t, double *, double *) noexcept


cdef struct Api:
    create_t create
    destroy_t destroy
    set_objective_t set_min_objective
    set_vector_t set_lower_bounds
    set_vector_t set_xtol_abs
    set_double_t set_ftol_abs
    set_double_t set_xtol_rel
    set_int_t set_maxeval
    set_vector_t set_initial_step
    optimize_t optimize


NAMES = ("create", "destroy", "set_min_objective", "set_lower_bounds", "set_xtol_abs",
         "set_ftol_abs", "set_xtol_rel", "set_maxeval", "set_initial_step", "optimize",
         "force_stop")
"""The NLopt C functions used (``nlopt_`` + name)."""

cdef Api _api
cdef size_t _force_stop = 0
cdef bint _bound = False


def bind(addresses):
    """Bind NLopt's C functions from ``{name: address}`` for every name of :data:`NAMES`."""
    global _bound, _force_stop
    for name in NAMES:
        if not addresses.get(name):
            raise ValueError(f"no address for nlopt_{name}")
    _api.create = <create_t> <void *> <size_t> addresses["create"]
    _api.destroy = <destroy_t> <void *> <size_t> addresses["destroy"]
    _api.set_min_objective = <set_objective_t> <void *> <size_t> addresses["set_min_objective"]
    _api.set_lower_bounds = <set_vector_t> <void *> <size_t> addresses["set_lower_bounds"]
    _api.set_xtol_abs = <set_vector_t> <void *> <size_t> addresses["set_xtol_abs"]
    _api.set_ftol_abs = <set_double_t> <void *> <size_t> addresses["set_ftol_abs"]
    _api.set_xtol_rel = <set_double_t> <void *> <size_t> addresses["set_xtol_rel"]
    _api.set_maxeval = <set_int_t> <void *> <size_t> addresses["set_maxeval"]
    _api.set_initial_step = <set_vector_t> <void *> <size_t> addresses["set_initial_step"]
    _api.optimize = <optimize_t> <void *> <size_t> addresses["optimize"]
    _force_stop = <size_t> addresses["force_stop"]
    _bound = True


def bound():
    """Whether :func:`bind` has been called."""
    return _bound


def force_stop_address():
    """The address of ``nlopt_force_stop`` (for the objective's :meth:`set_stop`)."""
    return _force_stop


def minimize(size_t objective, size_t data, stop, int algorithm, double[::1] x,
             const double[::1] lower, const double[::1] xtol_abs, double ftol_abs,
             double xtol_rel, const double[::1] step, int maxeval):
    """Minimise the C ``objective`` (with its ``data``) by NLopt's ``algorithm`` from ``x``
    (overwritten by NLopt's answer) under ``lower`` bounds, with the tolerances, the
    initial ``step`` (empty: NLopt's default) and ``maxeval``. ``stop(force_stop, opt)``
    is called with the run's handle first (the objective's way to stop it).

    Returns (NLopt's result code, its value at ``x``). A setting NLopt refuses returns
    its code (negative) without running."""
    if not _bound:
        raise RuntimeError("NLopt's C functions are not bound")
    cdef unsigned n = <unsigned> x.shape[0]
    cdef double fmin = 0.0
    cdef int code
    cdef opt_t opt = _api.create(algorithm, n)
    if opt == NULL:
        raise MemoryError("nlopt_create failed")
    try:
        stop(_force_stop, <size_t> opt)
        code = _api.set_min_objective(opt, <objective_t> <void *> objective, <void *> data)
        if code > 0 and n:
            code = _api.set_lower_bounds(opt, &lower[0])
        if code > 0 and step.shape[0]:
            code = _api.set_initial_step(opt, &step[0])
        if code > 0 and n:
            code = _api.set_xtol_abs(opt, &xtol_abs[0])
        if code > 0:
            code = _api.set_ftol_abs(opt, ftol_abs)
        if code > 0:
            code = _api.set_xtol_rel(opt, xtol_rel)
        if code > 0:
            code = _api.set_maxeval(opt, maxeval)
        if code > 0:
            code = _api.optimize(opt, &x[0] if n else NULL, &fmin)
    finally:
        stop(0, 0)
        _api.destroy(opt)
    return code, fmin


# ---------------------------------------------------------------------------- the probe
cdef struct ProbeLog:
    double *rows  # (capacity rows of n + 1: the point, then the value)
    Py_ssize_t count, capacity


cdef double _probe_objective(unsigned n, const double *x, double *grad,
                             void *data) noexcept:
    """A smooth function of 4 parameters whose minimum under :func:`probe`'s bounds has
    one coordinate on its bound; every evaluation appended to the log ``data``."""
    cdef ProbeLog *log = <ProbeLog *> data
    cdef double a = x[0] - 1.3, b = x[1] - 0.4, c = x[2] + 0.2, d = x[3] - 0.7
    cdef double value = (a * a + 2.0 * b * b + 0.5 * c * c + d * d * (1.0 + x[0] * x[0])
                         + 0.3 * a * b + 0.1 * a * a * a * a + 0.2 * b * d)
    cdef Py_ssize_t j
    if log.count < log.capacity:
        for j in range(4):
            log.rows[log.count * 5 + j] = x[j]
        log.rows[log.count * 5 + 4] = value
    log.count += 1
    return value


PROBE_EVALUATIONS = 150
"""The most evaluations one :func:`probe` run may take."""


def probe(algorithms):
    """Short runs of NLopt's ``algorithms`` (their codes), each with NLopt's default step
    and with a given one, on a fixed function of 4 parameters, two of them bounded below,
    through the bound NLopt: every evaluated point and its value, then each run's code and
    final value, as one array. Two builds of NLopt that give the same array bit for bit
    took the same steps on it.

    Returns
    -------
    numpy.ndarray
        Rows of (point, value), then one row (code, value, 0, 0, 0) per run."""
    cdef double[::1] lower = np.array([-np.inf, -np.inf, 0.0, 0.0])
    cdef double[::1] xtol = np.full(4, 1e-10)
    cdef ProbeLog log
    runs = [(int(a), steps) for a in algorithms for steps in (np.empty(0), np.full(4, 0.3))]
    rows = np.zeros((len(runs) * (PROBE_EVALUATIONS + 1), 5))
    cdef double[:, ::1] out = rows
    log.rows = &out[0, 0]
    log.count, log.capacity = 0, len(runs) * PROBE_EVALUATIONS
    ends = []
    for algorithm, steps in runs:
        start = np.array([0.5, 1.0, 1.0, 0.5])
        ends.append(minimize(<size_t> &_probe_objective, <size_t> &log, _no_stop, algorithm,
                             start, lower, xtol, 1e-12, 1e-10, steps, PROBE_EVALUATIONS))
    used = min(log.count, log.capacity)
    for i, (code, fmin) in enumerate(ends):
        out[used + i, 0], out[used + i, 1] = code, fmin
    return rows[:used + len(ends)].copy()


def _no_stop(size_t force_stop, size_t opt):
    """:func:`minimize`'s ``stop`` for an objective that never stops the run."""
