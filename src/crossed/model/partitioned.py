"""Mixed-model fits on partitioned data: the two operations an engine runs on each
partition of rows, and what the driver builds from their sums.

A fit on data split into partitions (a Dask DataFrame, Parquet files, a Spark DataFrame)
needs two passes over the rows, each a map over partitions and a reduction by addition:

1. **levels** (:func:`levels_of`, reduced by ``+``): per partition, the rows, the missing
   values per used column, the distinct values of every factor column, the distinct cells
   of every grouping factor and the response's sum. The driver builds from their sum the
   model's structure (:func:`rowless_design`): the levels in R's order, the fixed-effects
   columns and the random-effects blocks, with no rows (:class:`RowlessDesign`).
2. **sums** (:func:`sums_of`, reduced by ``+``): per partition, the rows encoded with those
   levels and their :class:`~crossed.model.crossprod.CrossProducts` (which add), plus the
   per-column sums of the random-effects columns. The PLS problem is then built from the
   summed products alone (:meth:`PLS.from_products <crossed.model.pls.PLS.from_products>`):
   the driver's memory depends on the number of levels, not of rows.

An engine implements :class:`PartitionSource` (``levels`` and ``sums``: map the function
over its partitions, add the results in partition order); nothing here depends on the
engine. A partition holding a level the levels pass did not see raises a
:class:`~crossed.design.frame.DataError` naming the partition, the column and the level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from crossed._threads import single_blas_thread
from crossed._warn import warn
from crossed.design import Design, build_design
from crossed.design.fixed import build_matrix, build_response
from crossed.design.frame import (
    DataError,
    check_column,
    is_categorical,
    labels_of,
    level_label,
    prepare,
    used_columns,
    value_columns,
)
from crossed.design.newdata import describe_level
from crossed.design.random import RandomDesign, TermColumns, assemble_random
from crossed.formula.spec import ModelSpec
from crossed.model.crossprod import CrossProducts, RowMatrices
from crossed.model.glmm.family import ResidualDeviance

__all__ = ["LevelsChunk", "PartitionSource", "RowlessDesign", "RowsNotHeldError",
           "SumsChunk", "levels_of", "rowless_design", "sums_of", "theta_start_of",
           "tree_sum"]

_SAMPLE = 1000
"""Values of each numeric column kept by the levels pass: the rows the model's structure
(column names, factor codings) is built on in the driver."""


class RowsNotHeldError(DataError):
    """A row-level quantity asked of a fit whose rows stayed on the cluster."""


ROWS_MESSAGE = (
    "this fit was computed from partitioned data (a Dask DataFrame or Parquet files): the "
    "driver holds the level-sized cross-products, not the rows, so row-level quantities "
    "(fitted values, residuals, hat values, check(), influence, refits on the rows) are "
    "not available. Predict on each partition with fit.predict(newdata=partition) "
    "(e.g. ddf.map_partitions(lambda part: pd.Series(fit.predict(newdata=part), "
    "index=part.index))), or fit in memory to get them: cx.lmer(formula, ddf.compute())")


class _RowField:
    """A row-sized field of :class:`RowlessDesign` (``y``): stored empty, refused on read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = "_rowless_" + name

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return None
        raise RowsNotHeldError(ROWS_MESSAGE)

    def __set__(self, obj: object, value: object) -> None:
        obj.__dict__[self.key] = value


@dataclass(frozen=True, eq=False, repr=False)
class RowlessDesign(Design):
    """A :class:`~crossed.design.Design` without rows: the levels, fixed-effects columns
    and random-effects blocks of a model fitted on partitioned data.

    Everything that needs only the structure works (encoding new data, names, θ's layout);
    reading the rows (``X``, ``y``) raises :class:`RowsNotHeldError` naming the in-memory
    alternative, so no row-level quantity is computed from an empty array.

    Attributes
    ----------
    n_rows : int
        The number of rows used (after dropping rows with missing values).
    n_partitions : int
        The number of partitions the rows came in.
    means : dict
        Numeric column -> its mean over the rows used (emmeans' reference grid).
    response_sums : tuple of float
        (Σ y, Σ y²) of the response over the rows used: whether two fits share their
        response (likelihood-ratio tests).
    structure : pandas.DataFrame or None
        Rows with every level of every factor (not the data: made up from its distinct
        values) on which the fixed-effects columns are full rank: what row-free
        computations that need *a* model matrix of the model's columns read (lmerTest's
        Type III contrasts, which depend on the columns' span, not on the rows).
    """

    holds_rows: ClassVar[bool] = False
    n_rows: int = 0
    n_partitions: int = 0
    means: dict[str, float] = field(default_factory=dict)
    response_sums: tuple[float, float] = (0.0, 0.0)
    structure: pd.DataFrame | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        pass  # (no rows to freeze)

    @property
    def X(self) -> np.ndarray:
        raise RowsNotHeldError(ROWS_MESSAGE)

    @property
    def n(self) -> int:
        return self.n_rows

    def with_response(self, y: np.ndarray) -> Design:
        raise RowsNotHeldError(ROWS_MESSAGE)

    def subset(self, rows: np.ndarray, keep_frame: bool = True) -> Design:
        raise RowsNotHeldError(ROWS_MESSAGE)

    def __dask_tokenize__(self) -> tuple[str, int]:
        return ("RowlessDesign", id(self))  # (its fields include the refused rows)

    def __repr__(self) -> str:
        return (f"RowlessDesign({self.spec.formula!r}, n_rows={self.n_rows}, "
                f"n_partitions={self.n_partitions})")

    def with_random(self, random: RandomDesign) -> RowlessDesign:
        """The same design with other random-effects blocks (no rows are read)."""
        return RowlessDesign(spec=self.spec, y=np.zeros(0), fixed=self.fixed, random=random,
                             n_dropped=self.n_dropped, levels=self.levels,
                             columns=self.columns, frame=None, n_rows=self.n_rows,
                             n_partitions=self.n_partitions, means=self.means,
                             response_sums=self.response_sums, structure=self.structure)


