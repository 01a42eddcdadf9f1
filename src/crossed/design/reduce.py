"""Designs with fewer random-effects columns, built from an existing design's arrays.

lmerTest's ``ranova`` refits a model with one random term dropped or reduced (a slope
removed from ``(1 + x | g)``). Rebuilding from the formula would need the user's table;
here the reduced model reuses the original design's X, y and per-term Z columns, so no data
is re-read and the rows are exactly the same.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from crossed.design import Design
from crossed.design.random import ReBlock, TermColumns, assemble_random

__all__ = ["TermPiece", "reduced_design"]


@dataclass(frozen=True)
class TermPiece:
    """Columns of one lme4 random term kept in a reduced model.

    Attributes
    ----------
    term : int
        Index of the source term in ``design.random.terms``; -1 for a new intercept term.
    columns : tuple of int
        Positions of the kept columns within the source term.
    group : str
        Grouping factor (needed for a new intercept term).
    """

    term: int
    columns: tuple[int, ...]
    group: str


def _source(design: Design, group: str) -> ReBlock:
    for blk in design.random.blocks:
        if blk.group == group:
            return blk
    raise ValueError(f"no grouping factor {group!r} in the design")


def reduced_design(design: Design, pieces: list[TermPiece]) -> Design:
    """The design with only the random-effects columns in ``pieces``.

    Terms keep lme4's order (by number of levels when it increases) and are merged per
    grouping factor by :func:`crossed.design.random.assemble_random`, as for a full design.
    """
    terms = []
    for pc in pieces:
        if pc.term >= 0:
            t = design.random.terms[pc.term]
            blk = design.random.blocks[t.block]
            cols = [t.offset + c for c in pc.columns]
            Z, names = blk.Z[:, cols], tuple(t.columns[c] for c in pc.columns)
        else:
            blk = _source(design, pc.group)
            Z, names = np.ones((design.n, 1)), ("(Intercept)",)
        terms.append(TermColumns(group=blk.group, factors=blk.factors, levels=blk.levels,
                                 codes=blk.codes, Z=Z, names=names, keys=blk.keys))
    return replace(design, random=assemble_random(terms))
