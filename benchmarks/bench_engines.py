"""Time each of crossed's engines (native, statsmodels, lme4) on the benchmark cases, one run.

Usage::

    .venv/bin/python benchmarks/bench_engines.py [--cases sleepstudy,ner,blurb]
        [--engines native,statsmodels,lme4] [--repeat N] [--budget S] [--timeout S]
        [--out results.md]

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
