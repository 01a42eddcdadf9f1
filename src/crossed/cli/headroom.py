"""``crossed headroom``: gold-standard normalisation and fraction of headroom of raw scores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crossed.cli._files import check_output, write_output
from crossed.cli.fit import DATA_HELP, read_table
from crossed.evaluation.headroom import headroom

__all__ = ["register"]


def _source(text: str):
    """A number, a lookup table (CSV/Parquet file), or a column name."""
    try:
        return float(text)
    except ValueError:
        pass
    if Path(text).is_file():
        return read_table(text)[0]
    return text


def _run(args: argparse.Namespace) -> int:
    if args.output:
        check_output(args.output)
    data, _ = read_table(args.data)
    out = headroom(data, score=args.score, gold=_source(args.gold),
                   baseline=_source(args.baseline), on=args.on or None, name=args.name)
    if args.output:
        if args.output.endswith(".parquet"):
            write_output(args.output, lambda p: out.to_parquet(p, index=False))
        else:
            write_output(args.output, lambda p: out.to_csv(p, index=False))
        print(f"wrote {args.output} ({len(out)} rows, column {args.name!r})")
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("headroom", help="normalise raw scores by the gold standard and "
                                        "compute the fraction of headroom over a baseline")
    p.add_argument("data", help=DATA_HELP)
    p.add_argument("--score", required=True, help="raw score column")
    p.add_argument("--gold", required=True,
                   help="gold-standard score: a column, a number, or a CSV/Parquet lookup "
                        "table (key columns of --on and one value column)")
    p.add_argument("--baseline", required=True,
                   help="baseline score, given like --gold; a lookup table may hold several "
                        "runs per group (averaged)")
    p.add_argument("--on", nargs="*", default=[], metavar="COLUMN",
                   help="key columns matching lookup tables to rows")
    p.add_argument("--name", default="delta", help="name of the headroom column")
    p.add_argument("-o", "--output", help="CSV/Parquet file to write (default: stdout)")
    p.set_defaults(func=_run)
