"""The compiled kernels (``crossed/model/_core.pyx``) against the NumPy/SciPy expressions
they replace, on random inputs, including the cases each kernel branches on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import lapack

from crossed.model import _core


def test_the_core_is_compiled():
    assert _core.__file__.endswith((".so", ".pyd")), _core.__file__


def test_first_block_1x1_is_bitwise_numpys():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 30, size=40).astype(float)
    t = 0.73
    out = np.empty((4, 40))
    _core.first_block_1x1(a, t, *out)
    b = t * t * a + 1.0
    np.testing.assert_array_equal(out[0], b)
    np.testing.assert_array_equal(out[1], t * t / b)
    np.testing.assert_array_equal(out[2], np.sqrt(b))
    np.testing.assert_array_equal(out[3], t / np.sqrt(b))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("support", [True, False])
@pytest.mark.parametrize("scaled", [True, False])
def test_map_update(dense, support, scaled):
    """out[rows] = (arr - W g) * scale on the support, else out[rows] -= (W g) * scale; a
    CSR W in two row parts (as SparseMap.each_part hands them out) gives the same."""
    rng = np.random.default_rng(1)
    nrows, ncols, size = 30, 12, 100
    W = sp.random(nrows, ncols, density=0.3, random_state=2, format="csr")
    g = rng.normal(size=ncols)
    rows = np.sort(rng.choice(size, size=nrows, replace=False)).astype(np.int64)
    arr = rng.normal(size=nrows) if support else np.zeros(0)
    table = rng.normal(size=7)
    pair = rng.integers(0, 7, size=nrows).astype(np.int64) if scaled else np.zeros(
        0, dtype=np.int64)
    base = rng.normal(size=size)
    wg = W @ g
    scale = table[pair] if scaled else 1.0
    expected = base.copy()
    if support:
        expected[rows] = (arr - wg) * scale
    else:
        expected[rows] -= wg * scale
    out = base.copy()
    if dense:
        _core.map_update(W.toarray(), g, rows, 0, nrows, arr, table, pair, out)
    else:
        for lo, hi in ((0, 13), (13, nrows)):
            part = sp.csr_matrix((W.data[W.indptr[lo]:W.indptr[hi]],
                                  W.indices[W.indptr[lo]:W.indptr[hi]],
                                  W.indptr[lo:hi + 1] - W.indptr[lo]), shape=(hi - lo, ncols))
            _core.map_update(part, g, rows, lo, hi, arr, table, pair, out)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-14)


def test_map_update_without_rows_writes_in_order():
    """An empty ``rows`` writes W's row i at out[i] (the sparse Schur path's A_RR − W g, in
    two row parts): the values of SciPy's ``arr - W @ g``, bitwise."""
    rng = np.random.default_rng(4)
    W = sp.random(40, 15, density=0.3, random_state=5, format="csr")
    g, arr = rng.normal(size=15), rng.normal(size=40)
    none = np.zeros(0, dtype=np.int64)
    out = np.full(40, np.nan)
    for lo, hi in ((0, 17), (17, 40)):
        part = sp.csr_matrix((W.data[W.indptr[lo]:W.indptr[hi]],
                              W.indices[W.indptr[lo]:W.indptr[hi]],
                              W.indptr[lo:hi + 1] - W.indptr[lo]), shape=(hi - lo, 15))
        _core.map_update(part, g, none, lo, hi, arr, np.zeros(0), none, out)
    np.testing.assert_array_equal(out, arr - W @ g)


def test_potrf_lower_is_lapacks_and_reports_the_failing_minor():
    rng = np.random.default_rng(3)
    M = rng.normal(size=(9, 9))
    A = np.asfortranarray(M @ M.T + 9 * np.eye(9))
    upper = np.triu(A, 1).copy()
    expected = lapack.dpotrf(A.copy(order="F"), lower=1, clean=0)[0]
    assert _core.potrf_lower(A) == 0
    np.testing.assert_array_equal(np.tril(A), np.tril(expected))
    np.testing.assert_array_equal(np.triu(A, 1), upper)  # the upper triangle is not touched
    bad = np.asfortranarray(np.diag([1.0, 2.0, -1.0, 3.0]))
    assert _core.potrf_lower(bad) == 3
    with pytest.raises(ValueError):  # C order is refused, not silently transposed
        _core.potrf_lower(np.ascontiguousarray(M @ M.T + np.eye(9)))



