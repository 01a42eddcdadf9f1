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

from typing import TYPE_CHECKING

import numpy as np

from crossed.engines.native.rescale import ColumnRescaling, column_rescaling

if TYPE_CHECKING:
    from crossed.design.random import ReBlock
    from crossed.fit import LmerFit

__all__ = ["optimiser_random"]


def optimiser_random(fit: LmerFit) -> tuple[tuple[ReBlock, ...], np.ndarray,
                                            ColumnRescaling | None]:
    """The design's random-effects blocks and the fit's θ as the optimiser parametrised
    them, and the rescaling (None: the formula's own blocks and θ)."""
    blocks = tuple(fit.design.random.blocks)
    theta = np.asarray(fit.theta, dtype=float)
    columns = column_rescaling(blocks)
    if columns is None:
        return blocks, theta, None
    return columns.apply(blocks), columns.from_original(theta), columns
