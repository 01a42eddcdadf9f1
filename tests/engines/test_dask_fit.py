"""LMM fits on a Dask DataFrame / Parquet files (crossed.engines.dask_fit) against the
in-memory fit of the same rows, and against R (lme4 1.1-31 + lmerTest + emmeans + performance)
through the ner_crossed reference case.

The partitioned path sums the same cross-products in another order (a tree over the
partitions, another centre b of the response), so it agrees with the in-memory fit up to
rounding: the criterion to 1e-10 relative, the estimates to 1e-8 (the optimiser starts at
the same θ — lme4's moment estimates, computed from the products — and takes the same
steps). Against R the tolerances are those of the in-memory fit against R
(tests/engines/test_agreement.py), not tighter.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import crossed as cx  # noqa: E402
from crossed.design.frame import DataError  # noqa: E402
from crossed.model.partitioned import RowlessDesign, RowsNotHeldError  # noqa: E402

FORMULA = "score ~ system + (1 | item) + (1 | system:dataset)"


def make_scores(n: int = 20_000, seed: int = 1) -> pd.DataFrame:
    """Item-level scores: 6 systems x 5 datasets, 400 items, ~20k rows."""
    rng = np.random.default_rng(seed)
    systems = [f"sys{i}" for i in range(6)]
    datasets = [f"data{i}" for i in range(5)]
    system = rng.choice(systems, n)
    dataset = rng.choice(datasets, n)
    item = rng.integers(0, 400, n)
    item_effect = rng.normal(0, 1.0, 400)
    cell = {(s, d): rng.normal(0, 0.5) for s in systems for d in datasets}
    score = (50 + 0.3 * np.array([systems.index(s) for s in system]) + item_effect[item]
             + np.array([cell[(s, d)] for s, d in zip(system, dataset, strict=True)])
             + rng.normal(0, 1.0, n))
    return pd.DataFrame({"system": system, "dataset": dataset, "item": item, "score": score})


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def scores() -> pd.DataFrame:
    return make_scores()


@pytest.fixture(scope="module")
def in_memory(scores):
    return cx.lmer(FORMULA, scores)


@pytest.fixture(scope="module")
def on_dask(scores, client):
    return cx.lmer(FORMULA, dd.from_pandas(scores, npartitions=5), client=client)


def assert_same_fit(a, b, crit: float = 1e-10, est: float = 1e-8) -> None:
    assert abs(a.deviance - b.deviance) <= crit * abs(a.deviance)
    np.testing.assert_allclose(b.beta, a.beta, rtol=est, atol=est)
    np.testing.assert_allclose(b.theta, a.theta, rtol=est, atol=est)
    assert abs(b.sigma - a.sigma) <= est * a.sigma
    assert b.nobs == a.nobs
    assert b.fixef_names == a.fixef_names


def test_dask_fit_equals_the_in_memory_fit(in_memory, on_dask):
    assert type(on_dask) is type(in_memory) is cx.LmerFit
    assert isinstance(on_dask.design, RowlessDesign)
    assert on_dask.design.n_partitions == 5
    assert_same_fit(in_memory, on_dask)
    assert on_dask.ngroups == in_memory.ngroups == {"item": 400, "system:dataset": 30}


def test_parquet_glob(scores, in_memory, client, tmp_path):
    for i, part in enumerate(np.array_split(np.arange(len(scores)), 4)):
        scores.iloc[part].to_parquet(tmp_path / f"part-{i}.parquet")
    fit = cx.lmer(FORMULA, str(tmp_path / "*.parquet"), client=client)
    assert_same_fit(in_memory, fit)
    assert fit.design.n_partitions == 4
    assert fit.data_name == str(tmp_path / "*.parquet")


def test_refits_are_bitwise_equal_and_partitionings_agree(scores, client, on_dask):
    again = cx.lmer(FORMULA, dd.from_pandas(scores, npartitions=5), client=client)
    assert again.deviance == on_dask.deviance
    assert np.array_equal(again.beta, on_dask.beta)
    assert np.array_equal(again.theta, on_dask.theta)
    other = cx.lmer(FORMULA, dd.from_pandas(scores, npartitions=3), client=client)
    assert_same_fit(on_dask, other)


def test_missing_rows_are_dropped_and_reported_as_in_memory(scores, client):
    data = scores.copy()
    data.loc[data.index[::97], "score"] = np.nan
    data["item"] = data["item"].astype("Int64")
    data.loc[data.index[5::389], "item"] = pd.NA
    with pytest.warns(UserWarning, match="rows dropped for missing values") as mem_w:
        mem = cx.lmer(FORMULA, data)
    with pytest.warns(UserWarning, match="rows dropped for missing values") as dask_w:
        fit = cx.lmer(FORMULA, dd.from_pandas(data, npartitions=4), client=client)
    said = [str(w.message) for w in mem_w if "dropped" in str(w.message)]
    assert said == [str(w.message) for w in dask_w if "dropped" in str(w.message)]
    assert "score (207)" in said[0] and "item (52)" in said[0]
    assert fit.n_dropped == mem.n_dropped == int(data[["score", "item"]].isna().any(axis=1).sum())
    assert_same_fit(mem, fit)


def test_na_action_raise_names_the_partition_and_column(scores, client):
    data = scores.copy()
    data.loc[data.index[-1], "score"] = np.nan
    with pytest.raises(DataError, match=r"partition 3: 1 rows have missing values in: score"):
        cx.lmer(FORMULA, dd.from_pandas(data, npartitions=4), client=client,
                na_action="raise")


def test_row_level_methods_are_refused_naming_the_alternative(on_dask):
    for method in (on_dask.fitted, on_dask.residuals, on_dask.hatvalues):
        with pytest.raises(RowsNotHeldError, match=r"cx\.lmer\(formula, ddf\.compute\(\)\)"):
            method()
    with pytest.raises(RowsNotHeldError, match="fit.predict\\(newdata=partition\\)"):
        on_dask.check()
    with pytest.raises(RowsNotHeldError, match="use ddf='satterthwaite'"):
        on_dask.coef_table(ddf="kenward-roger")


def test_inference_from_the_reduced_system(in_memory, on_dask, scores):
    # Satterthwaite's df come from finite differences of the criterion at the optimum:
    # 1e-8 apart in θ gives df a few 1e-7 apart (relative)
    a, b = in_memory.coef_table(), on_dask.coef_table()
    assert list(a["term"]) == list(b["term"])
    np.testing.assert_allclose(b["estimate"], a["estimate"], rtol=1e-8)
    np.testing.assert_allclose(b["std_error"], a["std_error"], rtol=1e-7)
    np.testing.assert_allclose(b["df"], a["df"], rtol=1e-5)
    for kind in (1, 2, 3):
        x, y = in_memory.anova(type=kind), on_dask.anova(type=kind)
        np.testing.assert_allclose(y["statistic"], x["statistic"], rtol=1e-6)
        np.testing.assert_allclose(y["den_df"], x["den_df"], rtol=1e-5)
    em_a, em_b = in_memory.emmeans("system").table(), on_dask.emmeans("system").table()
    np.testing.assert_allclose(em_b["estimate"], em_a["estimate"], rtol=1e-8)
    np.testing.assert_allclose(em_b["std_error"], em_a["std_error"], rtol=1e-7)
    ra, rb = in_memory.ranef(), on_dask.ranef()
    assert ra[["group", "level", "term"]].equals(rb[["group", "level", "term"]])
    np.testing.assert_allclose(rb["estimate"], ra["estimate"], atol=1e-7)
    np.testing.assert_allclose(rb["cond_sd"], ra["cond_sd"], rtol=1e-7)
    new = scores.head(200)
    np.testing.assert_allclose(on_dask.predict(newdata=new), in_memory.predict(newdata=new),
                               rtol=1e-9)
    np.testing.assert_allclose(on_dask.r2().to_numpy(dtype=float),
                               in_memory.r2().to_numpy(dtype=float), rtol=1e-7)
    assert "not computed" in str(on_dask.summary())


def test_likelihood_ratio_test_between_dask_fits(scores, client, in_memory):
    ddf = dd.from_pandas(scores, npartitions=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cx.lmer(FORMULA, ddf, reml=False, client=client)
        null = cx.lmer("score ~ 1 + (1 | item) + (1 | system:dataset)", ddf, reml=False,
                       client=client)
        mem = cx.compare(cx.lmer(FORMULA, scores, reml=False),
                         cx.lmer("score ~ 1 + (1 | item) + (1 | system:dataset)", scores,
                                 reml=False))
    out = cx.compare(full, null)
    np.testing.assert_allclose(out["statistic"].to_numpy(dtype=float),
                               mem["statistic"].to_numpy(dtype=float), rtol=1e-7)


def test_client_is_refused_for_in_memory_data(scores):
    with pytest.raises(TypeError, match="client= is for a Dask DataFrame"):
        cx.lmer(FORMULA, scores, client="tcp://127.0.0.1:1")


def test_weights_are_refused_on_partitioned_data(scores, client):
    with pytest.raises(DataError, match="weights= and offsets are not supported"):
        cx.lmer(FORMULA, dd.from_pandas(scores, npartitions=2), client=client,
                weights="score")


def test_ner_case_against_r(client):
    """The ner_crossed reference case (tools/r_reference.R: lme4::lmer + lmerTest +
    emmeans + performance::r2_nakagawa on ner_like.csv) fitted from 4 partitions."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reference import load_case

    case = load_case("ner_crossed")
    fit = cx.lmer(case.formula, dd.from_pandas(case.data, npartitions=4), client=client,
                  reml=case.reml, reference=case.reference)
    r = case.r
    assert fit.nobs == r["nobs"]
    # lme4's optimiser stops within ~1e-6 of the optimum in θ, and where BOBYQA stops
    # moves with the BLAS kernel (θ 1.7e-7 apart under Haswell, σ 5e-8 under SkylakeX):
    # the tolerances follow from θ's, under both kernels (the identity with the
    # in-memory fit, 1e-10 / 1e-8, is the tests above)
    assert abs(fit.deviance - r["deviance"]) <= 1e-10 * abs(r["deviance"])
    np.testing.assert_allclose(fit.theta, r["theta"], rtol=1e-5)
    np.testing.assert_allclose(fit.sigma, r["sigma"], rtol=1e-6)
    coefs = fit.coef_table()
    est = [row["Estimate"] for row in r["coef_satterthwaite"]]
    df = [row["df"] for row in r["coef_satterthwaite"]]
    np.testing.assert_allclose(coefs["estimate"], est, rtol=1e-6)
    np.testing.assert_allclose(coefs["df"], df, rtol=1e-4)
    anova = fit.anova()
    np.testing.assert_allclose(anova["statistic"], [r["anova3_satterthwaite"][0]["F value"]],
                               rtol=1e-5)
    emm = fit.emmeans("model").table()
    np.testing.assert_allclose(emm["estimate"],
                               [row["emmean"] for row in r["emmeans"][0]["emm_satterthwaite"]],
                               rtol=1e-6)
    r2 = fit.r2()
    np.testing.assert_allclose(r2[["conditional", "marginal"]].to_numpy(dtype=float).ravel(),
                               [r["r2"]["conditional"], r["r2"]["marginal"]], rtol=1e-5)


