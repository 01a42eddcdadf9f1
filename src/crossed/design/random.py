"""Random-effects structure: lme4's terms, and the blocks the engine factors.

lme4 keeps one term per ``(expr | g)`` (``||`` split into one term per column) sorted by
number of levels; the order fixes theta's layout and names. The native engine merges terms
that share a grouping factor into one *block* with a structured lower-triangular template,
as MixedModels.jl does, so that e.g. eight uncorrelated slopes by ``model:dataset`` become a
single block-diagonal first block instead of eight dense ones.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from crossed._warn import warn
from crossed.design.fixed import MatrixSpec, Table, build_matrix
from crossed.design.frame import DataError, PreparedFrame, is_categorical, level_label
from crossed.formula.spec import RandomTermSpec

__all__ = ["FAR_FROM_ZERO", "RandomDesign", "ReBlock", "ReTerm", "TermColumns",
           "assemble_random", "build_random", "group_codes", "subset_random"]


@dataclass(frozen=True)
class ReTerm:
    """One lme4 random-effects term (in lme4's order).

    Attributes
    ----------
    group : str
        Grouping factor name as lme4 prints it (``"Subject"``, ``"cask:batch"``).
    columns : tuple of str
        Names of the term's columns (``"(Intercept)"``, ``"Days"``).
    block : int
        Index of the engine block holding this term.
    offset : int
        First column of this term within its block.
    theta_start : int
        Position of the term's first parameter in theta.
    """

    group: str
    columns: tuple[str, ...]
    block: int
    offset: int
    theta_start: int

    @property
    def ntheta(self) -> int:
        k = len(self.columns)
        return k * (k + 1) // 2


FAR_FROM_ZERO = 10.0
"""A random-slope column whose |mean| exceeds this many SDs is far from zero: the
native optimiser centres it in a correlated term (``engines/native/rescale.py``), and an
uncorrelated intercept beside it is warned of
(:attr:`RandomDesign.far_uncorrelated_slope`)."""


@dataclass(frozen=True)
class ReBlock:
    """All random-effects columns on one grouping factor.

    Attributes
    ----------
    group : str
        Grouping factor name.
    factors : tuple of str
        Data columns forming the grouping factor.
    levels : tuple of str
        Level labels (``"a1:b2"`` for interactions), in R's order.
    codes : numpy.ndarray
        Level index of each observation (int64, length n).
    Z : numpy.ndarray
        Covariate matrix, shape (n, q): the observation's value of each column.
    theta_index : numpy.ndarray
        (q, q) int array; entry (i, j), i >= j, is the index into theta of the relative
        covariance factor's element, or -1 where it is fixed at zero.
    column_names : tuple of str
    exprs : tuple of MatrixSpec
        Rebuilds ``Z``'s columns (per source term) on new data.
    keys : tuple of tuple of str
        Identity of each level: its R label per factor column (``("x:y", "z")``), which a
        joined label cannot give when level names contain ``:``. Empty for a single
        column (the label is the key); use :meth:`level_keys`.
    """

    group: str
    factors: tuple[str, ...]
    levels: tuple[str, ...]
    codes: np.ndarray
    Z: np.ndarray
    theta_index: np.ndarray
    column_names: tuple[str, ...]
    exprs: tuple[tuple[MatrixSpec, tuple[int, ...]], ...]
    keys: tuple[tuple[str, ...], ...] = ()

    def level_keys(self) -> tuple[tuple[str, ...], ...]:
        """:attr:`keys`; for one column its labels (an interaction without keys, built
        elsewhere, falls back to splitting labels on ':')."""
        if self.keys:
            return self.keys
        return tuple(tuple(lv.split(":")) if len(self.factors) > 1 else (lv,)
                     for lv in self.levels)

    @property
    def q(self) -> int:
        return int(self.Z.shape[1])

    @cached_property
    def column_stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per column of Z: whether it is all ones (an intercept), its mean and its SD
        (population), computed once per block (the design's warning and the native
        optimiser's rescaling read them)."""
        Z = self.Z
        ones = (Z == 1.0).all(axis=0)
        if len(Z) and ones.all():  # (intercepts alone: mean 1 and SD 0, exactly, without
            return ones, np.ones(Z.shape[1]), np.zeros(Z.shape[1])  # two passes over Z)
        return ones, Z.mean(axis=0), Z.std(axis=0)

    @cached_property
    def row_counts(self) -> np.ndarray:
        """Rows per level, ``np.bincount(codes)`` (up to the last level with rows), computed
        once per block (:meth:`RandomDesign.theta_start` reads them for every response)."""
        return np.bincount(self.codes)

    @cached_property
    def far_from_zero(self) -> np.ndarray:
        """Per column of Z: non-constant with |mean| over ``FAR_FROM_ZERO`` SDs."""
        _, mean, sd = self.column_stats
        return np.asarray((sd > 0) & (np.abs(mean) > FAR_FROM_ZERO * sd))

    @cached_property
    def singleton_columns(self) -> np.ndarray:
        """The columns j with a θ at (j, j) and none elsewhere in row or column j: each
        a 1 x 1 diagonal block of its own (an uncorrelated term's columns)."""
        idx = self.theta_index
        off = idx >= 0
        diag = np.diagonal(off).copy()
        np.fill_diagonal(off, False)
        return (diag & ~off.any(axis=0) & ~off.any(axis=1)).nonzero()[0]

    @property
    def nlevels(self) -> int:
        return len(self.levels)

    def template(self, theta: np.ndarray) -> np.ndarray:
        """The block's q x q lower-triangular relative covariance factor at ``theta``."""
        idx = self.theta_index
        T = np.zeros(idx.shape)
        mask = idx >= 0
        T[mask] = theta[idx[mask]]
        return T


@dataclass(frozen=True)
class RandomDesign:
    """lme4's term list, the merged blocks (most levels first) and theta's bounds/names."""

    terms: tuple[ReTerm, ...]
    blocks: tuple[ReBlock, ...]
    theta_lower: np.ndarray
    theta_names: tuple[str, ...]

    @property
    def ntheta(self) -> int:
        return len(self.theta_lower)

    @cached_property
    def far_uncorrelated_slope(self) -> str | None:
        """The note on the first intercept uncorrelated with a slope on a column far from
        zero (``(x || g)``, or ``(1 | g) + (0 + x | g)``, with x a year), or None;
        computed once per design: building it warns with the note, and the fit's
        messages keep it (:meth:`Design.messages`).

        Its variance is the groups' spread at x = 0, far outside the data, and the
        criterion along it is nearly flat for hundreds of units: lme4 and crossed stop
        where their path happens to end, and the two BLAS kernels can give different fits
        (fuzzed: ``y ~ log(w) + f + (x || g) + (1 | h)`` with x = 2000 ± 1 ended 3.8 apart
        in deviance, lme4 with the higher; the criterion was lower still further out).
        Centring x is the usual cure; it changes an uncorrelated model (the covariance at
        the data), so it is the user's choice."""
        for blk in self.blocks:
            idx = blk.theta_index
            if blk.q < 2 or len(blk.Z) < 2:
                continue
            ones, mean, sd = blk.column_stats
            for i0 in ones.nonzero()[0]:
                for j in blk.far_from_zero.nonzero()[0]:
                    if idx[max(i0, j), min(i0, j)] >= 0:
                        continue  # (correlated with the intercept: centred by the optimiser)
                    name = blk.column_names[j]
                    return (f"the random intercept on {blk.group!r} is uncorrelated with the "
                            f"slope on {name!r}, whose values lie far from 0 (mean "
                            f"{mean[j]:.4g}, SD {sd[j]:.3g}): its variance is the spread at "
                            f"{name} = 0, far outside the data, and is poorly determined; the "
                            "fit can depend on the optimiser's path (lme4's too) and differ "
                            f"between machines. Centre {name!r} (a different uncorrelated "
                            f"model) or correlate the terms (({name} | {blk.group}))")
        return None

    def theta_start(self, y: np.ndarray | None = None) -> np.ndarray:
        """lme4's starting value of theta for the response ``y``.

        By default 1 on diagonals and 0 off-diagonal. When every term is a random intercept
        on its own grouping factor, lme4 (``mkLmerDevfun``) starts instead from moment
        estimates: with v_f = var(ave(y, f)) per factor and v_e = var(y) - Σ v_f, theta =
        sqrt(v_f / v_e) when v_e > 0. Without ``y`` the default is returned.
        """
        terms = self._moment_terms
        if y is None or len(y) < 2 or terms is None:
            return np.where(np.isfinite(self.theta_lower), 1.0, 0.0)
        y = np.asarray(y, dtype=float)
        mean = y.mean()
        v = np.empty(len(terms))
        for i, (codes, counts, divisor) in enumerate(terms):  # var(ave(y, f)), R's n - 1
            means = np.bincount(codes, weights=y) / divisor  # denominator
            v[i] = float(np.sum(counts * (means - mean) ** 2)) / (len(y) - 1)
        dev = y - mean  # (var(y) in np.var's own steps, the same value, on this mean)
        v_e = float(np.add.reduce(dev * dev)) / (len(y) - 1) - float(v.sum())
        if not v_e > 0:
            return np.where(np.isfinite(self.theta_lower), 1.0, 0.0)
        return np.sqrt(v / v_e)

    @cached_property
    def _moment_terms(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] | None:
        """For :meth:`theta_start`'s moment estimates, per term: its block's codes, rows
        per level and their divisor (at least 1), as floats (the same numbers as the
        counts'); None unless every term is a random intercept on its own grouping factor.
        Computed once per design (a simulation starts thousands of refits)."""
        groups = [t.group for t in self.terms]
        if len(set(groups)) != len(groups) or any(
                t.columns != ("(Intercept)",) for t in self.terms):
            return None
        out = []
        for term in self.terms:
            block = self.blocks[term.block]
            counts = block.row_counts.astype(float)
            out.append((block.codes, counts, np.maximum(counts, 1.0)))
        return tuple(out)


def _warn_merged_numbers(column: str, values: list[object], labels: list[str]) -> None:
    """Say when distinct numbers share one R label and so one level (R merges them
    silently: 64-bit IDs stored as doubles above 1e15 become one group)."""
    seen: dict[str, object] = {}
    for v, lv in zip(values, labels, strict=True):
        if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Real):
            continue
        if lv in seen and seen[lv] != v:
            warn(f"grouping column {column!r}: the distinct values {seen[lv]!r} and "
                 f"{v!r} are one level, {lv!r} (R's label, 15 significant digits); "
                 "convert the column to strings or integers to keep them apart", UserWarning)
            return
        seen.setdefault(lv, v)