_y = _RowField()
_y.__set_name__(RowlessDesign, "y")
RowlessDesign.y = _y  # type: ignore[assignment]


# ---------------------------------------------------------------------------- pass 1
@dataclass(frozen=True)
class LevelsChunk:
    """What the levels pass finds in some partitions (:func:`levels_of`); chunks add
    (``+``: counts summed, distinct values united in the order first seen).

    Attributes
    ----------
    n_rows : int
        Rows read.
    n_dropped : int
        Rows with a missing value in a used column.
    missing : dict
        Column -> rows where it is missing (before dropping).
    values : dict
        Factor column -> its distinct values (a pandas Series with the column's dtype).
    samples : dict
        Numeric column -> up to 1,000 of its values.
    cells : dict
        Grouping factor (a tuple of columns) -> its distinct cells, a DataFrame of R labels.
    y_sum : float
        Sum of the response over the rows kept.
    y_ss : float
        Sum of the response's squares over the rows kept.
    sums : dict
        Numeric column -> the sum of its values over the rows kept.
    """

    n_rows: int
    n_dropped: int
    missing: dict[str, int]
    values: dict[str, pd.Series]
    samples: dict[str, pd.Series]
    cells: dict[tuple[str, ...], pd.DataFrame]
    y_sum: float
    y_ss: float = 0.0
    sums: dict[str, float] = field(default_factory=dict)

    def __add__(self, other: LevelsChunk) -> LevelsChunk:
        if not isinstance(other, LevelsChunk):
            return NotImplemented

        def unite(a: Any, b: Any) -> Any:
            if len(b) == 0:
                return a
            if len(a) == 0:
                return b
            if isinstance(a, pd.DataFrame):
                return pd.concat([a, b], ignore_index=True).drop_duplicates(
                    ignore_index=True)
            return pd.concat([a, b], ignore_index=True).drop_duplicates().reset_index(
                drop=True)

        def first(a: pd.Series, b: pd.Series) -> pd.Series:
            return a if len(a) >= _SAMPLE or len(b) == 0 else pd.concat(
                [a, b], ignore_index=True).iloc[:_SAMPLE]

        return LevelsChunk(
            n_rows=self.n_rows + other.n_rows, n_dropped=self.n_dropped + other.n_dropped,
            missing={c: self.missing.get(c, 0) + other.missing.get(c, 0)
                     for c in dict.fromkeys([*self.missing, *other.missing])},
            values={c: unite(self.values[c], other.values[c]) for c in self.values},
            samples={c: first(self.samples[c], other.samples[c]) for c in self.samples},
            cells={k: unite(self.cells[k], other.cells[k]) for k in self.cells},
            y_sum=self.y_sum + other.y_sum, y_ss=self.y_ss + other.y_ss,
            sums={c: self.sums[c] + other.sums[c] for c in self.sums})


def _grouping_factors(spec: ModelSpec) -> list[tuple[str, ...]]:
    return list(dict.fromkeys(tuple(t.factors) for t in spec.random))


