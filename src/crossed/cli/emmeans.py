"""``crossed emmeans``: estimated marginal means of a factor and their pairwise contrasts."""

from __future__ import annotations

import argparse
import warnings

import pandas as pd

from crossed.cli._tables import dump_json, print_notes, text_table
from crossed.cli.fit import JSON_HELP, add_family_options, add_model_arguments, fit_from_args
from crossed.fit import GlmerFit

__all__ = ["register"]


def _scale_notes(table: pd.DataFrame) -> None:
    """emmeans' notes on a table's scale ("Results are given on the logit (not the
    response) scale.", "Tests are performed on the log odds ratio scale"), as it prints
    them below the table."""
    for note in [*table.attrs.get("scale_messages", []), *table.attrs.get("messages", [])]:
        if note.startswith(("Results are given", "Intervals are back-transformed",
                            "Tests are performed", "Note: contrasts")):
            print(note)


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_args(args)
        glmm = isinstance(fit, GlmerFit)
        if glmm:  # emmeans of a glmer: asymptotic (z) intervals, on the scale asked for
            emm = fit.emmeans(args.specs, by=args.by or None, level=args.level,
                              type="link" if args.scale == "regrid" else args.scale)
            if args.scale == "regrid":
                emm = emm.regrid()
        else:
            emm = fit.emmeans(args.specs, by=args.by or None, ddf=args.ddf, level=args.level)
        table = emm.table()
        pairs = emm.pairs(adjust=args.adjust)
    notes = sorted({str(w.message) for w in caught})
    if args.json:
        print(dump_json({"formula": fit.formula, "specs": args.specs, "by": args.by,
                         "ddf": args.ddf, "adjust": pairs.attrs.get("adjust"),
                         "emmeans": table, "contrasts": pairs, "notes": notes}))
        return 0
    how = f"{args.scale} scale, asymptotic" if glmm else f"{args.ddf} df"
    print(f"Estimated marginal means of {args.specs}"
          + (f" by {', '.join(args.by)}" if args.by else "")
          + f" ({how}, {args.level:.0%} intervals): {fit.formula}")
    print(text_table(table))
    _scale_notes(table)
    print()
    print(text_table(pairs, f"Pairwise contrasts (p-values adjusted: "
                            f"{pairs.attrs.get('adjust')})"))
    _scale_notes(pairs)
    print_notes(notes)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("emmeans", help="estimated marginal means and pairwise contrasts")
    add_model_arguments(p)
    add_family_options(p)
    p.add_argument("specs", help="factor(s) whose means are estimated, e.g. language or "
                                 "language:task")
    p.add_argument("--by", nargs="*", default=[], help="factors to condition on")
    p.add_argument("--adjust", default="tukey",
                   help="multiplicity adjustment: tukey, holm, bonferroni, sidak, none, ...")
    p.add_argument("--ddf", default="satterthwaite",
                   help="satterthwaite, kenward-roger or none")
    p.add_argument("--level", type=float, default=0.95, help="confidence level")
    p.add_argument("--scale", default="link", choices=["link", "response", "regrid"],
                   help="with --family: means and contrasts on the link scale (logits, log "
                        "odds ratios: emmeans' default), the response scale "
                        "(probabilities, odds or rate ratios: type = \"response\") or "
                        "regridded (probabilities and their differences: regrid())")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
