"""Shared pytest configuration: the ``slow`` marker, the tests/ helpers on sys.path, and
the R stack (required in CI, optional elsewhere)."""

import os
import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)  # `import reference` from any test module


def require_r() -> None:
    """Skip when R, rpy2 or lme4 is missing, except in CI (env CI set), where it fails."""
    from crossed.engines import EngineUnavailableError
    from crossed.engines.lme4 import r_session

    try:
        r_session()
    except EngineUnavailableError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide the lme4 engine (see .ci/run): {exc}")
        pytest.skip(f"lme4 engine unavailable: {exc}")


@pytest.fixture(scope="session")
def r_stack():
    """The embedded R session (skip/fail as :func:`require_r`)."""
    from crossed.engines.lme4 import r_session

    require_r()
    return r_session()


@pytest.fixture(scope="session")
def extra():
    """R's answers for the extra cases (extra.json, computed by extra.R beside it)."""
    from reference import extra_answers

    return extra_answers()


@pytest.fixture(scope="session")
def exist_missing_cell_fit():
    """exist_multi without the cell es:t3:soft, fitted with the full three-way model: lme4
    drops languagees:taskt3:modesoft (rank deficient), so some EMMs are not estimable."""
    import warnings

    import crossed as cx

    d = cx.load_dataset("exist_multi")
    d = d[~((d["language"] == "es") & (d["task"] == "t3") & (d["mode"] == "soft"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.lmer("delta ~ language * task * mode + (1 | architecture)", d)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long-running test (still part of the default run unless deselected)"
    )
