"""``crossed report``: a self-contained HTML report of one analysis (tables and figures)."""

from __future__ import annotations

import argparse

from crossed.cli._files import check_output, write_output
from crossed.cli.fit import (
    DATA_HELP,
    add_family_options,
    add_model_options,
    glmm_options,
    parse_reference,
    read_model_table,
)
from crossed.evaluation.specs import resolve_family, resolve_formula

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("the report's figures need matplotlib: pip install "
                         "'crossed[plots]'") from None
    from crossed.report import build_report

    output = check_output(args.output)           # before minutes of fitting
    data, name = read_model_table(args)
    glmm = glmm_options(args, data)
    for f in args.compare:
        if resolve_family(f) is not None:
            raise ValueError(f"--compare {f!r} is a GLMM specification: the report compares "
                             "linear mixed models")
    text = build_report(data, resolve_formula(args.formula), focus=args.focus,
                        compare=[resolve_formula(f) for f in args.compare] or None,
                        title=args.title, data_name=name, ddf=args.ddf,
                        reference=parse_reference(args.reference), reml=not args.ml,
                        systems=args.systems, check=not args.no_check, glmm=glmm)
    path = write_output(output, lambda p: p.write_text(text, encoding="utf-8"))
    print(f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report (tables, figures)")
    p.add_argument("data", help=DATA_HELP)
    p.add_argument("formula", help="lme4 formula or named specification (NAME:key=value;...)")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write")
    p.add_argument("--focus", help="factor whose EMMs are reported (default: the first)")
    p.add_argument("--compare", nargs="*", default=[], metavar="FORMULA",
                   help="other specifications compared with the main one")
    p.add_argument("--systems", help="grouping factor whose adjusted means are reported "
                                     "(e.g. model in a cross-classified model)")
    p.add_argument("--title", help="title of the report")
    p.add_argument("--ddf", default="satterthwaite",
                   help="satterthwaite, kenward-roger or none")
    p.add_argument("--no-check", action="store_true",
                   help="leave out the simulated-residual (DHARMa-style) tests; fits with "
                        "more than 50,000 observations are tested on a random subsample "
                        "of 50,000")
    add_model_options(p)
    add_family_options(p)
    p.set_defaults(func=_run)