def _components_matrix(rng, sizes, rest):
    """A positive definite matrix whose first sum(sizes) rows fall into components of
    ``sizes`` rows, interleaved (shuffled), with ``rest`` dense rows after them, formed as
    L Lᵀ from a factor with that pattern: (A, rows, start) as ``lead_blocks_lower`` reads
    them."""
    rr = int(sum(sizes))
    labels = np.concatenate((rng.permutation(np.repeat(np.arange(len(sizes)), sizes)),
                             np.full(rest, -1)))
    r = rr + rest
    keep = (labels[:, None] == labels[None, :]) | (labels[:, None] < 0)
    L = np.tril(np.where(keep, rng.normal(size=(r, r)), 0.0), -1) + np.diag(
        rng.uniform(1.0, 2.0, r))
    rows = np.argsort(labels[:rr], kind="stable").astype(np.int64)
    start = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return np.asfortranarray(L @ L.T), rows, start


@pytest.mark.parametrize(("sizes", "rest"), [((3,) * 8, 5), ((1,) * 6, 4), ((1, 4, 2, 7), 0),
                                             ((2, 2), 1)])
def test_lead_blocks_lower_is_the_dense_factor(sizes, rest):
    """A matrix whose leading rows fall into independent components (interleaved: a
    component's rows are not contiguous), factored component by component and then its
    trailing rows: the dense Cholesky factor to rounding, its zeros between components
    exact, the upper triangle untouched; a pivot that is not positive is reported as
    LAPACK does (the failing row + 1), in a component or in the trailing block."""
    rng = np.random.default_rng(len(sizes) + rest)
    A, rows, start = _components_matrix(rng, sizes, rest)
    expect = np.linalg.cholesky(A)
    upper = np.triu(A, 1).copy()
    L = A.copy(order="F")
    assert _core.lead_blocks_lower(L, rows, start) == 0
    np.testing.assert_allclose(np.tril(L), expect, rtol=1e-12, atol=1e-13)
    rr = int(sum(sizes))
    apart = np.tril(expect[:rr, :rr] == 0.0)  # (between components: exact zeros)
    np.testing.assert_array_equal(np.tril(L)[:rr, :rr][apart], 0.0)
    np.testing.assert_array_equal(np.triu(L, 1), upper)
    bad = A.copy(order="F")
    j = int(rows[start[-2]])  # (a row of the last component)
    bad[j, j] = -1.0
    assert _core.lead_blocks_lower(bad, rows, start) == j + 1
    if rest:
        bad = A.copy(order="F")
        bad[rr + rest - 1, rr + rest - 1] = -1e3
        assert _core.lead_blocks_lower(bad, rows, start) == rr + rest


def test_lead_blocks_lower_refuses_components_it_cannot_read():
    """Rows out of range or not ascending within a component, or starts that do not
    cover the leading rows, are refused rather than read past the matrix."""
    A = np.asfortranarray(np.eye(5))
    good_rows, good_start = np.array([0, 2, 1, 3], dtype=np.int64), np.array([0, 2, 4])
    assert _core.lead_blocks_lower(A.copy(order="F"), good_rows, good_start) == 0
    for rows, start in (([0, 2, 1, 7], [0, 2, 4]), ([2, 0, 1, 3], [0, 2, 4]),
                        ([0, 2, 1, 3], [0, 2, 3]), ([0, 2, 1, 3], [0, 0, 4]),
                        ([0, 1, 2, 3, 4, 5], [0, 6])):
        with pytest.raises(ValueError, match="components"):
            _core.lead_blocks_lower(A.copy(order="F"), np.array(rows, dtype=np.int64),
                                    np.array(start, dtype=np.int64))



