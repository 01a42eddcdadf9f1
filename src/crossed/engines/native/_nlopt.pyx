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
