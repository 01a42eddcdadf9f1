"""Time crossed's native engine side by side with lme4, statsmodels and mixedlm.

Usage::

    .venv/bin/python benchmarks/run.py [--cases a,b] [--peers crossed,lme4,...]
        [--repeat N] [--budget S] [--timeout S] [--all] [--out results.md] [--json raw.json]
        [--kernels machine|other|both]

Every (case, peer) pair runs in its own subprocess, so that its peak resident memory can be
read from the kernel (``os.wait4``) and a crash or a timeout of one peer does not stop the
others. Inside the subprocess the peer is warmed up on sleepstudy (imports, lazy loading),
the case's data are read (not timed), and then the call that goes from formula and data to
a fitted model is timed (``time.perf_counter`` in Python, ``proc.time`` in R) up to
``--repeat`` times (sleepstudy: at least 50 times), stopping early once the fits have taken
``--budget`` seconds in all; the median is reported.

The report gives the environment: the BLAS library and kernel each worker used
(threadpoolctl), the numerical packages' versions, the CPU and the machine's load before and
after each (case, peer) (``environment.py``). ``--kernels both`` runs the whole table twice,
each time in a subprocess: with OpenBLAS' kernel as the machine is set, and with the other
one (``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` unset when the machine sets them, else
``OPENBLAS_CORETYPE=Haswell``), and prints one table per kernel and crossed's times side by
side.

The script is also its own worker: ``run.py --worker PEER --case NAME --result FILE`` fits
one case with one Python peer and writes a JSON record. lme4 runs through
``Rscript benchmarks/r/fit_lmer.R SPEC.json RESULT.json``.

The cases are in ``cases.py``, the worker side in ``workers.py``, the report in
``report.py``. Benchmarks are never run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cases import ALL_PEERS, CASES, CASES_BY_NAME, R_SCRIPT, REPO, Case, ensure_data
from environment import describe, environment
from report import cell, fmt_time, make_header, render
from workers import run_worker

KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
OTHER_CORETYPE = "Haswell"


def r_spec(case: Case, repeat: int, budget: float) -> dict:
    """The JSON spec that ``fit_lmer.R`` reads.

    Parameters
    ----------
    case : Case
    repeat : int
    budget : float

    Returns
    -------
    dict
    """
    return {
        "data": str(ensure_data(case)),
        "formula": case.formula,
        "factors": list(case.factors),
        "reference": case.reference,
        "indicators": [{"name": n, "column": c, "level": lv} for n, c, lv in case.indicators],
        "repeat": max(repeat, case.min_repeat),
        "budget": budget,
        "family": case.family,
    }


def run_one(case: Case, peer: str, repeat: int, budget: float, timeout: float,
            workdir: Path) -> dict:
    """Run one (case, peer) pair in a subprocess and collect its record.

    Parameters
    ----------
    case : Case
    peer : str
    repeat : int
    budget : float
    timeout : float
        Seconds before the subprocess (and its process group) is killed.
    workdir : pathlib.Path
        Folder for the spec, result and log files.

    Returns
    -------
    dict
        ``status`` ("ok", "error" or "timeout"), ``peak_rss_mb`` (from ``os.wait4``),
        ``wall_s`` of the whole subprocess, and on success the worker's record.
    """
    stem = f"{case.name}-{peer}"
    result_path = workdir / f"{stem}.json"
    log_path = workdir / f"{stem}.log"
    if peer == "lme4":
        spec_path = workdir / f"{stem}-spec.json"
        spec_path.write_text(json.dumps(r_spec(case, repeat, budget)))
        command = ["Rscript", str(R_SCRIPT), str(spec_path), str(result_path)]
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", peer,
                   "--cases", case.name, "--repeat", str(repeat), "--budget", str(budget),
                   "--result", str(result_path)]

    start = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       cwd=REPO, start_new_session=True)
        except OSError as error:
            return {"status": "error", "message": f"cannot start {command[0]}: {error}",
                    "wall_s": 0.0, "peak_rss_mb": 0.0}
        status, usage, timed_out = None, None, False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid != 0:
                break
            if time.perf_counter() - start > timeout:
                os.killpg(process.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(process.pid, 0)
                timed_out = True
                break
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
    record = {"wall_s": time.perf_counter() - start, "peak_rss_mb": usage.ru_maxrss / 1024.0}
    log_tail = log_path.read_text(errors="replace")[-2000:]
    if timed_out:
        record.update(status="timeout", timeout_s=timeout,
                      message=f"did not finish in {timeout:g} s (killed)")
    elif process.returncode != 0 or not result_path.exists():
        record.update(status="error",
                      message=f"exit code {process.returncode}: {last_line(log_tail)}",
                      log_tail=log_tail)
    else:
        record.update(json.loads(result_path.read_text()))
        record["status"] = "ok"
        record["median_s"] = statistics.median(record["times"])
        record["median_cpu_s"] = statistics.median(record["cpu_times"])
    return record


def last_line(text: str) -> str:
    """Last non-empty line of ``text`` (the error message of a traceback)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(c.name for c in CASES),
                        help="comma-separated case names (default: all): "
                             + ", ".join(c.name for c in CASES))
    parser.add_argument("--peers", default=",".join(ALL_PEERS),
                        help="comma-separated peers (default: all): " + ", ".join(ALL_PEERS))
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed fits per (case, peer); sleepstudy at least 50 (default 3)")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="stop repeating once the fits took this many seconds (default 30)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds before one (case, peer) subprocess is killed (default:"
                             " the case's own limit, else 600)")
    parser.add_argument("--kernels", choices=("machine", "other", "both"), default="machine",
                        help="OpenBLAS kernel: as the machine is set (default), the other"
                             " one (OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset if set, else"
                             " OPENBLAS_CORETYPE=Haswell), or both, one table each")
    parser.add_argument("--all", action="store_true",
                        help="also run statsmodels where it did not finish in the issue")
    parser.add_argument("--out", type=Path, help="also write the markdown report here")
    parser.add_argument("--json", type=Path,
                        help="also write every (case, peer) record (all times) as JSON here")
    parser.add_argument("--worker", choices=[p for p in ALL_PEERS if p != "lme4"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases.split(",") if c not in CASES_BY_NAME]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES_BY_NAME)}")
    unknown = [p for p in args.peers.split(",") if p not in ALL_PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {unknown}; choose from {list(ALL_PEERS)}")
    return args


def build_first() -> None:
    """Import crossed in the driver before any worker starts: through an editable install,
    the first import after a source change rebuilds the compiled modules (meson-python), and
    in a worker the compiler would count as the worker's memory (``os.wait4`` reports the
    largest of a process and its descendants: a rebuild's 250 MB were once reported as
    sleepstudy's peak)."""
    import crossed  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one fit) and print the report."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    cases = [CASES_BY_NAME[name] for name in args.cases.split(",")]

    if args.worker:
        record = run_worker(args.worker, cases[0], args.repeat, args.budget)
        args.result.write_text(json.dumps(record))
        return 0
    if args.kernels != "machine":
        return run_kernels(argv, args)

    build_first()
    driver_env = environment()
    peers = args.peers.split(",")
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="crossed-bench-") as tmp:
        for case in cases:
            results[case.name] = {}
            if case.generated:  # (deterministic; written once)
                from crowd import ensure_crowd_file

                ensure_crowd_file(REPO / case.data)
            timeout = args.timeout or case.timeout_s or 600.0
            for peer in peers:
                if peer == "statsmodels" and case.family is not None:
                    record = {"status": "skipped", "message": case.statsmodels.skip_reason}
                elif peer == "statsmodels" and not (case.statsmodels.by_default or args.all):
                    record = {"status": "skipped",
                              "message": f"{case.statsmodels.skip_reason} (--all runs it)"}
                else:
                    record = run_one(case, peer, args.repeat, args.budget, timeout,
                                     Path(tmp))
                results[case.name][peer] = record
                criterion = ""
                if "criterion" in record:
                    criterion = f" criterion {record['criterion']:.10g}"
                print(f"[{case.name} / {peer}] {record['status']}: {cell(record, True)}{criterion}"
                      + (f" — {record['message']}" if record.get("message") else ""),
                      file=sys.stderr, flush=True)
                if args.out:  # keep a partial report in case the run is cut short
                    done = [c for c in cases if c.name in results]
                    header = make_header(argv, results, describe(driver_env, environment(),
                                                                  results))
                    args.out.write_text(render(results, done, peers, header)
                                        + "\n(partial: the run is still going)\n")

    header = make_header(argv, results, describe(driver_env, environment(), results))
    report = render(results, cases, peers, header)
    print(report)
    if args.out:
        args.out.write_text(report)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def kernel_environments() -> list[tuple[str, dict[str, str]]]:
    """(label, environment) of each kernel: as the machine is set, and the other one."""
    machine = dict(os.environ)
    other = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    set_here = {k: os.environ[k] for k in KERNEL_VARIABLES if k in os.environ}
    if set_here:
        label = ", ".join(f"{k}={v}" for k, v in set_here.items())
        return [(f"as the machine is set ({label})", machine),
                ("OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset", other)]
    other["OPENBLAS_CORETYPE"] = OTHER_CORETYPE
    return [("as the machine is set (no OPENBLAS_CORETYPE)", machine),
            (f"OPENBLAS_CORETYPE={OTHER_CORETYPE}", other)]


