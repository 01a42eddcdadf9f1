"""R's contrast codings as formulaic ``Contrasts`` (:class:`RCoding`), which
:func:`crossed.design.contrasts.rewrite_formula` places in formulaic's evaluation context;
apart from :mod:`crossed.design.contrasts` so that a fit that needs no formulaic does not
import it."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from formulaic.transforms.contrasts import Contrasts

from crossed.design.contrasts import contrast_matrix

__all__ = ["RCoding"]


@dataclass(frozen=True)
class RCoding(Contrasts):  # type: ignore[misc]
    """An R contrast coding for formulaic: the coding matrix when formulaic reduces the
    rank, the full indicator coding otherwise (as R's ``model.matrix``)."""

    coding: str | tuple[tuple[float, ...], ...] = "treatment"
    column: str = ""

    @Contrasts.override  # type: ignore[untyped-decorator]
    def _get_coding_matrix(self, levels: Sequence[Hashable], reduced_rank: bool = True,
                           sparse: bool = False) -> Any:
        if not reduced_rank:
            return np.eye(len(levels))
        return contrast_matrix(self.coding, [str(v) for v in levels], self.column)[0]

    @Contrasts.override  # type: ignore[untyped-decorator]
    def get_coding_column_names(self, levels: Sequence[Hashable],
                                reduced_rank: bool = True) -> Sequence[Hashable]:
        if not reduced_rank:
            return list(levels)
        return contrast_matrix(self.coding, [str(v) for v in levels], self.column)[1]

    @Contrasts.override  # type: ignore[untyped-decorator]
    def get_coefficient_row_names(self, levels: Sequence[Hashable],
                                  reduced_rank: bool = True) -> Sequence[Hashable]:
        return list(levels)
