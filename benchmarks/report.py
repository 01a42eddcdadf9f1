"""The benchmark's report: markdown tables of times, ratios, targets, memory, CPU time
and agreement of the criteria, from the records of every (case, peer) pair."""

from __future__ import annotations

import datetime
import os
import subprocess

from cases import PEER_LABELS, REPO, Case
from environment import cpu_model


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
        return f"did not finish in {record.get('timeout_s', record['wall_s']):.0f} s"
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


def _ratio_value(record: dict | None, base: dict) -> tuple[float, bool] | None:
    """``peer / crossed`` and whether it is a lower bound (the peer did not finish)."""
    if not record:
        return None
    if record["status"] == "ok":
        return record["median_s"] / base["median_s"], False
    if record["status"] == "timeout":
        return record["wall_s"] / base["median_s"], True
    return None


def target_cell(case: Case, records: dict[str, dict]) -> str:
    """The case's targets for crossed (time, memory, and its ratio targets, e.g. ≥ 10×
    lme4, where that peer ran) and whether the measured medians meet each (✓/✗; ? where
    the peer did not finish and the lower bound falls short)."""
    base = records.get("crossed")
    ok = bool(base) and base["status"] == "ok"
    parts = []
    if case.target_s is not None:
        text = f"≤ {fmt_time(case.target_s)}"
        if ok:
            text += " ✓" if base["median_s"] <= case.target_s else " ✗"
        parts.append(text)
    if case.target_gb is not None:
        text = f"≤ {case.target_gb:g} GB"
        if ok:
            text += " ✓" if base["peak_rss_mb"] <= case.target_gb * 1024 else " ✗"
        parts.append(text)
    for peer, want in case.ratio_targets.items():
        got = _ratio_value(records.get(peer), base) if ok else None
        if got is None:
            continue
        value, bound = got
        parts.append(f"≥ {want:g}× {peer} {'✓' if value >= want else ('?' if bound else '✗')}")
    return ", ".join(parts) if parts else "—"


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
             "| case (REML; GLMM: ML) | crossed | lme4 | statsmodels | mixedlm | lme4/crossed"
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
            f" | {target_cell(case, rec)} | {agreement_cell(rec)} |")

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


def make_header(argv: list[str], results: dict[str, dict[str, dict]],
                env_lines: list[str] | None = None) -> str:
    """Date, machine, versions of the peers, the command line and the environment
    (``env_lines``: :func:`environment.describe`'s)."""
    versions = sorted({record["version"] for by_peer in results.values()
                       for record in by_peer.values() if record.get("version")})
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        f"Measured {now} on {os.cpu_count()} cores ({cpu_model()}), crossed at commit"
        f" {git_commit()}" + (f"; {', '.join(versions)}." if versions else "."),
        "",
        "Command: `" + " ".join(["python", "benchmarks/run.py", *argv]) + "`",
        *(env_lines or []),
    ])