@pytest.mark.parametrize("seed", range(4))
def test_later_components_are_scipys_connected_components(seed):
    """The later random effects' components (a first-factor level's columns, Z_rᵀZ_r's
    entries and a later level's columns joined): SciPy's ``connected_components`` of that
    graph, numbered in the order of their smallest nodes, with their count and the
    largest one's size."""
    from scipy.sparse.csgraph import connected_components

    blocks = np.array([[7, 1], [4, 2], [3, 3]], dtype=np.int64)  # (levels, columns each)
    n = int(np.sum(blocks[:, 0] * blocks[:, 1]))
    P = sp.random(12, n, density=0.08, format="csr", random_state=seed)
    P.data[:] = 1.0
    Z = sp.random(n, n, density=0.03, format="csc", random_state=seed + 10)
    labels, count, biggest = _core.later_components(
        n, P.indptr.astype(np.int32), P.indices.astype(np.int32),
        Z.indptr.astype(np.int32), Z.indices.astype(np.int32), blocks)
    edges = [np.zeros((n, n), dtype=bool)]
    for s_ in range(P.shape[0]):  # (all pairs of a level's columns)
        cols = P.indices[P.indptr[s_]:P.indptr[s_ + 1]]
        edges[0][np.ix_(cols, cols)] = True
    edges.append(Z.toarray() != 0)
    off = 0
    for levels, q in blocks:
        for _ in range(levels):
            edges[0][off:off + q, off:off + q] = True
            off += q
    graph = sp.csr_matrix(edges[0] | edges[1] | edges[1].T)
    want_count, want = connected_components(graph, directed=False)
    assert count == want_count
    first_of = {}  # (SciPy's numbering mapped to the order of smallest nodes)
    for lab in want:
        first_of.setdefault(lab, len(first_of))
    np.testing.assert_array_equal(labels, [first_of[lab] for lab in want])
    assert biggest == np.bincount(labels).max()


def test_later_components_refuse_arrays_they_cannot_read():
    """Columns out of range, index pointers that do not fit and blocks of another total
    are refused, not read past their ends."""
    i32 = np.int32
    ptr, none = np.array([0, 2], dtype=i32), np.zeros(4, dtype=i32)
    blocks = np.array([[3, 1]], dtype=np.int64)
    labels, count, biggest = _core.later_components(3, ptr, np.array([0, 2], dtype=i32), none,
                                                    np.zeros(0, dtype=i32), blocks)
    assert labels.tolist() == [0, 1, 0] and (count, biggest) == (2, 2)
    for args in ((ptr, np.array([0, 3], dtype=i32), none, np.zeros(0, dtype=i32), blocks),
                 (np.array([0, 5], dtype=i32), np.array([0, 2], dtype=i32), none,
                  np.zeros(0, dtype=i32), blocks),
                 (ptr, np.array([0, 2], dtype=i32), np.zeros(3, dtype=i32),
                  np.zeros(0, dtype=i32), blocks),
                 (ptr, np.array([0, 2], dtype=i32), np.array([0, 0, 0, 1], dtype=i32),
                  np.array([7], dtype=i32), blocks),
                 (ptr, np.array([0, 2], dtype=i32), none, np.zeros(0, dtype=i32),
                  np.array([[2, 1]], dtype=np.int64))):
        with pytest.raises(ValueError):
            _core.later_components(3, *args)


