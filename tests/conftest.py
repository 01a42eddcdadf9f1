"""Shared pytest configuration: the ``slow`` marker and the tests/ helpers on sys.path."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)  # `import reference` from any test module


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long-running test (still part of the default run unless deselected)"
    )
