"""``crossed fit``: fit a model on a CSV/Parquet table (or a bundled example) and print it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from crossed.api import lmer
from crossed.cli._tables import dump_json
from crossed.datasets import list_datasets, load_dataset, read_data

__all__ = ["DATA_HELP", "JSON_HELP", "add_model_arguments", "add_model_options", "fit_from_args",
           "parse_reference", "read_model_table", "read_table", "register"]

JSON_HELP = "machine-readable output (strict JSON: NaN and infinite numbers are null)"
DATA_HELP = ("data file (.csv, .tsv, .jsonl, .json, each optionally .gz, or .parquet) or a "
             "bundled dataset name")


def read_table(source: str) -> tuple[pd.DataFrame, str]:
    """A table from a data file (:func:`crossed.datasets.read_data`: the format by the
    file name), or a bundled example given by name."""
    path = Path(source)
    if path.exists():
        return read_data(path), path.name
    if source in list_datasets():
        return load_dataset(source), source
    raise FileNotFoundError(
        f"no file {source!r}, and it is not a bundled dataset ({', '.join(list_datasets())})"
    )


def parse_reference(items: list[str] | None) -> dict[str, str] | None:
    """``COLUMN=LEVEL`` pairs into a dict."""
    if not items:
        return None
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--reference expects COLUMN=LEVEL, got {item!r}")
        col, level = item.split("=", 1)
        out[col.strip()] = level.strip()
    return out


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--ml, --reference and --factor, shared by every command that fits models."""
    p.add_argument("--ml", action="store_true", help="maximum likelihood instead of REML")
    p.add_argument("--reference", nargs="*", metavar="COLUMN=LEVEL",
                   help="reference level of a factor column")
    p.add_argument("--factor", nargs="*", default=[], metavar="COLUMN",
                   help="treat these numeric columns as factors")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """DATA FORMULA, --engine and the model options of the commands that fit one model."""
    p.add_argument("data", help=DATA_HELP)
    p.add_argument("formula", help="lme4 formula, e.g. 'y ~ x + (1 | g)'")
    p.add_argument("--engine", default="native", help="fitting engine (default: native)")
    add_model_options(p)


def read_model_table(args: argparse.Namespace) -> tuple[pd.DataFrame, str]:
    """The table named by ``args.data`` with the ``--factor`` columns as strings."""
    data, name = read_table(args.data)
    for col in args.factor:
        if col not in data.columns:
            raise ValueError(f"--factor: column {col!r} is not in the data")
        data[col] = data[col].astype(str)
    return data, name


def fit_from_args(args: argparse.Namespace):
    """Fit the model the arguments describe."""
    data, name = read_model_table(args)
    from crossed.evaluation.specs import resolve_formula

    return lmer(resolve_formula(args.formula), data, reml=not args.ml, engine=args.engine,
                reference=parse_reference(args.reference), data_name=name)


def _run(args: argparse.Namespace) -> int:
    fit = fit_from_args(args)
    if args.json:
        out = {
            "formula": fit.formula, "reml": fit.reml, "engine": fit.engine, "nobs": fit.nobs,
            "deviance": fit.deviance, "loglik": fit.loglik, "aic": fit.aic, "bic": fit.bic,
            "sigma": fit.sigma, "theta": fit.theta.tolist(), "is_singular": fit.is_singular,
            "converged": fit.converged, "messages": list(fit.messages),
            "coefficients": fit.coef_table(ddf=args.ddf), "varcorr": fit.varcorr(),
        }
        print(dump_json(out))
    else:
        print(fit.summary(ddf=args.ddf))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="fit a linear mixed model and print its summary")
    add_model_arguments(p)
    p.add_argument("--ddf", default="satterthwaite", help="satterthwaite or none")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_run)
