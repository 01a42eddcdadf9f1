"""From parameters to a fit: the model core turns theta (and the criterion there) into an
:class:`~crossed.model.result.LmerResult`.

Every engine ends here: the native one with its optimum, statsmodels and lme4 with the
theta they hand back. β, the spherical random effects, σ and the covariance of β are
solved from the design's PLS problem at theta, lme4's checks are reported (messages and
warnings), and rows or columns that were dropped are said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from crossed._warn import warn
from crossed.design import Design
from crossed.design.frame import DataError
from crossed.model.convergence import ConvergenceCheck, assess
from crossed.model.pls import PLS, Factor
from crossed.model.result import LmerResult
from crossed.model.status import SINGULAR_MESSAGE

if TYPE_CHECKING:
    from crossed.model.control import LmerControl, OptSummary

__all__ = ["ConvergenceWarning", "SingularFitWarning", "finish_fit"]


class ConvergenceWarning(UserWarning):
    """The optimiser did not converge cleanly (lme4's convergence warnings)."""


class SingularFitWarning(UserWarning):
    """A bounded variance parameter is on the boundary (lme4's ``boundary (singular) fit``)."""


def finish_fit(design: Design, pls: PLS, f: Factor, theta: np.ndarray, dev: float,
               reml: bool, engine: str, opt: OptSummary | None, control: LmerControl,
               seconds: float | None, data_name: str, check: ConvergenceCheck | None = None,
               notes: tuple[str, ...] = ()) -> LmerResult:
    """Solve for β, u, σ and vcov at ``theta``, report the checks and build the result.

    Parameters
    ----------
    design : Design
    pls : PLS
        The design's PLS problem (:meth:`PLS.of`); ``f`` its factorisation at ``theta``.
    theta : numpy.ndarray
    dev : float
        The criterion at ``theta``.
    reml : bool
    engine : str
        The engine's name, recorded on the fit.
    opt : OptSummary or None
        The optimiser's record (None for engines that expose none).
    control : LmerControl
        Its ``singular_tol`` decides singularity when ``check`` is None.
    seconds : float or None
        Wall time of the fit, recorded as ``fit.fit_seconds``.
    data_name : str
    check : ConvergenceCheck, optional
        lme4's verdict at ``theta`` (:func:`crossed.model.convergence.assess`); without it
        the fit is only checked for singularity (engines that run their own optimiser and
        checks).
    notes : tuple of str
        Engine messages to record (e.g. the native optimiser's continuations).

    Returns
    -------
    LmerResult
    """
    n, p = pls.n, pls.p
    messages: list[str] = design.messages()
    if check is None:
        check = assess(theta, dev, design.random.theta_lower, control, None)
    messages.extend(notes)
    if opt is not None:
        if opt.return_code < 0 or opt.return_code == 5:
            messages.append(f"optimizer ({opt.optimizer}) stopped: {opt.message}")
    for m in check.messages:
        messages.append(m)
        warn(m, ConvergenceWarning)
    singular = check.singular
    if singular:
        messages.append(SINGULAR_MESSAGE)
        warn(SINGULAR_MESSAGE, SingularFitWarning)
    try:
        beta, u = pls.solve(f)
        Ri = pls.rx_inverse(f)
    except np.linalg.LinAlgError as exc:
        raise DataError(
            f"the penalised least-squares system at the optimum is numerically not positive "
            f"definite ({exc}): the predictors are on very different scales or nearly "
            "collinear; rescale the variables (lme4 stops here with 'Downdated VtV is not "
            "positive definite')") from None
    denom = n - p if reml else n
    sigma = float(np.sqrt(f.pwrss / denom))
    vcov = sigma**2 * (Ri.T @ Ri)
    fit = LmerResult(
        design=design, reml=reml, engine=engine, theta=theta, beta=beta, sigma=sigma,
        deviance=float(dev), vcov_beta=vcov, u=tuple(u), opt=opt, is_singular=singular,
        converged=check.converged, messages=tuple(messages), data_name=data_name,
        convergence=check.status, fit_seconds=seconds,
    )
    fit.memo("factor", lambda: f)  # the factorisation its estimates came from
    return fit
