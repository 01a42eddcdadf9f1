"""How an optimisation ended, as one value (:class:`ConvergenceStatus`): the verdict of
lme4's checks (``crossed.model.convergence``) that every fit and optimiser record carries."""

from __future__ import annotations

import enum

__all__ = ["ConvergenceStatus", "SINGULAR_MESSAGE"]

SINGULAR_MESSAGE = "boundary (singular) fit: see help('isSingular')"
"""lme4's message for a fit on the boundary, in every fit's messages (one string for
every engine and both fit classes)."""


class ConvergenceStatus(enum.StrEnum):
    """How an optimisation ended: lme4's verdict as one value (a ``str``, so it compares
    equal to, and serialises as, its lower-case value).

    A fit is converged (:attr:`LmerFit.converged`) exactly when its status is ``OK`` or
    ``SINGULAR``; :attr:`LmerFit.is_singular` is reported separately (a fit that failed
    its checks can be singular too). When several problems occur, the optimiser's
    return code (``MAX_EVALUATIONS``, ``FAILED``) is reported before a failed derivative
    check (``GRADIENT``, then ``HESSIAN``), and any failure before ``SINGULAR``; the
    fit's messages list them all.

    Attributes
    ----------
    OK
        The optimiser stopped on a tolerance and lme4's checks passed: no message, or only
        notes that do not fail the check (``Hessian is numerically singular``, ``Model is
        nearly unidentifiable``).
    SINGULAR
        Converged on the boundary: a bounded theta below ``singular_tol`` (lme4's
        ``boundary (singular) fit: see help('isSingular')``; lme4 then skips the
        derivative checks).
    GRADIENT
        lme4's scaled-gradient check failed (``Model failed to converge with max|grad| =
        ...``, ``... max|relative grad| ...``, ``unable to evaluate scaled gradient``), or
        the criterion is not finite near the optimum (lme4's ``Gradient contains NAs``;
        crossed's ``Model failed to converge: the criterion is not finite near the
        optimum ...``).
    HESSIAN
        lme4's Hessian check failed (``Model failed to converge: degenerate Hessian with
        k negative eigenvalues``, ``Problem with Hessian check``).
    MAX_EVALUATIONS
        The optimiser stopped at its evaluation limit (NLopt's ``NLOPT_MAXEVAL_REACHED``,
        return code 5; lme4's ``convergence code 5 from nloptwrap``).
    FAILED
        The optimiser failed otherwise (a negative NLopt return code; any other lme4
        message that the model failed to converge), or an engine reported non-convergence
        without saying why (statsmodels' ``converged = False``).
    """

    OK = "ok"
    SINGULAR = "singular"
    GRADIENT = "gradient"
    HESSIAN = "hessian"
    MAX_EVALUATIONS = "max_evaluations"
    FAILED = "failed"

    @property
    def converged(self) -> bool:
        """True for ``OK`` and ``SINGULAR`` (the fit's ``converged`` flag)."""
        return self in (ConvergenceStatus.OK, ConvergenceStatus.SINGULAR)

    @classmethod
    def combine(cls, singular: bool, *issues: ConvergenceStatus | None) -> ConvergenceStatus:
        """The status of a fit from its singularity and the problems found (None: none),
        in the order of precedence of the class docstring."""
        for kind in (cls.MAX_EVALUATIONS, cls.FAILED, cls.GRADIENT, cls.HESSIAN):
            if kind in issues:
                return kind
        return cls.SINGULAR if singular else cls.OK

    @classmethod
    def from_return_code(cls, return_code: int) -> ConvergenceStatus | None:
        """NLopt's return code as a problem: ``MAX_EVALUATIONS`` (5), ``FAILED`` (< 0) or
        None (stopped on a tolerance)."""
        if return_code == 5:
            return cls.MAX_EVALUATIONS
        if return_code < 0:
            return cls.FAILED
        return None
