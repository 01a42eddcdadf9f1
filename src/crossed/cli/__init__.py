"""Command-line interface: a thin layer over the public API.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (called with the parsed arguments, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

_COMMAND_MODULES = (
    "crossed.cli.fit",
    "crossed.cli.resample",
    "crossed.cli.anova",
    "crossed.cli.emmeans",
    "crossed.cli.specs",
    "crossed.cli.report",
    "crossed.cli.headroom",
    "crossed.cli.engines",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``crossed`` argument parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="crossed", description="Mixed-effects analysis of evaluation results."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"crossed: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
