"""Penalised least squares for LMMs with a blocked Cholesky factor (lme4 / MixedModels.jl).

:class:`PLS` is the factoriser of a design's cross-products (:class:`CrossProducts`,
``crossprod.py``: immutable sums over the rows, which can be computed chunk by chunk and
added): built once from them, it factors the system below at any θ.

For relative covariance factor Λθ (block diagonal: one template T_k per block, repeated per
level) the matrix

    [ΛᵀZᵀZΛ + I   ΛᵀZᵀX   ΛᵀZᵀy]
    [XᵀZΛ         XᵀX     Xᵀy  ]
    [yᵀZΛ         yᵀX     yᵀy  ]

is factored as L Lᵀ. Its first block (the grouping factor with most levels) is block
diagonal with one q₁ x q₁ block per level, so it is factored level by level. The rest
(later random blocks, X and y, of size r) is the dense Schur complement

    C = S (A_rr − A_r1 G A_1r) Sᵀ + [I on the random part],   G = blockdiag_s T₁ B_s⁻¹ T₁ᵀ,

with B_s = T₁ᵀ A_s T₁ + I and S = blockdiag(Λ_restᵀ, I). With G_s = H_sᵀH_s,
``A_r1 G A_1r = Σ_s (H_s A_s)ᵀ(H_s A_s)``: it is formed either by dense rank-k updates
(dsyrk) over groups of levels whose rows of A_1r share few columns (models nested in a
family touch only that family's columns), or as a fixed sparse linear map of G's entries
(``W``, built once in ``sparse_map.py``), whichever costs fewer operations for the
design. The B_s are factored in closed form for q₁ ≤ 2 and as one banded matrix for q₁ > 2
(``banded.py``). An evaluation costs that update, the first block's factorisation and one
dense Cholesky of size r (assembled on its nonzeros alone when they are few; blocked and
shared with a helper thread when large, ``cholesky.py``). Z is never formed densely.

Past ``MAX_DENSE`` random effects after the first block (or from ``SPARSE_FROM`` on when its
factor's fill is low) C is not formed: ``sparse_schur.py`` keeps its random part sparse and
factors it by QDLDL; its factorisations are :class:`SparseFactor`, which ``solve``,
``rx_factor``/``rx_inverse`` and ``conditional_inverse_blocks`` read as they read the dense
``Factor`` (``Factor.L`` is None there).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas

from crossed.design.random import ReBlock
from crossed.model import _core
from crossed.model.banded import BandedBlocks
from crossed.model.cholesky import MIN_DIAGONAL, cholesky_lower
from crossed.model.closed_forms import first_block_2x2, matrices_2x2
from crossed.model.condvar import conditional_inverse_blocks
from crossed.model.crossprod import (
    MAX_DENSE_ROW_PRODUCTS,
    CrossProducts,
    RowMatrices,
    shallow_copy,
    sparse_z,
    stored,
    stored_beside,
    stored_like,
)
from crossed.model.factor import (
    Factor,
    FactorBatch,
    deviance_at,
    in_basis,
    lower_triangle,
    profiled_deviance,
    tri_inverse,
    tri_solve,
)
from crossed.model.pwrss import (
    BEYOND_REPAIR,
    CANCELLATION_LIMIT,
    collinear_levels,
    from_residuals,
    pivot_cancels,
    pivots_cancel,
)
from crossed.model.sparse_map import (
    SPLIT_NNZ,
    LevelClasses,
    Products,
    SparseMap,
    build_sparse_map,
    response_free_products,
)
from crossed.model.sparse_schur import SparseFactor, SparseSchur, sparse_schur_for
from crossed.model.update_plan import (
    LeadBlocks,
    LevelGroups,
    LevelPattern,
    diagonal_lead,
    lead_blocks,
    level_pattern,
    map_cost,
    plan_update,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from crossed.design import Design

__all__ = ["CrossProducts", "Factor", "MAX_DENSE", "PLS", "deviance_at", "profiled_deviance",
           "sparse_z", "tri_inverse", "tri_solve"]

_SmallInputs = tuple[np.ndarray, "np.ndarray | sp.csr_matrix", np.ndarray, np.ndarray, np.ndarray,
                     np.ndarray, np.ndarray]
"""``_core.SmallDense``'s arrays: a, W, rows, src, count, arr, Arr."""

MAX_DENSE = 20000
GROUPS_OVERHEAD = 80_000.0
"""The interpreted groups update's fixed cost per evaluation in the planner's units
(``update_plan.plan_update``; about 120 µs, a unit being about 1.5 ns of the compiled
sparse map's): a first block of three or more columns per level takes the compiled map
while W costs less than the groups plus this (W grows as q₁²; carrots' 103 consumers
with (1 + sens1 + sens2) crossed with 12 products: 118k units, 181 µs, the groups 172).
Kept where the groups are compiled too (``SmallDense``'s groups): below it the compiled
map is as fast or faster (blurb's ``(1 + lr | dataset)``: 16.7 against 16.8 µs;
``(1 + seed | dataset)``: 8.9 against 11.0 µs), above it the groups are (carrots: 181
against 33 µs)."""
_SMALL_SCHUR = 256
"""Up to this size the scaled A_rr is formed by one product with the scales' outer product
(fewer calls), above it block by block on the upper triangle (half the work)."""
_ONE = np.ones(1)
_ZERO = np.zeros(1)
_NO_PAIRS = np.zeros(0, dtype=np.int64)
_NO_CLASSES = np.zeros(0, dtype=np.int64)  # (dense_solve: a factor per level)
_NO_SCALE_BLOCKS = (np.zeros((0, 4), dtype=np.int64), _NO_PAIRS)  # (every later block scalar)
_RESIDUAL_MODES = {"never": 0, "auto": 1, "always": 2}  # (SmallDense.deviances')


