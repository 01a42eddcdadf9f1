"""``crossed all-fit``: the model refitted with every optimiser crossed has (lme4's
``allFit``, :meth:`crossed.LmerFit.all_fit`), and with ``--repca`` the principal components
of each grouping factor's random effects (lme4's ``rePCA``): the two checks a reviewer asks
for when a fit is singular or its convergence is in doubt."""

from __future__ import annotations

import argparse
import warnings

import pandas as pd

from crossed._format import format_number_column
from crossed.cli._tables import dump_json, print_notes, text_table
from crossed.cli.fit import JSON_HELP, add_family_options, add_model_arguments, fit_from_args

__all__ = ["register"]

_TABLE = ["optimizer", "lme4_optimizer", "criterion", "converged", "singular", "feval",
          "messages"]


def _precise(table: pd.DataFrame, digits: int = 7) -> pd.DataFrame:
    """The float columns as R's ``format(x, digits)`` (lme4 prints ``summary(allFit(m))``
    with 7): the differences between optimisers are in the digits a 4-digit table rounds
    away."""
    out = table.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = format_number_column(out[col], digits, na="")
    return out


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_from_args(args)
        refits = fit.all_fit()
        pca = fit.rePCA() if args.repca else None
    notes = sorted({str(w.message) for w in caught})
    if args.json:
        print(dump_json({"formula": fit.formula, "all_fit": refits.table,
                         "fixef": refits.fixef, "sdcor": refits.sdcor,
                         "errors": refits.errors, "spread": refits.spread(),
                         "best": refits.best, "rePCA": pca, "notes": notes}))
        return 0
    print(f"Refits with every optimiser (lme4's allFit): {fit.formula}")
    print(text_table(_precise(refits.table[[c for c in _TABLE if c in refits.table]],
                                  digits=12)))
    print()
    print(text_table(_precise(refits.fixef), "Fixed effects by optimiser"))
    print()
    print(text_table(_precise(refits.sdcor),
                     "Standard deviations and correlations by optimiser"))
    for name, message in refits.errors.items():
        print(f"{name}: failed: {message}")
    print()
    print(f"Lowest criterion among the converged refits: {refits.best}")
    if pca is not None:
        print()
        print(text_table(pca, "Principal components of the random effects (lme4's rePCA)"))
    print_notes(notes)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("all-fit",
                       help="refit with every optimiser (lme4's allFit); --repca: the "
                            "random effects' principal components (lme4's rePCA)")
    add_model_arguments(p)
    add_family_options(p)
    p.add_argument("--repca", action="store_true",
                   help="also print each grouping factor's principal components")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