def levels_of(spec: ModelSpec, frame: pd.DataFrame, na_action: str = "omit",
              index: int = 0) -> LevelsChunk:
    """The levels pass on one partition (see the module's docstring).

    Parameters
    ----------
    spec : ModelSpec
    frame : pandas.DataFrame
        The partition's rows.
    na_action : {"omit", "raise"}
        "raise": a missing value raises, naming the partition and the column.
    index : int
        The partition's position (for messages).
    """
    columns = [str(c) for c in frame.columns]
    used, _ = used_columns(spec, columns)
    label = {str(c): c for c in frame.columns}
    arrays = {c: frame[label[c]].array for c in used}
    value_cols = value_columns(spec, columns)
    for c, a in arrays.items():
        check_column(c, a, c in value_cols)
    masks = {c: np.asarray(pd.isna(a), dtype=bool) for c, a in arrays.items()}
    any_missing = (np.logical_or.reduce(list(masks.values())) if masks
                   else np.zeros(len(frame), dtype=bool))
    n_dropped = int(any_missing.sum())
    if n_dropped and na_action == "raise":
        where = ", ".join(f"{c} ({int(m.sum())})" for c, m in masks.items() if m.any())
        raise DataError(f"partition {index}: {n_dropped} rows have missing values in: {where}")
    keep = ~any_missing
    kept = frame.loc[keep, [label[c] for c in used]]
    kept.columns = used
    values: dict[str, pd.Series] = {}
    samples: dict[str, pd.Series] = {}
    for c in used:
        col = kept[c]
        if is_categorical(col.array) or c in spec.group_factors:
            values[c] = pd.Series(col.drop_duplicates().to_numpy(), dtype=col.dtype)
        if not is_categorical(col.array):
            samples[c] = col.iloc[:_SAMPLE].reset_index(drop=True)
    cells = {}
    for factors in _grouping_factors(spec):
        labels = pd.DataFrame({f: labels_of(kept[f]) for f in factors})
        cells[factors] = labels.drop_duplicates(ignore_index=True)
    y_sum = y_ss = 0.0
    if len(kept):
        y = build_response(spec, kept)
        y_sum, y_ss = float(np.sum(y)), float(y @ y)
    sums = {c: float(np.sum(np.asarray(kept[c], dtype=float))) for c in samples}
    return LevelsChunk(n_rows=len(frame), n_dropped=n_dropped,
                       missing={c: int(m.sum()) for c, m in masks.items()},
                       values=values, samples=samples, cells=cells, y_sum=y_sum, y_ss=y_ss,
                       sums=sums)


def _synthetic_frame(levels: LevelsChunk, used: list[str]) -> pd.DataFrame:
    """A table on which the model's structure is built: every distinct value of every
    factor column, and numeric columns' sampled values, at random pairings (so that the
    fixed-effects columns are not made collinear by the pairing)."""
    sizes = [len(levels.values[c]) for c in used if c in levels.values]
    n = 4 * max(sizes + [len(s) for s in levels.samples.values()] + [1]) + 200
    rng = np.random.default_rng(20261128)
    out = {}
    for c in used:
        source = levels.values[c] if c in levels.values else levels.samples[c]
        if len(source) == 0:
            raise DataError(f"column {c!r} has no value in the rows used")
        k = len(source)
        idx = np.concatenate([np.arange(k), rng.integers(0, k, n - k)])
        rng.shuffle(idx)
        out[c] = source.iloc[idx].reset_index(drop=True)
    return pd.DataFrame(out)


def _level_rank(column: str, prepared_levels: dict[str, list[str]],
                values: pd.Series) -> dict[str, int]:
    """Each R label of a grouping column -> its position in R's order (a factor's levels;
    a numeric column's sorted values)."""
    if column in prepared_levels:
        return {lv: i for i, lv in enumerate(prepared_levels[column])}
    cats = pd.Categorical(values.dropna().to_numpy()).categories.tolist()
    labels = list(dict.fromkeys(level_label(c) for c in cats))
    return {lv: i for i, lv in enumerate(labels)}


