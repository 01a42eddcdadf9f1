"""``crossed select-random``: backward selection of the random-effects structure
(:func:`crossed.select_random`), printing the steps table and the final formula."""

from __future__ import annotations

import argparse
import warnings

from crossed.cli._tables import dump_json, print_notes, text_table
from crossed.cli.fit import (
    JSON_HELP,
    add_family_options,
    add_model_arguments,
    glmm_options,
    parse_reference,
    read_model_table,
)

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from crossed.evaluation.random_selection import select_random
    from crossed.evaluation.specs import resolve_formula

    data, name = read_model_table(args)
    glmm = glmm_options(args, data)
    options: dict = {"engine": args.engine, "data_name": name}
    family = None
    if glmm is not None:
        family = glmm.pop("family")
        options.update({k: v for k, v in glmm.items() if v is not None})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sel = select_random(resolve_formula(args.formula), data, strategy=args.strategy,
                            family=family, maximal="design" if args.maximal_design else None,
                            alpha=args.alpha, reml=not args.ml,
                            reference=parse_reference(args.reference),
                            fit_options=options)
    notes = sorted({str(w.message) for w in caught})
    if args.json:
        print(dump_json({"strategy": sel.strategy, "maximal": sel.maximal,
                         "final": sel.formula, "steps": sel.steps,
                         "methods": sel.methods_sentence(), "notes": notes}))
        return 0
    print(f"Random-effects selection ({sel.strategy}) from the maximal model: {sel.maximal}")
    print(text_table(sel.steps))
    print(f"Final model: {sel.formula}")
    print()
    print(sel.methods_sentence())
    print_notes(notes)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("select-random",
                       help="select the random-effects structure by backward reduction of "
                            "the maximal model (buildmer; Matuschek et al. 2017)")
    add_model_arguments(p)
    add_family_options(p)
    p.add_argument("--strategy", default="lrt",
                   choices=["lrt", "aic", "rePCA", "maximal-converging"],
                   help="lrt: likelihood-ratio tests (default); aic; rePCA: drop dimensions "
                        "without variance; maximal-converging: the largest model that "
                        "converges without a singular fit")
    p.add_argument("--alpha", type=float, default=0.2,
                   help="level of the likelihood-ratio tests (default 0.2, Matuschek et al.)")
    p.add_argument("--maximal-design", action="store_true",
                   help="build the maximal model from the design: every fixed term that "
                        "varies within a grouping factor as its slope")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
