"""cx.glmer on the issue-17 benchmarks: cbpp (formula to fit) and an items × systems design
(20 systems × 5,000 items × 2 datasets, ~200k binary rows,
``correct ~ system + (1 | item) + (1 | dataset)``), beside lme4's glmer when R is there.

    PYTHONPATH=src python benchmarks/bench_glmer.py [--rows-scale 1.0] [--r]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import crossed as cx

ROOT = Path(__file__).resolve().parents[1]


def items_systems(n_items: int = 5000, n_systems: int = 20, n_datasets: int = 2,
                  seed: int = 17) -> pd.DataFrame:
    """Binary correctness from an IRT-like model: system ability, item difficulty."""
    rng = np.random.default_rng(seed)
    ability = np.linspace(-1, 1, n_systems)
    items = n_items * n_datasets
    difficulty = rng.normal(0, 1.2, items)
    shift = rng.normal(0, 0.3, n_datasets)
    sys_idx = np.repeat(np.arange(n_systems), items)
    item_idx = np.tile(np.arange(items), n_systems)
    ds_idx = item_idx // n_items
    eta = ability[sys_idx] - difficulty[item_idx] + shift[ds_idx]
    correct = (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(int)
    return pd.DataFrame({"correct": correct, "system": [f"s{k:02d}" for k in sys_idx],
                         "item": [f"d{d}_i{k:05d}" for d, k in zip(ds_idx, item_idx,
                                                                  strict=True)],
                         "dataset": [f"d{d}" for d in ds_idx]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--r", action="store_true", help="also time lme4's glmer through Rscript")
    args = ap.parse_args()
    cb = pd.read_csv(ROOT / "tests/data/glmm/cbpp.csv", dtype={"herd": str, "period": str})
    form = "cbind(incidence, size - incidence) ~ period + (1 | herd)"
    times = []
    for _ in range(5):
        t = time.perf_counter()
        cx.glmer(form, cb)
        times.append(time.perf_counter() - t)
    print(f"cbpp formula to fit: best {min(times) * 1000:.1f} ms (median "
          f"{np.median(times) * 1000:.1f} ms)")
    d = items_systems(args.items)
    t = time.perf_counter()
    c = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("correct ~ system + (1 | item) + (1 | dataset)", d)
    tn = time.perf_counter() - t
    cn = time.process_time() - c
    print(f"items x systems ({len(d)} rows): native {tn:.2f} s wall, {cn:.2f} s CPU, "
          f"-2logLik {fit.criterion:.4f}, "
          f"theta {np.round(fit.theta, 5)}, evaluations {dict(fit.engine_info)['feval']}")
    if args.r:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "d.csv"
            d.to_csv(path, index=False)
            script = (
                "suppressPackageStartupMessages(library(lme4)); "
                f"d <- read.csv('{path}'); "
                "t <- system.time(f <- glmer(correct ~ system + (1 | item) + (1 | dataset), "
                "d, binomial)); "
                "cat(sprintf('lme4 %.2f s wall, %.2f s CPU, -2logLik %.4f theta %s\\n', "
                "t[['elapsed']], t[['user.self']] + t[['sys.self']], -2 * logLik(f), "
                "paste(round(getME(f, 'theta'), 5), collapse = ' ')))")
            out = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
            print(out.stdout.strip() or out.stderr.strip()[-500:])


if __name__ == "__main__":
    main()
