"""Time crossed's native engine side by side with lme4, statsmodels and mixedlm.

Usage::

    .venv/bin/python benchmarks/run.py [--cases a,b] [--peers crossed,lme4,...]
        [--repeat N] [--budget S] [--timeout S] [--all] [--out results.md] [--json raw.json]

Every (case, peer) pair runs in its own subprocess, so that its peak resident memory can be
read from the kernel (``os.wait4``) and a crash or a timeout of one peer does not stop the
others. Inside the subprocess the peer is warmed up on sleepstudy (imports, lazy loading),
the case's data are read (not timed), and then the call that goes from formula and data to
a fitted model is timed (``time.perf_counter`` in Python, ``proc.time`` in R) up to
``--repeat`` times (sleepstudy: at least 50 times), stopping early once the fits have taken
``--budget`` seconds in all; the median is reported.

The script is also its own worker: ``run.py --worker PEER --case NAME --result FILE`` fits
one case with one Python peer and writes a JSON record. lme4 runs through
``Rscript benchmarks/r/fit_lmer.R SPEC.json RESULT.json``.

Benchmarks are never run by the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
R_SCRIPT = BENCH / "r" / "fit_lmer.R"
SLEEPSTUDY = REPO / "tests" / "data" / "sleepstudy.csv"

ALL_PEERS = ("crossed", "crossed-nocheck", "lme4", "statsmodels", "mixedlm")
PEER_LABELS = {
    "crossed": "crossed",
    "crossed-nocheck": "crossed (check_conv=False)",
    "lme4": "lme4",
    "statsmodels": "statsmodels",
    "mixedlm": "mixedlm",
}


@dataclass(frozen=True)
class StatsmodelsSpec:
    """How a case is written for statsmodels' ``MixedLM.from_formula``.

    Attributes
    ----------
    fixed : str
        Fixed-effects formula.
    vc : dict of str to str
        Variance-component formulas (``vc_formula``); crossed factors are all variance
        components of one group.
    groups : str or None
        Grouping column; None puts every row in a single group.
    re_formula : str or None
        Random-effects formula within ``groups`` (correlated slopes).
    interactions : tuple of (str, (str, str))
        Columns to build before fitting, e.g. ``("md", ("model", "dataset"))`` for the
        grouping factor ``model:dataset``.
    by_default : bool
        Run without ``--all``; False where statsmodels did not finish or takes minutes.
    skip_reason : str
        Why it is not run by default (shown in the notes).
    """

    fixed: str
    vc: dict[str, str] = field(default_factory=dict)
    groups: str | None = None
    re_formula: str | None = None
    interactions: tuple[tuple[str, tuple[str, str]], ...] = ()
    by_default: bool = True
    skip_reason: str = ("not measured in the issue: one-group variance components did not"
                        " finish InstEval (73k rows) in 15 min")


@dataclass(frozen=True)
class Case:
    """One benchmark model.

    Attributes
    ----------
    name : str
        Short name used on the command line.
    title : str
        Row label in the table.
    data : str
        CSV file (may be gzipped), relative to the repository root.
    formula : str
        lme4 formula, fitted by REML.
    factors : tuple of str
        Columns read as strings (factors).
    reference : dict of str to str
        Reference level per factor (R's ``relevel``).
    indicators : tuple of (str, str, str)
        ``(new, column, level)``: numeric 0/1 column ``new = (column == level)``.
    statsmodels : StatsmodelsSpec
        The same model for statsmodels.
    target_s : float
        Target wall time for crossed, in seconds.
    target_gb : float or None
        Target peak memory for crossed, in GB.
    min_repeat : int
        Fits to time at least (sleepstudy: many, it is timed formula to fit).
    """

    name: str
    title: str
    data: str
    formula: str
    factors: tuple[str, ...]
    statsmodels: StatsmodelsSpec
    target_s: float
    reference: dict[str, str] = field(default_factory=dict)
    indicators: tuple[tuple[str, str, str], ...] = ()
    target_gb: float | None = None
    min_repeat: int = 1


BLURB_FACTORS = ("model", "dataset", "seed", "lr", "batch_size")
BLURB_REFERENCE = {"seed": "59", "lr": "5e-5", "batch_size": "32"}
BLURB_FIXED = "score ~ seed + lr + batch_size + num_epochs"
BLURB_VC = {"model": "0 + C(model)", "dataset": "0 + C(dataset)", "md": "0 + C(md)"}
BLURB_INDICATORS = (
    ("s20", "seed", "20"), ("s47", "seed", "47"), ("lr1", "lr", "1e-5"), ("lr2", "lr", "2e-5"),
    ("lr3", "lr", "3e-5"), ("lr4", "lr", "4e-5"), ("b16", "batch_size", "16"),
)
BLURB_SLOPES = ("s20", "s47", "lr1", "lr2", "lr3", "lr4", "b16", "num_epochs")

CASES = (
    Case(
        name="insteval",
        title="InstEval `y ~ service + (1|s) + (1|d) + (1|dept)`, 73k rows",
        data="tests/data/InstEval.csv.gz",
        formula="y ~ service + (1 | s) + (1 | d) + (1 | dept)",
        factors=("s", "d", "studage", "lectage", "service", "dept"),
        statsmodels=StatsmodelsSpec(
            fixed="y ~ service",
            vc={"s": "0 + C(s)", "d": "0 + C(d)", "dept": "0 + C(dept)"},
            by_default=False,
            skip_reason="did not finish in 15 min (> 12 GB) in the issue's measurement",
        ),
        target_s=2.0,
    ),
    Case(
        name="blurb_slopes",
        title="blurb_like CCMEM + 8 uncorrelated slopes by model:dataset, 3k rows",
        data="src/crossed/data/blurb_like.csv",
        formula=(
            "score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset)"
            " + (1 | model:dataset)"
            " + (0 + s20 + s47 + lr1 + lr2 + lr3 + lr4 + b16 + num_epochs || model:dataset)"
        ),
        factors=BLURB_FACTORS,
        reference=BLURB_REFERENCE,
        indicators=BLURB_INDICATORS,
        statsmodels=StatsmodelsSpec(
            fixed=BLURB_FIXED,
            vc={**BLURB_VC, **{f"md_{x}": f"0 + C(md):{x}" for x in BLURB_SLOPES}},
            interactions=(("md", ("model", "dataset")),),
            by_default=False,
            skip_reason="took 345 s with convergence warnings in a trial on 2026-11-22",
        ),
        target_s=0.5,
    ),
    Case(
        name="blurb",
        title="blurb_like CCMEM, 3 crossed intercepts, 3k rows",
        data="src/crossed/data/blurb_like.csv",
        formula=(
            "score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset)"
            " + (1 | model:dataset)"
        ),
        factors=BLURB_FACTORS,
        reference=BLURB_REFERENCE,
        statsmodels=StatsmodelsSpec(
            fixed=BLURB_FIXED, vc=BLURB_VC, interactions=(("md", ("model", "dataset")),),
        ),
        target_s=0.1,
    ),
    Case(
        name="ner",
        title="ner_like `f1 ~ model + (1|language) + (1|model:language)`, 3.7k rows",
        data="src/crossed/data/ner_like.csv",
        formula="f1 ~ model + (1 | language) + (1 | model:language)",
        factors=("model", "language", "seed"),
        statsmodels=StatsmodelsSpec(
            fixed="f1 ~ model",
            vc={"language": "0 + C(language)", "ml": "0 + C(ml)"},
            interactions=(("ml", ("model", "language")),),
        ),
        target_s=0.05,
    ),
    Case(
        name="sleepstudy",
        title="sleepstudy `Reaction ~ Days + (Days|Subject)`, formula to fit",
        data="tests/data/sleepstudy.csv",
        formula="Reaction ~ Days + (Days | Subject)",
        factors=("Subject",),
        statsmodels=StatsmodelsSpec(fixed="Reaction ~ Days", groups="Subject",
                                    re_formula="~Days"),
        target_s=0.010,
        min_repeat=50,
    ),
    Case(
        name="leaderboard",
        title=("leaderboard `score ~ family + (1|model) + (1|dataset) + (1|model:dataset)`,"
               " 480k rows"),
        data="benchmarks/data/leaderboard.csv.gz",
        formula="score ~ family + (1 | model) + (1 | dataset) + (1 | model:dataset)",
        factors=("model", "family", "dataset", "seed"),
        statsmodels=StatsmodelsSpec(
            fixed="score ~ family",
            vc={"model": "0 + C(model)", "dataset": "0 + C(dataset)", "md": "0 + C(md)"},
            interactions=(("md", ("model", "dataset")),),
            by_default=False,
        ),
        target_s=10.0,
        target_gb=2.0,
    ),
    Case(
        name="recycling",
        title=("model_recycling_leaderboard `score ~ base_model + (1|model_name) + (1|dataset)"
               " + (1|base_model:dataset)`, 46k rows"),
        data="benchmarks/data/model_recycling_leaderboard.csv.gz",
        formula=("score ~ base_model + (1 | model_name) + (1 | dataset)"
                 " + (1 | base_model:dataset)"),
        factors=("model_name", "base_model", "model_type", "dataset"),
        statsmodels=StatsmodelsSpec(
            fixed="score ~ base_model",
            vc={"model_name": "0 + C(model_name)", "dataset": "0 + C(dataset)",
                "bd": "0 + C(bd)"},
            interactions=(("bd", ("base_model", "dataset")),),
            by_default=False,
        ),
        target_s=0.5,
    ),
)
CASES_BY_NAME = {case.name: case for case in CASES}


# --------------------------------------------------------------------------------------
# worker side: one peer, one case, in this process
# --------------------------------------------------------------------------------------

def load_data(case: Case):
    """Read a case's table: factor columns as strings, indicator columns added.

    Parameters
    ----------
    case : Case

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    data = pd.read_csv(REPO / case.data, dtype={c: str for c in case.factors})
    for new, column, level in case.indicators:
        data[new] = (data[column] == level).astype(float)
    return data


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def prepare_crossed(case: Case, check_conv: bool):
    """Warm crossed up and return a closure fitting ``case`` and a describer.

    Parameters
    ----------
    case : Case
    check_conv : bool
        Run lme4's post-fit derivative check (crossed's default).

    Returns
    -------
    fit : callable
        ``fit(data) -> LmerFit``.
    describe : callable
        ``describe(result) -> dict`` with criterion, convergence and version.
    """
    import pandas as pd

    import crossed

    control = crossed.LmerControl(check_conv=check_conv)
    sleep = pd.read_csv(SLEEPSTUDY, dtype={"Subject": str})
    crossed.lmer("Reaction ~ Days + (Days | Subject)", sleep, control=control)

    def fit(data):
        return crossed.lmer(case.formula, data, reml=True, engine="native",
                            reference=case.reference or None, control=control)

    def describe(result):
        return {
            "criterion": float(result.deviance),
            "converged": bool(result.converged),
            "singular": bool(result.is_singular),
            "feval": int(result.opt.feval),
            "theta": [float(x) for x in result.theta],
            "version": f"crossed {crossed.__version__}",
        }

    return fit, describe


def with_reference_levels(data, reference: dict[str, str]):
    """Put each reference level first, as the first category of a pandas Categorical.

    Parameters
    ----------
    data : pandas.DataFrame
    reference : dict of str to str

    Returns
    -------
    pandas.DataFrame
        A copy, or ``data`` itself when there is nothing to relevel.
    """
    import pandas as pd

    if not reference:
        return data
    data = data.copy()
    for column, level in reference.items():
        others = sorted(set(data[column]) - {level})
        data[column] = pd.Categorical(data[column], categories=[level, *others])
    return data


def prepare_mixedlm(case: Case):
    """Warm mixedlm up and return a fitting closure and a describer.

    Parameters
    ----------
    case : Case

    Returns
    -------
    fit, describe : callable
        See :func:`prepare_crossed`.
    """
    import mixedlm

    mixedlm.lmer("Reaction ~ Days + (Days | Subject)", mixedlm.load_sleepstudy())

    def fit(data):
        return mixedlm.lmer(case.formula, data, REML=True)

    def describe(result):
        return {
            "criterion": float(result.REMLcrit()),
            "converged": bool(result.converged),
            "singular": bool(result.is_singular()),
            "feval": int(result.function_evals),
            "theta": [float(x) for x in result.theta],
            "version": f"mixedlm {mixedlm.__version__}",
        }

    return fit, describe


def prepare_statsmodels(case: Case):
    """Warm statsmodels up and return a fitting closure and a describer.

    The crossed factors are variance components (``vc_formula``) of one group that holds
    every row, statsmodels' way of writing crossed random effects; sleepstudy uses
    ``groups="Subject", re_formula="~Days"``.

    Parameters
    ----------
    case : Case

    Returns
    -------
    fit, describe : callable
        See :func:`prepare_crossed`.
    """
    import pandas as pd
    import statsmodels
    from statsmodels.regression.mixed_linear_model import MixedLM

    spec = case.statsmodels
    sleep = pd.read_csv(SLEEPSTUDY, dtype={"Subject": str})
    MixedLM.from_formula("Reaction ~ Days", sleep, groups="Subject").fit(reml=True)

    def fit(data):
        model = MixedLM.from_formula(spec.fixed, data, groups=spec.groups or "_one",
                                     re_formula=spec.re_formula, vc_formula=spec.vc or None)
        return model.fit(reml=True)

    def describe(result):
        return {
            "criterion": float(-2.0 * result.llf),
            "converged": bool(result.converged),
            "singular": None,
            "feval": None,
            "theta": None,
            "version": f"statsmodels {statsmodels.__version__}",
        }

    return fit, describe


def prepare_statsmodels_data(case: Case, data):
    """Add statsmodels' single-group column and the interaction grouping columns.

    Parameters
    ----------
    case : Case
    data : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    data = data.copy()
    data["_one"] = 1
    for new, (a, b) in case.statsmodels.interactions:
        data[new] = data[a] + ":" + data[b]
    return data


def run_worker(peer: str, case: Case, repeat: int, budget: float) -> dict:
    """Fit ``case`` with a Python peer, timing the fits, and return a JSON-able record.

    Parameters
    ----------
    peer : str
        "crossed", "crossed-nocheck", "statsmodels" or "mixedlm".
    case : Case
    repeat : int
        Number of timed fits (at least ``case.min_repeat``).
    budget : float
        Stop repeating once the timed fits have taken this many seconds in all.

    Returns
    -------
    dict
        ``times`` (wall seconds of each fit), ``cpu_times`` (CPU seconds of this process,
        all threads), ``rss_before_fit_mb``, ``warnings`` and what
        the describer reports (criterion, converged, singular, feval, version).
    """
    if peer == "crossed":
        fit, describe = prepare_crossed(case, check_conv=True)
    elif peer == "crossed-nocheck":
        fit, describe = prepare_crossed(case, check_conv=False)
    elif peer == "mixedlm":
        fit, describe = prepare_mixedlm(case)
    elif peer == "statsmodels":
        fit, describe = prepare_statsmodels(case)
    else:
        raise ValueError(f"unknown Python peer {peer!r}")

    data = load_data(case)
    if peer in ("statsmodels", "mixedlm"):
        data = with_reference_levels(data, case.reference)
    if peer == "statsmodels":
        data = prepare_statsmodels_data(case, data)
    rss_before = peak_rss_mb()

    times, cpu_times = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while True:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = fit(data)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - start_cpu)
            if len(times) >= max(repeat, case.min_repeat) or sum(times) >= budget:
                break
    messages = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    record = describe(result)
    record.update(times=times, cpu_times=cpu_times, rss_before_fit_mb=rss_before,
                  warnings=messages)
    return record


# --------------------------------------------------------------------------------------
# driver side: one subprocess per (case, peer)
# --------------------------------------------------------------------------------------

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
        "data": str(REPO / case.data),
        "formula": case.formula,
        "factors": list(case.factors),
        "reference": case.reference,
        "indicators": [{"name": n, "column": c, "level": lv} for n, c, lv in case.indicators],
        "repeat": max(repeat, case.min_repeat),
        "budget": budget,
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
        record.update(status="timeout", message=f"killed after {timeout:g} s")
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


# --------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------

def md_escape(text: str) -> str:
    """Escape ``|`` for a markdown table cell (also inside backticks)."""
    return text.replace("|", "\\|")


def fmt_time(seconds: float) -> str:
    """Seconds as ``23.5 ms``, ``2.35 s`` or ``173 s`` (negative: ``-1.2 ms``)."""
    if seconds < 0:
        return "-" + fmt_time(-seconds)
    if seconds < 1.0:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 100.0:
        return f"{seconds:.3g} s"
    return f"{seconds:.0f} s"


def fmt_mem(mb: float) -> str:
    """Megabytes as ``0.72 GB`` or ``310 MB``."""
    return f"{mb / 1024:.2f} GB" if mb >= 1024 else f"{mb:.0f} MB"


def cell(record: dict | None, with_memory: bool = False) -> str:
    """Table cell for one peer's record: median time, or why there is none."""
    if record is None:
        return "—"
    if record["status"] == "skipped":
        return "— (skipped)"
    if record["status"] == "timeout":
        return f"> {record['wall_s']:.0f} s (timeout)"
    if record["status"] == "error":
        return "error"
    text = fmt_time(record["median_s"])
    if with_memory:
        text += f", {fmt_mem(record['peak_rss_mb'])}"
    return text


def ratio(record: dict | None, base: dict | None) -> str:
    """``peer / crossed`` median time ratio, or ``—``."""
    if not record or not base or record["status"] != "ok" or base["status"] != "ok":
        if record and base and record["status"] == "timeout" and base["status"] == "ok":
            return f"> {record['wall_s'] / base['median_s']:.0f}×"
        return "—"
    return f"{record['median_s'] / base['median_s']:.1f}×"


def target_cell(case: Case, base: dict | None) -> str:
    """The target for crossed and whether the measured median meets it."""
    text = f"≤ {fmt_time(case.target_s)}"
    if case.target_gb is not None:
        text += f", ≤ {case.target_gb:g} GB"
    if not base or base["status"] != "ok":
        return text
    met = base["median_s"] <= case.target_s
    if case.target_gb is not None:
        met = met and base["peak_rss_mb"] <= case.target_gb * 1024
    return f"{text} {'✓' if met else '✗'}"


def agreement_cell(records: dict[str, dict]) -> str:
    """Each peer's criterion minus crossed's (positive: the peer stopped higher)."""
    base = records.get("crossed")
    if not base or base["status"] != "ok":
        return "—"
    reference = base["criterion"]
    parts = []
    for peer in ("lme4", "statsmodels", "mixedlm"):
        record = records.get(peer)
        if record and record["status"] == "ok":
            parts.append(f"{peer} {record['criterion'] - reference:+.2g}")
    if not parts:
        return f"crossed {reference:.10g}"
    return f"crossed {reference:.10g}; Δ " + ", ".join(parts)


def peer_table(results: dict[str, dict[str, dict]], cases: list[Case], peers: list[str],
               cell_of, title: str) -> list[str]:
    """A markdown table with one row per case and one column per peer, after ``title``."""
    lines = ["", title, "", "| case | " + " | ".join(PEER_LABELS[p] for p in peers) + " |",
             "|---|" + "---|" * len(peers)]
    for case in cases:
        cells = [cell_of(results[case.name].get(peer)) for peer in peers]
        lines.append(f"| {case.name} | " + " | ".join(cells) + " |")
    return lines


def render(results: dict[str, dict[str, dict]], cases: list[Case], peers: list[str],
           header: str) -> str:
    """The markdown report: main table, memory table, crossed details, notes.

    Parameters
    ----------
    results : dict
        ``results[case][peer]`` records from :func:`run_one`.
    cases : list of Case
    peers : list of str
    header : str
        Lines put before the tables (date, machine, versions, command).

    Returns
    -------
    str
    """
    lines = [header, "",
             "| case (REML) | crossed | lme4 | statsmodels | mixedlm | lme4/crossed"
             " | mixedlm/crossed | target | criterion agreement |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        rec = results[case.name]
        memory = case.target_gb is not None
        base = rec.get("crossed")
        lines.append(
            f"| {md_escape(case.title)} | {cell(base, memory)} | {cell(rec.get('lme4'), memory)}"
            f" | {cell(rec.get('statsmodels'), memory)} | {cell(rec.get('mixedlm'), memory)}"
            f" | {ratio(rec.get('lme4'), base)} | {ratio(rec.get('mixedlm'), base)}"
            f" | {target_cell(case, base)} | {agreement_cell(rec)} |")

    def memory_cell(record: dict | None) -> str:
        if record is None or record["status"] == "skipped":
            return "—"
        if record["status"] != "ok":
            return f"{fmt_mem(record['peak_rss_mb'])} ({record['status']})"
        rise = record["peak_rss_mb"] - record["rss_before_fit_mb"]
        return f"{fmt_mem(record['peak_rss_mb'])} (+{fmt_mem(max(rise, 0))})"

    def cpu_cell(record: dict | None) -> str:
        ok = record is not None and record["status"] == "ok"
        return fmt_time(record["median_cpu_s"]) if ok else "—"

    lines += peer_table(results, cases, peers, memory_cell,
                        "Peak resident memory of each subprocess (interpreter, libraries and"
                        " data included; in brackets: the rise during the fits):")
    lines += peer_table(results, cases, peers, cpu_cell,
                        "CPU time of one fit (median; user + system, all threads of the"
                        " process). Less sensitive than wall time to other jobs on the machine:")
    lines += ["", "crossed in detail (median of n fits; the derivative check is lme4's"
              " calc.derivs, on by default):", "",
              "| case | n | crossed | without check | check's cost | evaluations"
              " | converged | singular | lme4 evaluations | mixedlm evaluations |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        rec = results[case.name]
        base, nocheck = rec.get("crossed"), rec.get("crossed-nocheck")
        if not base or base["status"] != "ok":
            lines.append(f"| {case.name} | — | {cell(base)} | {cell(nocheck)} | — | — | — | — "
                         f"| — | — |")
            continue
        cost = "—"
        if nocheck and nocheck["status"] == "ok":
            cost = fmt_time(base["median_s"] - nocheck["median_s"])
        lme4 = rec.get("lme4") or {}
        mlm = rec.get("mixedlm") or {}
        lines.append(
            f"| {case.name} | {len(base['times'])} | {fmt_time(base['median_s'])}"
            f" | {cell(nocheck)} | {cost} | {base['feval']} | {base['converged']}"
            f" | {base['singular']} | {lme4.get('feval', '—')} | {mlm.get('feval', '—')} |")

    notes = []
    for case in cases:
        for peer in peers:
            record = results[case.name].get(peer)
            if record is None:
                continue
            if record["status"] in ("error", "timeout", "skipped"):
                notes.append(f"- {case.name} / {peer}: {record['status']}: {record['message']}")
            elif record["status"] == "ok":
                if not record.get("converged", True):
                    notes.append(f"- {case.name} / {peer}: did not report convergence")
                for message in record.get("warnings", []):
                    notes.append(f"- {case.name} / {peer}: {message.strip()[:300]}")
    if notes:
        lines += ["", "Notes:", "", *notes]
    return "\n".join(lines) + "\n"


def git_commit() -> str:
    """Short commit of the checkout, with ``+dirty`` when ``src/`` has local changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def make_header(argv: list[str], results: dict[str, dict[str, dict]]) -> str:
    """Date, machine, versions of the peers and the command line."""
    versions = sorted({record["version"] for by_peer in results.values()
                       for record in by_peer.values() if record.get("version")})
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        f"Measured {now} on {os.cpu_count()} cores ({cpu_model()}), crossed at commit"
        f" {git_commit()}" + (f"; {', '.join(versions)}." if versions else "."),
        "",
        "Command: `" + " ".join(["python", "benchmarks/run.py", *argv]) + "`",
    ])


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
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before one (case, peer) subprocess is killed (600)")
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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--worker``, one fit) and print the report."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    cases = [CASES_BY_NAME[name] for name in args.cases.split(",")]

    if args.worker:
        record = run_worker(args.worker, cases[0], args.repeat, args.budget)
        args.result.write_text(json.dumps(record))
        return 0

    peers = args.peers.split(",")
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="crossed-bench-") as tmp:
        for case in cases:
            results[case.name] = {}
            for peer in peers:
                if peer == "statsmodels" and not (case.statsmodels.by_default or args.all):
                    record = {"status": "skipped",
                              "message": f"{case.statsmodels.skip_reason} (--all runs it)"}
                else:
                    record = run_one(case, peer, args.repeat, args.budget, args.timeout,
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
                    args.out.write_text(render(results, done, peers, make_header(argv, results))
                                        + "\n(partial: the run is still going)\n")

    report = render(results, cases, peers, make_header(argv, results))
    print(report)
    if args.out:
        args.out.write_text(report)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
