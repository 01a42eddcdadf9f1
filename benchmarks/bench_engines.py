"""Time each of crossed's engines (native, statsmodels, lme4) on the benchmark cases, one run.

Usage::

    .venv/bin/python benchmarks/bench_engines.py [--cases sleepstudy,ner,blurb]
        [--engines native,statsmodels,lme4] [--repeat N] [--budget S] [--timeout S]
        [--out results.md] [--json benchmarks/stored/engines.json]

Uses the cases of ``benchmarks/run.py`` (same data, reference levels and indicator columns).
Every (case, engine) pair runs in its own subprocess (this script is its own worker), so a
slow or failing engine does not stop the others and a timeout kills it. In the subprocess
the engine is warmed up on sleepstudy (imports; for lme4, starting R), the data are read
(not timed), and ``crossed.lmer(formula, data, engine=ENGINE)`` is timed up to ``--repeat``
times (sleepstudy: at least 20), stopping once the fits took ``--budget`` seconds; the
median is reported, with each engine's REML criterion minus the native one. An engine that
cannot express a case says so (``UnsupportedModelError``) and the cell shows it.

Default cases: those that finish in minutes for every engine (sleepstudy, ner, blurb,
blurb_slopes); ``--cases`` adds insteval, recycling and leaderboard (lme4 takes minutes).

``--json FILE`` stores the run (date, commit, machine, versions and every record) so that
the documentation's timing table is generated from it (:func:`render_stored`), never typed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES_BY_NAME, SLEEPSTUDY  # noqa: E402  (the benchmark's cases)
from report import fmt_time, md_escape  # noqa: E402
from run import last_line  # noqa: E402
from workers import load_data  # noqa: E402

ENGINES = ("native", "statsmodels", "lme4")
DEFAULT_CASES = ("sleepstudy", "ner", "blurb", "blurb_slopes")


def worker(engine: str, case_name: str, repeat: int, budget: float) -> dict:
    """Fit one case with one engine in this process and return a JSON-able record.

    Parameters
    ----------
    engine : str
    case_name : str
    repeat : int
    budget : float

    Returns
    -------
    dict
        ``status`` ("ok" or "unsupported"), ``times``, ``criterion``, ``converged``,
        ``singular``, or ``message`` for an unsupported case.
    """
    import pandas as pd

    import crossed

    case = CASES_BY_NAME[case_name]
    sleep = pd.read_csv(SLEEPSTUDY, dtype={"Subject": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crossed.lmer("Reaction ~ Days + (Days | Subject)", sleep, engine=engine)
    data = load_data(case)
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            start = time.perf_counter()
            try:
                fit = crossed.lmer(case.formula, data, engine=engine,
                                   reference=case.reference or None)
            except crossed.UnsupportedModelError as exc:
                return {"status": "unsupported", "message": str(exc)}
            times.append(time.perf_counter() - start)
            if len(times) >= max(repeat, 20 if case.min_repeat > 1 else 1) \
                    or sum(times) >= budget:
                break
    return {"status": "ok", "times": times, "criterion": fit.deviance,
            "converged": fit.converged, "singular": fit.is_singular}


def run_pair(engine: str, case_name: str, repeat: int, budget: float, timeout: float,
             workdir: Path) -> dict:
    """One (case, engine) pair in a subprocess; ``status`` "ok", "unsupported", "error" or
    "timeout"."""
    result = workdir / f"{case_name}-{engine}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, "--cases",
           case_name, "--repeat", str(repeat), "--budget", str(budget), "--result", str(result)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"killed after {timeout:g} s"}
    if proc.returncode != 0 or not result.exists():
        return {"status": "error", "message": last_line(proc.stderr + proc.stdout)}
    record = json.loads(result.read_text())
    if record["status"] == "ok":
        record["median_s"] = statistics.median(record["times"])
    return record


def render(results: dict[str, dict[str, dict]], cases: list[str], engines: list[str]) -> str:
    """Markdown: median time per engine, criterion difference from native, notes."""
    head = "| case (REML) | " + " | ".join(engines) + " | criterion − native |"
    lines = [head, "|" + "---|" * (len(engines) + 2)]
    notes = []
    for name in cases:
        row = [md_escape(CASES_BY_NAME[name].title)]
        for engine in engines:
            rec = results[name][engine]
            if rec["status"] == "ok":
                extra = "" if rec["converged"] else " (not converged)"
                row.append(fmt_time(rec["median_s"]) + extra)
            else:
                row.append(rec["status"])
                notes.append(f"- {name} / {engine}: {rec['message']}")
        base = results[name].get("native", {})
        diffs = []
        for engine in engines:
            rec = results[name][engine]
            if engine != "native" and rec["status"] == "ok" and base.get("status") == "ok":
                diffs.append(f"{engine} {rec['criterion'] - base['criterion']:+.2e}")
        row.append(", ".join(diffs) or "—")
        lines.append("| " + " | ".join(row) + " |")
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def git_commit() -> str:
    """``git describe`` of the tree (``-dirty`` when it has changes), or ``unknown``."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"],
                              cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True, timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_metadata(started: float, finished: float, commit: str) -> dict:
    """When, at which commit (taken when the run started) and on what the run happened: UTC
    start and end, the machine and its load, the BLAS variables and the versions of crossed,
    statsmodels, R and lme4."""
    from environment import environment

    versions = {}
    for name in ("crossed", "statsmodels", "rpy2"):
        try:
            from importlib import metadata
            versions[name] = metadata.version(name)
        except Exception:  # noqa: BLE001 - a missing package is recorded as such
            versions[name] = "not installed"
    try:
        r = subprocess.run(["Rscript", "-e", 'cat(R.version$major, R.version$minor, '
                            'as.character(packageVersion("lme4")))'],
                           capture_output=True, text=True, timeout=120).stdout.split()
        versions["R"], versions["lme4"] = f"{r[0]}.{r[1]}", r[2]
    except (OSError, subprocess.SubprocessError, IndexError):
        versions["R"] = versions["lme4"] = "not installed"
    fmt = "%Y-%m-%d %H:%M UTC"
    return {"started": time.strftime(fmt, time.gmtime(started)),
            "finished": time.strftime(fmt, time.gmtime(finished)),
            "commit": commit,
            "environment": environment(), "versions": versions}