def rowless_design(spec: ModelSpec, levels: LevelsChunk, n_partitions: int = 0,
                   glmm: bool = False) -> RowlessDesign:
    """The model's structure from the levels pass: the levels of every factor in R's
    order, the fixed-effects columns, the random-effects blocks with every level seen.

    Raises
    ------
    DataError
        No rows left; a model the partitioned path cannot fit without the rows (stateful
        transforms such as ``scale()``/``poly()``, whose parameters are learnt from the
        rows; rank-deficient fixed-effects columns); a grouping factor with too few levels.
    """
    n = levels.n_rows - levels.n_dropped
    if n == 0:
        raise DataError(f"no rows left after dropping rows with missing values "
                        f"({levels.n_rows} rows read)")
    if levels.n_dropped:
        where = ", ".join(f"{c} ({k})" for c, k in levels.missing.items() if k)
        warn(f"{levels.n_dropped} of {levels.n_rows} rows dropped for missing values in: "
             f"{where}")
    used = [c for c in dict.fromkeys([*levels.values, *levels.samples])]
    syn = _synthetic_frame(levels, used)
    skeleton = build_design(spec, syn, na_action="raise", glmm=glmm)
    prepared = prepare(spec, syn, na_action="raise")
    for mspec in [skeleton.fixed.spec, *(m for b in skeleton.random.blocks
                                         for m, _ in b.exprs)]:
        state = getattr(mspec.formulaic, "transform_state", None) if mspec.formulaic else None
        if state:
            raise DataError(
                f"the formula uses a transform learnt from the rows ({', '.join(state)}): "
                "on partitioned data it cannot be computed per partition; compute the "
                "column beforehand (e.g. ddf.assign(x_c=ddf.x - ddf.x.mean()))")
    if skeleton.fixed.dropped:
        raise DataError("fixed-effects columns " + ", ".join(map(repr, skeleton.fixed.dropped))
                        + " are linearly dependent on the others: drop them from the formula "
                          "(partitioned fits do not drop columns)")
    ordered = {c: "poly" for c in prepared.ordered}
    frame = skeleton.frame
    terms: list[TermColumns] = []
    for rspec in spec.random:
        Zt, names, mspec = build_matrix(rspec.expr, frame, caret=spec.caret,
                                        codings=ordered, trusted=spec.trusted)
        factors = tuple(rspec.factors)
        cells = levels.cells[factors]
        ranks = [_level_rank(f, prepared.levels, levels.values[f]) for f in factors]
        order = sorted(range(len(cells)), key=lambda i: tuple(
            r[cells.iat[i, j]] for j, r in enumerate(ranks)))
        rows = [tuple(cells.iat[i, j] for j in range(len(factors))) for i in order]
        labels = tuple(":".join(r) for r in rows)
        keys = tuple(rows) if len(factors) > 1 else ()
        if len(labels) < 2:
            raise DataError(f"grouping factor {rspec.name!r} has {len(labels)} level; a "
                            "random effect needs at least 2")
        col_sets = [(j,) for j in range(Zt.shape[1])] if rspec.uncorrelated else [
            tuple(range(Zt.shape[1]))]
        for cols in col_sets:
            nre = len(labels) * len(cols)
            if nre > n or (nre == n and not glmm):
                raise DataError(
                    f"number of observations ({n}) <= number of random effects ({nre}) for "
                    f"term ({rspec.expr} | {rspec.name}); the random-effects parameters are "
                    "unidentifiable")
            terms.append(TermColumns(
                group=rspec.name, factors=factors, levels=labels,
                codes=np.zeros(0, dtype=np.int64), Z=np.zeros((0, len(cols))),
                names=tuple(names[j] for j in cols), source=(mspec, cols), keys=keys))
    random = assemble_random(terms)
    p = skeleton.fixed.X.shape[1]
    fixed = replace(skeleton.fixed, X=np.zeros((0, p)))
    return RowlessDesign(spec=spec, y=np.zeros(0), fixed=fixed, random=random,
                         n_dropped=levels.n_dropped, levels=skeleton.levels,
                         columns=skeleton.columns, frame=None, n_rows=n,
                         n_partitions=n_partitions,
                         means={c: s / n for c, s in levels.sums.items()},
                         response_sums=(levels.y_sum, levels.y_ss), structure=skeleton.frame)


def response_centre(design: RowlessDesign, levels: LevelsChunk) -> np.ndarray:
    """The b of the centred response y − X b the partitions' products share: the
    response's mean on the intercept (zeros without one). Any b gives the same problem
    (:func:`crossed.model.crossprod.centre_of`); this one removes the response's mean,
    the cancellation the centring is there for, and is known after the levels pass."""
    b = np.zeros(len(design.fixed.names))
    if "(Intercept)" in design.fixed.names and design.n_rows:
        b[design.fixed.names.index("(Intercept)")] = levels.y_sum / design.n_rows
    return b


# ---------------------------------------------------------------------------- pass 2
@dataclass(frozen=True)
class SumsChunk:
    """The sums pass's result on some partitions (:func:`sums_of`); chunks add.

    Attributes
    ----------
    products : CrossProducts or None
        The cross-products of the rows (None: no rows).
    z_sums : tuple of numpy.ndarray
        Per random-effects block, per column: (Σ z, Σ z², Σ [z ≠ 1]) as (3, q).
    """

    products: CrossProducts | None
    z_sums: tuple[np.ndarray, ...] = field(default=())

    def __add__(self, other: SumsChunk) -> SumsChunk:
        if not isinstance(other, SumsChunk):
            return NotImplemented
        if self.products is None:
            return other
        if other.products is None:
            return self
        return SumsChunk(self.products + other.products,
                         tuple(a + b for a, b in zip(self.z_sums, other.z_sums, strict=True)))


def encode_partition(design: RowlessDesign, frame: pd.DataFrame, index: int = 0
                     ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]:
    """One partition's rows encoded with ``design``'s levels: (X, codes per block, Z per
    block, y), rows with a missing value in a used column left out.

    Raises
    ------
    DataError
        A level the levels pass did not see (naming partition, column or grouping factor,
        and level).
    """
    label = {str(c): c for c in frame.columns}
    used = [label[c] for c in design.columns]
    part = frame[used]
    part.columns = list(design.columns)
    part = part.loc[~part.isna().any(axis=1).to_numpy()]
    if len(part) == 0:
        p = len(design.fixed.names)
        return (np.zeros((0, p)), [np.zeros(0, dtype=np.int64)] * len(design.random.blocks),
                [np.zeros((0, b.q)) for b in design.random.blocks], np.zeros(0))
    try:
        new = design.encode(part, include_random=True, allow_new_levels=True)
    except DataError as exc:
        raise DataError(f"partition {index}: {exc} (the levels pass did not see it: did "
                        "the data change between the passes?)") from None
    for blk, codes in zip(design.random.blocks, new.codes, strict=True):
        if np.any(codes < 0):
            row = int(np.flatnonzero(codes < 0)[0])
            raise DataError(
                f"partition {index}: {describe_level(blk, part, row)} of grouping factor "
                f"{blk.group!r} was not seen by the levels pass (did the data change "
                "between the passes?)")
    y = build_response(design.spec, part.reset_index(drop=True))
    return new.X, new.codes, new.Z, y


