"""``crossed resample`` and ``crossed eval-size``: leaderboard uncertainty from the command line.

``crossed resample TABLE`` reads a published result table (XQuAD, FLORES-200, OpenNER,
EA-MT formats are recognised; any long CSV with system/task/seed columns works too) and
prints its variance components, aggregates with intervals, pairwise differences with
effect sizes, rank distributions and (``--predict``) leave-one-language-out performance
prediction. ``crossed eval-size TABLE`` prints the ranking stability on subsets of the
evaluation set (per-item tables, or the tasks of a result table as the items).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from crossed.cli._files import check_output, check_output_dir, write_output
from crossed.cli._tables import count_arg, positive_arg

__all__ = ["ANALYSES", "register"]

ANALYSES = ("variance", "aggregates", "pairwise", "ranks", "predict")


def _load(args: argparse.Namespace):
    from crossed.datasets import list_datasets, load_dataset, read_data
    from crossed.evaluation.resample.io import read_table

    _check_outputs(args)
    src = args.table
    if Path(src).exists():
        data = read_data(src)
    elif src in list_datasets():
        data = load_dataset(src)
    else:
        raise FileNotFoundError(f"no file {src!r}, and it is not a bundled dataset")
    st = read_table(data, fmt=args.format, metric=args.metric, score=args.score,
                    system=args.system, task=args.task, seed_col=args.seed_col, boot=args.boot)
    if getattr(args, "n_boot", None) and st.kind == "summary":
        import dataclasses

        import numpy as np

        st = dataclasses.replace(st, n_boot=np.full(st.shape, float(args.n_boot)))
    return st


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse unwritable --figure / --output-dir before the resampling runs."""
    if getattr(args, "figure", None):
        check_output(args.figure, "--figure")
        from matplotlib.backend_bases import FigureCanvasBase

        kinds = FigureCanvasBase.get_supported_filetypes()
        suffix = Path(args.figure).suffix.lower().lstrip(".")
        if suffix and suffix not in kinds:
            raise ValueError(f"--figure {args.figure!r}: unknown image type {suffix!r} "
                             f"(one of {', '.join(sorted(kinds))})")
    if getattr(args, "output_dir", None):
        check_output_dir(args.output_dir, "--output-dir")


def _print(title: str, df: pd.DataFrame, digits: int) -> None:
    print(f"\n## {title}\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30,
                           "display.max_rows", 500):
        print(df.round(digits).to_string(index=False))


def _save(df: pd.DataFrame, outdir: str | None, name: str) -> None:
    if outdir:
        Path(outdir).mkdir(parents=True, exist_ok=True)
        write_output(Path(outdir) / f"{name}.csv", lambda p: df.to_csv(p, index=False),
                     "--output-dir")


def _add_table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="result table (.jsonl, .json, .csv, .tsv, each optionally "
                                 ".gz, or .parquet) or bundled dataset")
    p.add_argument("--format", default=None,
                   help="xquad, flores, openner, ea_mt or long (default: detected)")
    p.add_argument("--metric", default=None,
                   help="score of a multi-metric table (flores: bleu/chrf/comet; "
                        "ea_mt: overall/comet/meta)")
    p.add_argument("--score", default=None, help="score column of a long table")
    p.add_argument("--system", default="system", help="system column of a long table")
    p.add_argument("--task", default="task", help="task column of a long table")
    p.add_argument("--seed-col", default=None, help="seed column of a long table")
    p.add_argument("--boot", default=None, help="bootstrap-replicate column of a long table")
    p.add_argument("--seed", type=count_arg, default=0, help="random seed (default 0)")
    p.add_argument("--digits", type=count_arg, default=3, help="digits printed (default 3)")
    p.add_argument("--output-dir", default=None, help="also write each table as CSV here")
    p.add_argument("--n-boot", type=positive_arg, default=None,
                   help="bootstrap replicates behind a summary table's boot SDs (for their SEs)")
    p.add_argument("--progress", action="store_true", help="show progress bars")