def run_kernels(argv: list[str], args: argparse.Namespace) -> int:
    """``--kernels other|both``: rerun this script in a subprocess per kernel, then print
    each kernel's report and crossed's median times side by side."""
    kernels = kernel_environments()
    if args.kernels == "other":
        kernels = kernels[1:]
    rest = []
    skip = False
    for a in argv:  # the arguments less --kernels, --out and --json
        if skip:
            skip = False
            continue
        if a in ("--kernels", "--out", "--json"):
            skip = True
            continue
        if a.startswith(("--kernels=", "--out=", "--json=")):
            continue
        rest.append(a)
    reports, records = [], []
    with tempfile.TemporaryDirectory(prefix="crossed-kernels-") as tmp:
        for k, (label, env) in enumerate(kernels):
            out, raw = Path(tmp) / f"k{k}.md", Path(tmp) / f"k{k}.json"
            print(f"[kernel: {label}]", file=sys.stderr, flush=True)
            code = subprocess.run([sys.executable, str(Path(__file__).resolve()), *rest,
                                   "--out", str(out), "--json", str(raw)], env=env,
                                  cwd=REPO, stdout=subprocess.DEVNULL).returncode
            if code != 0 or not out.exists():
                reports.append(f"## Kernel: {label}\n\nthe run failed (exit code {code})\n")
                records.append({})
                continue
            reports.append(f"## Kernel: {label}\n\n{out.read_text()}")
            records.append(json.loads(raw.read_text()))
    text = "\n".join(reports)
    if len(kernels) == 2:
        lines = ["## crossed under both kernels (median wall time)", "",
                 f"| case | {kernels[0][0]} | {kernels[1][0]} | second / first |",
                 "|---|---|---|---|"]
        for case in args.cases.split(","):
            a = records[0].get(case, {}).get("crossed", {})
            b = records[1].get(case, {}).get("crossed", {})
            cells = [fmt_time(r["median_s"]) if r.get("status") == "ok" else r.get("status", "—")
                     for r in (a, b)]
            both = a.get("status") == "ok" and b.get("status") == "ok"
            ratio_text = f"{b['median_s'] / a['median_s']:.2f}" if both else "—"
            lines.append(f"| {case} | {cells[0]} | {cells[1]} | {ratio_text} |")
        text += "\n" + "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(
            {label: rec for (label, _), rec in zip(kernels, records, strict=True)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
