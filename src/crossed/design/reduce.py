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
from crossed.design.random import RandomDesign, ReBlock, ReTerm, _lme4_order


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

    Terms keep lme4's order (by number of levels when it increases), blocks are merged per
    grouping factor as :func:`crossed.design.random.build_random` does.
    """
    raw = []
    for pc in pieces:
        if pc.term >= 0:
            t = design.random.terms[pc.term]
            blk = design.random.blocks[t.block]
            cols = [t.offset + c for c in pc.columns]
            raw.append(dict(group=t.group, blk=blk, Z=blk.Z[:, cols],
                            names=tuple(t.columns[c] for c in pc.columns),
                            exprs=blk.exprs))
        else:
            blk = _source(design, pc.group)
            raw.append(dict(group=pc.group, blk=blk, Z=np.ones((design.n, 1)),
                            names=("(Intercept)",), exprs=()))
    order = _lme4_order([r["blk"].nlevels for r in raw])
    raw = [raw[i] for i in order]
    keys: list[str] = []
    for r in raw:
        if r["group"] not in keys:
            keys.append(r["group"])
    nl = {r["group"]: r["blk"].nlevels for r in raw}
    keys.sort(key=lambda k: -nl[k])
    theta_pos, lower, names = 0, [], []
    terms: list[ReTerm] = []
    offsets = dict.fromkeys(keys, 0)
    members: dict[str, list] = {k: [] for k in keys}
    for r in raw:
        g, k = r["group"], len(r["names"])
        terms.append(ReTerm(group=g, columns=r["names"], block=keys.index(g),
                            offset=offsets[g], theta_start=theta_pos))
        members[g].append((r, offsets[g], theta_pos))
        for c in range(k):
            for rr in range(c, k):
                lower.append(0.0 if rr == c else -np.inf)
                names.append(f"{g}.{r['names'][c]}" if rr == c
                             else f"{g}.{r['names'][rr]}.{r['names'][c]}")
        theta_pos += k * (k + 1) // 2
        offsets[g] += k
    blocks = []
    for g in keys:
        q = offsets[g]
        tidx = -np.ones((q, q), dtype=np.int64)
        Zs, cnames = [], []
        for r, off, start in members[g]:
            k = len(r["names"])
            pos = start
            for c in range(k):
                for rr in range(c, k):
                    tidx[off + rr, off + c] = pos
                    pos += 1
            Zs.append(r["Z"])
            cnames.extend(r["names"])
        src = members[g][0][0]["blk"]
        blocks.append(ReBlock(group=g, factors=src.factors, levels=src.levels, codes=src.codes,
                              Z=np.column_stack(Zs), theta_index=tidx,
                              column_names=tuple(cnames), exprs=()))
    random = RandomDesign(terms=tuple(terms), blocks=tuple(blocks),
                          theta_lower=np.array(lower), theta_names=tuple(names))
    return replace(design, random=random)