def _factor_labels(values: Any, column: str) -> tuple[np.ndarray, list[str]]:
    """Codes and R labels of one grouping column's values; values with one R label are
    one level."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        # whole numbers (an ID column): sorted as pd.Categorical sorts them, each its own
        # label, without the Categorical
        uniq, inverse = np.unique(values, return_inverse=True)
        return (inverse.reshape(-1).astype(np.int64, copy=False),
                [level_label(v) for v in uniq.tolist()])
    cat = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
    codes = np.asarray(cat.codes, dtype=np.int64)
    labels = [level_label(c) for c in cat.categories.tolist()]
    unique = list(dict.fromkeys(labels))
    if len(unique) < len(labels):  # e.g. 0.1 + 0.2 and 0.3: one label, one level in R
        _warn_merged_numbers(column, cat.categories.tolist(), labels)
        position = {lv: i for i, lv in enumerate(unique)}
        codes = np.array([position[lv] for lv in labels], dtype=np.int64)[codes]
    return codes, unique


def _unique_codes(key: np.ndarray, size: float) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for keys in ``0 .. size - 1``: by counting
    when the range is at most a few times the number of keys (no sort of the rows)."""
    if size > 4 * len(key) + 1000:
        uniq, codes = np.unique(key, return_inverse=True)
        return uniq, codes.reshape(-1)
    present = np.bincount(key, minlength=int(size)) > 0
    position = np.cumsum(present) - 1
    return np.flatnonzero(present), position[key]


