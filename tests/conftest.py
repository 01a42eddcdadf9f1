"""Shared pytest configuration: the ``slow`` marker and the tests/ helpers on sys.path."""

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)  # `import reference` from any test module


@pytest.fixture(scope="session")
def extra():
    """R's answers for the extra cases (extra.json, computed by extra.R beside it)."""
    from reference import extra_answers

    return extra_answers()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long-running test (still part of the default run unless deselected)"
    )
