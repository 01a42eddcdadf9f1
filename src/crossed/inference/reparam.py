"""The random effects in the parametrisation the native optimiser used, for derivatives.

Where a random-effects column sits far from zero or far from unit SD, the optimiser runs
on centred and scaled columns (``engines/native/rescale.py``): the same model, with
Z = Z′T, b′ = Tb and Σ′ = TΣTᵀ. Quantities that do not depend on how the covariance is
parametrised (Satterthwaite's and Kenward–Roger's df and adjusted covariance, the profile
of σ or of a fixed effect) are computed there too: in the formula's θ a random slope on a
year (x ≈ 2000) has θ from 167 to 6e-5, and derivatives or inner optimisations over
such θ lose every digit the answer needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from crossed.engines.native.rescale import ColumnRescaling, column_rescaling
from crossed.model.factor import basis_inverse

if TYPE_CHECKING:
    from crossed.design.random import ReBlock
    from crossed.model.pls import PLS
    from crossed.model.result import LmerResult as LmerFit

__all__ = ["OptimiserProblem", "optimiser_problem", "optimiser_random"]


def optimiser_random(fit: LmerFit) -> tuple[tuple[ReBlock, ...], np.ndarray,
                                            ColumnRescaling | None]:
    """The design's random-effects blocks and the fit's θ as the optimiser parametrised
    them, and the rescaling (None: the formula's own blocks and θ)."""
    blocks = tuple(fit.design.random.blocks)
    theta = np.asarray(fit.theta, dtype=float)
    # (from the design's rows alone: shared with every refit of them to another response)
    columns = fit.pls.rows_memo(("column_rescaling",), lambda: column_rescaling(blocks))
    if columns is None:
        return blocks, theta, None
    return columns.apply(blocks), columns.from_original(theta), columns


@dataclass(frozen=True)
class OptimiserProblem:
    """The PLS problem as the optimiser solved it (:func:`optimiser_problem`).

    Attributes
    ----------
    pls : PLS
        Its random-effects columns centred and scaled and X in the fit's ``fixed_basis``,
        where either applies (without a rescaling: :meth:`LmerFit.solved_pls`'s problem).
    theta : numpy.ndarray
        The fit's θ in those columns.
    back : numpy.ndarray or None
        R⁻¹ mapping the problem's β′ to the formula's β (None: the same).
    blocks : tuple of ReBlock
        The design's blocks in those columns (not √w-scaled).
    columns : ColumnRescaling or None
        The rescaling (None: the formula's own columns).
    """

    pls: PLS
    theta: np.ndarray
    back: np.ndarray | None
    blocks: tuple[ReBlock, ...]
    columns: ColumnRescaling | None


def optimiser_problem(fit: LmerFit) -> OptimiserProblem:
    """The fit's :class:`OptimiserProblem`, built once per fit."""

    def build() -> OptimiserProblem:
        blocks, theta, columns = optimiser_random(fit)
        if columns is None:
            pls, back = fit.solved_pls()
            return OptimiserProblem(pls, theta, back, blocks, None)
        R = fit.fixed_basis  # (the PLS blocks may be √w-scaled: the map commutes)
        pls = fit.pls.reparametrised(columns.apply(fit.pls.blocks), R)
        return OptimiserProblem(pls, theta, None if R is None else basis_inverse(R), blocks,
                                columns)

    return cast(OptimiserProblem, fit.memo("optimiser_problem", build))