def _every_level_occurs(codes: np.ndarray, nlevels: int) -> bool:
    """Whether ``codes`` take every value of 0 .. nlevels - 1 (no unused level)."""
    return bool(len(codes) and codes.min() == 0 and codes.max() == nlevels - 1
                and np.bincount(codes).all())


def group_codes(
    frame: Table, factors: tuple[str, ...], name: str | None = None
) -> tuple[np.ndarray, tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Codes, labels and keys of the interaction of factor columns (first varies slowest).

    A level's identity is its key, the tuple of its R labels per column (``("x", "y:z")``;
    empty for one column, whose label is its key); its label joins them with ``:`` as lme4
    prints it. Two cells whose labels would be
    equal (``x`` with ``y:z`` and ``x:y`` with ``z``) raise a :class:`DataError`.
    ``frame``: a table, or :func:`prepare`'s columns (whose factors' codes are used).
    """
    def column(f: str) -> Any:  # (a prepared factor's values are its codes, below)
        return frame.values[f] if isinstance(frame, PreparedFrame) else frame[f].array

    coded = frame.codes if isinstance(frame, PreparedFrame) else {}
    key = np.zeros(len(frame), dtype=np.int64)
    cats = []
    for f in factors:
        c, f_labels = coded[f] if f in coded else _factor_labels(column(f), str(f))
        if len(factors) == 1 and _every_level_occurs(c, len(f_labels)):
            return c, tuple(f_labels), ()  # (one column: its codes and labels as they are)
        cats.append(f_labels)
        key = key * len(f_labels) + c
    uniq, codes = _unique_codes(key, int(np.prod([len(c) for c in cats], dtype=float)))
    # keys and labels of the observed combinations, vectorised over levels
    parts = []
    rest = uniq
    for cat in reversed(cats):
        rest, r = np.divmod(rest, len(cat))
        parts.append(np.asarray(cat, dtype=object)[r])
    parts = parts[::-1]
    # one factor: the label is the key (kept implicit, see ReBlock.level_keys)
    keys = tuple(zip(*(p.tolist() for p in parts), strict=True)) if len(parts) > 1 else ()
    joined = parts[0]
    for part in parts[1:]:
        joined = joined + ":" + part
    labels = tuple(joined.tolist())
    if len(set(labels)) < len(labels):
        seen: dict[str, tuple[str, ...]] = {}
        for k, lv in zip(keys, labels, strict=True):
            if lv in seen:
                cells = " and ".join(
                    ", ".join(f"{f}={v!r}" for f, v in zip(factors, cell, strict=True))
                    for cell in (seen[lv], k))
                raise DataError(
                    f"grouping factor {name or ':'.join(factors)!r} has two cells labelled "
                    f"{lv!r} ({cells}): level names containing ':' make the interaction "
                    "ambiguous; rename those levels"
                )
            seen[lv] = k
    return codes.astype(np.int64), labels, keys


def _lme4_order(nlevels: list[int]) -> list[int]:
    """lme4's term order: ``rev(order(nl))`` when any term has more levels than the one before."""
    idx = list(range(len(nlevels)))
    if any(b > a for a, b in zip(nlevels, nlevels[1:], strict=False)):
        idx = sorted(idx, key=lambda i: nlevels[i])[::-1]
    return idx


