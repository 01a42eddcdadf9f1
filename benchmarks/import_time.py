"""What ``import crossed`` and a first fit cost, next to ``import pandas``: the issue's
target is "``import crossed``: ≤ 1.3× ``import pandas``", measured as a fresh process doing
``import crossed; crossed.lmer`` (the attribute loads the modules a fit needs).

Usage::

    .venv/bin/python benchmarks/import_time.py --wheel      # crossed as users install it
    .venv/bin/python benchmarks/import_time.py --repeat 15 --python /path/to/venv/bin/python

Each run is a fresh subprocess (same environment, so ``PYTHONPATH`` applies) that times its
statement with ``time.perf_counter`` (``statement``: without the interpreter's own start)
and is timed as a whole by this driver (``process``: the wall time a user waits). Bytecode
caching is on in the children (``PYTHONDONTWRITEBYTECODE`` is dropped): an installed
package has its ``.pyc`` files, and compiling crossed's sources in every run is a cost no
user pays. An editable install pays it anyway: meson-python's editable loader writes no
bytecode, so the report says when crossed is imported through it; ``--wheel`` builds the
wheel (``python -m build``) and installs it into a temporary virtual environment whose
interpreter runs the children (``--python`` names one already made). The cases run in
turn (pandas, floor, crossed, fit, ...) after one unrecorded warm-up round, which also
writes the bytecode, so that a change of the machine's load hits them alike; the table
gives medians and the ratios to ``import pandas``. The fits are on
``tests/data/sleepstudy.csv`` (reading the CSV included): ``Reaction ~ Days + (Days |
Subject)``, whose formula of columns needs no formulaic, and ``Reaction ~ poly(Days, 2) +
(1 | Subject)``, which loads it. Timings only: the test suite checks which modules a fit
loads (``tests/test_imports.py``), never how long that takes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["CASES", "main", "run_once"]

SLEEPSTUDY = Path(__file__).resolve().parents[1] / "tests" / "data" / "sleepstudy.csv"

CASES: dict[str, str] = {
    "`import pandas`": "import pandas",
    "floor: the libraries a fit loads": (
        "import pandas, scipy.sparse, scipy.sparse.csgraph, scipy.linalg, nlopt, "
        "threadpoolctl"
    ),
    "`import crossed; crossed.lmer`": "import crossed; crossed.lmer",
    "... and `crossed.lmer(...)` on sleepstudy": (
        "import crossed; import pandas as pd; "
        f"crossed.lmer('Reaction ~ Days + (Days | Subject)', pd.read_csv({str(SLEEPSTUDY)!r}))"
    ),
    "... a formula with an expression (`poly(Days, 2)`: formulaic)": (
        "import crossed; import pandas as pd; "
        "crossed.lmer('Reaction ~ poly(Days, 2) + (1 | Subject)', "
        f"pd.read_csv({str(SLEEPSTUDY)!r}))"
    ),
}
"""Label -> the statement timed in a fresh process. The second row is the floor: the
third-party libraries that ``crossed.lmer`` and a fit of columns load, without crossed's
own modules (formulaic, with narwhals, comes only with a formula that needs it: the last
row)."""

_CHILD = """import time
_t0 = time.perf_counter()
{statement}
print(time.perf_counter() - _t0)
"""


def run_once(statement: str, python: str = sys.executable) -> tuple[float, float]:
    """One fresh process running ``statement``.

    Parameters
    ----------
    statement : str
        Python code, run with ``python -c``.
    python : str
        The interpreter (default: this one).

    Returns
    -------
    tuple of float
        (seconds of the statement, measured inside the process; seconds of the whole
        process, measured here).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    out = subprocess.run([python, "-c", _CHILD.format(statement=statement)],
                         capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - start
    return float(out.stdout.strip().splitlines()[-1]), wall


def main(argv: list[str] | None = None) -> str:
    """Run every case ``--repeat`` times, interleaved, and print the markdown table.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    str
        The report that was printed.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each case (default 7)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose crossed is timed (default: this one)")
    parser.add_argument("--wheel", action="store_true",
                        help="build the wheel and time it installed in a temporary venv")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        python = _wheel_python(Path(tmp)) if args.wheel else args.python
        return _report(python, args.repeat)


def _wheel_python(tmp: Path) -> str:
    """The interpreter of a new virtual environment holding this repository's wheel."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp / "dist"),
                    str(root)], check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True)
    python = str(tmp / "venv" / "bin" / "python")
    wheel = next((tmp / "dist").glob("crossed-*.whl"))
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True)
    return python


def _report(python: str, repeat: int) -> str:
    """Time every case ``repeat`` times with ``python``; print and return the table."""
    editable = subprocess.run(
        [python, "-c", "import sys, crossed; "
                       "print('_crossed_editable_loader' in sys.modules)"],
        capture_output=True, text=True, check=True).stdout.strip() == "True"
    load_before = os.getloadavg()
    for statement in CASES.values():  # warm-up: the file cache, not recorded
        run_once(statement, python)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in CASES}
    for _ in range(repeat):
        for label, statement in CASES.items():
            times[label].append(run_once(statement, python))
    load_after = os.getloadavg()

    medians = {label: (statistics.median(t for t, _ in runs),
                       statistics.median(w for _, w in runs))
               for label, runs in times.items()}
    base_stmt, base_proc = medians["`import pandas`"]
    lines = [
        f"median of {repeat} fresh processes per case, interleaved; "
        f"load average (1/5/15 min) {_load(load_before)} before, {_load(load_after)} after; "
        f"{os.cpu_count()} cores; Python {sys.version.split()[0]}",
        "",
        *(["crossed is an editable install here: its loader writes no bytecode, so every "
           "run compiles crossed's sources; --wheel times crossed as installed", ""]
          if editable else []),
        "| case | statement ms | ratio | process ms | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, (stmt, proc) in medians.items():
        lines.append(f"| {label} | {stmt * 1e3:.0f} | {stmt / base_stmt:.2f}× "
                     f"| {proc * 1e3:.0f} | {proc / base_proc:.2f}× |")
    report = "\n".join(lines)
    print(report)
    return report


def _load(values: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
