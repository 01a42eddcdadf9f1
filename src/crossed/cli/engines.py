"""``crossed compare-engines``: fit one model with every engine and print them side by side."""

from __future__ import annotations

import argparse

from crossed.cli._tables import count_arg, dump_json
from crossed.cli.fit import (
    JSON_HELP,
    add_family_options,
    add_model_arguments,
    glmm_options,
    parse_reference,
    read_model_table,
)
from crossed.evaluation.compare_engines import compare_engines, format_comparison

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    data, _ = read_model_table(args)
    engines = [e.strip() for e in args.engines.split(",")] if args.engines else None
    glmm = glmm_options(args, data) or {}
    if "control" in glmm:
        raise ValueError("--pirls: compare-engines fits each engine as it is (the native "
                         "engine with lme4's PIRLS rule, as lme4)")
    from crossed.evaluation.specs import resolve_formula

    table = compare_engines(resolve_formula(args.formula), data, engines=engines,
                            reml=not args.ml,
                            reference=parse_reference(args.reference), **glmm)
    if args.json:
        out = {
            "formula": args.formula, "reml": not args.ml,
            "table": table,
            "errors": table.attrs["errors"], "messages": table.attrs["messages"],
        }
        print(dump_json(out))
    else:
        print(format_comparison(table, digits=args.digits))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare-engines",
        help="fit a model with every engine (native, statsmodels, lme4) and compare",
        description="Fit one lme4 formula with several engines and print estimates, standard "
                    "errors, variance components, criterion and time side by side.",
    )
    add_model_arguments(p)
    add_family_options(p)
    p._option_string_actions["--engine"].help = argparse.SUPPRESS  # see --engines
    p.add_argument("--engines", default=None, metavar="A,B",
                   help="comma-separated engines (default: all of native, statsmodels, lme4)")
    p.add_argument("--digits", type=count_arg, default=7, help="significant digits (default 7)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
