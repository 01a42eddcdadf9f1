"""Engine tests: the R stack is required in CI and optional elsewhere."""

from __future__ import annotations

import os

import pytest


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
