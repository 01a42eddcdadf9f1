"""``crossed compare-specs``: several specifications side by side; ``crossed spec``: write
the formula of a named specification (``crossed/formulas/``) and explain it."""

from __future__ import annotations

import argparse
import warnings

from crossed.cli._tables import dump_json, print_notes, text_table
from crossed.cli.fit import (
    DATA_HELP,
    JSON_HELP,
    add_model_options,
    parse_reference,
    read_model_table,
)
from crossed.evaluation import specs as specs_mod
from crossed.evaluation.compare_specs import compare_specs

__all__ = ["register"]


def _run_compare(args: argparse.Namespace) -> int:
    data, name = read_model_table(args)
    for f in args.formulas:
        family = specs_mod.resolve_family(f)
        if family is not None:
            raise ValueError(f"{f!r} is a {family} GLMM specification: compare-specs "
                             "compares linear mixed models (crossed fit fits it)")
    formulas = [specs_mod.resolve_formula(f) for f in args.formulas]
    names = args.names or None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = compare_specs(data, formulas, focus=args.focus, names=names, ddf=args.ddf,
                            adjust=args.adjust, reml=not args.ml, check=not args.no_check,
                            reference=parse_reference(args.reference))
    notes = sorted({str(w.message) for w in caught} | set(res.messages))
    if args.json:
        print(dump_json({"data": name, "focus": args.focus, "ddf": args.ddf,
                         "table": res.table, "lrt": res.lrt,
                         "emmeans": {k: v for k, v in res.emmeans.items()}, "notes": notes}))
        return 0
    print(f"Specifications compared on {name} (focus: {args.focus}, {args.ddf} df)")
    for spec_name, fit in res.fits.items():
        print(f"  {spec_name}: {fit.formula}")
    print()
    print(text_table(res.contrasts, "Focus contrast (EMM pairs)"))
    print()
    cols = ["spec", "r2_marginal", "r2_conditional", "aic", "bic", "npar", "is_singular",
            "converged", "resid_normality_p", "resid_spread_p", "sim_uniformity_p",
            "sim_dispersion_p", "sim_outliers_p"]
    print(text_table(res.table[cols].drop_duplicates("spec"),
                     "Fit (AIC/BIC of ML fits), flags, residual checks (resid_*: Shapiro-Wilk, "
                     "|residual| vs fitted; sim_*: simulated residuals)"))
    if len(res.lrt):
        print()
        print(text_table(res.lrt, "Likelihood-ratio tests of nested specifications "
                                  "(ML refits)"))
    print_notes(notes)
    return 0


def _parse_fields(items: list[str]) -> dict:
    fields: dict = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"fields are KEY=VALUE, got {item!r}")
        key, value = (s.strip() for s in item.split("=", 1))
        fields[key] = [v.strip() for v in value.split(",") if v.strip()] \
            if key in ("within", "nuisance") else value
    return fields


def _run_spec(args: argparse.Namespace) -> int:
    if not args.name:
        for n in specs_mod.list_named():
            rec = specs_mod.load_named(n)
            print(f"{n}: {rec.get('summary', '')}")
            print(f"    e.g. {rec.get('example', rec.get('formula', ''))}")
        return 0
    spec = specs_mod.from_name(args.name, **_parse_fields(args.fields))
    if args.json:
        print(dump_json({"design": spec.design, "formula": spec.formula,
                         "fields": spec.fields, "terms": spec.terms_table()}))
    elif args.formula_only:
        print(spec.formula)
    else:
        print(spec.explain())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare-specs",
                       help="fit several specifications and compare the focus contrast, "
                            "R2, AIC/BIC, flags and residual checks side by side")
    p.add_argument("data", help=DATA_HELP)
    p.add_argument("formulas", nargs="+",
                   help="lme4 formulas or named specifications (NAME:key=value;...)")
    p.add_argument("--focus", required=True, help="factor whose EMM contrasts are compared")
    p.add_argument("--names", nargs="*", help="labels of the specifications")
    p.add_argument("--ddf", default="satterthwaite",
                   help="satterthwaite, kenward-roger or none")
    p.add_argument("--adjust", default="tukey", help="adjustment of the pairwise contrasts")
    add_model_options(p)
    p.add_argument("--no-check", action="store_true",
                   help="skip the simulated-residual (DHARMa-style) tests")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run_compare)

    q = sub.add_parser("spec", help="write the formula of a named specification "
                                    "(crossed/formulas/*.toml) and explain it; no NAME lists them")
    q.add_argument("name", nargs="?", help="repeated_measures, cross_classified, ...")
    q.add_argument("fields", nargs="*", metavar="KEY=VALUE",
                   help="e.g. response=delta within=language,task,mode "
                        "subjects=architecture/model")
    q.add_argument("--formula-only", action="store_true", help="print only the formula")
    q.add_argument("--json", action="store_true", help=JSON_HELP)
    q.set_defaults(func=_run_spec)
