"""Thread control (_threads.py): the native engine's helper thread."""

from __future__ import annotations

import os

import pytest

from crossed import _threads


@pytest.fixture(autouse=True)
def default_helper():
    yield
    _threads.use_helper_thread(None)


def test_helper_on_off_and_default():
    _threads.use_helper_thread(True)
    pool = _threads.helper_thread()
    assert pool is not None and pool.submit(lambda: 3).result() == 3
    assert _threads.helper_thread() is pool  # one helper for the process
    _threads.use_helper_thread(False)
    assert _threads.helper_thread() is None
    _threads.use_helper_thread(None)  # default: on with at least two CPUs
    assert (_threads.helper_thread() is not None) == (_threads.available_cpus() >= 2)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_starts_its_own_helper():
    """A forked child inherits no thread: it must not submit to the parent's executor."""
    _threads.use_helper_thread(True)
    assert _threads.helper_thread().submit(lambda: 1).result() == 1
    pid = os.fork()
    if pid == 0:  # child: a fresh helper that runs work, else exit code 1
        try:
            ok = _threads.helper_thread().submit(lambda: 2).result(timeout=10) == 2
        except Exception:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_environment_variable_turns_the_helper_off(monkeypatch):
    monkeypatch.setenv("CROSSED_HELPER_THREAD", "0")
    assert _threads.helper_thread() is None
    _threads.use_helper_thread(True)  # an explicit choice wins
    assert _threads.helper_thread() is not None


def test_work_on_the_helper_does_not_wait_for_it():
    """Code running on the helper thread gets no helper (it would wait for itself)."""
    _threads.use_helper_thread(True)
    pool = _threads.helper_thread()
    assert pool.submit(_threads.helper_thread).result(timeout=10) is None


def test_concurrent_fits_give_the_serial_results_bit_for_bit():
    """Fits in concurrent threads share the process-wide BLAS limit (single_blas_thread
    counts its users): none sees the thread count restored by another one finishing."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    import crossed as cx

    df = cx.load_dataset("blurb_like")
    ner = cx.load_dataset("ner_like")
    jobs = [("score ~ 1 + (1 | model) + (1 | dataset) + (1 | model:dataset)", df),
            ("f1 ~ model + (1 | language) + (1 | model:language)", ner)] * 3

    def run(job):
        fit = cx.lmer(*job)
        return fit.theta, fit.beta, fit.deviance, fit.coef_table()["df"].to_numpy()

    serial = [run(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        concurrent = list(pool.map(run, jobs))
    for a, b in zip(serial, concurrent, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_single_blas_thread_takes_turns_across_threads():
    """A second thread waits for the first to leave (and restore the BLAS count) before it
    sets its own limit; nested use in one thread does not wait."""
    import threading

    import scipy.linalg  # noqa: F401  (NumPy's and SciPy's OpenBLAS loaded, as by any fit)
    from threadpoolctl import threadpool_info

    def blas() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    original = blas()
    inside, release, second_in = threading.Event(), threading.Event(), threading.Event()

    def hold():
        with _threads.single_blas_thread(), _threads.single_blas_thread():  # nested: free
            inside.set()
            release.wait(10)

    def second():
        with _threads.single_blas_thread():
            second_in.set()

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    assert blas() == {1}
    t2 = threading.Thread(target=second)
    t2.start()
    assert not second_in.wait(0.2)  # waits for its turn
    release.set()
    t.join()
    t2.join()
    assert second_in.is_set()
    assert blas() == original


def test_nested_use_sets_the_limit_once(monkeypatch):
    """Only the outermost use in a thread sets (and restores) the BLAS limit: a refit's
    fit inside the refit's own use costs nothing."""
    import contextlib

    controller = _threads._controller()
    calls = []

    @contextlib.contextmanager
    def counting_limit(**kwargs):
        calls.append(kwargs)
        yield

    monkeypatch.setattr(controller, "limit", counting_limit)
    with _threads.single_blas_thread():
        with _threads.single_blas_thread(), _threads.single_blas_thread():
            pass
    assert calls == [{"limits": 1, "user_api": "blas"}]
    with _threads.single_blas_thread():  # the next outermost use sets it again
        pass
    assert len(calls) == 2