def _run_resample(args: argparse.Namespace) -> int:
    from crossed.evaluation.resample import analyze

    st = _load(args)
    wanted = _wanted_analyses(args)
    print(f"# {args.table}: {st.shape[0]} systems × {st.shape[1]} tasks, score {st.score!r} "
          f"({st.kind}); {args.n_resamples} resamples, replication {args.replication}, "
          f"seed {args.seed}")
    res = analyze(st, n_resamples=args.n_resamples, replication=args.replication,
                  n_tasks_subsample=args.n_tasks, threshold=args.threshold, seed=args.seed,
                  progress=True if args.progress else None)
    if "variance" in wanted:
        _show_variance(res, args)
    if "aggregates" in wanted:
        _show_aggregates(res, args)
    if "pairwise" in wanted:
        _show_pairwise(res, st, args)
    if "ranks" in wanted:
        _show_ranks(res, args)
    if "predict" in wanted:
        _show_prediction(st, args)
    if args.figure:
        _save_rank_figure(res, args)
    return 0


def _wanted_analyses(args: argparse.Namespace) -> list[str]:
    """The analyses asked for (``all``: every one but ``predict``; ``--predict`` adds it)."""
    wanted = list(ANALYSES[:4]) if args.analysis == ["all"] else args.analysis
    if args.predict and "predict" not in wanted:
        wanted = [*wanted, "predict"]
    return wanted


def _show_variance(res, args: argparse.Namespace) -> None:
    vc = res.variance
    _print("Variance components (estimate)", vc.wide().reset_index(), args.digits)
    _print("Variance components (standard error)", vc.wide("std_error").reset_index(),
           args.digits)
    _save(vc.components, args.output_dir, "variance_components")


def _show_aggregates(res, args: argparse.Namespace) -> None:
    cols = ["tasks", "system", "aggregate", "estimate", "std_error", "conf_low",
            "conf_high", "pct_low", "pct_high", "half_width"]
    _print("Aggregates over tasks (95 % intervals: normal conf_*, percentile pct_*)",
           res.aggregates[cols], args.digits)
    _save(res.aggregates, args.output_dir, "aggregates")


def _show_pairwise(res, st, args: argparse.Namespace) -> None:
    """The difference matrices (small leaderboards), and how many systems each beats."""
    pw = res.pairwise
    n_sys = st.shape[0]
    for mode in ("fixed", "subsample"):
        if n_sys > args.max_matrix:
            break
        _show_difference_matrix(pw, st, mode, args)
    if n_sys > args.max_matrix:
        print(f"\n({n_sys} systems: difference matrices not printed; "
              f"raise --max-matrix or use --output-dir)")
    sel = pw[(pw["aggregate"] == args.aggregate) & pw["large"] & (pw["estimate"] > 0)]
    wins = (sel.groupby(["system_a", "tasks"]).size().unstack("tasks")
            .reindex(index=list(st.systems), columns=["fixed", "subsample"]).fillna(0)
            .astype(int).rename(columns=lambda c: f"beats_{c}"))
    _print(f"How many systems each system beats with effect size >= {args.threshold:g} "
           f"({args.aggregate})", wins.reset_index(names="system"), args.digits)
    _save(pw, args.output_dir, "pairwise")