@dataclass(frozen=True)
class TermColumns:
    """One lme4 term before assembly: its grouping factor and its columns.

    Attributes
    ----------
    group : str
        lme4's name of the grouping factor.
    factors, levels, codes
        The grouping factor's data columns, level labels and per-row level codes.
    Z : numpy.ndarray
        (n, k) covariate columns of the term.
    names : tuple of str
        Names of the k columns.
    source : tuple of (MatrixSpec, tuple of int)
        Rebuilds the columns on new data (the expression's spec and the columns taken).
    """

    group: str
    factors: tuple[str, ...]
    levels: tuple[str, ...]
    codes: np.ndarray
    Z: np.ndarray
    names: tuple[str, ...]
    source: tuple[MatrixSpec, tuple[int, ...]] | None = None
    keys: tuple[tuple[str, ...], ...] = ()


def _note_factor_in_double_bar(spec: RandomTermSpec, frame: Table) -> None:
    """``(f || g)`` with a factor f: crossed gives every indicator column its own variance
    (afex's ``expand_re``), lme4 1.1-31 keeps the factor's columns one correlated block
    ((1 | g) + (0 + f | g)): a different model, so it is said (found by fuzzing)."""
    factors = set(frame.levels) if isinstance(frame, PreparedFrame) else {
        str(c) for c in frame.columns if is_categorical(frame[c].array)}
    words = set(re.findall(r"[A-Za-z_.][A-Za-z0-9_.]*", spec.expr))
    named = sorted(words & factors)
    if named:
        f = named[0]
        warn(f"({spec.expr} || {spec.name}): the factor {f!r} gets an independent variance "
             "per indicator column (afex's expand_re); lme4 1.1-31 splits || by terms, not "
             f"columns, and keeps the columns of {f!r} in one correlated block (for (1 + {f} || "
             f"{spec.name}): (1 | {spec.name}) + (0 + {f} | {spec.name})): write that to fit "
             "lme4's model")


