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