def _scipy_upper_products(Aa, Ab, class_of, ncls):
    """The SciPy expression ``_upper_products`` computed before the kernel: Aa's entries
    spread over one row per (i, k), its product with Ab, the entries j <= i, by column."""
    ls, r = Aa.shape
    key = Aa.indices.astype(np.int64) * ncls + np.repeat(class_of, np.diff(Aa.indptr))
    keys = np.unique(key)
    spread = sp.csr_matrix((Aa.data, np.searchsorted(keys, key), Aa.indptr),
                           shape=(ls, len(keys)))
    P = spread.T.tocsr() @ Ab
    keep = P.indices <= np.repeat(keys // ncls, np.diff(P.indptr))
    kept = np.concatenate([[0], np.cumsum(keep)])
    upper = sp.csr_matrix((P.data[keep], P.indices[keep], kept[P.indptr]),
                          shape=P.shape).tocsc()
    j = np.repeat(np.arange(r, dtype=np.int64), np.diff(upper.indptr))
    i, k = np.divmod(keys[upper.indices], ncls)
    return j * r + i, k, upper.data


@pytest.mark.parametrize("seed", range(4))
def test_upper_products_is_bitwise_scipys(seed):
    """The set-up's products per class (sparse_map._upper_products) equal SciPy's
    product, its upper part and its conversion to columns, bit for bit: the same entries
    in the same order, the same sums over levels in ascending order, exact zeros dropped
    (a level pair with products +x and -x, as SciPy drops a sum that cancels)."""
    from crossed.model.sparse_map import _upper_products

    rng = np.random.default_rng(seed)
    ls, r, ncls = 300, 40, 7
    Aa = sp.random(ls, r, density=0.15, random_state=seed, format="csr")
    Aa.data[:] = rng.normal(size=Aa.nnz) * 10.0 ** rng.integers(-8, 8, size=Aa.nnz)
    Ab = Aa if seed % 2 else sp.random(ls, r, density=0.2, random_state=seed + 10,
                                       format="csr")
    class_of = rng.integers(0, ncls, size=ls).astype(np.int64)
    if seed == 3:  # two levels of one class whose products cancel exactly
        Aa = sp.csr_matrix(np.array([[1.0, 2.0], [1.0, -2.0]]))
        Ab, class_of, ncls = Aa, np.zeros(2, dtype=np.int64), 1
    got = _upper_products(Aa, Ab, class_of, ncls)
    want = _scipy_upper_products(Aa, Ab, class_of, ncls)
    for g, w in zip(got, want, strict=True):
        assert g.dtype.kind == w.dtype.kind
        np.testing.assert_array_equal(g, w)
    if seed == 3:
        assert len(got[0]) == 2  # (0, 0) and (1, 1); (0, 1) = 1·2 + 1·(-2) is dropped


def test_searchsorted_in_buckets_is_numpys():
    """Positions of keys j·w + i in a sorted pattern, found inside each key's bucket: the
    same as np.searchsorted (side "left") for present and absent keys, at the ends of
    buckets and of the array, and for empty buckets; a key outside the buckets is refused."""
    rng = np.random.default_rng(5)
    width, nb = 37, 50
    keys = np.unique(rng.integers(0, width * nb, size=400)).astype(np.int64)
    keys = keys[(keys // width) % 7 != 3]  # some empty buckets
    starts = np.searchsorted(keys, np.arange(nb + 1, dtype=np.int64) * width)
    query = np.concatenate([rng.choice(keys, 300), rng.integers(0, width * nb, size=300),
                            [0, width * nb - 1, keys[0], keys[-1]]]).astype(np.int64)
    columns, rows = query // width, query % width
    np.testing.assert_array_equal(
        _core.searchsorted_in_buckets(keys, starts, columns, rows, width),
        np.searchsorted(keys, query))
    one = np.zeros(1, np.int64)
    for column, row in ((nb, 0), (-1, 0), (0, width), (0, -1)):
        with pytest.raises(ValueError, match="outside the buckets"):
            _core.searchsorted_in_buckets(keys, starts, one + column, one + row, width)
    with pytest.raises(ValueError, match="one entry per query"):
        _core.searchsorted_in_buckets(keys, starts, columns, rows[:-1], width)


@pytest.mark.parametrize("qq", [1, 4, 9])
def test_class_sums_are_bincounts(qq):
    """The sums by key position·width + class·q² + entry (entry = level·q² + its entry)
    are np.bincount's, bit for bit (each key's values summed in input order), over the
    keys that occur; pairs whose key falls outside are refused."""
    rng = np.random.default_rng(qq)
    nlevels, ncls, npos, n = 300, 5, 200, 5000
    class_of = rng.integers(0, ncls, nlevels).astype(np.int64)
    position = rng.integers(0, npos, n).astype(np.int64)
    entry = rng.integers(0, nlevels * qq, n).astype(np.int64)
    value = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    width = ncls * qq
    key = position * width + class_of[entry // qq] * qq + entry % qq
    sums = np.bincount(key, weights=value, minlength=npos * width)
    want = np.flatnonzero(np.bincount(key, minlength=npos * width))
    present, values = _core.class_sums(position, entry, value, class_of, qq, width,
                                       npos * width)
    np.testing.assert_array_equal(present, want)
    np.testing.assert_array_equal(values, sums[want])
    with pytest.raises(ValueError, match="no key below size"):
        _core.class_sums(position, entry, value, class_of, qq, width, int(key.max()))
    with pytest.raises(ValueError, match="no key below size"):
        _core.class_sums(position, entry + nlevels * qq, value, class_of, qq, width,
                         npos * width)
    with pytest.raises(ValueError, match="one entry per pair"):
        _core.class_sums(position, entry[:-1], value, class_of, qq, width, npos * width)


def _numpy_entries(A: np.ndarray, q: int, last: bool) -> tuple[np.ndarray, np.ndarray]:
    """The sparse map's entries (j, i), j <= i, in NumPy (the form before the kernel)."""
    r = A.shape[1]
    i0 = r - 1 if last else 0
    stored = (A != 0).reshape(-1, q, r).any(axis=1)
    touched = np.tril((stored[:, i0:, None] & stored[:, None, :]).any(axis=0), k=i0)
    j, i = np.nonzero(touched.T)
    return j, i + i0


def _numpy_products(A: np.ndarray, q: int, class_of: np.ndarray, ncls: int, j: np.ndarray,
                    i: np.ndarray) -> np.ndarray:
    """The sparse map's rows at (j, i) in NumPy (np.add.at per class, in level order)."""
    l1, r = len(class_of), A.shape[1]
    A = A.reshape(l1, q, r)
    with np.errstate(invalid="ignore"):  # (0 · inf)
        products = A[:, :, None, i] * A[:, None, :, j]
    if not np.array_equal(class_of, np.arange(l1)):
        per_class = np.zeros((ncls,) + products.shape[1:])
        np.add.at(per_class, class_of, products)
        products = per_class
    return products.transpose(3, 1, 2, 0).reshape(len(i), -1)


@pytest.mark.parametrize("seed", range(6))
def test_map_entries_and_products_are_bitwise_numpys(seed):
    """A small design's sparse map from the dense A_1r (sparse_map._dense_products, and
    y's rows for a new response): the entries each level's nonzeros reach and W's rows at
    them, per level or summed per class in level order, bit for bit (signs of zero, NaN
    and ±inf included) the NumPy forms above."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        q, l1, r = int(rng.integers(1, 4)), int(rng.integers(1, 10)), int(rng.integers(1, 16))
        A = rng.normal(size=(l1 * q, r)) * 10.0 ** rng.integers(-6, 6, size=(l1 * q, r))
        A[rng.random(A.shape) < rng.uniform(0.0, 0.9)] = 0.0
        if rng.random() < 0.3:
            A = -np.abs(A)  # (products of zeros and negatives: -0.0)
        if rng.random() < 0.1:
            A[rng.integers(l1 * q), rng.integers(r)] = rng.choice([np.nan, np.inf, -np.inf])
        for last in (False, True):
            j, i = _core.map_entries(A, q, last)
            wj, wi = _numpy_entries(A, q, last)
            np.testing.assert_array_equal(j, wj)
            np.testing.assert_array_equal(i, wi)
        j, i = _core.map_entries(A, q, bool(rng.random() < 0.3))
        if rng.random() < 0.5:
            ncls, class_of = l1, np.arange(l1, dtype=np.int64)
        else:
            ncls = int(rng.integers(1, l1 + 1))
            class_of = rng.permutation(np.concatenate(
                [np.arange(ncls), rng.integers(0, ncls, l1 - ncls)])).astype(np.int64)
        per_level = bool(np.array_equal(class_of, np.arange(l1)))
        got = _core.map_products(A, q, class_of, ncls, per_level, j, i)
        if len(i) == 0:
            assert got.shape == (0, q * q * ncls)
            continue
        want = _numpy_products(A, q, class_of, ncls, j, i)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("csr", [False, True])
@pytest.mark.parametrize("support", [False, True])
@pytest.mark.parametrize("q1", [1, 2, 3])
def test_small_dense_is_the_steps_it_stands_for(q1, support, csr):
    """One evaluation of a small design: B_s in closed form (q₁ ≤ 2; q₁ = 3: its
    Cholesky factor in band storage), G of each class's entry, C
    scaled by the later block's θ (A_rr whole, or 0 but on the support), less W g on
    ``rows``, 1 on the later random effects' diagonal, its Cholesky factor, the log
    determinants and the pwrss, as NumPy computes them (to rounding); info -1 where a
    B_s is not positive definite and dpotrf's where C is not."""
    rng = np.random.default_rng(10 * q1 + 2 * support + csr)
    n, rr, r = 7, 3, 6  # (a later scalar block of 3 levels, 2 columns of X, y)
    t = (0.8, -0.3, 0.5) if q1 == 2 else (0.8, 0.0, 0.0)
    theta = np.array([t[0], t[1], t[2], 1.7]) if q1 == 2 else np.array([t[0], 1.7])
    T = np.array([[t[0], 0.0], [t[1], t[2]]])[:q1, :q1]
    t_index = (0, 1, 2) if q1 == 2 else (0, -1, -1)  # (t's positions in θ)
    if q1 == 3:  # (T lower, row-major positions; -1 a zero)
        theta = np.array([0.8, -0.3, 0.5, 0.2, 0.1, 0.6, 1.7])
        positions = np.array([[0, -1, -1], [1, 2, -1], [3, 4, 5]])
        T = np.where(positions >= 0, np.append(theta, 0.0)[positions], 0.0)
        t_index = tuple(positions.ravel().tolist())
    scale_index = np.array([len(theta) - 1] * rr + [-1] * (r - rr), dtype=np.int64)
    z = rng.normal(size=(n, 5, q1))
    A = np.einsum("sia,sib->sab", z, z)  # A_s per level
    a = (np.stack([A[:, 0, 0], A[:, 1, 0], A[:, 1, 1]]) if q1 == 2 else A[:, 0, 0][None]
         if q1 == 1 else A.reshape(n, -1).T)
    a = np.ascontiguousarray(a)
    src = np.array([0, 2, 3, 5, 6], dtype=np.int64)  # (W's classes: these levels)
    rows = np.array([i * r + j for i in range(r) for j in range(i, r)], dtype=np.int64)
    W = rng.uniform(0.0, 0.05, size=(len(rows), len(src) * q1 * q1))
    W[rng.random(W.shape) < 0.5] = 0.0
    M = rng.normal(size=(r, 3 * r))
    Arr = M @ M.T + r * np.eye(r)
    arr = Arr.reshape(-1)[rows] if support else np.zeros(0)
    Wk = sp.csr_matrix(W) if csr else W
    first = np.empty((q1 if q1 == 1 else 3, n) if q1 < 3 else (n * q1, q1))
    L = np.empty((r, r), order="F")

    per_level = np.zeros(0)

    def run(a=a, Arr=Arr, arr=arr, W=Wk, rows=rows, src=src, count=per_level):
        small = _core.SmallDense(a, W, rows, src, count, arr, Arr, scale_index, rr, t_index,
                                 len(theta))
        return small.factor(theta, first, L)

    info, ld, ldrx, pwrss, ratio = run()
    B = T.T @ A @ T + np.eye(q1)
    G = T @ np.linalg.inv(B) @ T.T
    g = G[src].transpose(1, 2, 0).reshape(-1)
    sc = np.append(theta, 1.0)[scale_index]
    S = np.multiply.outer(sc, sc).reshape(-1)
    C = np.zeros(r * r) if support else Arr.reshape(-1) * S
    if support:
        C[rows] = (arr - W @ g) * S[rows]
    else:
        C[rows] -= (W @ g) * S[rows]
    C = np.triu(C.reshape(r, r))
    C = C + np.triu(C, 1).T + np.diag([1.0] * rr + [0.0] * (r - rr))
    expect = np.linalg.cholesky(C)
    d = np.diag(expect)
    assert info == 0
    np.testing.assert_allclose(np.tril(L), expect, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)  # (C's strict lower triangle)
    assert ld == pytest.approx(np.linalg.slogdet(B)[1].sum() + 2 * np.log(d[:rr]).sum(),
                               rel=1e-13)
    assert ldrx == pytest.approx(2.0 * np.log(d[rr:-1]).sum(), rel=1e-13)
    assert pwrss == pytest.approx(d[-1] ** 2, rel=1e-13)
    if q1 == 2:
        np.testing.assert_allclose(first, np.stack([B[:, 0, 0], B[:, 1, 0], B[:, 1, 1]]),
                                   rtol=1e-14)
        assert ratio == pytest.approx(
            np.max(B[:, 0, 0] * B[:, 1, 1] / np.linalg.det(B)), rel=1e-13)
    elif q1 == 1:
        np.testing.assert_allclose(first[0], np.sqrt(B[:, 0, 0]), rtol=1e-15)
        assert ratio == 1.0
    else:  # (band storage: first[s q + c, k] = L_s[c + k, c], 0 past the level)
        chol = np.linalg.cholesky(B)
        band = first.reshape(n, q1, q1)
        for c in range(q1):
            for k in range(q1):
                want = chol[:, c + k, c] if c + k < q1 else 0.0
                np.testing.assert_allclose(band[:, c, k], want, rtol=1e-13, atol=1e-15)
        assert ratio == 1.0
    # per class with sizes: the first block's log determinant weighted by them (no W)
    count = np.arange(1.0, n + 1.0)
    _, ld_w, *_ = run(W=np.zeros((0, 0)), rows=rows[:0], src=src[:0], count=count,
                      arr=arr[:0])
    d_w = np.diag(L)
    assert ld_w == pytest.approx(np.log(np.linalg.det(B)) @ count
                                 + 2 * np.log(d_w[:rr]).sum(), rel=1e-13)
    # failures: a B_s not positive definite (-1), C not positive definite (dpotrf's k)
    bad = a.copy()
    bad[-1, 3] = -50.0
    assert run(a=bad)[0] == -1
    if not support:
        not_pd = Arr.copy()
        not_pd[4, 4] = -1e3
        assert run(Arr=not_pd)[0] == 5


def test_small_dense_refuses_a_first_block_it_cannot_read():
    """``a`` has one row (q₁ = 1), three (q₁ = 2) or q₁² (q₁ ≥ 3), with as many θ positions
    of T (three for q₁ ≤ 2): anything else is refused, not read past its end."""
    r = 2
    args = (np.zeros((0, 0)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
            np.zeros(0), np.zeros(0), np.eye(r), np.full(r, -1, dtype=np.int64), 0)
    for rows, t_index in ((5, (0,) * 5), (9, (0, 1, 2)), (4, (0, -1, -1, 1))):
        with pytest.raises(ValueError, match="q²"):
            _core.SmallDense(np.ones((rows, 2)), *args, t_index, 3)
    small = _core.SmallDense(np.ones((16, 2)), *args, (0,) * 16, 3)
    assert small.q == 4 and small.first_shape == (8, 4)
    with pytest.raises(ValueError, match="first is"):
        small.factor(np.ones(3), np.empty((4, 8)), np.empty((r, r), order="F"))



def test_small_dense_refuses_groups_it_cannot_read():
    """The groups' update (a first block of q ≥ 3 columns) takes pointers into its levels
    and ascending columns and one row of A_1r per (level, column): levels or columns out of
    range, unsorted columns, pointers that do not fit, rows of another count, a first
    block of fewer columns, or a sparse map beside it are refused."""
    r, q = 4, 3
    i64 = np.int64
    args = (np.zeros((0, 0)), np.zeros(0, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0),
            np.zeros(0), np.eye(r), np.full(r, -1, dtype=i64), 1)
    a = np.ones((q * q, 2))

    def build(ptr, levels, cptr, cols, nvals, a=a, extra=()):
        groups = (np.array(ptr, dtype=i64), np.array(levels, dtype=i64),
                  np.array(cptr, dtype=i64), np.array(cols, dtype=i64), np.ones((nvals, q)))
        t_index = (0,) * len(a) if len(a) > 3 else (0, -1, -1)
        return _core.SmallDense(a, *(extra or args), t_index, 3, groups=groups)

    small = build([0, 2], [0, 1], [0, 3], [0, 2, 3], 6)  # (two levels, three columns)
    assert small.first_shape == (6, 3)
    for bad in (([0, 2], [0, 5], [0, 3], [0, 2, 3], 6), ([0, 2], [0, 1], [0, 3], [0, 3, 2], 6),
                ([0, 2], [0, 1], [0, 3], [0, 2, 9], 6), ([0, 3], [0, 1], [0, 3], [0, 2, 3], 6),
                ([0, 2], [0, 1], [0, 2], [0, 2, 3], 6), ([0, 2], [0, 1], [0, 3], [0, 2, 3], 5)):
        with pytest.raises(ValueError, match="groups"):
            build(*bad)
    with pytest.raises(ValueError, match="groups"):  # (q₁ = 1)
        build([0, 2], [0, 1], [0, 3], [0, 2, 3], 6, a=np.ones((1, 2)))
    with pytest.raises(ValueError, match="no sparse map"):
        build([0, 2], [0, 1], [0, 3], [0, 2, 3], 6,
              extra=(np.ones((1, 9)), np.array([0], dtype=i64), np.array([0], dtype=i64),
                     *args[3:]))


def test_small_dense_pickles_as_its_arrays():
    """A fit's PLS problem travels to simulation workers (joblib, Dask): its SmallDense is
    pickled as its arrays and gives the same evaluation."""
    import pickle

    import crossed as cx
    from crossed.model.pls import PLS

    design = cx.lmer("Reaction ~ Days + (Days | Subject)",
                     cx.load_dataset("sleepstudy")).design
    pls = PLS(design.random.blocks, design.X, design.y)
    small = pls._small
    assert small is not None
    copy = pickle.loads(pickle.dumps(small))
    theta = np.array([0.9, 0.1, 0.2])
    outs = []
    for s in (small, copy):
        first, L = np.empty((3, s.nentries)), np.empty((pls.r, pls.r), order="F")
        outs.append((s.factor(theta, first, L), first, np.tril(L)))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    np.testing.assert_array_equal(outs[0][2], outs[1][2])


def _random_hessians(seed):
    """Symmetric matrices of 1 to 8 parameters: positive definite, indefinite, singular."""
    rng = np.random.default_rng(seed)
    for m in (1, 2, 3, 5, 8):
        for shift in (1.0, 0.0, -0.5):
            A = rng.normal(size=(m, m))
            H = A @ A.T + shift * np.eye(m)
            if shift == 0.0 and m > 1:
                H[:, -1] = H[:, 0]  # (a singular one)
                H[-1, :] = H[0, :]
            yield H, rng.normal(size=m)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_derivative_check_is_lme4s_numbers(seed):
    """The scaled gradient solve(chol(H), g), max min(|s|, |g|) and its first index, and
    the eigenvalues of (H + Hᵀ)/2 in decreasing order, as NumPy computes them; a matrix
    that is not positive definite reports no scaled gradient."""
    for H, g in _random_hessians(seed):
        ev = np.empty(len(g))
        scaled, maxmin, comp = _core.derivative_check(g, H, ev)
        np.testing.assert_allclose(ev, np.linalg.eigvalsh(0.5 * (H + H.T))[::-1],
                                   rtol=1e-10, atol=1e-12)
        try:
            s = np.linalg.solve(np.linalg.cholesky(H).T, g)
        except np.linalg.LinAlgError:
            assert not scaled
            continue
        v = np.minimum(np.abs(s), np.abs(g))
        assert scaled
        assert maxmin == pytest.approx(v.max(), rel=1e-10)
        assert comp == int(np.argmax(v))


@pytest.mark.parametrize("seed", [0, 1])
def test_newton_probe_is_the_projected_step_and_its_predicted_decrease(seed):
    """point = max(θ − H⁻¹g, lower) on the coordinates given (θ elsewhere), and the
    decrease −(gᵀs + ½ sᵀHs) of s = point − θ there, as NumPy computes them; NaN and
    the point untouched where H is not positive definite."""
    rng = np.random.default_rng(100 + seed)
    for H, g in _random_hessians(seed):
        m = len(g)
        k = m + 2
        coords = np.sort(rng.choice(k, size=m, replace=False)).astype(np.int64)
        theta = rng.normal(size=k)
        lower = np.where(rng.random(k) < 0.5, 0.0, -np.inf)
        point = np.full(k, 7.0)
        predicted = _core.newton_probe(g, H, coords, theta, lower, point)
        try:
            np.linalg.cholesky(H)
        except np.linalg.LinAlgError:
            assert np.isnan(predicted)
            np.testing.assert_array_equal(point, 7.0)
            continue
        if np.linalg.cond(H) >= 1e8:  # (a numerically singular one factors, to rounding)
            continue
        expected = theta.copy()
        expected[coords] -= np.linalg.solve(H, g)
        expected = np.maximum(expected, lower)
        np.testing.assert_allclose(point, expected, rtol=1e-7, atol=1e-12)
        s = point[coords] - theta[coords]
        assert predicted == pytest.approx(-(g @ s + 0.5 * s @ H @ s), rel=1e-9, abs=1e-12)


def test_newton_probe_refuses_shapes_that_do_not_fit():
    H, g = np.eye(2), np.ones(2)
    with pytest.raises(ValueError, match="shapes"):
        _core.newton_probe(g, H, np.array([0, 1]), np.zeros(3), np.zeros(2), np.empty(3))
    with pytest.raises(ValueError, match="outside theta"):
        _core.newton_probe(g, H, np.array([0, 3]), np.zeros(3), np.zeros(3), np.empty(3))
