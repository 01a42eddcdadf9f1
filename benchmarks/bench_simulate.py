"""Simulation benchmarks: crossed against lme4 + lmerTest + emmeans (R), side by side.

1. Missing-data experiment of the repeated-measures analysis: ``delta ~ language * task *
   mode + (1 | architecture)`` on exist_multi, 10 fractions (0.05 ... 0.5) x 100 random
   removals, each refitted and the EMM contrast of language tested with Satterthwaite df
   (``crossed.ablation``; R: ``lmerTest::lmer`` + ``emmeans(...) |> pairs()`` per subset).
   R runs on exactly the subsets crossed used (``removal_masks``), so the p-values can be
   compared one by one. Target (issue 6): crossed <= 5 s (R took 345 s).
2. Power analysis of the CCMEM on blurb_like: 1,000 simulations, t test of ``seed20`` with
   Satterthwaite df (``crossed.power_sim``; R: ``lme4::refit`` on the same simulated
   responses + ``lmerTest`` summary). Target: crossed <= 60 s.

Usage::

    .venv/bin/python benchmarks/bench_simulate.py                 # everything, R included
    .venv/bin/python benchmarks/bench_simulate.py --r-nsim 100     # R power on 100 sims
    .venv/bin/python benchmarks/bench_simulate.py --skip-r --n-jobs 2

R's power time for fewer simulations than crossed's is scaled linearly to crossed's number
(marked "scaled" in the table). Times are wall-clock; the machine may be shared, compare
the ratios of one run. ``--json FILE`` stores the run (date, commit, machine, every time
and agreement figure) for the docs' table (:func:`render_stored`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import crossed as cx
from crossed import simulate as cs
from crossed.simulate.ablation import removal_masks
from crossed.simulate.execution import seed_sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ABLATION_FORMULA = "delta ~ language * task * mode + (1 | architecture)"
CCMEM = ("score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) "
         "+ (1 | model:dataset)")
REFERENCE = {"batch_size": "32", "lr": "5e-5", "seed": "59"}
RM = {"subject": "model", "within": ["language", "task", "mode"], "effect": "language"}


def run_r(mode: str, data: Path, table: Path, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = ["Rscript", str(HERE / "r" / "simulate.R"), mode, str(data), str(table), str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        res = json.loads(out.read_text())
    res["p_value"] = np.array([np.nan if v is None else v for v in res["p_value"]], float)
    return res


def bench_ablation(args, tmp: Path) -> dict:
    data = cx.load_dataset("exist_multi")
    fractions = [round(0.05 * k, 2) for k in range(1, 11)]
    cx.ablation(data, ABLATION_FORMULA, cs.emm_contrast("language"), fractions=[0.1],
                reps=3, seed=0)  # warm-up (imports, caches)
    t0, c0 = time.perf_counter(), time.process_time()
    res = cx.ablation(data, ABLATION_FORMULA, cs.emm_contrast("language"),
                      fractions=fractions, reps=args.reps, seed=args.seed, n_jobs=args.n_jobs)
    t_crossed, c_crossed = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    with_rm = cx.ablation(data, ABLATION_FORMULA, cs.emm_contrast("language"),
                          fractions=fractions, reps=args.reps, seed=args.seed,
                          n_jobs=args.n_jobs, rm_anova=RM)
    t_rm = time.perf_counter() - t0
    out = {"crossed": t_crossed, "crossed_cpu": c_crossed, "crossed_with_rm": t_rm,
           "result": with_rm, "r": None}
    if args.skip_r:
        return out
    masks = removal_masks(len(data), fractions, args.r_reps, args.seed)
    data_csv, keep_csv = tmp / "exist_multi.csv", tmp / "keep.csv"
    data.to_csv(data_csv, index=False)
    masks.to_csv(keep_csv, index=False)
    r = run_r("ablation", data_csv, keep_csv, args.timeout)
    lmm = res.replicates[res.replicates["method"] == "lmm"]
    lmm = lmm[lmm["rep"] < args.r_reps]
    ours = lmm["p_value"].to_numpy()
    both = np.isfinite(ours) & np.isfinite(r["p_value"])
    scale = len(fractions) * args.reps / r["n"]
    out["r"] = {"elapsed": r["elapsed"], "n": r["n"], "versions": r["versions"],
                "scaled": r["n"] < len(fractions) * args.reps,
                "elapsed_scaled": r["elapsed"] * scale, "cpu_scaled": r["cpu"] * scale,
                "same_status": int(np.sum(np.isfinite(ours) == np.isfinite(r["p_value"]))),
                "max_abs_p_diff": float(np.max(np.abs(ours[both] - r["p_value"][both])))
                if both.any() else np.nan,
                "same_decision": int(np.sum((ours[both] < 0.05) == (r["p_value"][both] < 0.05))),
                "n_both": int(both.sum())}
    return out


def bench_power(args, tmp: Path) -> dict:
    data = cx.load_dataset("blurb_like")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer(CCMEM, data, reference=REFERENCE)
    cx.power_sim(fit, cs.fixed("seed20"), nsim=3, seed=0)  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    res = cx.power_sim(fit, cs.fixed("seed20"), nsim=args.nsim, seed=args.seed,
                       n_jobs=args.n_jobs)
    t_crossed, c_crossed = time.perf_counter() - t0, time.process_time() - c0
    out = {"crossed": t_crossed, "crossed_cpu": c_crossed, "result": res, "r": None}
    if args.skip_r:
        return out
    n_r = min(args.r_nsim, args.nsim)
    seeds = seed_sequence(args.seed).spawn(args.nsim)[:n_r]
    ys = np.column_stack([cs.simulate_responses(fit, 1, np.random.default_rng(s))[:, 0]
                          for s in seeds])
    data_csv, y_csv = tmp / "blurb_like.csv", tmp / "y.csv"
    data.to_csv(data_csv, index=False)
    pd.DataFrame(ys, columns=[f"y{i}" for i in range(n_r)]).to_csv(y_csv, index=False)
    r = run_r("power", data_csv, y_csv, args.timeout)
    ours = res.replicates["p_value"].to_numpy()[:n_r]
    both = np.isfinite(ours) & np.isfinite(r["p_value"])
    out["r"] = {"elapsed": r["elapsed"], "n": r["n"], "versions": r["versions"],
                "scaled": n_r < args.nsim, "elapsed_scaled": r["elapsed"] * args.nsim / n_r,
                "cpu_scaled": r["cpu"] * args.nsim / n_r,
                "max_abs_p_diff": float(np.max(np.abs(ours[both] - r["p_value"][both]))),
                "same_decision": int(np.sum((ours[both] < 0.05) == (r["p_value"][both] < 0.05))),
                "n_both": int(both.sum())}
    return out


def report(abl: dict, pw: dict, args) -> str:
    lines = ["# Simulation benchmarks: crossed vs R (lme4 + lmerTest + emmeans)", ""]
    lines.append(f"n_jobs = {args.n_jobs}, seed = {args.seed}")
    lines.append("")
    lines.append("| task | crossed wall (CPU) | R wall (CPU) | R / crossed wall (CPU) | "
                 "target (crossed wall) |")
    lines.append("|---|---|---|---|---|")
    rows = [(f"missing data: 10 fractions x {args.reps} refits, EMM contrast (Satterthwaite)",
             abl, 5.0), (f"power: CCMEM blurb_like, {args.nsim} simulations, t test seed20",
                         pw, 60.0)]
    for name, res, target in rows:
        r = res["r"]
        ours = f"{res['crossed']:.2f} s ({res['crossed_cpu']:.2f} s)"
        if r is None:
            r_txt, ratio = "skipped", "-"
        else:
            r_txt = (f"{r['elapsed_scaled']:.1f} s ({r['cpu_scaled']:.1f} s)"
                     + (f", scaled from {r['n']} runs" if r["scaled"] else ""))
            ratio = (f"{r['elapsed_scaled'] / res['crossed']:.0f}x "
                     f"({r['cpu_scaled'] / res['crossed_cpu']:.0f}x)")
        ok = "met" if res["crossed"] <= target else "MISSED"
        lines.append(f"| {name} | {ours} | {r_txt} | {ratio} | <= {target:g} s: {ok} |")
    lines.append("")
    lines.append("CPU: user + system time of the process (crossed with n_jobs=1; R one core); "
                 "on a shared machine it shows what the wall time would be unloaded.")
    lines.append("")
    lines.append(f"crossed with the repeated-measures ANOVA on the same subsets as well: "
                 f"{abl['crossed_with_rm']:.2f} s")
    for name, res in (("missing data", abl), ("power", pw)):
        r = res["r"]
        if r is not None:
            lines.append(f"{name}: same subsets/responses in R; p-values of both on "
                         f"{r['n_both']} runs, max |p_crossed - p_R| = "
                         f"{r['max_abs_p_diff']:.2e}, same decision at 0.05 on "
                         f"{r['same_decision']}/{r['n_both']}"
                         + (f", same fit/estimability status on {r['same_status']}/{r['n']}"
                            if "same_status" in r else ""))
            lines.append(f"  R versions: {r['versions']}")
    lines.append("")
    lines.append("Detection rate of the language contrast by fraction removed:")
    lines.append(abl["result"].summary().to_string(index=False,
                                                   float_format=lambda v: f"{v:.3f}"))
    lines.append("")
    lines.append(str(pw["result"]))
    return "\n".join(lines)


def _table_rows(abl: dict, pw: dict, reps: int, nsim: int) -> list[str]:
    rows = [(f"missing data: 10 fractions × {reps} refits, EMM contrast of language "
             f"(Satterthwaite)", abl, 5.0),
            (f"power: CCMEM on blurb_like, {nsim:,} simulations, t test of seed20 "
             f"(Satterthwaite)", pw, 60.0)]
    out = []
    for name, res, target in rows:
        r = res["r"]
        ours = f"{res['crossed']:.2f} s ({res['crossed_cpu']:.2f} s)"
        if r is None:
            r_txt, ratio = "skipped", "—"
        else:
            r_txt = (f"{r['elapsed_scaled']:.0f} s ({r['cpu_scaled']:.0f} s)"
                     + (f", scaled from {r['n']} runs" if r["scaled"] else ""))
            ratio = f"{r['elapsed_scaled'] / res['crossed']:.0f}×"
        out.append(f"| {name} | {ours} | {r_txt} | {ratio} | ≤ {target:g} s |")
    return out


def render_stored(stored: dict) -> str:
    """The docs' speed table (``docs/simulation.md``) of a run stored with ``--json``: a
    line saying which run it is, the table, the agreement of the p-values."""
    meta, a = stored["meta"], stored["args"]
    env, v = meta["environment"], meta["versions"]
    lines = [f"Run {meta['started']} – {meta['finished'][11:]} at commit `{meta['commit']}` "
             f"on {env['cpu']}, {env['cores']} cores (load average {env['load'][0]:g} at the "
             f"start), crossed {v['crossed']}, R {v['R']} with lme4 {v['lme4']}, n_jobs = "
             f"{a['n_jobs']}, seed {a['seed']}; `{stored['command']}`. Wall time, CPU time "
             f"in parentheses:", "",
             "| task | crossed | R | R / crossed | target (crossed) |",
             "|---|---|---|---|---|",
             *_table_rows(stored["ablation"], stored["power"], a["reps"], a["nsim"])]
    notes = []
    for name, res in (("missing data", stored["ablation"]), ("power", stored["power"])):
        r = res["r"]
        if r is not None:
            notes.append(f"{name}: max |p_crossed − p_R| = {r['max_abs_p_diff']:.1e} over "
                         f"{r['n_both']} runs, the same decision at 0.05 on "
                         f"{r['same_decision']}"
                         + (f", the same fit/estimability status on {r['same_status']} of "
                            f"{r['n']}" if "same_status" in r else ""))
    if notes:
        lines += ["", "The p-values of the same subsets and simulated responses in R: "
                  + "; ".join(notes) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="removals per fraction (crossed)")
    ap.add_argument("--r-reps", type=int, default=100, help="removals per fraction in R")
    ap.add_argument("--nsim", type=int, default=1000, help="power simulations (crossed)")
    ap.add_argument("--r-nsim", type=int, default=1000, help="power simulations in R")
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--skip-r", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path, help="store the run (for the docs' table)")
    args = ap.parse_args(argv)
    from bench_engines import git_commit, run_metadata

    started, commit = time.time(), git_commit()
    if not args.skip_r and shutil.which("Rscript") is None:
        print("Rscript not found: R columns skipped", file=sys.stderr)
        args.skip_r = True
    with tempfile.TemporaryDirectory() as tmp:
        abl = bench_ablation(args, Path(tmp))
        pw = bench_power(args, Path(tmp))
    text = report(abl, pw, args)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        command = "benchmarks/bench_simulate.py " + " ".join(
            argv if argv is not None else sys.argv[1:])
        stored = {"command": command.strip(),
                  "args": {k: (str(x) if isinstance(x, Path) else x)
                           for k, x in vars(args).items()},
                  "meta": run_metadata(started, time.time(), commit),
                  "ablation": {k: x for k, x in abl.items() if k != "result"},
                  "power": {k: x for k, x in pw.items() if k != "result"}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(stored, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
