"""Fits on data larger than memory (issue 32): the LMM ``score ~ system + (1 | item) +
(1 | system:dataset)`` and the binary GLMM ``correct ~ system + (1 | item)`` on generated
Parquet data, fitted by ``cx.lmer`` / ``cx.glmer`` on a ``LocalCluster`` of 2 worker
processes with a stated memory limit each.

The levels are fixed at every size (50 systems x 20 datasets, 20,000 items, each item in
one dataset, as in evaluation logs: an item meets the 50 cells of its dataset); the rows
grow.
Each size is written once to ``--data-dir`` (Parquet files of ``--file-rows`` rows,
generated file by file: the generator never holds the data set). Reported per fit: wall
time, passes over the data, the peak resident memory of the driver (this process, sampled
during the fit; its resident size before the fit beside it) and of each worker (sampled
through ``client.run``), and, at the smallest
size, the in-memory fit's time and the identity of both fits (criterion relative
difference, largest estimate difference).

Usage::

    python benchmarks/dask_scale.py --sizes 2000000                  # LMM at 2M
    python benchmarks/dask_scale.py --sizes 2e6 1e7 5e7 1e8 --glmm-sizes 2e6 1e7 2e7
    python benchmarks/dask_scale.py --sizes 2e6 --glmm-sizes 2e6 --memory-limit 4GiB

Targets (issue 32): time linear in rows from 10M up (log-log slope <= 1.1), driver peak
under 2 GB and every worker under its limit at every size, Dask within 3x of in-memory at
2M rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

N_SYSTEMS, N_DATASETS, N_ITEMS = 50, 20, 20_000
LMM = "score ~ system + (1 | item) + (1 | system:dataset)"
GLMM = "correct ~ system + (1 | item)"


def _effects(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"system": rng.normal(0, 0.3, N_SYSTEMS), "item": rng.normal(0, 1.0, N_ITEMS),
            "cell": rng.normal(0, 0.4, (N_SYSTEMS, N_DATASETS))}


def generate(kind: str, rows: int, directory: Path, file_rows: int, seed: int = 32) -> Path:
    """Write ``rows`` generated rows as Parquet files under ``directory/kind-rows/`` (once;
    kept for later runs), file by file. Returns the directory."""
    out = directory / f"{kind}-{rows}-nested"
    done = out / "_done"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    eff = _effects(seed)
    systems = np.array([f"sys{i:02d}" for i in range(N_SYSTEMS)])
    datasets = np.array([f"data{i:02d}" for i in range(N_DATASETS)])
    start = 0
    for k in range(math.ceil(rows / file_rows)):
        n = min(file_rows, rows - start)
        rng = np.random.default_rng([seed, k])
        s = rng.integers(0, N_SYSTEMS, n)
        i = rng.integers(0, N_ITEMS, n)
        d = i % N_DATASETS  # (each item belongs to one dataset, as in evaluation logs)
        eta = eff["system"][s] + eff["item"][i]
        frame = {"system": systems[s], "item": i.astype(np.int64)}
        if kind == "lmm":
            frame["dataset"] = datasets[d]
            frame["score"] = 50.0 + eta + eff["cell"][s, d] + rng.normal(0, 1.0, n)
        else:
            frame["correct"] = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
        pd.DataFrame(frame).to_parquet(out / f"part-{k:05d}.parquet", index=False)
        start += n
    done.touch()
    return out


class Peaks:
    """Peak resident memory of this process and of each worker, sampled every
    ``interval`` seconds while running."""

    def __init__(self, client: object = None, interval: float = 0.25) -> None:
        import psutil

        self.client, self.interval = client, interval
        self.driver = 0
        self.workers: dict[str, int] = {}
        self._me = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.driver = max(self.driver, self._me.memory_info().rss)
            if self.client is not None:
                try:
                    rss = self.client.run(_rss)  # type: ignore[attr-defined]
                    for w, v in rss.items():
                        self.workers[w] = max(self.workers.get(w, 0), v)
                except Exception:  # noqa: BLE001 - a sample missed while a worker restarts
                    pass
            self._stop.wait(self.interval)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.driver = max(self.driver, self._me.memory_info().rss)


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _passes(fit: object) -> int:
    record = fit.memo("passes", lambda: ())  # type: ignore[attr-defined]
    if record and record[-1][0] == "pirls":
        return 2 + int(record[-1][1])  # levels, sums, then the PIRLS passes
    return len(record)


def run(kind: str, rows: int, args: argparse.Namespace, client: object) -> dict:
    # (generated in a child process: the driver's memory is the fit's alone)
    from concurrent.futures import ProcessPoolExecutor

    import crossed as cx

    with ProcessPoolExecutor(1) as pool:
        path = pool.submit(generate, kind, rows, Path(args.data_dir), args.file_rows).result()
    glob = str(path / "*.parquet")
    formula = LMM if kind == "lmm" else GLMM
    control = cx.LmerControl(pirls=args.pirls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = _rss()
        with Peaks(client) as peaks:
            t0 = time.perf_counter()
            if kind == "lmm":
                fit = cx.lmer(formula, glob, client=client)
            else:
                fit = cx.glmer(formula, glob, client=client, control=control)
            seconds = time.perf_counter() - t0
    out = {"model": kind, "rows": rows, "seconds": round(seconds, 2), "passes": _passes(fit),
           "driver_peak_mb": round(peaks.driver / 2**20, 1),
           "driver_before_mb": round(base / 2**20, 1),
           "worker_peak_mb": {w.rsplit(":", 1)[-1]: round(v / 2**20, 1)
                              for w, v in peaks.workers.items()},
           "criterion": float(fit.criterion if kind == "glmm" else fit.deviance)}
    if rows <= args.in_memory_up_to:
        data = pd.read_parquet(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            mem = (cx.lmer(formula, data) if kind == "lmm"
                   else cx.glmer(formula, data, control=control))
            out["in_memory_seconds"] = round(time.perf_counter() - t0, 2)
        crit = mem.deviance if kind == "lmm" else mem.criterion
        out["identity_criterion_rel"] = abs(out["criterion"] - crit) / abs(crit)
        out["identity_estimates_max"] = float(max(np.max(np.abs(fit.beta - mem.beta)),
                                                  np.max(np.abs(fit.theta - mem.theta))))
        out["dask_over_in_memory"] = round(seconds / out["in_memory_seconds"], 2)
        del data
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="*", type=float, default=[2e6],
                   help="LMM sizes in rows (default 2e6; the issue's: 2e6 1e7 5e7 1e8)")
    p.add_argument("--glmm-sizes", nargs="*", type=float, default=[],
                   help="GLMM sizes in rows (the issue's: 2e6 1e7 2e7)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="4GiB", help="per worker (default 4GiB)")
    p.add_argument("--data-dir", default=os.environ.get("CROSSED_DASK_DATA",
                                                        "/tmp/crossed-dask-scale"))
    p.add_argument("--file-rows", type=int, default=1_000_000,
                   help="rows per Parquet file (a partition each)")
    p.add_argument("--in-memory-up-to", type=float, default=2e6,
                   help="also fit in memory (time and identity) up to this many rows")
    p.add_argument("--pirls", default="lme4", choices=("lme4", "exact"),
                   help="the GLMMs' PIRLS stopping rule, both fits (lme4's rule leaves the "
                        "criterion a step function of the iterations, at about 1e-8 "
                        "relative on 2M rows: the paths then stop apart; 'exact' is smooth)")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    from distributed import Client

    from crossed.engines.dask_fit import local_cluster

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from environment import describe, environment

    results = []
    env_start = environment()
    with local_cluster(n_workers=args.workers, threads_per_worker=1,
                       memory_limit=args.memory_limit, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        for kind, sizes in (("lmm", args.sizes), ("glmm", args.glmm_sizes)):
            for rows in sizes:
                r = run(kind, int(rows), args, client)
                results.append(r)
                print(json.dumps(r), flush=True)
    print(f"\nLocalCluster: {args.workers} workers x 1 thread, memory limit "
          f"{args.memory_limit} each; levels: {N_SYSTEMS} systems x {N_DATASETS} datasets, "
          f"{N_ITEMS} items\n")
    print("| model | rows | wall s | passes | driver peak MB | worker peaks MB | "
          "in-memory s | identity (crit rel, est max) |")
    print("|---|---:|---:|---:|---:|---|---:|---|")
    for r in results:
        ident = (f"{r['identity_criterion_rel']:.1e}, {r['identity_estimates_max']:.1e}"
                 if "identity_criterion_rel" in r else "")
        print(f"| {r['model']} | {r['rows']:,} | {r['seconds']} | {r['passes']} | "
              f"{r['driver_peak_mb']} | "
              f"{', '.join(str(v) for v in r['worker_peak_mb'].values())} | "
              f"{r.get('in_memory_seconds', '')} | {ident} |")
    for kind in ("lmm", "glmm"):
        pts = [(r["rows"], r["seconds"]) for r in results
               if r["model"] == kind and r["rows"] >= 1e7]
        if len(pts) >= 2:
            x, y = np.log([a for a, _ in pts]), np.log([b for _, b in pts])
            print(f"{kind}: log-log slope of time in rows from 10M up: "
                  f"{np.polyfit(x, y, 1)[0]:.2f}")
    print("\n" + "\n".join(describe(env_start, environment(), {})))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results,
                                               "environment": env_start}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