def _show_difference_matrix(pw: pd.DataFrame, st, mode: str, args: argparse.Namespace) -> None:
    """Row − column differences ± resampled SD (effect size), tasks fixed or subsampled."""
    from crossed.evaluation.resample import difference_matrix

    d = args.digits
    est = difference_matrix(pw, args.aggregate, "estimate", tasks=mode)
    sd = difference_matrix(pw, args.aggregate, "std_error", tasks=mode)
    es = difference_matrix(pw, args.aggregate, "effect_size", tasks=mode)
    big = difference_matrix(pw, args.aggregate, "large", tasks=mode)
    cells = est.copy().astype(object)
    for r in est.index:
        for c in est.columns:
            cells.loc[r, c] = "" if r == c else (
                f"{est.loc[r, c]:.{d}f} ± {sd.loc[r, c]:.{d}f} "
                f"(ES {es.loc[r, c]:.1f}{'*' if big.loc[r, c] else ''})")
    how = "fixed" if mode == "fixed" else (
        f"subsampled ({args.n_tasks or max(2, st.shape[1] // 2)} of {st.shape[1]}, "
        f"without replacement)")
    print(f"\n## Differences in {args.aggregate} (row − column) ± resampled SD "
          f"(effect size; * |ES| >= {args.threshold:g}), tasks {how}\n")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(cells.reset_index(names="system").to_string(index=False))


def _show_ranks(res, args: argparse.Namespace) -> None:
    from crossed.evaluation.resample import rank_table

    sub = res.ranks[res.ranks["tasks"] == "bootstrap"]
    for agg in res.aggregates["aggregate"].unique():
        tab = rank_table(sub, agg)
        if tab.shape[1] > args.max_matrix:       # many systems: the first ranks only
            tab = tab.iloc[:, :args.max_matrix]
        _print(f"Rank distribution ({agg}, tasks resampled): share of resamples at "
               f"each rank", tab.reset_index(names="system"), args.digits)
    _save(res.ranks, args.output_dir, "ranks")


def _show_prediction(st, args: argparse.Namespace) -> None:
    """Leave-one-language-out performance prediction."""
    from crossed.evaluation.resample import leave_one_task_out, prediction_frame

    frame = prediction_frame(st)
    numeric = ["latin_script", "n_tasks_language"]
    categorical = [c for c in ("script", "direction") if frame[c].nunique() > 1]
    pred = leave_one_task_out(frame, numeric=numeric, categorical=categorical,
                              group="family", seed=args.seed,
                              progress=True if args.progress else None)
    _print("Leave-one-language-out MAE (random intercept per family for 'mixed')",
           pred.mae, args.digits)
    wide = pred.mae_by_task.pivot(index="task", columns="model", values="mae")
    wide = wide.reindex(columns=list(pd.unique(pred.mae_by_task["model"])))
    _print("MAE per held-out language", wide.reset_index(), args.digits)
    _save(pred.predictions, args.output_dir, "predictions")


def _save_rank_figure(res, args: argparse.Namespace) -> None:
    from crossed.plots.resample import plot_rank_distribution

    ax = plot_rank_distribution(res.ranks, args.aggregate, tasks="bootstrap")
    write_output(args.figure, lambda p: ax.figure.savefig(p, bbox_inches="tight"),
                 "--figure")
    print(f"\nfigure: {args.figure}")