def sums_of(design: RowlessDesign, frame: pd.DataFrame, centre: np.ndarray,
            index: int = 0) -> SumsChunk:
    """The sums pass on one partition: the cross-products of its rows (with the shared
    centre b), and the per-column sums of the random-effects columns."""
    X, codes, Zs, y = encode_partition(design, frame, index)
    if len(y) == 0:
        return SumsChunk(None, ())
    blocks = [replace(blk, codes=np.ascontiguousarray(c, dtype=np.int64),
                      Z=np.ascontiguousarray(Z, dtype=float))
              for blk, c, Z in zip(design.random.blocks, codes, Zs, strict=True)]
    with single_blas_thread():
        products = CrossProducts.of(blocks, np.ascontiguousarray(X, dtype=float), y,
                                    centre=centre)
    z_sums = tuple(np.stack([b.Z.sum(axis=0), (b.Z ** 2).sum(axis=0),
                             (b.Z != 1.0).sum(axis=0).astype(float)]) for b in blocks)
    return SumsChunk(products, z_sums)


def with_column_stats(design: RowlessDesign, sums: SumsChunk) -> RowlessDesign:
    """``design`` whose blocks know their columns' statistics (intercept, mean, SD: what
    the design's warnings and the optimiser's rescaling read) from the summed columns."""
    n = design.n_rows
    blocks = []
    for blk, s in zip(design.random.blocks, sums.z_sums, strict=True):
        new = replace(blk)
        mean = s[0] / n
        sd = np.sqrt(np.maximum(s[1] / n - mean ** 2, 0.0))
        new.__dict__["column_stats"] = (s[2] == 0, mean, sd)  # (its cached property)
        blocks.append(new)
    return design.with_random(replace(design.random, blocks=tuple(blocks)))


def theta_start_of(design: RowlessDesign, products: CrossProducts) -> np.ndarray:
    """lme4's starting θ from the cross-products (:meth:`RandomDesign.theta_start
    <crossed.design.random.RandomDesign.theta_start>` without the rows): the moment
    estimates when every term is a random intercept on its own factor, else the default.

    Per level, Σ y = Zᵀy_c + ZᵀX b; Σ y and Σ y² follow from Xᵀy_c, XᵀX and y_cᵀy_c."""
    random: RandomDesign = design.random
    default = np.where(np.isfinite(random.theta_lower), 1.0, 0.0)
    groups = [t.group for t in random.terms]
    n = products.n
    if (n < 2 or len(set(groups)) != len(groups)
            or any(t.columns != ("(Intercept)",) for t in random.terms)
            or "(Intercept)" not in design.fixed.names):
        return default
    b = products.centre
    i0 = design.fixed.names.index("(Intercept)")
    xty_c = products.Xty
    total = float(xty_c[i0] + products.xtx[i0] @ b)  # Σ y
    sum_sq = float(products.yc_ss + 2.0 * b @ xty_c + b @ products.xtx @ b)
    mean = total / n
    z1x, zrx = products.ZtX
    z1y, zry = products.Zty
    starts = np.cumsum([0] + [blk.nlevels for blk in random.blocks[1:]])
    v = np.empty(len(random.terms))
    for i, term in enumerate(random.terms):
        k = term.block
        counts = products.levels[k][:, 0, 0]
        if k == 0:
            sums = z1y + z1x @ b
        else:
            assert zrx is not None and zry is not None  # (a later block)
            sl = slice(int(starts[k - 1]), int(starts[k]))
            sums = zry[sl] + zrx[sl] @ b
        means = sums / np.maximum(counts, 1)
        v[i] = float(np.sum(counts * (means - mean) ** 2)) / (n - 1)
    v_e = (sum_sq - n * mean ** 2) / (n - 1) - float(v.sum())
    if not v_e > 0:
        return default
    return np.sqrt(v / v_e)


