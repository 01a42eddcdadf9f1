"""``crossed fit``: fit a model on a CSV/Parquet table (or a bundled example) and print it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from crossed.api import glmer, lmer
from crossed.cli._tables import dump_json
from crossed.datasets import list_datasets, load_dataset, read_data
from crossed.design.frame import level_label
from crossed.engines.native.optimize import PIRLS_MODES, LmerControl
from crossed.fit import GlmerFit

__all__ = ["DATA_HELP", "FAMILIES", "JSON_HELP", "add_family_options", "add_model_arguments",
           "add_model_options", "as_factor", "fit_from_args", "glmm_options", "parse_reference",
           "read_model_table", "read_table", "register"]

#: families of ``--family`` (a GLMM fitted by :func:`crossed.glmer`)
FAMILIES = ("binomial", "poisson")

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


def add_family_options(p: argparse.ArgumentParser) -> None:
    """--family, --weights, --offset, --nagq and --pirls: a GLMM instead of a linear mixed
    model."""
    p.add_argument("--family", choices=FAMILIES,
                   help="fit a generalised linear mixed model (lme4's glmer) with this "
                        "family: binomial (0/1, a two-level or boolean column, a proportion "
                        "with --weights trials, or cbind(successes, failures)) or poisson "
                        "(counts)")
    p.add_argument("--weights", metavar="COLUMN",
                   help="with --family: column of prior weights (binomial: trials)")
    p.add_argument("--offset", metavar="COLUMN",
                   help="with --family: column added to the linear predictor (e.g. a log "
                        "exposure)")
    p.add_argument("--nagq", type=int, default=1,
                   help="with --family: 1 Laplace (default), 0, or > 1 adaptive "
                        "Gauss-Hermite points (one scalar random-effects term)")
    p.add_argument("--pirls", choices=PIRLS_MODES, default="lme4",
                   help="with --family: where PIRLS stops: lme4 (lme4's rule and numbers, "
                        "default), exact (at the conditional modes: the Laplace "
                        "approximation itself), auto (lme4's, then exact where lme4's rule "
                        "leaves the criterion off by more than 1e-3)")


def glmm_options(args: argparse.Namespace, data: pd.DataFrame) -> dict | None:
    """The keyword arguments of :func:`crossed.glmer` from ``--family`` (or the family of a
    named GLMM specification, ``item_level:...``) and its options, or None for a linear
    mixed model (then ``--weights``/``--offset``/``--nagq``/``--pirls``
    are refused: they belong to GLMMs here)."""
    family = getattr(args, "family", None)
    if family is None and getattr(args, "formula", None):  # a named GLMM specification
        from crossed.evaluation.specs import resolve_family

        family = resolve_family(args.formula)
    weights, offset = getattr(args, "weights", None), getattr(args, "offset", None)
    nagq = getattr(args, "nagq", 1)
    pirls = getattr(args, "pirls", "lme4")
    if family is None:
        given = [o for o, v in (("--weights", weights), ("--offset", offset)) if v is not None]
        if nagq != 1:
            given.append("--nagq")
        if pirls != "lme4":
            given.append("--pirls")
        if given:
            raise ValueError(f"{', '.join(given)}: only with --family binomial or poisson")
        return None
    for opt, col in (("--weights", weights), ("--offset", offset)):
        if col is not None and col not in data.columns:
            raise ValueError(f"{opt}: column {col!r} is not in the data")
    if getattr(args, "ml", False):
        raise ValueError("--ml is for linear mixed models: a GLMM is always fitted by "
                         "maximum likelihood (Laplace or --nagq)")
    out = {"family": family, "weights": weights, "offset": offset, "nAGQ": int(nagq)}
    if pirls != "lme4":
        out["control"] = LmerControl(pirls=pirls)
    return out


def as_factor(values: pd.Series) -> pd.Series:
    """A column as R's ``factor(x)``: numbers labelled as R writes them (``2``, not
    ``2.0``) in numeric order (``2, 3, ..., 10``, not ``10, 2, 3``: the reference level is
    R's), strings as they are; missing values stay missing (not a level ``"nan"``)."""
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        labels = list(dict.fromkeys(level_label(v) for v in sorted(values.dropna().unique())))
        text = values.map(lambda v: None if pd.isna(v) else level_label(v))
        return pd.Series(pd.Categorical(text, categories=labels), index=values.index,
                         name=values.name)
    return values.where(values.isna(), values.astype(str))


def read_model_table(args: argparse.Namespace) -> tuple[pd.DataFrame, str]:
    """The table named by ``args.data`` with the ``--factor`` columns as factors
    (:func:`as_factor`)."""
    data, name = read_table(args.data)
    for col in args.factor:
        if col not in data.columns:
            raise ValueError(f"--factor: column {col!r} is not in the data")
        data[col] = as_factor(data[col])
    return data, name


def _fit_on_dask(args: argparse.Namespace):
    """``--dask``: the data (a Parquet file, directory or glob, local or an fsspec URL)
    fitted on a Dask cluster, its rows never read into this process."""
    from crossed.evaluation.specs import resolve_formula

    if args.factor:
        raise ValueError("--factor is not available with --dask: store the column as "
                         "strings in the Parquet files")
    if not args.data.endswith((".parquet", ".parq", "/", "*")) and not any(
            c in args.data for c in "*?[") and "://" not in args.data:
        if not Path(args.data).is_dir():
            raise ValueError(f"--dask reads Parquet data: {args.data!r} is not a .parquet "
                             "file, a directory or a glob")
    client = None if args.dask == "local" else args.dask
    family = getattr(args, "family", None)
    if family is not None:
        if args.weights is not None or args.offset is not None or args.nagq > 1:
            raise ValueError("--weights, --offset and --nagq > 1 are not available with "
                             "--dask")
        control = LmerControl(pirls=args.pirls) if args.pirls != "lme4" else None
        return glmer(resolve_formula(args.formula), args.data, family=family,
                     nAGQ=args.nagq, engine=args.engine, control=control,
                     reference=parse_reference(args.reference), client=client,
                     progress=True)
    return lmer(resolve_formula(args.formula), args.data, reml=not args.ml,
                engine=args.engine, reference=parse_reference(args.reference),
                client=client, progress=True)


def fit_from_args(args: argparse.Namespace):
    """Fit the model the arguments describe (a GLMM with ``--family``)."""
    if getattr(args, "dask", None) is not None:
        return _fit_on_dask(args)
    data, name = read_model_table(args)
    from crossed.evaluation.specs import resolve_formula

    glmm = glmm_options(args, data)
    if glmm is not None:
        return glmer(resolve_formula(args.formula), data, engine=args.engine,
                     reference=parse_reference(args.reference), data_name=name, **glmm)
    return lmer(resolve_formula(args.formula), data, reml=not args.ml, engine=args.engine,
                reference=parse_reference(args.reference), data_name=name)


def _run_glmm(args: argparse.Namespace, fit) -> int:
    if args.ddf not in ("satterthwaite", "none"):
        raise ValueError("--ddf: a GLMM's tests are Wald z tests (no denominator df)")
    if args.json:
        out = {
            "formula": fit.formula, "family": fit.family.name, "link": fit.family.link.name,
            "nagq": fit.nagq, "engine": fit.engine, "nobs": fit.nobs,
            "deviance": fit.deviance, "loglik": fit.loglik, "aic": fit.aic, "bic": fit.bic,
            "theta": fit.theta.tolist(), "is_singular": fit.is_singular,
            "converged": fit.converged, "messages": list(fit.messages),
            "coefficients": fit.coef_table(), "varcorr": fit.varcorr(),
        }
        print(dump_json(out))
    else:
        print(fit.summary())
    return 0


def _run(args: argparse.Namespace) -> int:
    fit = fit_from_args(args)
    if isinstance(fit, GlmerFit):
        return _run_glmm(args, fit)
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
    p = sub.add_parser("fit", help="fit a linear (or, with --family, generalised linear) "
                                   "mixed model and print its summary")
    add_model_arguments(p)
    add_family_options(p)
    p.add_argument("--ddf", default="satterthwaite",
                   help="satterthwaite or none (a GLMM's tests are Wald z tests)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--dask", nargs="?", const="local", default=None,
                   metavar="SCHEDULER_ADDRESS",
                   help="fit on a Dask cluster, for data larger than memory: DATA is a "
                        "Parquet file, directory or glob (quote it: \"data/*.parquet\"; "
                        "local or an fsspec URL); the scheduler's address (tcp://host:8786), "
                        "or none for a local cluster sized to this machine. A line per pass "
                        "over the data goes to stderr")
    p.set_defaults(func=_run)
