# The optimiser's side of a compiled criterion: the evaluation log and the stop (included
# by model/_core.pyx and model/glmm/_scalar.pyx, so that each module's criteria derive
# from it without a cross-module import; each module holds its own copy of the class).

from libc.math cimport NAN
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy


cdef class LoggedObjective:
    """A criterion of ``ntheta`` parameters as a C function for a compiled optimiser loop:
    a subclass's :meth:`compute` gives the value at a point, this class logs every
    evaluation and stops the optimiser after an error.

    :meth:`objective_address` gives the C objective in NLopt's form and this object's
    address; the caller keeps the object alive while the optimiser runs. A non-finite
    value is logged as it is and handed to the optimiser as 1e300 (``run_nlopt``'s rule).
    An error (kept in :attr:`error` by :meth:`compute`) stops the optimiser
    (:meth:`set_stop`) and is not logged."""
    cdef Py_ssize_t nlog, cap, ntheta
    cdef double *log_x
    cdef double *log_f
    cdef void *stop_opt
    cdef int (*stop_fn)(void *) noexcept nogil
    cdef public object error

    def __cinit__(self, *args, **kwargs):
        self.log_x = NULL
        self.log_f = NULL
        self.stop_opt = NULL
        self.stop_fn = NULL
        self.nlog = self.cap = 0
        self.error = None

    def __dealloc__(self):
        free(self.log_x)
        free(self.log_f)

    def objective_address(self):
        """(address of the C objective, double f(unsigned n, const double *x, double
        *grad, void *data), as NLopt calls it; address of this object, its data)."""
        return <size_t> &_logged_objective, <size_t> <void *> self

    def set_stop(self, size_t force_stop, size_t opt):
        """The optimiser's ``force_stop(opt)`` to call after an error (0, 0: none)."""
        self.stop_fn = <int (*)(void *) noexcept nogil> <void *> force_stop
        self.stop_opt = <void *> opt

    def __call__(self, const double[::1] x):
        """The criterion at ``x`` (logged), as the optimiser's loop evaluates it; NaN
        after an error (kept in :attr:`error`)."""
        if x.shape[0] != self.ntheta:
            raise ValueError(f"the point has {x.shape[0]} entries, the criterion "
                             f"{self.ntheta}")
        return self.evaluate(&x[0])

    def take_log(self):
        """The evaluations since the last call, as a list of (point, value), and forget
        them (the points are the rows of one array)."""
        cdef Py_ssize_t n = self.nlog, m = self.ntheta
        points = np.empty((n, m))
        values = np.empty(n)
        cdef double[:, ::1] pv = points
        cdef double[::1] fv = values
        if n and m:
            memcpy(&pv[0, 0], self.log_x, n * m * sizeof(double))
        if n:
            memcpy(&fv[0], self.log_f, n * sizeof(double))
        self.nlog = 0
        return list(zip(points, values.tolist()))

    def deriv12(self, const double[::1] x, double fx, double delta, double[::1] g,
                double[:, ::1] H):
        """lme4's ``deriv12`` at ``x`` over every coordinate, into ``g`` and ``H``: the
        points and the central differences of ``convergence.derivatives`` (x ± δe_a, then
        each pair b < a at its four corners; the same sums in the same order), evaluated
        by :meth:`compute` without logging them. ``fx`` is the criterion at x.

        Returns False, with :attr:`error` set, where an evaluation failed; ``g`` and ``H``
        are then unset."""
        cdef Py_ssize_t m = self.ntheta, a, b, c
        cdef double fp, fm, d2 = delta ** 2
        cdef double v[4]
        cdef double sa[4]
        cdef double sb[4]
        sa[0], sa[1], sa[2], sa[3] = delta, delta, -delta, -delta  # (deriv12's corners)
        sb[0], sb[1], sb[2], sb[3] = delta, -delta, delta, -delta
        if x.shape[0] != m or g.shape[0] != m or H.shape[0] != m or H.shape[1] != m:
            raise ValueError(f"deriv12: the criterion has {m} parameters")
        if m == 0:
            return True
        cdef double *point = <double *> malloc(m * sizeof(double))
        if point == NULL:
            raise MemoryError()
        try:
            for c in range(m):
                point[c] = x[c]
            for a in range(m):
                point[a] = x[a] + delta
                if not self.compute(point, &fp):
                    return False
                point[a] = x[a] - delta
                if not self.compute(point, &fm):
                    return False
                g[a] = (fp - fm) / (2.0 * delta)
                H[a, a] = (fp - 2.0 * fx + fm) / d2
                for b in range(a):
                    for c in range(4):
                        point[a] = x[a] + sa[c]
                        point[b] = x[b] + sb[c]
                        if not self.compute(point, &v[c]):
                            return False
                    point[b] = x[b]
                    H[a, b] = (v[0] - v[1] - v[2] + v[3]) / (4.0 * d2)
                    H[b, a] = H[a, b]
                point[a] = x[a]
            return True
        finally:
            free(point)

    cdef int _grow_log(self) noexcept:
        cdef Py_ssize_t size = 2 * self.cap + 64
        cdef void *px = realloc(self.log_x, size * (self.ntheta + 1) * sizeof(double))
        if px == NULL:
            return -1
        self.log_x = <double *> px
        cdef void *pf = realloc(self.log_f, size * sizeof(double))
        if pf == NULL:
            return -1
        self.log_f = <double *> pf
        self.cap = size
        return 0

    cdef bint compute(self, const double *x, double *value) noexcept:
        """The criterion at ``x`` into ``value``; False after an error, kept in
        :attr:`error` (a subclass's)."""
        value[0] = NAN
        return True

    cdef double evaluate(self, const double *x) noexcept:
        """The criterion at x (logged), or NaN after an error (the optimiser is stopped)."""
        cdef Py_ssize_t j
        cdef double value
        if not self.compute(x, &value):
            if self.stop_fn != NULL:
                self.stop_fn(self.stop_opt)
            return NAN
        if self.nlog == self.cap and self._grow_log() != 0:
            self.error = MemoryError()
            if self.stop_fn != NULL:
                self.stop_fn(self.stop_opt)
            return NAN
        for j in range(self.ntheta):
            self.log_x[self.nlog * self.ntheta + j] = x[j]
        self.log_f[self.nlog] = value
        self.nlog += 1
        return value


cdef double _logged_objective(unsigned n, const double *x, double *grad,
                              void *data) noexcept with gil:
    """NLopt's objective: :meth:`LoggedObjective.evaluate`, a non-finite value as 1e300."""
    cdef double value = (<LoggedObjective> data).evaluate(x)
    return value if value - value == 0.0 else 1e300  # (not finite: run_nlopt's 1e300)