def build_random(terms: tuple[RandomTermSpec, ...], frame: Table,
                 caret: bool = False, codings: Mapping[str, Any] | None = None,
                 glmm: bool = False, trusted: bool = False) -> RandomDesign:
    """Random-effects structure of a model on prepared data (``codings``: the contrasts of
    ordered factors; ``glmm``: a GLMM, which has no residual, so one level per observation
    is allowed, as lme4's glmer; ``frame``: a table, or :func:`prepare`'s columns)."""
    n = len(frame)
    # lme4 terms as written, with || split into one term per column
    out: list[TermColumns] = []
    for spec in terms:
        Zt, names, mspec = build_matrix(spec.expr, frame, caret=caret, codings=codings,
                                        trusted=trusted)
        if Zt.shape[1] == 0:
            raise DataError(f"random term ({spec.expr} | {spec.name}) has no columns")
        codes, levels, keys = group_codes(frame, spec.factors, spec.name)
        if len(levels) < 2:
            raise DataError(
                f"grouping factor {spec.name!r} has {len(levels)} level; a random effect "
                "needs at least 2"
            )
        if len(levels) >= n and not (glmm and len(levels) <= n):
            raise DataError(
                f"grouping factor {spec.name!r} has {len(levels)} levels for {n} observations; "
                "the random effects and the residual are not identifiable"
            )
        if spec.uncorrelated and Zt.shape[1] > 1:
            _note_factor_in_double_bar(spec, frame)
        col_sets = [(j,) for j in range(Zt.shape[1])] if spec.uncorrelated else [
            tuple(range(Zt.shape[1]))
        ]
        for cols in col_sets:
            nre = len(levels) * len(cols)
            if nre > n or (nre == n and not glmm):
                raise DataError(
                    f"number of observations ({n}) <= number of random effects ({nre}) for "
                    f"term ({spec.expr} | {spec.name}); the random-effects parameters are "
                    "unidentifiable"
                )
            out.append(TermColumns(group=spec.name, factors=spec.factors, levels=levels,
                                   codes=codes, Z=Zt[:, list(cols)], keys=keys,
                                   names=tuple(names[j] for j in cols), source=(mspec, cols)))
    random = assemble_random(out)
    if random.far_uncorrelated_slope is not None:
        warn(random.far_uncorrelated_slope)
    return random


