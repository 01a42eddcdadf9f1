"""``python -m crossed`` runs the command line, as the ``crossed`` script does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import crossed


def test_python_dash_m_crossed_runs_the_cli():
    # before: "No module named crossed.__main__; 'crossed' is a package and cannot be
    # directly executed"
    src = str(Path(crossed.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ok = subprocess.run([sys.executable, "-m", "crossed", "--help"], capture_output=True,
                        text=True, env=env, timeout=120)
    assert ok.returncode == 0 and "usage: crossed" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "crossed", "fit", "no_such_file.csv",
                          "y ~ x + (1 | g)"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("crossed: error: no file")
