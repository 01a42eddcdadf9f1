"""The pooled crowdsourcing design of issue 16: items × annotators, as annotation platforms
produce it, generated deterministically.

Annotators work in pools: ``pools`` pools of ``pool_size`` annotators (600 × 50 = 30k
annotators). Each item belongs to one pool (drawn uniformly) and is rated by ``raters`` of
that pool's annotators, drawn without replacement (5 of 50): 200k items give 1M ratings.
The rating is

    y = 3 + 0.4·x + b_item + b_annotator + ε,   b_item ~ N(0, 0.8²), b_annotator ~ N(0, 0.5²),
    ε ~ N(0, 1)

with x a standard normal covariate per rating (e.g. the time spent on it, standardised).
The model fitted is ``y ~ 1 + x + (1 | item) + (1 | annotator)``: the annotator Schur
complement is block diagonal by pool (plus the x and y columns), so its sparse factor has
little fill.

Usage::

    .venv/bin/python benchmarks/crowd.py [--items 200000] [--out benchmarks/data/crowd_1m.csv.gz]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["FORMULA", "SEED", "crowd_table", "ensure_crowd_file"]

SEED = 20261126
FORMULA = "y ~ 1 + x + (1 | item) + (1 | annotator)"
DEFAULT_FILE = Path(__file__).resolve().parent / "data" / "crowd_1m.csv.gz"


def crowd_table(items: int = 200_000, pools: int = 600, pool_size: int = 50, raters: int = 5,
                seed: int = SEED) -> pd.DataFrame:
    """The ratings table: columns ``item``, ``annotator``, ``pool`` (strings), ``x``, ``y``.

    Parameters
    ----------
    items, pools, pool_size, raters : int
        Items, pools of annotators, annotators per pool, ratings per item (≤ pool_size).
    seed : int
        numpy Generator seed: the same arguments give the same table.

    Returns
    -------
    pandas.DataFrame
        ``items · raters`` rows, sorted by item.
    """
    if raters > pool_size:
        raise ValueError(f"raters ({raters}) must be at most pool_size ({pool_size})")
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, pools, items)
    # ``raters`` distinct annotators of the item's pool: the first of a random permutation
    local = np.argsort(rng.random((items, pool_size)), axis=1)[:, :raters]
    annotator = (pool[:, None] * pool_size + local).ravel()
    item = np.repeat(np.arange(items), raters)
    n = len(item)
    b_item = rng.normal(0.0, 0.8, items)
    b_ann = rng.normal(0.0, 0.5, pools * pool_size)
    x = rng.normal(size=n)
    y = 3.0 + 0.4 * x + b_item[item] + b_ann[annotator] + rng.normal(size=n)
    width_i, width_a = len(str(items - 1)), len(str(pools * pool_size - 1))
    return pd.DataFrame({
        "item": np.char.add("i", np.char.zfill(item.astype(str), width_i)),
        "annotator": np.char.add("a", np.char.zfill(annotator.astype(str), width_a)),
        "pool": np.repeat(pool, raters).astype(str),
        "x": np.round(x, 6),
        "y": np.round(y, 6),
    })


def ensure_crowd_file(path: Path = DEFAULT_FILE, **kwargs: int) -> Path:
    """Write the table to ``path`` (gzipped CSV) unless it is there already."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        crowd_table(**kwargs).to_csv(tmp, index=False, compression="gzip")
        tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--pools", type=int, default=600)
    parser.add_argument("--pool-size", type=int, default=50)
    parser.add_argument("--raters", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_FILE)
    args = parser.parse_args(argv)
    path = ensure_crowd_file(args.out, items=args.items, pools=args.pools,
                             pool_size=args.pool_size, raters=args.raters)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
