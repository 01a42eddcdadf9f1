"""BOBYQA against L-BFGS-B (analytic gradient) on every R reference case.

For each case and optimiser: criterion evaluations, gradient evaluations, continuations,
the criterion minus lme4's (relative; R's deviance from tests/data/reference/<case>.json)
and the fit's wall time (best of ``--repeat``, the two optimisers timed alternately in one
process, as the machine may be shared). Also the cost of one evaluation and of one
gradient at R's θ.

    PYTHONPATH=src python benchmarks/compare_optimizers.py [case ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import crossed  # noqa: E402
from crossed._threads import single_blas_thread  # noqa: E402
from crossed.engines.native.optimize import LmerControl  # noqa: E402
from crossed.model.gradient import criterion_gradient  # noqa: E402
from reference import as_array, case_names, load_case  # noqa: E402


def per_call(fn, budget: float = 0.3) -> float:
    """Best per-call time of ``fn`` over three rounds of about ``budget`` seconds."""
    t = time.perf_counter()
    fn()
    n = max(1, int(budget / max(time.perf_counter() - t, 1e-6)))
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| case | optimiser | evals | grads | restarts | criterion − lme4's (rel) | "
          "fit ms | eval ms | grad ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.cases or case_names():
        case = load_case(name)
        dev_r = case.r["deviance"]
        best: dict[str, tuple[crossed.LmerFit, float]] = {}
        for _ in range(args.repeat):
            for opt in ("bobyqa", "lbfgsb"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = time.perf_counter()
                    fit = crossed.lmer(case.formula, case.data, reml=case.reml,
                                       reference=case.reference,
                                       control=LmerControl(optimizer=opt))
                    dt = time.perf_counter() - t
                if opt not in best or dt < best[opt][1]:
                    best[opt] = (fit, dt)
        pls = best["bobyqa"][0].pls
        theta = as_array(case.r["theta"])
        f = pls.factor(theta)
        with single_blas_thread():
            t_eval = per_call(lambda p=pls, t=theta: p.factor(t))
            t_grad = per_call(lambda p=pls, fa=f, reml=case.reml: criterion_gradient(p, fa, reml))
        for opt, (fit, dt) in best.items():
            rel = (fit.deviance - dev_r) / abs(dev_r)
            print(f"| {name} | {opt} | {fit.opt.feval} | {fit.opt.geval} | "
                  f"{len(fit.opt.restarts)} | {rel:.2e} | {dt * 1e3:.1f} | "
                  f"{t_eval * 1e3:.3f} | {t_grad * 1e3:.3f} |", flush=True)


if __name__ == "__main__":
    main()
