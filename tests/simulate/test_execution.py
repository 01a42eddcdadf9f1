"""Identical seeds give identical results with n_jobs=1, n_jobs=2 and a Dask cluster."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed import simulate as cs
from crossed.simulate.execution import run_tasks, show_progress, spawn_seeds

RM = {"subject": "model", "within": ["language", "task", "mode"], "effect": "language"}


def _draw(shared, item):
    i, ss = item
    return shared + i + float(np.random.default_rng(ss).random())


def test_seeds_are_independent_of_chunking():
    items = list(enumerate(spawn_seeds(7, 20)))
    a = run_tasks(_draw, 1.0, items, n_jobs=1)
    b = run_tasks(_draw, 1.0, items, n_jobs=1, chunk_size=3)
    assert a == b
    assert a != run_tasks(_draw, 1.0, list(enumerate(spawn_seeds(8, 20))), n_jobs=1)


def test_generator_seed_is_reproducible():
    a = spawn_seeds(np.random.default_rng(3), 2)[1].generate_state(2)
    b = spawn_seeds(np.random.default_rng(3), 2)[1].generate_state(2)
    np.testing.assert_array_equal(a, b)


def test_progress_off_when_not_interactive():
    assert show_progress(None) is False  # pytest captures stderr
    assert show_progress(True) is True


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend"):
        run_tasks(_draw, 0.0, [(0, spawn_seeds(1, 1)[0])], backend="ray")


def _runs(kwargs_list, call):
    return [call(**kw) for kw in kwargs_list]


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_same_results_joblib_and_dask(truth, exist_fit, dask_client):
    backends = [dict(n_jobs=1), dict(n_jobs=2), dict(backend="dask", scheduler=dask_client)]
    boots = [cx.bootstrap(truth, "sdcor", nsim=12, seed=11, **kw).replicates for kw in backends]
    for other in boots[1:]:
        pd.testing.assert_frame_equal(boots[0], other)
    powers = [cx.power_sim(truth, "x", nsim=12, seed=5, **kw).replicates for kw in backends]
    for other in powers[1:]:
        pd.testing.assert_frame_equal(powers[0], other)
    data = cx.load_dataset("exist_multi")
    abl = [cx.ablation(data, exist_fit.formula, cs.emm_contrast("language"),
                       fractions=[0.1, 0.3], reps=4, seed=2, rm_anova=RM, **kw).replicates
           for kw in backends]
    for other in abl[1:]:
        pd.testing.assert_frame_equal(abl[0], other)
    res = [cs.simulate_residuals(truth, nsim=20, seed=4).scaled for _ in range(2)]
    np.testing.assert_array_equal(res[0], res[1])


def test_dask_with_scheduler_address(truth, dask_client):
    # an address string: the call opens (and closes) its own client
    address = dask_client.scheduler.address
    a = cx.power_sim(truth, "x", nsim=6, seed=1, backend="dask", scheduler=address)
    b = cx.power_sim(truth, "x", nsim=6, seed=1)
    pd.testing.assert_frame_equal(a.replicates, b.replicates)


def _blas_threads(shared, item):
    """The BLAS libraries' thread counts as a task sees them, and whether the task runs
    with the one-thread limit held."""
    from threadpoolctl import threadpool_info

    from crossed._threads import _HOLDING

    return (tuple(sorted({i["num_threads"] for i in threadpool_info()
                          if i["user_api"] == "blas"})),
            getattr(_HOLDING, "held", False))


def test_tasks_in_this_process_run_under_one_blas_thread_set_once():
    """A run in this process holds the one-BLAS-thread limit for all its tasks (set once,
    not per refit: a fit inside a task then finds it held), and restores the count after,
    also when a task fails."""
    from threadpoolctl import threadpool_info

    def counts():
        return tuple(sorted({i["num_threads"] for i in threadpool_info()
                             if i["user_api"] == "blas"}))

    before = counts()
    seen = run_tasks(_blas_threads, None, list(range(3)), n_jobs=1)
    assert seen == [((1,), True)] * 3
    assert counts() == before

    def fails(shared, item):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_tasks(fails, None, [0], n_jobs=1)
    assert counts() == before
    from crossed._threads import _HOLDING
    assert not getattr(_HOLDING, "held", False)
