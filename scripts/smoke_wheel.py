"""Smoke test of an installed crossed (run by scripts/check_wheel.sh in a clean virtual
environment, with the repository not on the path): a fit, a GLMM, ANOVA, EMMs, the command
line, a bundled dataset, and the package data and typing marker the wheel must ship."""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import crossed as cx


def main() -> None:
    here = Path(cx.__file__).resolve().parent
    repo = Path(__file__).resolve().parents[1]
    assert repo / "src" not in here.parents, f"crossed imported from the source tree: {here}"
    assert "site-packages" in str(here), f"crossed not installed: {here}"

    # the compiled core is the wheel's own (built at wheel time; no compiler at install)
    from crossed.design import _rank
    from crossed.engines.native import _nlopt, optimize
    from crossed.inference import _hessian
    from crossed.model import _core, _gradient
    from crossed.model.glmm import _scalar

    for module in (_rank, _core, _gradient, _scalar, _nlopt, _hessian):
        core = Path(module.__file__).resolve()
        assert here in core.parents and core.suffix == ".so", f"compiled core not installed: {core}"
    assert shutil.which("cc") is None and shutil.which("gcc") is None, "a compiler on PATH"

    files = importlib.resources.files("crossed")
    assert files.joinpath("py.typed").is_file(), "py.typed is not in the wheel"
    for name in ("exist_multi.csv", "exist_raw.csv", "model_recycling_seeds.csv.gz",
                 "blurb_like.csv", "ner_like.csv"):
        assert files.joinpath("data", name).is_file(), f"data/{name} is not in the wheel"
    tomls = [p.name for p in files.joinpath("formulas").iterdir() if p.name.endswith(".toml")]
    assert {"repeated_measures.toml", "cross_classified.toml"} <= set(tomls), tomls
    assert cx.__version__ != "0+unknown", cx.__version__

    df = cx.load_dataset("exist_multi")
    assert len(df) == 36, len(df)
    fit = cx.lmer("delta ~ language * task * mode + (1 | architecture)", df)
    assert abs(fit.fixef["(Intercept)"] - 0.430543) < 1e-5, fit.fixef
    # (its optimiser ran through NLopt's C interface with the compiled criterion)
    assert optimize.nlopt_c_api(), "NLopt's C functions not found"
    aov = fit.anova()
    assert list(aov["term"])[0] == "language" and aov["p_value"].iloc[0] < 0.01, aov
    emm = fit.emmeans("language")
    pairs = emm.pairs()
    assert abs(pairs["estimate"].iloc[0] - 0.03) < 1e-4, pairs
    assert "<table" in fit._repr_html_() and "<table" in emm._repr_html_()
    spec = cx.specs.repeated_measures("delta", within=["language", "task", "mode"],
                                      subjects="architecture")
    assert "repeated_measures" in spec.explain()

    # a GLMM with two scalar terms: the compiled PIRLS solve (glmm/_scalar)
    rng = np.random.default_rng(0)
    counts = pd.DataFrame({"a": rng.integers(0, 12, 240).astype(str),
                           "b": rng.integers(0, 8, 240).astype(str), "x": rng.normal(size=240)})
    effect_a, effect_b = rng.normal(0, 0.5, 12), rng.normal(0, 0.5, 8)
    counts["y"] = rng.poisson(np.exp(0.5 + 0.3 * counts["x"]
                                     + effect_a[counts["a"].astype(int)]
                                     + effect_b[counts["b"].astype(int)]))
    glmm = cx.glmer("y ~ x + (1 | a) + (1 | b)", counts, family="poisson")
    assert abs(glmm.fixef["x"] - 0.3) < 0.15, glmm.fixef

    cli = Path(sys.executable).with_name("crossed")
    out = subprocess.run([str(cli), "anova", "exist_multi",
                          "delta ~ language * task * mode + (1 | architecture)"],
                         capture_output=True, text=True, check=True).stdout
    assert "language:task:mode" in out, out
    print(f"crossed {cx.__version__} wheel smoke test passed: compiled core, fit, GLMM, ANOVA, "
          f"EMMs, CLI, datasets, formulas ({len(tomls)} specs), py.typed")


if __name__ == "__main__":
    main()