def assemble_random(terms: list[TermColumns]) -> RandomDesign:
    """lme4's term order, theta layout and names; terms merged into blocks per factor.

    Terms are sorted as lme4 sorts them; blocks (one per grouping factor) by number of
    levels, descending, ties in lme4's order.
    """
    order = _lme4_order([len(t.levels) for t in terms])
    terms = [terms[i] for i in order]
    block_keys: list[str] = []
    for t in terms:
        if t.group not in block_keys:
            block_keys.append(t.group)
    nl = {t.group: len(t.levels) for t in terms}
    block_keys.sort(key=lambda k: -nl[k])  # stable: ties keep lme4's order

    theta_pos, lower, theta_names = 0, [], []
    re_terms: list[ReTerm] = []
    members: dict[str, list[tuple[TermColumns, int, int]]] = {k: [] for k in block_keys}
    offsets = dict.fromkeys(block_keys, 0)
    for t in terms:
        key, k = t.group, len(t.names)
        re_terms.append(ReTerm(group=key, columns=t.names, block=block_keys.index(key),
                               offset=offsets[key], theta_start=theta_pos))
        members[key].append((t, offsets[key], theta_pos))
        for c in range(k):
            for rr in range(c, k):
                lower.append(0.0 if rr == c else -np.inf)
                theta_names.append(f"{key}.{t.names[c]}" if rr == c
                                   else f"{key}.{t.names[rr]}.{t.names[c]}")
        theta_pos += k * (k + 1) // 2
        offsets[key] += k

    blocks = []
    for key in block_keys:
        q = offsets[key]
        tidx = -np.ones((q, q), dtype=np.int64)
        for t, off, start in members[key]:
            k = len(t.names)
            pos = start
            for c in range(k):
                for rr in range(c, k):
                    tidx[off + rr, off + c] = pos
                    pos += 1
        first = members[key][0][0]
        sources = [t.source for t, _, _ in members[key]]
        blocks.append(ReBlock(
            group=key, factors=first.factors, levels=first.levels, codes=first.codes,
            Z=np.column_stack([t.Z for t, _, _ in members[key]]), theta_index=tidx,
            column_names=tuple(n for t, _, _ in members[key] for n in t.names),
            exprs=(tuple(src for src in sources if src is not None)
                   if all(src is not None for src in sources) else ()),
            keys=first.keys,
        ))
    return RandomDesign(terms=tuple(re_terms), blocks=tuple(blocks),
                        theta_lower=np.array(lower), theta_names=tuple(theta_names))


def subset_random(random: RandomDesign, rows: np.ndarray) -> RandomDesign:
    """The random-effects structure on a subset of rows (empty levels dropped)."""
    n = len(rows)
    blocks = []
    for blk in random.blocks:
        kept = blk.codes[rows]  # (the levels with rows, in order, and their new codes:
        # np.unique's, without its sort)
        has_rows = np.bincount(kept, minlength=blk.nlevels) > 0
        used = np.flatnonzero(has_rows)
        codes = (np.cumsum(has_rows) - 1)[kept]
        if len(used) < 2:
            raise DataError(
                f"grouping factor {blk.group!r} has {len(used)} level in the subset; a random "
                "effect needs at least 2"
            )
        if len(used) * blk.q >= n:
            raise DataError(
                f"number of observations ({n}) <= number of random effects "
                f"({len(used) * blk.q}) for grouping factor {blk.group!r} in the subset"
            )
        blocks.append(replace(blk, codes=codes.astype(np.int64), Z=blk.Z[rows],
                              levels=tuple(blk.levels[i] for i in used),
                              keys=tuple(blk.keys[i] for i in used) if blk.keys else ()))
    return replace(random, blocks=tuple(blocks))