def _run_eval_size(args: argparse.Namespace) -> int:
    from crossed.evaluation.resample import eval_size

    if args.item:
        from crossed.datasets import read_data

        _check_outputs(args)
        data = read_data(args.table)
        counts = tuple(args.counts.split(",")) if args.counts else None
        named = [("--item", args.item), ("--system", args.system),
                 ("--score", args.score or "score"), ("--seed-col", args.seed_col),
                 ("--tokens", args.tokens)] + [("--counts", c) for c in counts or ()]
        for option, col in named:
            if col is not None and col not in data.columns:
                raise ValueError(f"{option}: column {col!r} is not in {args.table} "
                                 f"(columns: {', '.join(map(str, data.columns))})")
        result = eval_size(data, score=args.score or "score", system=args.system,
                           item=args.item, seed_col=args.seed_col, tokens=args.tokens,
                           counts=counts, sizes=args.sizes, unit=args.unit,
                           strategies=args.strategies, n_subsamples=args.n_subsamples,
                           level=args.level, quantile=args.quantile, aso=not args.no_aso,
                           aso_threshold=args.aso_threshold, seed=args.seed,
                           progress=True if args.progress else None)
        what = f"{len(result.full)} systems, items {args.item!r}"
    else:
        st = _load(args)
        result = eval_size(st, sizes=args.sizes, strategies=args.strategies,
                           n_subsamples=args.n_subsamples, level=args.level,
                           quantile=args.quantile, aso=not args.no_aso,
                           aso_threshold=args.aso_threshold, seed=args.seed,
                           progress=True if args.progress else None)
        what = f"{st.shape[0]} systems, the {st.shape[1]} tasks as items"
    print(f"# {args.table}: {what}; {args.n_subsamples} subsets per size, seed {args.seed}")
    _print("Full-set ranking", result.full, args.digits)
    _print("Ranking agreement by size (Kendall τ-b, weighted τ, ASO decision agreement)",
           result.summary, args.digits)
    _print(f"Smallest size with τ >= {args.level}", result.min_size, args.digits)
    _save(result.subsamples, args.output_dir, "eval_size_subsamples")
    _save(result.summary, args.output_dir, "eval_size_summary")
    if args.figure:
        from crossed.plots.resample import plot_tau_by_size

        ax = plot_tau_by_size(result)
        write_output(args.figure, lambda p: ax.figure.savefig(p, bbox_inches="tight"),
                     "--figure")
        print(f"\nfigure: {args.figure}")
    return 0


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resample", help="leaderboard uncertainty: variance components, "
                                        "aggregates, differences, ranks, prediction")
    _add_table_arguments(p)
    p.add_argument("--analysis", nargs="+", default=["all"],
                   choices=["all", *ANALYSES], help="analyses to print (default: all but predict)")
    p.add_argument("--predict", action="store_true",
                   help="add leave-one-language-out performance prediction")
    p.add_argument("--n-resamples", type=positive_arg, default=10_000)
    p.add_argument("--replication", default="parametric",
                   choices=["parametric", "nonparametric", "none"])
    p.add_argument("--n-tasks", type=positive_arg, default=None,
                   help="tasks per subsample for the differences (default half)")
    p.add_argument("--aggregate", default="mean", choices=["mean", "geometric_mean", "median"],
                   help="aggregate of the difference matrices and figure")
    p.add_argument("--threshold", type=float, default=2.0,
                   help="|effect size| counted as large (default 2)")
    p.add_argument("--max-matrix", type=count_arg, default=12,
                   help="print difference matrices for at most this many systems (default 12)")
    p.add_argument("--figure", default=None, help="save a rank-distribution figure here")
    p.set_defaults(func=_run_resample)

    q = sub.add_parser("eval-size", help="how ranking agreement grows with evaluation-set size")
    _add_table_arguments(q)
    q.add_argument("--item", default=None,
                   help="item column: the table holds per-item scores (else tasks are items)")
    q.add_argument("--tokens", default=None, help="item length column (for --unit tokens)")
    q.add_argument("--counts", default=None, help="tp,fp,fn columns: score subsets by micro-F1")
    q.add_argument("--unit", default="items", choices=["items", "tokens"])
    q.add_argument("--sizes", type=_floats, default=None, help="comma-separated sizes")
    q.add_argument("--strategies", nargs="+", default=["seq", "rand", "rand_seq"],
                   choices=["seq", "rand", "rand_seq"])
    q.add_argument("--n-subsamples", type=positive_arg, default=50)
    q.add_argument("--level", type=float, default=0.9, help="τ level for the smallest size")
    q.add_argument("--quantile", type=float, default=None,
                   help="judge the smallest size by this quantile of τ instead of its mean")
    q.add_argument("--no-aso", action="store_true", help="skip ASO agreement")
    q.add_argument("--aso-threshold", type=float, default=0.5)
    q.add_argument("--figure", default=None, help="save the τ-by-size figure here")
    q.set_defaults(func=_run_eval_size)
