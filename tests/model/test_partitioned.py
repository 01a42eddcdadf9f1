"""The engine-free part of fits on partitioned data (crossed.model.partitioned): the
levels pass and its sums, the model's structure without rows, the sums pass on pandas
partitions, and the errors they raise. (Dask: tests/engines/test_dask_fit.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed.design.frame import DataError
from crossed.formula import parse
from crossed.model.partitioned import (
    RowsNotHeldError,
    levels_of,
    response_centre,
    rowless_design,
    sums_of,
    theta_start_of,
    tree_sum,
)
from crossed.model.pls import PLS

FORMULA = "score ~ system + (1 | item) + (1 | system:dataset)"


def table(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    system = rng.choice(["b", "a", "c10", "c9"], n)
    dataset = rng.choice(["x", "y", "z"], n)
    item = rng.integers(0, 60, n)
    score = 10 + rng.normal(0, 1, 60)[item] + rng.normal(0, 1, n) + (system == "a")
    return pd.DataFrame({"system": system, "dataset": dataset, "item": item, "score": score})


def passes(data: pd.DataFrame, k: int):
    spec = parse(FORMULA)
    parts = np.array_split(np.arange(len(data)), k)
    frames = [data.iloc[p] for p in parts]
    levels = tree_sum([levels_of(spec, f, index=i) for i, f in enumerate(frames)],
                      lambda a, b: a + b)
    design = rowless_design(spec, levels, k)
    centre = response_centre(design, levels)
    sums = tree_sum([sums_of(design, f, centre, i) for i, f in enumerate(frames)],
                    lambda a, b: a + b)
    return design, sums


def test_structure_is_the_in_memory_design_s():
    data = table()
    mem = cx.lmer(FORMULA, data)
    design, sums = passes(data, 4)
    assert design.fixed.names == mem.design.fixed.names
    assert design.levels == mem.design.levels  # (R's order: c10 before c9)
    for a, b in zip(design.random.blocks, mem.design.random.blocks, strict=True):
        assert a.group == b.group and a.levels == b.levels and a.keys == b.keys
    np.testing.assert_array_equal(design.random.theta_lower, mem.design.random.theta_lower)
    assert design.n == mem.nobs
    products = sums.products
    assert products.n == len(data)
    # lme4's start (moment estimates), from the products alone
    np.testing.assert_allclose(theta_start_of(design, products),
                               mem.design.random.theta_start(mem.design.y), rtol=1e-12)
    pls = PLS.from_products(products, design.random.blocks)
    assert abs(pls.objective(mem.theta, True) - mem.deviance) < 1e-9 * abs(mem.deviance)


def test_tree_sum_is_a_fixed_tree_in_partition_order():
    assert tree_sum(["a", "b", "c", "d", "e"], lambda x, y: f"({x}+{y})") == \
        "(((a+b)+(c+d))+e)"
    with pytest.raises(ValueError, match="no partitions"):
        tree_sum([], lambda x, y: x)


def test_a_level_the_levels_pass_did_not_see_names_partition_factor_and_level():
    data = table()
    spec = parse(FORMULA)
    levels = levels_of(spec, data)
    design = rowless_design(spec, levels, 1)
    centre = response_centre(design, levels)
    new = data.head(20).copy()
    new.loc[new.index[3], "item"] = 999
    with pytest.raises(DataError, match=r"partition 7: level '999' of grouping factor "
                                        r"'item' was not seen by the levels pass"):
        sums_of(design, new, centre, 7)
    new = data.head(20).copy()
    new.loc[new.index[0], "system"] = "zz"
    with pytest.raises(DataError, match=r"partition 2: .*system.*zz"):
        sums_of(design, new, centre, 2)


def test_empty_partitions_add_nothing():
    data = table()
    design, sums = passes(data, 3)
    spec = parse(FORMULA)
    levels = levels_of(spec, data)
    centre = response_centre(design, levels)
    empty = sums_of(design, data.iloc[:0], centre, 0)
    assert empty.products is None
    total = empty + sums
    assert total.products is sums.products


def test_rowless_design_refuses_its_rows():
    design, _ = passes(table(), 2)
    for read in (lambda: design.X, lambda: design.y, lambda: design.subset([0])):
        with pytest.raises(RowsNotHeldError, match="ddf.compute"):
            read()


def test_transforms_learnt_from_the_rows_are_refused():
    data = table().assign(x=np.linspace(0, 1, 3000))
    spec = parse("score ~ scale(x) + (1 | item)")
    with pytest.raises(DataError, match="transform learnt from the rows"):
        rowless_design(spec, levels_of(spec, data), 1)


# ------------------------------------------------- PIRLS on partitions holding whole levels
def binary_table(n: int = 4000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    system = rng.choice(["s1", "s2", "s3"], n)
    item = rng.integers(0, 80, n)
    eta = 0.2 + 0.5 * (system == "s2") + rng.normal(0, 1.0, 80)[item]
    correct = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return pd.DataFrame({"system": system, "item": item, "correct": correct})


def by_item(data: pd.DataFrame, k: int) -> list[pd.DataFrame]:
    """``k`` partitions, each holding every row of its items (rows shuffled within)."""
    return [data[data["item"] % k == j].sample(frac=1.0, random_state=j) for j in range(k)]


def local_setup(data: pd.DataFrame, k: int):
    from crossed.model.glmm.family import binomial
    from crossed.model.partitioned import glmm_partition

    spec = parse("correct ~ system + (1 | item)")
    frames = by_item(data, k)
    levels = tree_sum([levels_of(spec, f, index=i) for i, f in enumerate(frames)],
                      lambda a, b: a + b)
    design = rowless_design(spec, levels, k, glmm=True)
    family = binomial()
    parts = [glmm_partition(design, f, family, i) for i, f in enumerate(frames)]
    return family, parts


@pytest.mark.parametrize("k", [1, 3])
def test_local_pirls_gives_the_in_memory_pirls(k):
    """At fixed (θ, β), PIRLS on partitions that hold whole items, summed, is the
    in-memory PIRLS: at the iteration where that stops, the same modes, log|L|²,
    deviance and ‖u‖² (to rounding: the rows are summed in another order)."""
    from crossed.model.glmm.pirls import GlmmProblem
    from crossed.model.partitioned import LocalPirlsSums, local_modes, local_pirls

    data = binary_table()
    family, parts = local_setup(data, k)
    theta, beta = np.array([0.8]), np.array([0.1, 0.4, -0.2])
    fit = cx.glmer("correct ~ system + (1 | item)", data)
    prob = GlmmProblem(fit.design, fit.family)
    s = prob.pirls(theta, beta, joint=False)
    sums = tree_sum([local_pirls(p, None, family, theta, beta, 100) for p in parts],
                    lambda a, b: a + b)
    assert isinstance(sums, LocalPirlsSums) and s.iterations <= len(sums) <= 12
    assert sums.step[-1] <= 1e-13 * (1 + sums.size[-1])  # ran until η settled
    i = s.iterations - 1
    np.testing.assert_allclose(sums.uu[i], s.u @ s.u, rtol=1e-12)
    np.testing.assert_allclose(sums.ld[i], s.ldL2, rtol=1e-12)
    np.testing.assert_allclose(sums.resdev[i], prob.resdev(s.mu), rtol=1e-12)
    u = np.zeros(prob.q)
    for p in parts:
        _, levels, values = local_modes(p, None, family, theta, beta, s.iterations)
        u[levels] = values
    np.testing.assert_allclose(u, s.u, rtol=1e-11, atol=1e-14)


def test_local_pirls_sums_carry_a_settled_partition_on():
    from crossed.model.partitioned import LocalPirlsSums

    a = LocalPirlsSums(*(np.array(v, dtype=float) for v in
                         ([5, 4], [1, 1], [2, 2], [1, 1e-14], [3, 3])))
    b = LocalPirlsSums(*(np.array(v, dtype=float) for v in
                         ([7, 6, 5.5], [1, 2, 2], [0, 1, 1], [2, 1, 1e-15], [1, 4, 4])))
    total = a + b
    np.testing.assert_array_equal(total.resdev, [12, 10, 9.5])
    np.testing.assert_array_equal(total.step, [2, 1, 1e-14])
    np.testing.assert_array_equal(total.size, [3, 4, 4])
    empty = LocalPirlsSums(*(np.zeros(0) for _ in range(5)))
    assert (empty + a) is a and (a + empty) is a
