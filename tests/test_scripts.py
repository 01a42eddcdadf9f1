"""The shell entry points (scripts/test, scripts/demo, scripts/setup.sh), run in a copy of
the repository's layout with a stand-in ``.venv`` (its ``python`` and ``crossed`` record
their arguments and do nothing), so that nothing is installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _layout(tmp_path: Path, scripts: list[str]) -> Path:
    """tmp_path as a repository: the named scripts, pyproject.toml, meson.build and a
    stand-in .venv whose programs append their arguments to calls.txt."""
    (tmp_path / "scripts").mkdir()
    for name in scripts:
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    for name in ("pyproject.toml", "meson.build"):
        shutil.copy(ROOT / name, tmp_path / name)
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for prog in ("python", "crossed"):
        (bin_ / prog).write_text(f'#!/usr/bin/env bash\necho "{prog} $*" >> '
                                 f'"{tmp_path}/calls.txt"\n')
        (bin_ / prog).chmod(0o755)
    return tmp_path


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "CROSSED_DEMO_DIR": str(repo / "demo")}
    return subprocess.run(["bash", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)


def _can_compile() -> bool:
    """setup.sh checks for a C compiler and Python's headers (and installs them as root)."""
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which("cc") is not None and include.exists()


def test_scripts_test_installs_the_docs_extra_so_the_site_tests_run(tmp_path):
    repo = _layout(tmp_path, ["test"])
    (repo / "scripts" / "setup.sh").write_text(f'echo "setup $1" >> "{repo}/calls.txt"\n')
    done = _run(repo, "scripts/test", "tests/docs", "-q")
    assert done.returncode == 0, done.stderr
    calls = (repo / "calls.txt").read_text().splitlines()
    extras = calls[0].removeprefix("setup ").split(",")
    assert "docs" in extras and "dev" in extras
    assert calls[1] == "python -m pytest tests/docs -q"
    # what tests/docs/test_site.py needs (it skips without them) is in the docs extra
    pyproject = (ROOT / "pyproject.toml").read_text()
    docs = re.search(r"^docs = \[(.*)\]$", pyproject, re.M).group(1)
    needed = set(re.findall(r'importorskip\("(\w+)"\)',
                            (ROOT / "tests" / "docs" / "test_site.py").read_text()))
    assert needed == {"mkdocs", "mkdocstrings"}
    for module in needed:
        assert f'"{module}' in docs, module


@pytest.mark.skipif(not _can_compile(), reason="setup.sh wants a C compiler and Python.h")
def test_the_first_demo_run_says_what_it_installs(tmp_path):
    repo = _layout(tmp_path, ["demo", "setup.sh"])
    first = _run(repo, "scripts/demo")
    assert first.returncode == 0, first.stderr
    assert ("crossed: installing crossed [plots] and its dependencies into .venv (first run, "
            "or pyproject.toml changed: a few minutes)...") in first.stderr
    calls = (repo / "calls.txt").read_text()
    assert "-e .[plots]" in calls and "crossed report" in calls
    # the second run installs nothing and says nothing about it
    (repo / "calls.txt").unlink()
    second = _run(repo, "scripts/demo")
    assert second.returncode == 0, second.stderr
    assert "installing" not in second.stderr
    assert "pip" not in (repo / "calls.txt").read_text()
