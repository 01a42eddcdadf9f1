"""Benchmark: the full leaderboard-uncertainty pipeline on ner_like (6 systems × 61 languages).

Runs :func:`crossed.resample.analyze` — variance components (1,000 resamples for their SEs),
aggregates (mean, geometric mean, median) with tasks fixed and bootstrapped, pairwise
differences with tasks fixed and subsampled, rank distributions — with 10,000 resamples
each, for parametric and nonparametric replication resampling, and prints the wall time.
Target: under 5 s per pipeline.

usage: python benchmarks/bench_resample.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import crossed as cx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-resamples", type=int, default=10_000)
    args = ap.parse_args()
    ner = cx.load_dataset("ner_like")
    table = cx.resample.from_replicates(ner, "f1", "model", "language", seed_col="seed")
    print(f"ner_like: {table.shape[0]} systems × {table.shape[1]} languages × 10 seeds; "
          f"{args.n_resamples} resamples")
    for replication in ("parametric", "nonparametric"):
        times = []
        for r in range(args.repeat):
            t0 = time.perf_counter()
            res = cx.resample.analyze(table, n_resamples=args.n_resamples,
                                      replication=replication, seed=r, progress=False)
            times.append(time.perf_counter() - t0)
        print(f"analyze(replication={replication!r}): best {min(times):.2f} s, "
              f"median {sorted(times)[len(times) // 2]:.2f} s over {args.repeat} runs "
              f"({len(res.aggregates)} aggregate rows, {len(res.pairwise)} pairwise rows, "
              f"{len(res.ranks)} rank rows)")
    t0 = time.perf_counter()
    cx.resample.analyze(ner, n_resamples=args.n_resamples, seed=0, progress=False,
                        score="f1", system="model", task="language", seed_col="seed")
    print(f"analyze from the raw long DataFrame (incl. reading it): "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