def _scale_blocks(rest: tuple[ReBlock, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The later blocks ``rest`` as ``_core.scale_both_sides`` reads S = blockdiag(I ⊗ T_kᵀ,
    I on X and y): per block, its first row, levels, q and where its T_kᵀ starts among
    the blocks' T_kᵀ laid side by side, each in C order; and the θ position of each entry
    of those (-1: a zero; :meth:`PLS._later_templates`)."""
    out = np.zeros((len(rest), 4), dtype=np.int64)
    row = offset = 0
    for i, b in enumerate(rest):
        out[i] = (row, b.nlevels, b.q, offset)
        row, offset = row + b.nlevels * b.q, offset + b.q * b.q
    index = [b.theta_index.T.reshape(-1) for b in rest]
    return out, np.concatenate(index or [np.zeros(0)]).astype(np.int64)


class PLS:
    """The PLS problem of a design: its cross-products (:class:`CrossProducts`) and their
    factorisation at any θ (dense blocked or sparse Schur complement).

    The cross-products are immutable sums over the rows; what is built here from them, once,
    is the plan of the factorisation (how the Schur update is formed, the banded or closed
    forms of the first block, which θ scales which column). With the rows (the usual
    constructor) it also keeps them, for new responses (:meth:`with_response`), PIRLS's
    working weights (:meth:`reweighted`) and the penalised residual sum of squares from the
    residuals (``pwrss.py``).

    Parameters
    ----------
    blocks : sequence of ReBlock
        Random-effects blocks, most levels first.
    X : numpy.ndarray
        Fixed-effects matrix (n x p).
    y : numpy.ndarray
        Response (n).
    update : {None, "groups", "sparse"}
        How A_r1 G A_1r is formed at each evaluation: dense rank-k updates over groups of
        levels, or the sparse map W; None chooses the cheaper by an operation count.
    schur : {None, "dense", "sparse"}
        How the Schur complement is factored: densely (limited to ``MAX_DENSE`` random
        effects after the first block), or sparse (``sparse_schur.py``); None: sparse past
        ``MAX_DENSE``, or from ``SPARSE_FROM`` on when its factor's fill is low.
    ldW : float
        Σ log w of prior weights already applied to the rows (:meth:`weighted`).

    Attributes
    ----------
    products : CrossProducts
        The cross-products the criterion is a function of.
    rows : RowMatrices or None
        The rows they were computed from (None: built from the products alone,
        :meth:`from_products`).
    blocks : tuple of ReBlock
        The random-effects blocks: their structure (levels, templates); their Z are the
        rows' unless the problem is :meth:`reweighted`.
    X, y : numpy.ndarray
        The fixed-effects matrix and the response as the rows are scaled (empty without
        rows).
    n, p, q1, l1, r_rand, r : int
        Rows, fixed effects, the first block's columns per level and levels, the later
        blocks' random effects, and the order of the part after the first block
        (r_rand + p + 1).
    rest_sizes : list of int
        The later blocks' random effects, per block.
    A11 : numpy.ndarray
        The first block's per-level cross-products, (ℓ₁, q₁, q₁).
    Arr : numpy.ndarray
        The unscaled cross-products of the part after the first block, (r, r) (dense path).
    A1r : scipy.sparse.csr_matrix
        The first block against that part, Z₁ᵀ[Z_r X y_c].
    residual_pwrss : {"always", "auto", "never"}
        When ``pwrss.py`` recomputes the pwrss from the residuals.
    ldW : float
        Σ log(prior weights): subtracted from log|L|² in :meth:`factor`.
    centre : numpy.ndarray
        b of the centred response y_c = y − X b the products hold (:meth:`solve` adds it
        back to β).
    yc_ss : float
        y_cᵀy_c, the centred response's sum of squares.
    band : BandedBlocks or None
        The first block's banded factoriser (q₁ > 2), else None.
    first_2x2 : tuple
        For q₁ = 2 only: the levels' A_s entries (a₀₀, a₁₀, a₁₁) as (3, ℓ₁), the θ
        positions of the template's (t₀, t₁, t₂) (-1: zero), and the largest a₀₀ and a₁₁.
    update : str or None
        The ``update`` asked for.
    """

    _diagonal: int = 0  # leading columns of C whose block is diagonal (_diagonal_lead)
    _lead: LeadBlocks | None = None  # C's random part in small independent components
    A11: np.ndarray
    residual_pwrss: str
    ldW: float
    yc_ss: float
    centre: np.ndarray
    band: BandedBlocks | None
    first_2x2: tuple[np.ndarray, list[int], tuple[float, float]]
    _band: BandedBlocks | None  # the first block's banded factoriser (q1 > 2)
    _t_2x2: list[int]  # q1 = 2: the template's θ positions,
    _a_2x2: np.ndarray  # the levels' A_s entries
    _a_2x2_max: tuple[float, float]  # and their largest diagonal ones
    _sparse: SparseSchur | None  # the sparse Schur complement, or None (dense)
    _ZrtZr: np.ndarray | None  # Z_rᵀZ_r as a dense array (dense path)
    rest_sizes: list[int]
    r_rand: int
    r: int
    _rest_scalar: bool  # every later block scalar
    _t1: int  # q1 = 1: the template's θ position
    _scale_index: np.ndarray  # scalar later blocks: the θ position scaling each column
    _diag_rand: np.ndarray  # the random part's diagonal positions
    _scalar_ranges: list[tuple[int, int]]  # each later block's column range, then X and y's
    _s_blocks: tuple[np.ndarray, np.ndarray]  # the later blocks as S's diagonal blocks
    # and their T_kᵀ's θ positions (_scale_blocks)
    _w_cost: float  # the sparse map's cost (update_plan.map_cost)
    _pattern: LevelPattern  # the columns each level of the first factor meets
    _group_plan: list[tuple[float, LevelGroups | None]]  # the groups' cost and levels
    # (update_plan.plan_update), planned once where asked (_level_groups), shared with the
    # problems of the same pattern
    _classes: LevelClasses | None = None  # the first block evaluated per class (_set_response)
    _small: _core.SmallDense | None = None  # a small design's evaluation in one compiled
    # call (_set_response)
    A1r: sp.csr_matrix  # Z₁ᵀ[Z_r X y_c] (l1·q1 x r; _set_response)
    _y_slots: tuple[np.ndarray, np.ndarray] | None = None  # A1r's y entries: rows with one,
    # positions in its data (_a1r_with)
    _free_known = False  # _free computed (with_response)
    _last_weighted: PLS | None = None  # the last problem reweighted from this one
    _ntheta: int  # θ's length (_layout)
    _scale_pair: np.ndarray  # scalar later blocks: each map entry's scale s_i s_j as a
    # position in θ̃ ⊗ θ̃ (_set_response)

    @classmethod
    def of(cls, design: Design, like: PLS | None = None) -> PLS:
        """The PLS problem of ``design``, built once per design and kept on it
        (:meth:`Design.derived`), so the engine that fits a design and every later use of
        the fit share it. ``like``: a PLS of the same design with another response, whose
        y-free products are reused (:meth:`with_response`; simulation refits)."""
        w, off = design.weights, design.offset
        if w is not None or off is not None:  # prior weights / offset (lmer's weights=)
            y = design.y if off is None else design.y - off
            if like is not None:
                base = like
                yw = y if w is None else y * np.sqrt(w)
                return cast(PLS, design.derived("pls", lambda: base.with_response(yw)))
            return cast(PLS, design.derived(
                "pls", lambda: cls.weighted(design.random.blocks, design.X, y, w)))
        if like is not None:
            base = like
            return cast(PLS, design.derived("pls", lambda: base.with_response(design.y)))
        return cast(PLS, design.derived(
            "pls", lambda: cls(design.random.blocks, design.X, design.y)))

    def __init__(self, blocks: tuple[ReBlock, ...], X: np.ndarray, y: np.ndarray,
                 update: str | None = None, schur: str | None = None, *, ldW: float = 0.0):
        blocks = tuple(blocks)
        rows = RowMatrices.of(blocks, X)
        y = np.asarray(y, dtype=float)
        products = CrossProducts.from_rows(rows, y, ldW=ldW)
        self._build(products, blocks, update, schur, rows, y)

    @classmethod
    def from_products(cls, products: CrossProducts, blocks: tuple[ReBlock, ...],
                      update: str | None = None, schur: str | None = None) -> PLS:
        """The problem of ``products`` (e.g. summed over chunks of rows,
        :meth:`CrossProducts.from_chunks`) with the structure of ``blocks`` (their levels
        and templates; their Z are not read).

        Without the rows the pwrss is always the factor's last pivot (``residual_pwrss``
        "never"), and :meth:`with_response`, :meth:`reweighted` and
        :meth:`reparametrised` are not available."""
        pls = cls.__new__(cls)
        pls._build(products, tuple(blocks), update, schur, None, np.zeros(0))
        return pls

    def reweighted(self, sqrt_w: np.ndarray, y: np.ndarray) -> PLS:
        """This problem's structure with the rows of ``[Z X]`` scaled by ``sqrt_w`` and the
        response ``y`` (unscaled; scaled here): PIRLS's working weights and response.

        The cross-products are those of the scaled rows (:meth:`CrossProducts.from_rows`,
        from the unweighted rows this problem was built from); the plan of the update (how
        levels are grouped, the diagonal lead) is this problem's, as the pattern of the
        products does not change with the weights. The pwrss is the factor's own
        (``residual_pwrss`` "never"); the blocks keep the unweighted Z."""
        blocks, X = self.source
        # the sparse patterns of the last weighted problem (the working response's, which
        # the unweighted y's zeros do not have) are shared where they hold: the same arrays
        # (and the rows' entries' columns)
        last = self if self._last_weighted is None else self._last_weighted
        rows = RowMatrices.of(blocks, X, sqrt_w, like=last.rows)
        y = np.asarray(y, dtype=float) * sqrt_w
        products = CrossProducts.from_rows(rows, y, like=last.products)
        new = PLS.__new__(PLS)
        new._build(products, blocks, self.update, None, rows, y, plan=self, template=last)
        new.source = self.source
        self._last_weighted = new
        return new

    def _build(self, products: CrossProducts, blocks: tuple[ReBlock, ...],
               update: str | None, schur: str | None, rows: RowMatrices | None,
               y: np.ndarray, plan: PLS | None = None, template: PLS | None = None) -> None:
        """Everything that depends on the cross-products but not on θ.

        ``plan``: a problem of the same pattern whose update plan is reused: PIRLS's
        working weights (:meth:`reweighted`), or the same rows with another response
        (:meth:`with_response`: ``products`` share its y-free products, and so does
        everything formed from them alone). ``template``: a problem of the same layout whose
        sparse patterns are shared where they hold (default ``plan``)."""
        same_rows = plan is not None and products.A11 is plan.A11
        if update not in (None, "groups", "sparse"):
            raise ValueError(f"update must be None, 'groups' or 'sparse', got {update!r}")
        if schur not in (None, "dense", "sparse"):
            raise ValueError(f"schur must be None, 'dense' or 'sparse', got {schur!r}")
        self.products = products
        self.rows = rows
        # (plain attributes: the evaluation reads them at every θ)
        self.ldW, self.yc_ss, self.centre = products.ldW, products.yc_ss, products.centre
        self.update = update
        self.blocks = blocks
        self.source: tuple[tuple[ReBlock, ...], np.ndarray] = (
            blocks, rows.X if rows is not None else np.zeros((0, products.p)))
        self.n, self.p = products.n, products.p
        self.X = self.source[1]
        first = self.blocks[0]
        self.q1, self.l1 = first.q, first.nlevels
        rest = self.blocks[1:]
        if plan is not None:  # (the same blocks and X columns: the same layout)
            self.rest_sizes, self.r_rand, self.r = plan.rest_sizes, plan.r_rand, plan.r
            self._rest_scalar, self._t1 = plan._rest_scalar, plan._t1
            self._scale_index, self._diag_rand = plan._scale_index, plan._diag_rand
            self._scalar_ranges, self._s_blocks = plan._scalar_ranges, plan._s_blocks
            self._ntheta = plan._ntheta
        else:
            self._layout(first, rest)
        A11 = products.A11
        self.A11 = A11
        if same_rows:
            assert plan is not None  # (same_rows)
            self._band = plan._band
            if self.q1 == 2:
                self._t_2x2, self._a_2x2, self._a_2x2_max = (
                    plan._t_2x2, plan._a_2x2, plan._a_2x2_max)
        else:
            self._band = BandedBlocks(A11, first.theta_index) if self.q1 > 2 else None
            if self.q1 == 2:  # T = [[t0, 0], [t1, t2]] (θ positions, -1 = 0), A_s entries
                self._t_2x2 = first.theta_index[[0, 1, 1], [0, 0, 1]].tolist()
                self._a_2x2 = np.array([A11[:, 0, 0], A11[:, 1, 0], A11[:, 1, 1]])  # (np.stack's)
                self._a_2x2_max = (float(A11[:, 0, 0].max()), float(A11[:, 1, 1].max()))
        self.band = self._band
        if self.q1 == 1:  # (contiguous, for the compiled closed forms)
            self._a_1x1 = np.ascontiguousarray(A11[:, 0, 0])
        if self.q1 == 2:
            self.first_2x2 = (self._a_2x2, self._t_2x2, self._a_2x2_max)
        # the pwrss from the residuals (factor): at every θ for nearly collinear levels,
        # else where the factor's pivot cancels (GLMM working copies and problems without
        # rows: never)
        if same_rows:
            assert plan is not None  # (same_rows)
            self.residual_pwrss = plan.residual_pwrss
        elif rows is None or plan is not None:
            self.residual_pwrss = "never"
        else:
            self.residual_pwrss = "always" if any(
                collinear_levels(a) for b, a in zip(self.blocks, products.levels, strict=True)
                if b.q > 1) else "auto"
        self.y = y
        # W's y-free products, once a new response comes
        self._free: list[Products] | None = plan._free if same_rows and plan else None
        self._free_known = bool(same_rows and plan and plan._free_known)
        # what the engines derive from the rows alone (rows_memo): shared with every
        # problem of these rows with another response
        self._rows_memo: dict[Hashable, Any] = (
            plan._rows_memo if same_rows and plan is not None else {})
        # the sparse Schur complement (sparse_schur.py): no r x r array is formed
        if same_rows and plan is not None:  # (pattern, W and symbolic analysis shared)
            self._sparse = None if plan._sparse is None else plan._sparse.with_response(
                products)
        else:
            self._sparse = sparse_schur_for(schur if plan is None else plan.schur_choice,
                                            first, rest, products, MAX_DENSE)
        if self._sparse is not None:
            self._set_sparse_response()
            return
        self._Z1tZr = products.Z1tZr
        if same_rows and plan is not None:
            self._ZrtZr = plan._ZrtZr
        else:
            self._ZrtZr = products.ZrtZr.toarray() if products.ZrtZr is not None else None
        if plan is not None and plan._sparse is None:
            self._diagonal, self._lead = plan._diagonal, plan._lead
            self._w_cost, self._pattern = plan._w_cost, plan._pattern
            self._group_plan = plan._group_plan
        else:
            pattern = self._pattern = level_pattern(self._Z1tZr, self.q1, self.l1)
            self._diagonal = diagonal_lead(pattern, rest)
            self._lead = lead_blocks(pattern, rest, products.ZrtZr, self.r)
            self._w_cost = map_cost(pattern, self.q1, self.r_rand, self.r)
            self._group_plan = []
        self._set_response(plan if same_rows else None,
                           template=plan if template is None else template)

    def _level_groups(self) -> tuple[float, LevelGroups | None]:
        """The groups of levels of the dense rank-k updates and their cost
        (:func:`~crossed.model.update_plan.plan_update`; inf and None where none was
        completed), planned on the first call: the designs evaluated in one compiled call
        never ask (the greedy grouping of ham's 324 levels cost 1.2 ms)."""
        if not self._group_plan:
            _, cost, groups = plan_update(self._pattern, self.q1, self.r_rand, self.r,
                                          groups=self.update == "groups")
            self._group_plan.append((cost, groups))
        return self._group_plan[0]

    def _layout(self, first: ReBlock, rest: tuple[ReBlock, ...]) -> None:
        """The sizes of the part after the first block, and which θ scales which of its
        columns."""
        self.rest_sizes = [b.nlevels * b.q for b in rest]
        self.r_rand = int(sum(self.rest_sizes))
        self.r = self.r_rand + self.p + 1
        self._rest_scalar = all(b.q == 1 for b in rest)
        # evaluation shortcuts: theta positions of scalar templates
        self._t1 = int(first.theta_index[0, 0]) if self.q1 == 1 else -1
        idx = ([np.full(b.nlevels, b.theta_index[0, 0], dtype=np.int64) for b in rest]
               if self._rest_scalar else [])
        self._scale_index = np.concatenate(idx + [np.full(self.p + 1, -1, dtype=np.int64)])
        self._diag_rand = np.arange(self.r_rand)
        # scalar later blocks: the index ranges of each block, then of X and y (scale 1)
        bounds = list(accumulate([0, *self.rest_sizes, self.p + 1]))
        self._scalar_ranges = list(zip(bounds[:-1], bounds[1:], strict=True))
        # S's blocks: the Schur complement's scaling where a later block is not scalar
        self._s_blocks = _scale_blocks(rest)
        self._ntheta = 1 + max(int(b.theta_index.max()) for b in self.blocks)  # (θ's length)

    def rows_memo(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A quantity derived from this problem's rows and blocks, not its response,
        computed once by ``compute()`` and shared with every problem of the same rows with
        another response (:meth:`with_response`; the native engine's reparametrisation in
        simulation refits)."""
        if key not in self._rows_memo:
            self._rows_memo[key] = compute()
        return self._rows_memo[key]

    @property
    def schur_choice(self) -> str:
        """How this problem's Schur complement is factored: "dense" or "sparse"."""
        return "dense" if self._sparse is None else "sparse"

    @property
    def uses_sparse_schur(self) -> bool:
        """Whether the Schur complement is factored sparse (``sparse_schur.py``): then the
        factor has no dense ``L`` (and the analytic gradient is not available)."""
        return self._sparse is not None

    @property
    def sparse(self) -> SparseSchur | None:
        """The sparse Schur complement (``sparse_schur.py``), or None on the dense path."""
        return self._sparse

    @property
    def scalar_later_blocks(self) -> bool:
        """Whether every random-effects block after the first has one column per level."""
        return self._rest_scalar

    @property
    def dense_order(self) -> int:
        """Order of the dense matrix each evaluation factors past its diagonal lead, or past
        the later random effects where they fall into small components (0 on the sparse
        Schur path): what sets an evaluation's BLAS cost."""
        if self._sparse is not None:
            return 0
        return self.r - (self.r_rand if self._lead is not None else self._diagonal)

    @property
    def xtx(self) -> np.ndarray:
        """XᵀX of the rows (y-free: new responses share it)."""
        return self.products.xtx

    @property
    def centred_response(self) -> np.ndarray:
        """y_c = y − X b, the centred response of the rows (empty without rows)."""
        kept = self.__dict__.get("_yc")
        if kept is None:
            b = self.centre
            kept = self.y - self.X @ b if np.any(b) else self.y
            self._yc = kept
        return cast(np.ndarray, kept)

    @property
    def sparse_map(self) -> SparseMap | None:
        """The sparse map W that forms the Schur update, or None (dense rank-k updates over
        groups of levels, or the sparse Schur path)."""
        return self._map

    @property
    def level_classes(self) -> LevelClasses | None:
        """The classes of first-block levels evaluated once each (levels with equal A_s
        under the sparse map, q₁ = 1), or None."""
        return self._classes

    @property
    def first_theta(self) -> int:
        """The θ position of the first block's template when q₁ = 1 (else -1)."""
        return self._t1

    @property
    def scale_index(self) -> np.ndarray:
        """When every later block is scalar: the θ position scaling each column after the
        first block (-1 on X and y), (r,)."""
        return self._scale_index

    def _set_response(self, plan: PLS | None = None, template: PLS | None = None) -> None:
        """The dense path's products with the centred response (from :attr:`products`) and
        the first-to-rest product they complete; ``plan``: the same rows with another
        response (:meth:`with_response`), whose A_1r and sparse map are reused where y's
        column has the same nonzeros; ``template``: a problem of the same layout (PIRLS's
        last weighted one, :meth:`reweighted`) whose A_1r's index arrays, and its sparse
        map's pairs, are shared where the nonzeros are the same (:func:`stored_like`,
        :meth:`SparseMap.reweighted`)."""
        products = self.products
        rr = self.r_rand
        Arr = np.empty((self.r, self.r))
        if products.ZrtD is not None:
            Arr[:rr, :rr] = self._ZrtZr
            ZtD = products.ZrtD
            Arr[:rr, rr:] = ZtD
            Arr[rr:, :rr] = ZtD.T
        Arr[rr:, rr:] = products.DtD
        self.Arr = Arr
        A1r = None if plan is None else plan._a1r_with(products.Z1tD[:, -1])
        plan_map = None if plan is None or A1r is None else plan._map  # (the same pattern:
        if A1r is None:  # the plan's map's positions hold)
            like = None if template is None else template.A1r
            if self._Z1tZr is None:
                A1r = stored_like(products.Z1tD, like)
            elif self._Z1tZr.shape[0] * self.r <= MAX_DENSE_ROW_PRODUCTS:  # (small: the
                # nonzeros of the rows side by side, as the dense matrix's)
                A1r = stored_beside(self._Z1tZr, products.Z1tD, like)
            else:
                A1r = sp.hstack([self._Z1tZr, stored(products.Z1tD)], format="csr")
                A1r.sum_duplicates()
                A1r.sort_indices()
        self.A1r = A1r
        self._y_slots = None
        # A_r1 G A_1r: dense rank-k updates over groups of levels, else the sparse map W
        self._groups = None
        self._map: SparseMap | None = None
        self._classes = None
        self._small = None
        # small (one compiled call, SmallDense, can evaluate it): the sparse map, whatever
        # the planner's costs (the groups' update was Python's: 500 items x 10 systems
        # with (1 + x | system), r = 23, 77 → 8 µs an evaluation; blurb's CCMEM with
        # seed * lr, 17 fixed-effect columns, r = 35, 115 → 26 µs). Scalar later blocks:
        # while W is one part (SmallDense's condition; W's cost is its nonzeros); a first
        # block of three or more columns: while W costs less than the groups and their
        # interpreted fixed cost (GROUPS_OVERHEAD, as measured before SmallDense took the
        # groups too), else the groups, in the compiled call as well. Not for PIRLS's
        # weighted problems (a template without a plan: no such call)
        weighted = plan is None and template is not None
        small = not weighted and (self.r < MIN_DIAGONAL or self._lead is not None)
        compiled = (small and (not self._rest_scalar or self._w_cost < SPLIT_NNZ)
                    and (self.q1 <= 2
                         or self._w_cost < self._level_groups()[0] + GROUPS_OVERHEAD))
        if self.update == "groups" or (
                self.update is None and not compiled and self._level_groups()[0] <= self._w_cost
                and self.l1 * self.q1 * self.r <= 20_000_000):
            self._Arr_F = np.asfortranarray(Arr)
            level_groups = self._level_groups()[1]
            assert level_groups is not None  # planned whenever groups can be chosen
            self._groups = [self._group_block(A1r, levels, cols)
                            for levels, cols in level_groups]
            if (self.update is None and small and self.q1 > 2
                    and self.residual_pwrss != "always"):
                self._small = self._small_groups()
        else:
            kept = None if plan_map is None else plan_map.with_response(
                A1r, self.A11, Arr, products.Z1tD[:, -1])
            source = plan
            if kept is None and plan is None and template is not None and (
                    template._map is not None):  # (PIRLS's weights: the same pairs)
                kept, source = template._map.reweighted(A1r, self.A11), template
            self._map = kept if kept is not None else build_sparse_map(
                A1r, self.A11, self.Arr, support=self._rest_scalar and self.r_rand > 0,
                free=self._free)
            if kept is not None and source is plan:  # (the plan's classes: the same map's)
                assert plan is not None
                self._classes = plan._classes
                self._small = (None if plan._small is None
                               else plan._small.with_response(*self._response_arrays()))
            else:
                self._classes = LevelClasses.of(self._map, self.A11)
                # (not for PIRLS's weighted problems with a later block of several columns:
                # each is factored once or twice, and the compiled call's r² work arrays
                # cost more)
                self._small = (None if weighted and not self._rest_scalar
                               else self._small_dense())
            if self._rest_scalar and kept is not None and source is not None:
                self._scale_pair = source._scale_pair  # (the kept map's entries: its)
            elif self._rest_scalar:  # each entry's scale s_i s_j as a position in θ̃ ⊗ θ̃,
                # θ̃ = (θ, 1) (the X and y columns' index -1 is the appended 1)
                k = 1 + self._ntheta
                a, b = self._scale_index[self._map.i] % k, self._scale_index[self._map.j] % k
                self._scale_pair = a * k + b

    def _a1r_with(self, y_column: np.ndarray) -> sp.csr_matrix | None:
        """This problem's A_1r with ``y_column`` (Z₁ᵀy_c of another response) as its last
        column, where its nonzeros are this one's (else None): the same matrix as formed
        from that response's products, without SciPy's constructors (each row's last
        stored entry is y's)."""
        A = self.A1r
        if A is None:
            return None
        if self._y_slots is None:  # (this problem's y entries and their positions, found
            nonzero = self.products.Z1tD[:, -1] != 0  # once for all later responses)
            self._y_slots = (nonzero, A.indptr[1:][nonzero] - 1)
        nonzero, at = self._y_slots
        if not ((y_column != 0) == nonzero).all():  # (the same rows: the same length)
            return None
        new = shallow_copy(A)  # (the same pattern, shared: canonical, nothing re-sorts it;
        new.data = A.data.copy()  # a shallow copy skips SciPy's checks of it)
        new.data[at] = y_column[nonzero]
        return new

    def _small_dense(self) -> _core.SmallDense | None:
        """A whole evaluation in one compiled call (``_core.SmallDense``, on
        :meth:`_small_dense_inputs`), or None where those are None."""
        inputs = self._small_dense_inputs()
        if inputs is None:
            return None
        return self._compiled_evaluation(inputs)

    def _small_groups(self) -> _core.SmallDense:
        """A whole evaluation in one compiled call with the groups' update of a first block
        of three or more columns (``_core.SmallDense``'s groups: each group's levels, its
        columns of C and the levels' rows of A_1r there, :attr:`_groups`' blocks), where W
        costs more than the groups."""
        assert self._band is not None and self._groups is not None  # (q₁ > 2, groups)
        levels = [g[0] for g in self._groups]
        cols = [g[1] for g in self._groups]
        pointers = [np.concatenate(([0], np.cumsum([len(x) for x in parts]))).astype(np.int64)
                    for parts in (levels, cols)]
        vals = np.concatenate([block.transpose(0, 2, 1).reshape(-1, self.q1)
                               for _, _, block in self._groups])
        groups = (pointers[0], np.concatenate(levels).astype(np.int64), pointers[1],
                  np.concatenate(cols).astype(np.int64), np.ascontiguousarray(vals))
        empty = np.zeros(0, dtype=np.int64)
        return self._compiled_evaluation(
            (np.ascontiguousarray(self._band.entries), np.zeros((0, 0)), empty, empty,
             np.zeros(0), np.zeros(0), np.ascontiguousarray(self.Arr)), groups=groups)

    def _compiled_evaluation(self, inputs: _SmallInputs, groups: tuple[np.ndarray, ...] = ()
                             ) -> _core.SmallDense:
        """``_core.SmallDense`` on ``inputs`` (:meth:`_small_dense_inputs`' form) with
        this problem's T positions, scales, later blocks and components."""
        if self._band is not None:  # (q₁ > 2: T's positions, row-major)
            t_index = tuple(self._band.positions.tolist())
        else:
            t_index = (self._t1, -1, -1) if self.q1 == 1 else tuple(self._t_2x2)
        # (a later block of several columns: scaled by S = blockdiag(I ⊗ T_kᵀ, I) on both
        # sides, no scale per column)
        if self._rest_scalar:
            scale_index, (blocks, tt_index) = self._scale_index, _NO_SCALE_BLOCKS
        else:
            scale_index, (blocks, tt_index) = (np.full(self.r, -1, dtype=np.int64),
                                               self._s_blocks)
        lead = (_NO_PAIRS, _NO_PAIRS) if self._lead is None else self._lead
        return _core.SmallDense(*inputs, scale_index, self.r_rand, t_index, self._ntheta,
                                blocks=blocks, tt_index=tt_index, lead_rows=lead[0],
                                lead_start=lead[1], groups=groups)

    def _small_dense_inputs(self) -> _SmallInputs | None:
        """The arrays of a whole evaluation in one compiled call (``_core.SmallDense``),
        or None: for the update by the sparse map W in one part and a Schur complement of
        order below ``MIN_DIAGONAL`` (one dpotrf: ``cholesky_lower``'s choice there; later
        blocks of several columns per level scaled as :meth:`_finish_schur` scales them),
        as (A_s per level or class as rows of entries (q₁ ≥ 3: A_s row-major), W, its
        positions, the level standing for each of W's classes, the classes' sizes (empty:
        per level), A_rr on the support (empty: C formed from A_rr whole), A_rr).

        Not where the pwrss is taken from the residuals at every θ (nearly collinear
        levels, ``residual_pwrss`` "always"; as ``batched.py``): there each evaluation
        is dominated by that solve, and it keeps the steps' own arithmetic on the designs
        whose optimum is most sensitive to rounding."""
        m = self._map
        if (m is None or self.r >= MIN_DIAGONAL and self._lead is None or len(m.parts) > 1
                or self.residual_pwrss == "always"):
            return None
        classes = self._classes
        if self.q1 == 1:
            a = (self._a_1x1 if classes is None else classes.a).reshape(1, -1)
        elif self.q1 == 2:
            a = self._a_2x2
        else:  # (the banded factoriser's: A_s's entries row-major, one row each)
            assert self._band is not None  # q1 > 2
            a = self._band.entries
        per_entry = classes is not None or m.identity
        src = np.arange(a.shape[1]) if per_entry else m.rep
        count = np.zeros(0) if classes is None else classes.count
        W, support, Arr = self._response_arrays()
        return (np.ascontiguousarray(a), W, m.rows.astype(np.int64), src.astype(np.int64),
                count, support, Arr)

    def _response_arrays(self) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray, np.ndarray]:
        """The inputs of ``_core.SmallDense`` that change with the response: W, A_rr on
        the support (empty: C formed from A_rr whole) and A_rr (:meth:`_small_dense_inputs`;
        a kept map's problem shares the others, ``SmallDense.with_response``)."""
        m = self._map
        assert m is not None  # (the sparse map's path)
        support = (m.arr if self._rest_scalar and self.r_rand and m.arr is not None
                   else np.zeros(0))
        return (m.W if sp.issparse(m.W) else np.ascontiguousarray(m.W),
                np.ascontiguousarray(support), np.ascontiguousarray(self.Arr))

    def _set_sparse_response(self) -> None:
        """The sparse path's A_1r = Z₁ᵀ[Zr X y_c] (sparse)."""
        assert self._sparse is not None  # the sparse path
        self._map, self._groups, self._free = None, None, None
        self.A1r = sp.hstack([self._sparse.A1R, stored(self._sparse.A1D)], format="csr")
    def _group_block(self, A1r: sp.csr_matrix, levels: np.ndarray, cols: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One group's rows of A_1r on its columns: (levels, columns, block), the block as
        (columns x levels) in Fortran order when q1 = 1, else (levels, q1, columns)."""
        q = self.q1
        rows = (levels[:, None] * q + np.arange(q)[None, :]).ravel()
        block = A1r[rows][:, cols].toarray()
        if q == 1:
            return levels, cols, np.asfortranarray(block.T)
        return levels, cols, block.reshape(len(levels), q, len(cols))

    def with_response(self, y: np.ndarray) -> PLS:
        """The same design with another response: every product not involving y is reused
        (simulations refit thousands of responses), the sparse map's too."""
        if self.rows is None:
            raise ValueError("a PLS problem built from cross-products alone has no rows "
                             "for another response")
        y = np.asarray(y, dtype=float)
        if self._map is not None and not self._free_known:  # (kept for later responses;
            self._free = response_free_products(self.A1r, self.A11)  # None: dense products)
            self._free_known = True
        new = PLS.__new__(PLS)
        new._build(self.products.with_response(self.rows, y), self.blocks, self.update,
                   None, self.rows, y, plan=self)
        new.source = self.source
        return new

    def reparametrised(self, blocks: tuple[ReBlock, ...], basis: np.ndarray | None = None
                       ) -> PLS:
        """The same response and prior weights with other random-effects blocks of the
        same levels and θ, and with ``basis`` X in that basis (:func:`in_basis`: the same
        column space): the optimiser's centred and orthogonalised columns
        (``engines/native/rescale.py``)."""
        if self.rows is None:
            raise ValueError("a PLS problem built from cross-products alone has no rows "
                             "to reparametrise")
        X = self.X if basis is None else in_basis(self.X, basis)
        return PLS(blocks, X, self.y, update=self.update, ldW=self.ldW)

    # ------------------------------------------------------------------ prior weights
    @classmethod
    def weighted(cls, blocks: tuple[ReBlock, ...], X: np.ndarray, y: np.ndarray,
                 weights: np.ndarray | None) -> PLS:
        """The PLS problem of √w-scaled ``Z``, ``X`` and ``y`` (prior weights ``w``,
        lme4's ``weights=``); None or all ones gives the unweighted problem."""
        if weights is None or np.all(weights == 1.0):
            return cls(blocks, X, y)
        w = np.asarray(weights, dtype=float)
        sw = np.sqrt(w)
        scaled = tuple(replace(b, Z=b.Z * sw[:, None]) for b in blocks)
        # lme4's ldW: log|W| enters the criterion
        return cls(scaled, X * sw[:, None], np.asarray(y, dtype=float) * sw,
                   ldW=float(np.sum(np.log(w))))

    # ------------------------------------------------------------------ evaluation
    def scale_vector(self, theta: np.ndarray) -> np.ndarray:
        """Diagonal of S = blockdiag(Λ_restᵀ, I) when every later block is scalar: its θ
        repeated per level, then 1 on X and y, (r,)."""
        # index -1 (the X and y columns) reads the appended 1
        s: np.ndarray = np.concatenate((theta, _ONE))[self._scale_index]
        return s

    def _scale_table(self, theta: np.ndarray) -> np.ndarray:
        """Products of two scales, flattened θ̃ ⊗ θ̃ with θ̃ = (θ, 1): an updated entry's
        s_i s_j is ``table[self._scale_pair]`` (scalar later blocks)."""
        v = np.concatenate((theta, _ONE))
        return cast(np.ndarray, np.multiply.outer(v, v).reshape(-1))

    def scale_matrix(self, theta: np.ndarray) -> sp.csr_matrix:
        """S = blockdiag(I ⊗ T_kᵀ over the later blocks, I on X and y), (r, r), sparse."""
        mats = [sp.kron(sp.identity(b.nlevels), b.template(theta).T) for b in self.blocks[1:]]
        mats.append(sp.identity(self.p + 1))
        return sp.block_diag(mats, format="csr")

    def _later_templates(self, theta: np.ndarray) -> np.ndarray:
        """The later blocks' T_kᵀ at ``theta`` side by side, each in C order (each
        :meth:`ReBlock.template` transposed)."""
        return cast(np.ndarray, np.concatenate((theta, _ZERO))[self._s_blocks[1]])

    def first_block(self, theta: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None,
                                                      np.ndarray | None, float, bool]:
        """Block 1 per level: Cholesky factors of B_s, G_s = T B_s⁻¹ Tᵀ, a half H_s of G_s
        (G_s = H_sᵀ H_s) and log det of the block."""
        if self.q1 == 1:  # (per class of levels where the sparse map merges them)
            classes = self._classes
            a = self._a_1x1 if classes is None else classes.a
            out = np.empty((4, len(a), 1, 1))  # B_s, G_s, √B_s and H_s = t / √B_s
            flat = out.reshape(4, -1)
            _core.first_block_1x1(a, float(theta[self._t1]), *flat)
            logs = np.log(flat[0])  # (NumPy's log and sums, as closed_forms.py and batched.py)
            logdet = float(logs.sum() if classes is None else logs @ classes.count)
            return out[2], out[1], out[3], logdet, True
        if self.q1 == 2:
            th = theta.tolist() + [0.0]
            t0, t1, t2 = (th[i] for i in self._t_2x2)
            return first_block_2x2(self._a_2x2, t0, t1, t2)
        # q1 > 2: one banded factor of all levels (chol is its band storage); G and H are
        # formed in schur only where the update needs them
        assert self._band is not None  # q1 > 2
        Lb, logdet, ok = self._band.factor(theta)
        return Lb, None, None, logdet, ok

    def schur(self, theta: np.ndarray, chol: np.ndarray, G: np.ndarray | None,
              H: np.ndarray | None) -> np.ndarray:
        """The scaled dense Schur complement C, in Fortran order, before factorisation.

        ``chol``, ``G`` and ``H`` are :meth:`first_block`'s (G and H None for q1 > 2).

        Only its lower triangle is guaranteed: that is all the factorisation reads.
        """
        single = self._groups is not None and len(self._groups) == 1 and (
            len(self._groups[0][1]) == self.r)
        if self._band is not None:  # (the sparse map reads G = HᵀH)
            H, G = self._band.half_and_g(theta, chol, with_g=self._groups is None)
        elif self.q1 == 2 and self._groups is not None and not single:
            # H_s = L_s⁻¹ Tᵀ from B_s (first_block leaves B for q1 = 2)
            H = (np.linalg.inv(np.linalg.cholesky(matrices_2x2(chol)))
                 @ self.blocks[0].template(theta).T)
        if self._groups is None:
            assert G is not None  # first_block's G, or HᵀH above (q1 > 2)
            return self._sparse_schur(theta, G)
        # A_r1 G A_1r = Σ_s Mᵀ_s M_s with M_s = H_s A_s: per group of levels one symmetric
        # rank-k update (dsyrk) on the group's columns
        if single and self.q1 == 2:  # G A_1r by batched 2 x 2 products, one GEMM
            levels, _, block = self._groups[0]
            assert G is not None  # first_block's (q1 = 2)
            GA = (G[levels] @ block).reshape(-1, self.r)
            C = self.Arr - block.reshape(-1, self.r).T @ GA  # symmetric, row-major
            return np.asfortranarray(self._finish_schur(theta, C).T)  # (copies only when
            # the later blocks are not scalar: then the result is the full symmetric matrix)
        assert H is not None  # first_block's (q1 = 1) or formed above (q1 >= 2)
        if single:
            return self._finish_schur(theta, blas.dsyrk(
                -1.0, self._group_rows(self._groups[0], H), beta=1.0, c=self._Arr_F,
                trans=0, lower=1))
        C = self._Arr_F.copy(order="F")
        for group in self._groups:
            cols = group[1]
            C[np.ix_(cols, cols)] -= blas.dsyrk(1.0, self._group_rows(group, H), trans=0,
                                                lower=1)
        return self._finish_schur(theta, C)

    def _sparse_schur(self, theta: np.ndarray, G: np.ndarray) -> np.ndarray:
        """C by the sparse map W, which fills the upper triangle (row-major); the result is
        its transpose, a Fortran-order view whose lower triangle is that upper one."""
        r = self.r
        m = self._map
        assert m is not None  # no groups: the sparse map
        if self._rest_scalar and self.r_rand and m.arr is not None:
            # A_rr and the update are sparse: C = S (A_rr - W g) S on their support alone,
            # each part of W's rows written by its thread
            C = np.zeros((r, r))
            m.apply(G, C.reshape(-1), self._classes is not None, m.arr,
                    self._scale_table(theta), self._scale_pair)
        else:
            per_class = self._classes is not None
            if not self._rest_scalar or self.r_rand == 0:  # (no later blocks: S = I)
                C = self.Arr.copy()
                m.apply(G, C.reshape(-1), per_class, None, _ONE, _NO_PAIRS)
                return self._finish_schur(theta, C.T) if self.r_rand else C.T
            # S (A_rr - W g) S with S diagonal and constant on each block: copy-and-scale
            # A_rr block by block (upper block pairs), subtract the scaled update
            s = self.scale_vector(theta)
            if r <= _SMALL_SCHUR:  # one product with the outer product of the scales (the
                # same s_i s_j, so the same upper blocks; the lower ones are not read)
                C = self.Arr * np.multiply.outer(s, s)
            else:
                C = np.empty((r, r))
                for i, (a0, a1) in enumerate(self._scalar_ranges):
                    for b0, b1 in self._scalar_ranges[i:]:
                        np.multiply(self.Arr[a0:a1, b0:b1], s[a0] * s[b0],
                                    out=C[a0:a1, b0:b1])
            m.apply(G, C.reshape(-1), per_class, None, self._scale_table(theta),
                    self._scale_pair)
        idx = self._diag_rand
        C[idx, idx] += 1.0
        return C.T

    def _group_rows(self, group: tuple[np.ndarray, np.ndarray, np.ndarray], H: np.ndarray
                    ) -> np.ndarray:
        """The group's M_sᵀ = (H_s A_s)ᵀ side by side (columns x levels·q1, Fortran)."""
        levels, cols, block = group
        if self.q1 == 1:
            return cast(np.ndarray, block * H[levels, 0, 0])
        return np.asfortranarray((H[levels] @ block).reshape(-1, len(cols)).T)

    def _finish_schur(self, theta: np.ndarray, C: np.ndarray) -> np.ndarray:
        """Scale the unscaled Schur complement by S on both sides and add I on the random
        part (C's lower triangle, Fortran order)."""
        if self._rest_scalar:
            s = self.scale_vector(theta)
            C *= s[:, None]
            C *= s[None, :]
        else:
            out = np.empty((self.r, self.r), order="F")
            _core.scale_both_sides(C, self._s_blocks[0], self._later_templates(theta), out)
            C = out
        idx = self._diag_rand
        C[idx, idx] += 1.0
        return C

    def factor(self, theta: np.ndarray) -> Factor:
        """Factor the PLS system at ``theta``; ``ok`` is False if it is not positive definite."""
        theta = np.asarray(theta, dtype=float)
        if self._small is not None:
            small = self._factor_small_dense(theta)
            if small is not None:
                return small
        chol, G, H, ld1, ok = self.first_block(theta)
        if not ok:
            return Factor(theta=theta, ok=False)
        assert chol is not None  # ok
        if self._sparse is not None:
            if self._band is not None:  # G = HᵀH from the banded factor (q1 > 2)
                G = self._band.half_and_g(theta, chol)[1]
            assert G is not None  # first_block's (q1 <= 2) or formed above
            sf = self._sparse.factor(theta, G, ld1, chol)
            lost = sf.ok and pivot_cancels(self, sf.pwrss, chol, theta)
            return from_residuals(self, sf) if lost else sf
        L = self.schur(theta, chol, G, H)
        if cholesky_lower(L, solve_from=self.r_rand, diagonal=self._diagonal,
                          lead=self._lead) != 0:
            return Factor(theta=theta, ok=False)
        d = L.diagonal()
        rr = self.r_rand
        logd = np.log(d[:-1])
        ldL2 = ld1 + 2.0 * float(logd[:rr].sum()) if rr else ld1
        ldL2 -= self.ldW  # (prior weights: lme4's criterion has ldL2 - ldW)
        ldRX2 = 2.0 * float(logd[rr:].sum())
        f = Factor(theta=theta, ok=True, ldL2=ldL2, ldRX2=ldRX2, pwrss=float(d[-1] ** 2),
                   L=L, first=chol)
        return from_residuals(self, f) if pivot_cancels(self, f.pwrss, chol, theta) else f

    def _factor_small_dense(self, theta: np.ndarray) -> Factor | None:
        """:meth:`factor` in one compiled call (``_core.SmallDense``; designs of
        :meth:`_small_dense_inputs`): the same steps and the same criterion to rounding.
        None where a θ is not finite (the closed forms' general form: ``factor``)."""
        small = self._small
        assert small is not None  # (the caller's test)
        q, n = self.q1, small.nentries
        if q > 2:  # (the banded factor as first_block leaves it: band storage, whose
            first = np.empty((q, n * q), order="F")  # transpose SmallDense writes)
            into = first.T
        else:  # (√B_s per entry as first_block leaves them for q₁ = 1, B_s's entries
            first = np.empty((n, 1, 1) if q == 1 else (3, n))  # for q₁ = 2)
            into = first.reshape(-1, n)
        L = np.empty((self.r, self.r), order="F")
        info, ld1, ldRX2, pwrss, amplification = small.factor(
            np.ascontiguousarray(theta), into, L)
        if info == -2:
            return None
        if info != 0:
            return Factor(theta=theta, ok=False)
        f = Factor(theta=theta, ok=True, ldL2=ld1 - self.ldW, ldRX2=ldRX2, pwrss=pwrss,
                   L=L, first=first)
        lost = pivot_cancels(self, pwrss, amplification=amplification)
        return from_residuals(self, f) if lost else f

    def factor_batch(self, thetas: np.ndarray) -> FactorBatch | None:
        """:meth:`factor`'s numbers at each row of ``thetas`` (m x len θ) in one compiled
        loop (``_core.SmallDense.evaluations``; the same calls as
        :meth:`_factor_small_dense`, so the same numbers), for the designs evaluated in one
        call; None elsewhere (the criterion at many θ: the derivative check's points).
        Rows where :meth:`factor` takes another path (θ not finite, the pwrss from the
        residuals) are not ``own``: the caller's."""
        small = self._small
        if small is None:
            return None
        thetas = np.ascontiguousarray(thetas, dtype=float)
        values = np.empty((thetas.shape[0], 4))
        info = small.evaluations(thetas, values)
        ok = info == 0
        pwrss = values[:, 2]
        own = (info != -2) & ~(ok & pivots_cancel(self, pwrss, values[:, 3]))
        return FactorBatch(own=own, ok=ok, ldL2=values[:, 0] - self.ldW, ldRX2=values[:, 1],
                           pwrss=pwrss)

    def deviance_batch(self, thetas: np.ndarray, sigma: float, reml: bool,
                       vcov: bool = True, back: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray] | None:
        """The unprofiled deviance at ``sigma`` (:func:`deviance_at`) at each row of
        ``thetas`` and, with ``vcov``, the pwrss and the unscaled vcov(β) = (R_XᵀR_X)⁻¹
        (flattened; of the coefficients ``back`` maps to, R_X⁻¹backᵀ's, where given) after
        it, in one compiled loop (``_core.SmallDense.deviances``: :meth:`factor`,
        :meth:`rx_inverse` and those products' numbers) for the designs evaluated in one
        call; None elsewhere.

        Returns
        -------
        values : numpy.ndarray
            (m, 1) or (m, 2 + p²); NaN rows where the system is not positive definite.
        own : numpy.ndarray
            (m,) bool: the rows computed here. At the others (θ not finite, R_X singular,
            a pwrss to be taken from the residuals) the caller calls :meth:`factor`.
        """
        small = self._small
        if small is None:
            return None
        thetas = np.ascontiguousarray(thetas, dtype=float)
        m, p = thetas.shape[0], self.p
        s2 = sigma * sigma
        lg = float(np.log(2.0 * np.pi * s2))  # (the formula's constant, as NumPy gives it)
        out = np.empty((m, 2 + p * p if vcov else 1))
        own = np.empty(m, dtype=np.uint8)
        residual = _RESIDUAL_MODES[self.residual_pwrss]
        small.deviances(thetas, self.ldW, s2, lg, self.n, p, reml, residual, self.yc_ss,
                        CANCELLATION_LIMIT, BEYOND_REPAIR, out, own,
                        None if back is None else np.ascontiguousarray(back, dtype=float))
        return out, own.view(bool)

    def compiled_criterion(self, reml: bool, shift: float,
                           fallback: Callable[[np.ndarray], float]
                           ) -> _core.SmallCriterion | None:
        """The criterion (+ ``shift``) as a compiled function of θ for a compiled optimiser
        loop (``_core.SmallCriterion``: :meth:`_factor_small_dense`'s evaluation and
        :func:`profiled_deviance`'s formula, no Factor formed), or None where the design
        is not evaluated in one call. ``fallback(θ)`` gives the value where the pwrss is
        to be taken from the residuals (:func:`pivot_cancels`) or θ is not finite."""
        if self._small is None:
            return None
        return _core.SmallCriterion(
            self._small, self.n, self.p, reml, self.ldW, shift, self.yc_ss,
            self.residual_pwrss == "auto", (CANCELLATION_LIMIT, BEYOND_REPAIR), fallback)

    def objective(self, theta: np.ndarray, reml: bool) -> float:
        """Profiled deviance (ML) or REML criterion at ``theta``."""
        return profiled_deviance(self.factor(theta), self.n, self.p, reml)

    # ------------------------------------------------------------------ solutions
    def solve(self, f: Factor) -> tuple[np.ndarray, list[np.ndarray]]:
        """Fixed effects β and spherical random effects u (one (ℓ, q) array per block):
        where the first block has one or two columns per level and every later block one,
        on the dense path, in one compiled call (``_core.dense_solve``: these steps, the
        same numbers)."""
        if isinstance(f, SparseFactor):
            u_rest, beta = SparseSchur.solution(f)
        else:
            solved = self._dense_solve(f)
            if solved is not None:
                return solved
            L = f.L
            assert L is not None  # an ok factorisation
            rr = self.r_rand
            x = tri_solve(L[:-1, :-1], L[-1, :-1], trans=True)
            u_rest, beta = x[:rr], x[rr:]
        theta = f.theta
        # the rest blocks' u, per level; the first block from its own equations
        u_blocks = []
        pos = 0
        for blk in self.blocks[1:]:
            size = blk.nlevels * blk.q
            u_blocks.append(u_rest[pos: pos + size].reshape(blk.nlevels, blk.q))
            pos += size
        # [b_rest, β, -1]: A_1r times it is Z1'[Zr X] (b, β) - Z1'y
        xs = np.concatenate(
            [(ub @ blk.template(theta).T).ravel()
             for ub, blk in zip(u_blocks, self.blocks[1:], strict=True)]
            + [beta, [-1.0]]
        )
        rhs = -(self.A1r @ xs).reshape(self.l1, self.q1)  # Z1'y - Z1'[Zr X] x
        T1 = self.blocks[0].template(theta)
        rhs = rhs @ T1  # Λ1' (…): per level T1' v
        chol = self.first_chol(f)
        w = np.linalg.solve(chol, rhs[:, :, None])
        u1 = np.linalg.solve(np.swapaxes(chol, 1, 2), w)[:, :, 0]
        return beta + self.centre, [u1] + u_blocks

    def _dense_solve(self, f: Factor) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """:meth:`solve` by ``_core.dense_solve``, or None where it does not apply (a first
        block of more columns or of one level, a later one of several, A_1r not CSR with
        32-bit indices)."""
        A1r, L = self.A1r, f.L
        if (self.q1 > 2 or self.l1 < 2 or not self._rest_scalar or L is None
                or not L.flags.f_contiguous or not isinstance(A1r, sp.csr_matrix)
                or A1r.indices.dtype != np.int32 or A1r.indptr.dtype != np.int32):
            return None
        first = f.first
        assert first is not None  # (an ok factorisation)
        if self.q1 == 1:
            class_of = _NO_CLASSES if self._classes is None else self._classes.class_of
            first = first.reshape(1, -1)
        else:
            class_of = _NO_CLASSES
        beta = np.empty(self.p)
        u_rest = np.empty(self.r_rand)
        u1 = np.empty((self.l1, self.q1))
        info = _core.dense_solve(
            L, self.r_rand, np.ascontiguousarray(f.theta, dtype=float), self._scale_index,
            A1r.data, A1r.indices, A1r.indptr,
            np.ascontiguousarray(self.blocks[0].theta_index, dtype=np.int64),
            np.ascontiguousarray(first, dtype=float), class_of, beta, u_rest, u1)
        if info != 0:
            return None  # (the steps say what went wrong)
        u_blocks = [u1]
        for (lo, hi), blk in zip(self._scalar_ranges, self.blocks[1:], strict=False):
            u_blocks.append(u_rest[lo:hi].reshape(blk.nlevels, 1))
        return beta + self.centre, u_blocks

    def conditional_inverse_blocks(self, f: Factor) -> list[np.ndarray]:
        """Diagonal blocks of (ΛᵀZᵀZΛ + I)⁻¹ per level, one (ℓ, q, q) array per block
        (:func:`crossed.model.condvar.conditional_inverse_blocks`)."""
        return conditional_inverse_blocks(self, f)

    def first_chol(self, f: Factor) -> np.ndarray:
        """The first block's per-level Cholesky factors, (ℓ₁, q₁, q₁)."""
        assert f.first is not None  # an ok factorisation
        if self._classes is not None:  # (q1 = 1: one factor per class)
            return cast(np.ndarray, f.first[self._classes.class_of])
        if self.q1 == 2:  # first_block left B's entries (b00, b10, b11) per level
            return np.linalg.cholesky(matrices_2x2(f.first))
        return f.first if self._band is None else self._band.unpack(f.first)

    def rx_inverse(self, f: Factor) -> np.ndarray:
        """R_X⁻¹ with vcov(β) = σ² R_X⁻¹ R_X⁻ᵀ (R_X lower here)."""
        return tri_inverse(self.rx_factor(f))

    def rx_factor(self, f: Factor) -> np.ndarray:
        """R_X, lower triangular (p x p), contiguous: X's part of the factor."""
        if isinstance(f, SparseFactor):
            return SparseSchur.rx(f)
        rr = self.r_rand
        assert f.L is not None  # an ok factorisation
        return lower_triangle(f.L[rr:-1, rr:-1])