# ---------------------------------------------------------------------------- GLMMs
GLMM_FORMULA = "correct ~ system + (1 | item)"


def make_correct(n: int = 20_000, seed: int = 2) -> pd.DataFrame:
    """Binary item-level outcomes: 6 systems, 400 items, ~20k rows."""
    rng = np.random.default_rng(seed)
    systems = [f"sys{i}" for i in range(6)]
    system = rng.choice(systems, n)
    item = rng.integers(0, 400, n)
    eta = (0.3 + 0.2 * np.array([systems.index(s) for s in system])
           + rng.normal(0, 1.0, 400)[item])
    correct = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return pd.DataFrame({"system": system, "item": item, "correct": correct})


@pytest.fixture(scope="module")
def correct() -> pd.DataFrame:
    return make_correct()


def test_glmm_dask_fit_equals_the_in_memory_fit(correct, client):
    """With PIRLS run to the mode (pirls="exact") the Laplace criterion is a smooth
    function of (θ, β) and both paths stop at the same point: criterion 1e-10 relative,
    estimates 1e-8. (The in-memory fit on permuted rows moves β by 4e-9.)"""
    control = cx.LmerControl(pirls="exact")
    mem = cx.glmer(GLMM_FORMULA, correct, control=control)
    fit = cx.glmer(GLMM_FORMULA, dd.from_pandas(correct, npartitions=4), client=client,
                   control=control)
    assert type(fit) is type(mem) is cx.GlmerFit
    assert abs(fit.criterion - mem.criterion) <= 1e-10 * abs(mem.criterion)
    assert abs(fit.deviance - mem.deviance) <= 1e-9 * abs(mem.deviance)
    np.testing.assert_allclose(fit.beta, mem.beta, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(fit.theta, mem.theta, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(np.sqrt(np.diag(fit.vcov_beta)),
                               np.sqrt(np.diag(mem.vcov_beta)), rtol=1e-7)
    ra, rb = mem.ranef(), fit.ranef()
    np.testing.assert_allclose(rb["estimate"], ra["estimate"], atol=1e-7)
    np.testing.assert_allclose(rb["cond_sd"], ra["cond_sd"], rtol=1e-6)
    new = correct.head(100)
    np.testing.assert_allclose(fit.predict(newdata=new, type="response"),
                               mem.predict(newdata=new, type="response"), atol=1e-8)
    with pytest.raises(RowsNotHeldError, match=r"cx\.glmer\(formula, ddf\.compute\(\)\)"):
        fit.fitted()
    with pytest.raises(RowsNotHeldError):
        fit.residuals()


def test_glmm_with_lme4_s_pirls_rule(correct, client):
    """lme4's PIRLS stopping rule (the default) leaves the criterion a step function of
    the iteration count, at the 1e-9 level; the optimiser's stop moves with it, so the
    estimates agree to 1e-6 (the criterion to 1e-10)."""
    mem = cx.glmer(GLMM_FORMULA, correct)
    fit = cx.glmer(GLMM_FORMULA, dd.from_pandas(correct, npartitions=4), client=client)
    assert abs(fit.criterion - mem.criterion) <= 1e-10 * abs(mem.criterion)
    np.testing.assert_allclose(fit.beta, mem.beta, atol=1e-6)
    np.testing.assert_allclose(fit.theta, mem.theta, atol=1e-6)


def test_glmm_response_must_be_binary(correct, client):
    data = correct.assign(correct=correct["correct"] * 2)
    with pytest.raises(DataError, match=r"partition \d: binomial response 'correct' has "
                                        r"values other than 0 and 1"):
        cx.glmer(GLMM_FORMULA, dd.from_pandas(data, npartitions=2), client=client)


def test_random_slopes_and_a_slope_far_from_zero(client):
    """A correlated random slope fits as in memory; one far from zero (which the native
    optimiser centres, from the rows) is refused on partitioned data, not fitted
    differently."""
    rng = np.random.default_rng(4)
    n = 5000
    data = pd.DataFrame({"system": rng.choice(["a", "b", "c"], n),
                         "item": rng.integers(0, 80, n), "x": rng.normal(0, 1, n)})
    data["y"] = (1 + rng.normal(0, 1, 80)[data.item]
                 + (0.5 + rng.normal(0, 0.3, 80)[data.item]) * data.x + rng.normal(0, 1, n))
    formula = "y ~ system + x + (1 + x | item)"
    mem = cx.lmer(formula, data)
    fit = cx.lmer(formula, dd.from_pandas(data, npartitions=3), client=client)
    assert_same_fit(mem, fit)
    np.testing.assert_allclose(fit.emmeans("system").table()["estimate"],
                               mem.emmeans("system").table()["estimate"], rtol=1e-10)
    far = data.assign(x=data.x + 100)
    with pytest.raises(DataError, match="needs the optimiser's reparametrisation"):
        cx.lmer(formula, dd.from_pandas(far, npartitions=3), client=client)


def test_default_client_is_a_local_cluster_closed_afterwards():
    from crossed.engines.dask_fit import dask_client

    with dask_client(None) as c:
        cluster = c.cluster
        assert c.status == "running"
        assert len(c.scheduler_info()["workers"]) >= 1
    assert c.status == "closed"
    assert cluster.status.name == "closed"
    with pytest.raises(TypeError, match="client must be a distributed.Client"):
        with dask_client(3):
            pass


def test_anova_with_an_interaction(client):
    """Type III hypotheses of a model with an interaction are built on made-up rows
    spanning the model's columns (they depend on the span only); Types I and II on the
    summed XᵀX: all equal the in-memory tables."""
    rng = np.random.default_rng(4)
    n = 5000
    data = pd.DataFrame({"system": rng.choice(["a", "b", "c"], n), "g": rng.choice(["u", "v"], n),
                         "item": rng.integers(0, 80, n), "x": rng.normal(0, 1, n)})
    data["y"] = (1 + rng.normal(0, 1, 80)[data.item] + 0.5 * data.x
                 + (data.system == "b") * (data.g == "v") + rng.normal(0, 1, n))
    formula = "y ~ system * g + x + (1 | item)"
    mem = cx.lmer(formula, data)
    fit = cx.lmer(formula, dd.from_pandas(data, npartitions=3), client=client)
    for kind in (1, 2, 3):
        a, b = mem.anova(type=kind), fit.anova(type=kind)
        assert list(a["term"]) == list(b["term"])
        np.testing.assert_allclose(b["statistic"], a["statistic"], rtol=1e-9)
        np.testing.assert_allclose(b["den_df"], a["den_df"], rtol=1e-6)


def test_glmm_local_pirls_is_one_pass_per_evaluation_and_bitwise_repeatable(correct, client):
    """With one scalar random-effects term the partitions are regrouped by item and every
    Laplace evaluation is one pass; the shuffle's row order does not reach the fit (two
    fits are bitwise equal)."""
    data = dd.from_pandas(correct, npartitions=4)
    a = cx.glmer(GLMM_FORMULA, data, client=client)
    b = cx.glmer(GLMM_FORMULA, data, client=client)
    assert a.criterion == b.criterion
    np.testing.assert_array_equal(a.beta, b.beta)
    np.testing.assert_array_equal(a.theta, b.theta)
    passes = dict(a.memo("passes", lambda: ()))["pirls"]
    stage2 = a.engine_info["feval"]
    assert passes < stage2 + 20 * (a.engine_info["feval_stage1"] + 1)


def test_a_worker_lost_mid_fit_changes_nothing(correct):
    """A worker process killed during the PIRLS passes: Dask recomputes what it held (the
    encoded partitions, the linear predictors kept beside them) from their lineage and
    the fit is the one without the fault."""
    import os
    import signal

    from crossed.engines.dask_fit import DaskSource, local_cluster
    from crossed.engines.partitioned import fit_glmer_partitioned
    from crossed.formula import parse
    from crossed.model.glmm.family import binomial

    spec = parse(GLMM_FORMULA)
    with local_cluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as lc, \
            distributed.Client(lc) as c:
        frame = dd.from_pandas(correct, npartitions=4)
        ref = fit_glmer_partitioned(spec, DaskSource(frame, c), binomial())
        assert dict(ref.memo("passes", lambda: ()))["pirls"] > 60
        pids = sorted(c.run(os.getpid).values())
        killed: list[int] = []

        def kill_one(name: str, number: int, seconds: float | None) -> None:
            if not killed and name.startswith("PIRLS (pass"):  # (at pass 50)
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_glmer_partitioned(spec, DaskSource(frame, c), binomial(),
                                        progress=kill_one)
        assert killed and pids[0] not in c.run(os.getpid).values()  # (restarted)
    assert fit.criterion == ref.criterion
    np.testing.assert_array_equal(fit.beta, ref.beta)
    np.testing.assert_array_equal(fit.theta, ref.theta)
