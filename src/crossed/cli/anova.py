"""``crossed anova``: ANOVA table (Type I/II/III F tests) of a fitted model, with partial η²."""

from __future__ import annotations

import argparse
import warnings

from crossed.cli._tables import dump_json, print_notes, text_table
from crossed.cli.fit import JSON_HELP, add_family_options, add_model_arguments, fit_from_args
from crossed.fit import GlmerFit

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_args(args)
        glmm = isinstance(fit, GlmerFit)
        if glmm:  # car's Anova of a glmer: Wald chi-square tests, no F, no eta squared
            table = fit.anova(type=args.type)
            eta = None
        else:
            table = fit.anova(type=args.type, ddf=args.ddf)
            eta = (fit.eta_squared(partial=True, ci=args.level, alternative=args.alternative)
                   if args.eta else None)
    notes = sorted({str(w.message) for w in caught})
    if args.json:
        print(dump_json({"formula": fit.formula, "type": args.type,
                         "ddf": None if glmm else args.ddf, "test": "Chisq" if glmm else "F",
                         "anova": table, "eta_squared": eta, "notes": notes}))
        return 0
    if glmm:
        print(f"Type {args.type} Wald chi-square tests ({fit.family}): {fit.formula}")
    else:
        print(f"Type {args.type} ANOVA ({args.ddf} degrees of freedom): {fit.formula}")
    print(text_table(table))
    if eta is not None:
        print()
        sided = ("one-sided, upper bound fixed at 1" if args.alternative == "greater"
                 else args.alternative)
        print(text_table(eta, f"Partial eta squared ({args.level:.0%} interval, {sided})"))
    print_notes(notes)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("anova", help="F tests of the fixed terms (lmerTest's anova)")
    add_model_arguments(p)
    add_family_options(p)
    p.add_argument("--type", default="3", choices=["1", "2", "3", "I", "II", "III"],
                   help="type of the hypotheses (default: 3)")
    p.add_argument("--ddf", default="satterthwaite",
                   help="satterthwaite, kenward-roger or none (a GLMM's tests are Wald "
                        "chi-square tests)")
    p.add_argument("--no-eta", dest="eta", action="store_false",
                   help="leave out partial eta squared")
    p.add_argument("--level", type=float, default=0.95, help="interval level for eta squared")
    p.add_argument("--alternative", default="greater", choices=["greater", "two-sided"],
                   help="eta squared's interval: one-sided [low, 1] (effectsize's default) "
                        "or two-sided")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
