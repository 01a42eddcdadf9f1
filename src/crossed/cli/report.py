"""``crossed report``: a self-contained HTML report of one analysis (tables and figures),
or, with ``--text`` / ``--markdown`` / ``--latex``, the APA-style results and methods
paragraphs (``fit.report()``) printed (LaTeX: with the regression table)."""

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


def _write_up(args: argparse.Namespace, fmt: str) -> int:
    """Print the fit's write-up (``fit.report()``) as text, Markdown or LaTeX (with the
    booktabs regression table)."""
    from crossed.api import glmer, lmer
    from crossed.display.publication import regression_table

    if args.compare:
        raise ValueError("--compare belongs to the HTML report; the write-up describes one "
                         "model")
    data, name = read_model_table(args)
    glmm = glmm_options(args, data)
    formula = resolve_formula(args.formula)
    reference = parse_reference(args.reference)
    if glmm is not None:
        fit = glmer(formula, data, reference=reference, data_name=name, **glmm)
        report = fit.report(emmeans=args.focus)
    else:
        if args.ddf not in ("satterthwaite", "kenward-roger"):
            raise ValueError(f"--ddf {args.ddf!r}: the write-up's F tests use "
                             "satterthwaite or kenward-roger")
        fit = lmer(formula, data, reml=not args.ml, reference=reference, data_name=name)
        report = fit.report(emmeans=args.focus, ddf=args.ddf)
    if fmt == "latex":
        print(report.latex())
        print()
        print(regression_table(fit, names=[name]).latex())
    elif fmt == "markdown":
        print(report.markdown())
        print()
        print(regression_table(fit, names=[name]).markdown())
    else:
        print(report.text)
    return 0


def _run(args: argparse.Namespace) -> int:
    fmt = "text" if args.text else "markdown" if args.markdown else "latex" if args.latex \
        else None
    if fmt is not None:
        return _write_up(args, fmt)
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
    how = p.add_mutually_exclusive_group()
    how.add_argument("--text", action="store_true",
                     help="print the APA-style results and methods paragraphs instead of "
                          "writing the HTML report (--focus adds EMMs and contrasts)")
    how.add_argument("--markdown", action="store_true",
                     help="as --text, in Markdown, with the regression table")
    how.add_argument("--latex", action="store_true",
                     help="as --text, in LaTeX, with the booktabs regression table")
    add_model_options(p)
    add_family_options(p)
    p.set_defaults(func=_run)