def render_stored(stored: dict) -> str:
    """The markdown the documentation shows for a run stored with ``--json``: a line saying
    which run it is (date, commit, machine, load, versions), the table, its notes."""
    meta = stored["meta"]
    env = meta["environment"]
    v = meta["versions"]
    blas = ", ".join(f"{k}={val}" for k, val in env.get("blas_variables", {}).items())
    head = (f"Run {meta['started']} – {meta['finished'][11:]} at commit `{meta['commit']}` "
            f"on {env['cpu']}, {env['cores']} cores (load average {env['load'][0]:g} at the "
            f"start; {blas or 'no BLAS variable set'}): crossed {v['crossed']}, statsmodels "
            f"{v['statsmodels']}, R {v['R']} with lme4 {v['lme4']} through rpy2 {v['rpy2']}; "
            f"`{stored['command']}`.")
    return head + "\n\n" + render(stored["results"], stored["cases"], stored["engines"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path, help="store the run (for the docs' table)")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES_BY_NAME]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; known: {', '.join(CASES_BY_NAME)}")
    if args.worker:
        record = worker(args.worker, cases[0], args.repeat, args.budget)
        args.result.write_text(json.dumps(record))
        return 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    results: dict[str, dict[str, dict]] = {}
    started, commit = time.time(), git_commit()
    with tempfile.TemporaryDirectory() as tmp:
        for name in cases:
            results[name] = {}
            for engine in engines:
                results[name][engine] = run_pair(engine, name, args.repeat, args.budget,
                                                 args.timeout, Path(tmp))
                print(f"{name} / {engine}: {results[name][engine]['status']}", file=sys.stderr)
    report = render(results, cases, engines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    if args.json:
        command = "benchmarks/bench_engines.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        stored = {"command": command.strip(), "cases": cases, "engines": engines,
                  "meta": run_metadata(started, time.time(), commit), "results": results}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(stored, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
