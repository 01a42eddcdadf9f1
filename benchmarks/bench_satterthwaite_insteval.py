"""Satterthwaite inference on InstEval: crossed vs lmerTest.

Model (the core issue's InstEval fit, 73,421 ratings, 2,972 students x 1,128 lecturers x
14 departments, crossed)::

    y ~ service + (1 | s) + (1 | d) + (1 | dept)

Timed (after the fit, which is not timed): Satterthwaite df for all fixed effects
(``fit.coef_table()``: the Hessian of the deviance in (θ, σ) and the Jacobian of vcov(β)
by Richardson extrapolation, as lmerTest does) plus the Type III ANOVA table
(``fit.anova(type=3)``), starting from a fit with nothing cached.

Usage::

    .venv/bin/python benchmarks/bench_satterthwaite_insteval.py [--r] [--repeat N]

``--r`` also times lmerTest 3.1-3 through Rscript: ``as_lmerModLmerTest(m)`` (its Hessian
and Jacobian) + ``summary(m)`` + ``anova(m, type = 3)`` on an lme4 fit of the same model
(the lme4 fit itself is not timed). Target (issue 3): crossed < 3 s; lmerTest > 60 s.
Never run by the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "InstEval.csv.gz"
FORMULA = "y ~ service + (1 | s) + (1 | d) + (1 | dept)"
FACTORS = ("s", "d", "dept", "service", "studage", "lectage")

R_CODE = r"""
suppressMessages({library(lme4); library(lmerTest); library(jsonlite)})
args <- commandArgs(trailingOnly = TRUE)
cc <- setNames(rep("character", 6), c("s", "d", "dept", "service", "studage", "lectage"))
d <- read.csv(gzfile(args[1]), colClasses = cc)
for (f in names(cc)) d[[f]] <- factor(d[[f]])
m <- lme4::lmer(y ~ service + (1 | s) + (1 | d) + (1 | dept), data = d)
t0 <- proc.time()[["elapsed"]]
cpu0 <- sum(proc.time()[c("user.self", "sys.self")])
mt <- lmerTest::as_lmerModLmerTest(m)
co <- summary(mt)$coefficients
a3 <- anova(mt, type = 3)
pt <- proc.time()
el <- pt[["elapsed"]] - t0
cpu <- pt[["user.self"]] + pt[["sys.self"]] - cpu0
write_json(list(seconds = el, cpu = cpu, df = unname(co[, "df"]), F = a3[["F value"]],
                DenDF = a3[["DenDF"]]), args[2], digits = NA, auto_unbox = TRUE)
"""


def time_crossed(repeat: int) -> tuple[float, pd.DataFrame, pd.DataFrame, float]:
    import crossed

    data = pd.read_csv(DATA, dtype=dict.fromkeys(FACTORS, str))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer(FORMULA, data)
    fit_s = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(repeat):
        fit = dataclasses.replace(fit)  # start from nothing cached (a fresh cache)
        t0, c0 = time.perf_counter(), time.process_time()
        coef = fit.coef_table(ddf="satterthwaite")
        a3 = fit.anova(type=3, ddf="satterthwaite")
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(times), coef, a3, fit_s, min(cpu)


def time_lmertest() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench.R"
        out = Path(tmp) / "out.json"
        script.write_text(R_CODE)
        subprocess.run(["Rscript", str(script), str(DATA), str(out)], check=True)
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", action="store_true", help="also time lmerTest with Rscript")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions (best is shown)")
    args = ap.parse_args(argv)
    best, coef, a3, fit_s, cpu = time_crossed(args.repeat)
    print(f"InstEval {FORMULA}  (crossed fit: {fit_s:.2f} s, not counted)")
    print(coef[["term", "estimate", "std_error", "df", "p_value"]].to_string(index=False))
    print(a3.to_string(index=False))
    print(f"crossed  Satterthwaite (all fixed effects) + Type III table: {best:.3f} s wall, "
          f"{cpu:.3f} s CPU (best of {args.repeat})")
    if args.r:
        r = time_lmertest()
        print(f"lmerTest as_lmerModLmerTest + summary + anova(type = 3):     "
              f"{r['seconds']:.1f} s wall, {r['cpu']:.1f} s CPU")
        print(f"lmerTest df: {r['df']}, Type III DenDF: {r['DenDF']}")
        print(f"speed-up: {r['seconds'] / best:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