# ---------------------------------------------------------------------------- engines
def tree_sum(items: Sequence[Any], add: Callable[[Any, Any], Any]) -> Any:
    """Pairwise sums in a fixed tree over ``items`` in their order:
    ((i₀ + i₁) + (i₂ + i₃)) + ...; the shape engines reduce partition results in, so
    that the order of the floating-point sums does not depend on scheduling."""
    level = list(items)
    if not level:
        raise ValueError("no partitions")
    while len(level) > 1:
        level = [add(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


class PartitionSource(Protocol):
    """Partitioned rows as an engine holds them: what a fit asks of them.

    Each method maps a pure function over the partitions (a pandas DataFrame each, with
    its position) and adds the results in a fixed tree over the partitions in their order
    (:func:`tree_sum`), so the same partitions always give bitwise the same sums. An
    engine implements these two methods (Dask: :mod:`crossed.engines.dask_fit`; Spark's
    ``mapInPandas`` could), nothing else.
    """

    @property
    def n_partitions(self) -> int: ...

    def levels(self, spec: ModelSpec, na_action: str) -> LevelsChunk:
        """``levels_of`` on every partition, added."""
        ...

    def sums(self, design: RowlessDesign, centre: np.ndarray) -> SumsChunk:
        """``sums_of`` on every partition, added."""
        ...



# ---------------------------------------------------------------------------- GLMMs
@dataclass(frozen=True)
class GlmmPartition:
    """One partition's rows encoded for a GLMM, kept on the worker between the PIRLS
    passes (:func:`glmm_partition`).

    Attributes
    ----------
    X_rows, X_index : numpy.ndarray
        The fixed-effects columns (n x p, :attr:`X`): their distinct rows and each row's
        position among them where they repeat (factor columns: 50 systems' dummies are 50
        rows, and 4 bytes a row instead of 400), else X itself and None.
    blocks : tuple of ReBlock
        The design's blocks with this partition's codes and Z.
    y, wt, offset : numpy.ndarray
        Response (binomial: 0/1), prior weights (ones) and offset (zeros).
    eta_start : numpy.ndarray
        R's starting linear predictor (the link of ``mustart``).
    deviance : ResidualDeviance
        Σ R's ``dev.resids`` on these rows, as a function of μ.
    levels_here, local_codes : numpy.ndarray or None
        With one scalar random-effects term: the levels with rows here (their indices in
        the design, sorted) and each row's position among them (for
        :func:`local_pirls`); None otherwise.
    """

    X_rows: np.ndarray
    blocks: tuple[Any, ...]
    y: np.ndarray
    wt: np.ndarray
    offset: np.ndarray
    eta_start: np.ndarray
    deviance: ResidualDeviance
    levels_here: np.ndarray | None = None
    local_codes: np.ndarray | None = None
    X_index: np.ndarray | None = None

    @property
    def X(self) -> np.ndarray:
        """The fixed-effects columns (n x p), made from the distinct rows when stored so."""
        return self.X_rows if self.X_index is None else np.asarray(self.X_rows[self.X_index])

    def fixed(self, beta: np.ndarray) -> np.ndarray:
        """Xβ on these rows."""
        if self.X_index is None:
            return np.asarray(self.X_rows @ beta)
        return np.asarray((self.X_rows @ beta)[self.X_index])

    def zlu(self, theta: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Z Λθ u on these rows."""
        out = np.zeros(len(self.y))
        pos = 0
        for blk in self.blocks:
            size = blk.nlevels * blk.q
            b = u[pos:pos + size].reshape(blk.nlevels, blk.q) @ blk.template(theta).T
            pos += size
            if blk.q == 1:
                out += blk.Z[:, 0] * b[blk.codes, 0]
            else:
                out += np.einsum("ij,ij->i", blk.Z, b[blk.codes])
        return out


@dataclass(frozen=True)
class GlmmSums:
    """A PIRLS pass's sums over partitions; they add.

    Attributes
    ----------
    products : CrossProducts or None
        The cross-products of the rows scaled by √(working weights) at the partition's η,
        with the working response (centre b = 0, shared by every partition).
    resdev : float
        Σ R's ``dev.resids`` at η.
    aic : float
        R's ``aic`` at η (a sum of −2 log-likelihoods).
    step : float
        max |η − η_before| over the rows (how far the pass moved η).
    size : float
        max |η| over the rows.
    n : int
        Rows.
    """

    products: CrossProducts | None
    resdev: float
    aic: float
    step: float
    size: float
    n: int

    def __add__(self, other: GlmmSums) -> GlmmSums:
        if not isinstance(other, GlmmSums):
            return NotImplemented
        if self.products is None:
            products = other.products
        elif other.products is None:
            products = self.products
        else:
            products = self.products + other.products
        return GlmmSums(products, self.resdev + other.resdev, self.aic + other.aic,
                        max(self.step, other.step), max(self.size, other.size),
                        self.n + other.n)


def glmm_partition(design: RowlessDesign, frame: pd.DataFrame, family: Any,
                   index: int = 0, sort_rows: bool = False) -> GlmmPartition:
    """One partition encoded for a GLMM: the response checked as lme4's glmer checks it
    (binomial: 0/1 or booleans; Poisson: counts), naming the partition.

    ``sort_rows``: order the rows by the values of the columns the model uses first. A
    partition made by a shuffle holds its rows in the order their pieces arrived, which
    changes from run to run (and when a lost piece is recomputed); its sums, and so the
    fit, would change in the last bits with it."""
    if sort_rows and len(frame):
        label = {str(c): c for c in frame.columns}
        frame = frame.sort_values([label[c] for c in design.columns], kind="stable",
                                  ignore_index=True)
    X, codes, Zs, y = encode_partition(design, frame, index)
    response = design.spec.response
    y = np.asarray(y, dtype=float)
    if family.binary_outcome and np.any((y != 0) & (y != 1)):
        raise DataError(f"partition {index}: binomial response {response!r} has values other "
                        f"than 0 and 1 (e.g. {y[(y != 0) & (y != 1)][0]:g}); on partitioned "
                        "data the response must be 0/1 (proportions with weights= are not "
                        "supported)")
    if not family.binary_outcome and np.any(y < 0):
        raise DataError(f"partition {index}: negative values not allowed for the Poisson "
                        f"family: response {response!r}")
    blocks = tuple(replace(blk, codes=np.ascontiguousarray(c, dtype=np.int64),
                           Z=np.ascontiguousarray(Z, dtype=float))
                   for blk, c, Z in zip(design.random.blocks, codes, Zs, strict=True))
    wt = np.ones(len(y))
    mustart = family.mustart(y, wt)
    eta_start = family.link.linkfun(mustart)
    levels_here = local_codes = None
    if has_local_pirls(blocks):
        levels_here, local_codes = np.unique(blocks[0].codes, return_inverse=True)
    X = np.ascontiguousarray(X, dtype=float)
    X_index = None
    if X.shape[1] > 1 and len(X) > 64:
        rows, where = np.unique(X, axis=0, return_inverse=True)
        if 4 * len(rows) <= len(X):
            X, X_index = np.ascontiguousarray(rows), where.astype(np.int32).ravel()
    return GlmmPartition(X_rows=X, X_index=X_index, blocks=blocks, y=y, wt=wt,
                         offset=np.zeros(len(y)), eta_start=np.asarray(eta_start, dtype=float),
                         deviance=ResidualDeviance(family, y, wt, mustart),
                         levels_here=levels_here, local_codes=local_codes)


def glmm_pass(part: GlmmPartition, eta_before: np.ndarray | None, family: Any,
              theta: np.ndarray, u: np.ndarray | None, beta: np.ndarray, joint: bool,
              lp0: np.ndarray | None = None) -> tuple[np.ndarray, GlmmSums]:
    """One PIRLS pass on a partition: its new η, and the sums at it.

    η is ``offset + Xβ + ZΛu`` (``u`` None: the stage's start, ``offset + lp0``, or R's
    ``eta_start`` without ``lp0``). The sums are the deviance at η and the weighted
    cross-products of the next PIRLS step: rows scaled by √w (working weights at η) and
    the working response z = η − fixed + (y − μ)/μ', with fixed = offset (``joint``: the
    products hold X, β moves) or offset + Xβ (β fixed: no X)."""
    if len(part.y) == 0:
        return part.y, GlmmSums(None, 0.0, 0.0, 0.0, 0.0, 0)
    with single_blas_thread():
        if u is None:
            eta = part.offset + (part.eta_start - part.offset if lp0 is None else lp0)
        else:
            eta = part.offset + part.fixed(beta) + part.zlu(theta, u)
        mu, me = family.link.mu_and_mu_eta(eta)
        resdev = part.deviance(mu)
        aic = family.aic(part.y, part.wt, mu, part.wt)
        sw = np.sqrt(part.wt * me * me / family.variance(mu))
        fixed = part.offset if joint else part.offset + part.fixed(beta)
        z = eta - fixed + (part.y - mu) / me
        X = part.X if joint else np.zeros((len(part.y), 0))
        rows = RowMatrices.of(part.blocks, X, sw)
        products = CrossProducts.from_rows(rows, z * sw,
                                           centre=np.zeros(X.shape[1]))
    step = 0.0 if eta_before is None else float(np.max(np.abs(eta - eta_before)))
    return eta, GlmmSums(products, resdev, aic, step, float(np.max(np.abs(eta))),
                         len(part.y))


# ------------------------------------------------- PIRLS on partitions holding whole levels
LOCAL_SETTLE = 1e-13
""":func:`local_pirls` stops once a step moves η by less than this (relative to 1 + max|η|):
past it the iterates change the criterion by less than rounding."""


@dataclass(frozen=True)
class LocalPirlsSums:
    """The iterations of :func:`local_pirls`, summed over partitions; they add.

    Entry ``k`` belongs to PIRLS iteration ``k + 1``. A partition that settled before
    another carries its last values on (it would repeat them).

    Attributes
    ----------
    resdev : numpy.ndarray
        Σ R's ``dev.resids`` at the iteration's η.
    uu : numpy.ndarray
        ‖u‖² of the iteration's modes.
    ld : numpy.ndarray
        log|L|²: Σ over levels of log(θ²·Σ w z² + 1), at the working weights the
        iteration solved with.
    step, size : numpy.ndarray
        max |η − η before the iteration| and max |η| over the rows.
    """

    resdev: np.ndarray
    uu: np.ndarray
    ld: np.ndarray
    step: np.ndarray
    size: np.ndarray

    def __len__(self) -> int:
        return len(self.resdev)

    def at(self, k: int) -> int:
        """The entry of iteration ``k`` (the last one past the series' end)."""
        return min(k, len(self)) - 1

    def padded(self, k: int) -> LocalPirlsSums:
        """Each series carried on to ``k`` iterations with its last value."""
        if len(self) >= k or not len(self):
            return self
        return LocalPirlsSums(*(np.concatenate([a, np.full(k - len(a), a[-1])])
                                for a in (self.resdev, self.uu, self.ld, self.step, self.size)))

    def __add__(self, other: LocalPirlsSums) -> LocalPirlsSums:
        if not isinstance(other, LocalPirlsSums):
            return NotImplemented
        if not len(other):
            return self
        if not len(self):
            return other
        k = max(len(self), len(other))
        a, b = self.padded(k), other.padded(k)
        return LocalPirlsSums(a.resdev + b.resdev, a.uu + b.uu, a.ld + b.ld,
                              np.maximum(a.step, b.step), np.maximum(a.size, b.size))


def has_local_pirls(blocks: Sequence[Any]) -> bool:
    """Whether :func:`local_pirls` applies: one scalar random-effects term."""
    return len(blocks) == 1 and blocks[0].q == 1


def _local_iterates(part: GlmmPartition, lp0: np.ndarray | None, family: Any,
                    theta: np.ndarray, beta: np.ndarray
                    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """PIRLS's iterates at fixed (θ, β) on a partition holding every row of its levels
    (one scalar term): (η, μ, u of the levels here, d = θ² Σ w zc² + 1) per iteration,
    from the stage's start ``lp0`` as :func:`glmm_pass`. Run under one BLAS thread."""
    blk = part.blocks[0]
    t = float(theta[int(blk.theta_index[0, 0])])
    zc = blk.Z[:, 0]
    assert part.local_codes is not None and part.levels_here is not None
    codes, nl = part.local_codes, len(part.levels_here)
    both, variance = family.link.mu_and_mu_eta, family.variance
    y, wt = part.y, part.wt
    fixed = part.offset + part.fixed(beta)
    eta = part.offset + (part.eta_start - part.offset if lp0 is None else lp0)
    mu, me = both(eta)
    while True:
        w = wt * me * me / variance(mu)
        z = eta - fixed + (y - mu) / me
        wz = w * zc
        d = t * t * np.bincount(codes, weights=wz * zc, minlength=nl) + 1.0
        u = t * np.bincount(codes, weights=wz * z, minlength=nl) / d
        eta = fixed + t * zc * u[codes]
        mu, me = both(eta)
        yield eta, mu, u, d


def local_pirls(part: GlmmPartition, lp0: np.ndarray | None, family: Any, theta: np.ndarray,
                beta: np.ndarray, maxit: int) -> LocalPirlsSums:
    """PIRLS at fixed (θ, β) on a partition that holds every row of its levels, for a
    model with one scalar random-effects term (:func:`has_local_pirls`): every
    iteration's sums, until η settles (:data:`LOCAL_SETTLE`) or ``maxit``.

    The modes of different levels do not interact when β is fixed: each iteration is
    closed-form per level (u = θ Σ w z·zc / (θ² Σ w zc² + 1) on the working weights w and
    response z), so the partition iterates alone; the driver applies PIRLS's stopping
    rule and step halving to the totals (lme4's rule reads global sums).
    """
    if len(part.y) == 0:
        empty = np.zeros(0)
        return LocalPirlsSums(empty, empty, empty, empty, empty)
    if part.local_codes is None:
        raise ValueError("local PIRLS needs one scalar random-effects term")
    rows: list[tuple[float, float, float, float, float]] = []
    with single_blas_thread():
        before = part.offset + (part.eta_start - part.offset if lp0 is None else lp0)
        for eta, mu, u, d in islice(_local_iterates(part, lp0, family, theta, beta), maxit):
            step = float(np.max(np.abs(eta - before)))
            size = float(np.max(np.abs(eta)))
            rows.append((part.deviance(mu), float(u @ u), float(np.sum(np.log(d))),
                         step, size))
            if step <= LOCAL_SETTLE * (1.0 + size):
                break
            before = eta
    return LocalPirlsSums(*(np.array(c) for c in zip(*rows, strict=True)))


def local_modes(part: GlmmPartition, lp0: np.ndarray | None, family: Any, theta: np.ndarray,
                beta: np.ndarray, iterations: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`local_pirls`'s state after ``iterations`` iterations: (η, the levels here
    (their indices in the design), their u)."""
    if len(part.y) == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)
    if part.local_codes is None or part.levels_here is None:
        raise ValueError("local PIRLS needs one scalar random-effects term")
    with single_blas_thread():
        iterates = _local_iterates(part, lp0, family, theta, beta)
        for _ in range(iterations):
            eta, _mu, u, _d = next(iterates)
    return eta, part.levels_here, u
