"""Refit benchmarks (issue 31): the time per refit of a parametric bootstrap and of a power
simulation, crossed against lme4's ``bootMer``, simr's ``powerSim`` loop and mixedlm's
``bootMer``/``powerSim``, side by side in one run.

Cases: sleepstudy ``Reaction ~ Days + (Days | Subject)`` (test of Days) and the CCMEM on
blurb_like ``score ~ seed + lr + batch_size + num_epochs + (1 | model) + (1 | dataset) +
(1 | model:dataset)`` (test of seed20).

- bootstrap: ``crossed.bootstrap(fit, "fixef", nsim)``; lme4 ``bootMer(fit, fixef, nsim,
  type = "parametric")``; mixedlm ``bootMer(fit, nsim)``.
- power: ``crossed.power_sim(fit, fixed(term), nsim)`` (simulate, refit, Satterthwaite t
  test); R: simr's loop written out (``simulate``, ``refit``, lmerTest's t test; simr is not
  packaged for Debian); mixedlm ``powerSim(fit, term, nsim)`` (its Wald test, no
  Satterthwaite df: less work per refit than the others).

Targets: ≥ 50× lme4/simr and ≥ 5× mixedlm per refit. The missing-data ablation target
(≥ 50× lmerTest + emmeans) is measured by ``bench_simulate.py``. One process, n_jobs = 1,
wall times (per refit, ms); run on a quiet machine.

Usage::

    .venv/bin/python benchmarks/bench_refits.py [--nsim 200] [--peer-nsim 50] [--skip-r]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import crossed as cx
from crossed import simulate as cs

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from environment import environment, kernel_label  # noqa: E402

CASES = {
    "sleepstudy": dict(formula="Reaction ~ Days + (Days | Subject)", data="sleepstudy",
                       reference=None, term="Days", file=REPO / "tests/data/sleepstudy.csv"),
    "ccmem": dict(formula=("score ~ seed + lr + batch_size + num_epochs + (1 | model) "
                           "+ (1 | dataset) + (1 | model:dataset)"),
                  data="blurb_like",
                  reference={"batch_size": "32", "lr": "5e-5", "seed": "59"},
                  term="seed20", file=REPO / "src/crossed/data/blurb_like.csv"),
}


def _per_refit(seconds: float, n: int) -> float:
    return 1e3 * seconds / n


def bench_crossed(case: dict, nsim: int) -> dict:
    data = cx.load_dataset(case["data"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer(case["formula"], data, reference=case["reference"])
        cx.bootstrap(fit, "fixef", nsim=3, seed=0)  # warm-up
        t0 = time.perf_counter()
        cx.bootstrap(fit, "fixef", nsim=nsim, seed=1, progress=False)
        boot = time.perf_counter() - t0
        cx.power_sim(fit, cs.fixed(case["term"]), nsim=3, seed=0)
        t0 = time.perf_counter()
        cx.power_sim(fit, cs.fixed(case["term"]), nsim=nsim, seed=2, progress=False)
        power = time.perf_counter() - t0
    return {"bootstrap": _per_refit(boot, nsim), "power": _per_refit(power, nsim)}


def bench_mixedlm(case: dict, nsim: int) -> dict:
    import mixedlm
    import pandas as pd

    data = pd.read_csv(case["file"], dtype={c: str for c in case["reference"] or {}})
    for col, ref in (case["reference"] or {}).items():  # R's relevel: the reference first
        levels = sorted(data[col].unique())
        levels.remove(ref)
        data[col] = pd.Categorical(data[col], categories=[ref, *levels])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = mixedlm.lmer(case["formula"], data)
        mixedlm.bootMer(fit, nsim=2, seed=0)
        t0 = time.perf_counter()
        mixedlm.bootMer(fit, nsim=nsim, seed=1)
        boot = time.perf_counter() - t0
        t0 = time.perf_counter()
        mixedlm.powerSim(fit, test=None, nsim=nsim, seed=2)
        power = time.perf_counter() - t0
    return {"bootstrap": _per_refit(boot, nsim), "power": _per_refit(power, nsim)}


def bench_r(name: str, case: dict, nsim: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        proc = subprocess.run(["Rscript", str(HERE / "r" / "refits.R"), name, str(nsim),
                               str(out), str(case["file"])], capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        res = json.loads(out.read_text())
    return {"bootstrap": _per_refit(res["bootMer"]["elapsed"], nsim),
            "power": _per_refit(res["powerSim"]["elapsed"], nsim),
            "versions": res["versions"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nsim", type=int, default=200, help="crossed's refits per task")
    ap.add_argument("--peer-nsim", type=int, default=50, help="lme4's and mixedlm's refits")
    ap.add_argument("--cases", default="sleepstudy,ccmem")
    ap.add_argument("--skip-r", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args(argv)
    env = environment()
    print(f"{env['cpu']}, {env['cores']} cores, load {env['load']}; BLAS variables "
          f"{env['blas_variables'] or 'none'}; {kernel_label(env)}; crossed "
          f"{cx.__version__}")
    print()
    print("| case | task | crossed ms/refit | lme4/simr ms/refit | mixedlm ms/refit "
          "| lme4 / crossed (≥ 50×) | mixedlm / crossed (≥ 5×) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.cases.split(","):
        case = CASES[name]
        ours = bench_crossed(case, args.nsim)
        ml = bench_mixedlm(case, args.peer_nsim)
        r = None if args.skip_r else bench_r(name, case, args.peer_nsim, args.timeout)
        for task, r_name in (("bootstrap", "bootMer"), ("power", "powerSim loop")):
            r_txt = "skipped" if r is None else f"{r[task]:.1f} ({r_name})"
            r_ratio = "—" if r is None else f"{r[task] / ours[task]:.0f}×"
            print(f"| {name} | {task} | {ours[task]:.2f} | {r_txt} | {ml[task]:.2f} | "
                  f"{r_ratio} | {ml[task] / ours[task]:.1f}× |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
