"""R's contrast codings for formulaic: :func:`rewrite_formula` wraps each coded column of a
formula as ``C(column, cx_contr_<i>)`` and places an :class:`RCoding` (a formulaic
``Contrasts``) under that name in formulaic's evaluation context. Apart from
:mod:`crossed.design.contrasts` (the codings themselves, R's names), which a fit that needs
no formulaic imports without importing formulaic."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from formulaic.transforms.contrasts import Contrasts

from crossed.design.contrasts import CONTEXT_PREFIX, contrast_matrix

__all__ = ["RCoding", "rewrite_formula"]

_TOKEN = re.compile(r"`[^`]+`|(?:[^\W\d]|\.)[\w.]*")


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


def rewrite_formula(text: str, codings: Mapping[str, Any]
                    ) -> tuple[str, dict[str, RCoding], set[str]]:
    """``text`` (a formulaic right-hand side) with each top-level use of a coded column
    wrapped as ``C(column, cx_contr_<i>)``.

    Returns
    -------
    text : str
    context : dict
        ``cx_contr_<i>`` -> :class:`RCoding`, for formulaic's evaluation context.
    found : set of str
        The coded columns used bare at the top level of ``text`` (columns only used inside
        an expression, e.g. ``C(lr)``, are not recoded).
    """
    names = {c: f"{CONTEXT_PREFIX}{i}" for i, c in enumerate(codings)}
    context = {names[c]: RCoding(coding=codings[c], column=c) for c in codings}
    out: list[str] = []
    found: set[str] = set()
    depth, pos = 0, 0
    while pos < len(text):
        ch = text[pos]
        m = _TOKEN.match(text, pos) if (ch == "`" or ch == "." or ch.isalpha()
                                        or ch == "_") else None
        if m is None:
            depth += ch in "([{"
            depth -= ch in ")]}"
            out.append(ch)
            pos += 1
            continue
        tok = m.group(0)
        bare = tok[1:-1] if tok.startswith("`") else tok
        prev = text[:pos].rstrip()
        nxt = text[m.end():].lstrip()
        if (depth == 0 and bare in codings and not nxt.startswith("(")
                and not (prev.endswith(".") or prev[-1:].isalnum())):
            out.append(f"C({tok}, {names[bare]})")
            found.add(bare)
        else:
            out.append(tok)
        pos = m.end()
    return "".join(out), context, found
