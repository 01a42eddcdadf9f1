"""What ``import crossed`` and a first fit load (``crossed/__init__.py`` is lazy, and the fit
classes import the inference, display and simulate layers inside their methods).

A fit (lmer or glmer) must not load SciPy's statistics, statsmodels, matplotlib or
crossed's layers above the model (they are what made the first ``crossed.lmer`` cost 3×
``import pandas``; ``benchmarks/import_time.py`` has the timings), nor formulaic where the
formula holds only columns, factors and ``+``, nor the partitioned path (data in memory).
Each check runs in a fresh interpreter: the test session has long imported all of them.
Module presence only, never timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import crossed

SLEEPSTUDY = Path(__file__).parent / "data" / "sleepstudy.csv"

#: Loaded only by what needs them (a summary, a test, a plot, the statsmodels engine;
#: formulaic: a formula with more than columns, factors and ``+``; the partitioned path:
#: a Dask DataFrame or a Parquet path as data).
NOT_AT_FIT = ("scipy.stats", "statsmodels", "matplotlib", "crossed.inference",
              "crossed.display", "crossed.simulate", "crossed.evaluation", "crossed.plots",
              "crossed.cli", "formulaic", "crossed.engines.dask_fit",
              "crossed.engines.partitioned", "crossed.model.partitioned")


def _loaded_after(code: str) -> dict[str, bool]:
    """Which of :data:`NOT_AT_FIT` a fresh interpreter has loaded after running ``code``."""
    src = str(Path(crossed.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in " \
            f"{NOT_AT_FIT!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_crossed_loads_no_upper_layer():
    loaded = _loaded_after("import crossed")
    assert not any(loaded.values()), loaded


def test_first_lmer_fit_loads_no_statistics_or_display():
    code = ("import pandas as pd\nimport crossed\ncrossed.lmer\n"
            f"fit = crossed.lmer('Reaction ~ Days + (Days | Subject)', "
            f"pd.read_csv({str(SLEEPSTUDY)!r}))\n"
            "assert fit.converged and abs(fit.fixef['Days'] - 10.467) < 1e-3\n"
            "fit.fixef, fit.varcorr(), fit.ranef(), fit.predict(), fit.loglik\n")
    loaded = _loaded_after(code)
    assert not any(loaded.values()), [m for m, present in loaded.items() if present]


@pytest.mark.parametrize("formula", ["Reaction ~ Days + (1 + half | Subject)",
                                     "Reaction ~ Days * half + (1 | Subject)"])
def test_factor_slopes_and_interactions_load_no_formulaic(formula):
    """A random term of an intercept, columns and factors (``(1 + half | Subject)``) and
    a fixed part of their products (``Days * half``) are coded without formulaic, as a
    fixed part of columns and factors is."""
    code = ("import pandas as pd\nimport crossed\n"
            f"d = pd.read_csv({str(SLEEPSTUDY)!r})\n"
            "d['half'] = (d.Days < 5).map({True: 'early', False: 'late'})\n"
            f"fit = crossed.lmer({formula!r}, d)\n"
            "assert fit.converged\n")
    assert not _loaded_after(code)["formulaic"]


@pytest.mark.parametrize("family, formula, dataset", [
    ("binomial", "cbind(incidence, size - incidence) ~ period + (1 | herd)", "cbpp"),
    ("poisson", "TICKS ~ YEAR + (1 | BROOD)", "grouseticks"),
])
def test_first_glmer_fit_loads_no_statistics_or_display(family, formula, dataset):
    code = ("import crossed\n"
            f"fit = crossed.glmer({formula!r}, crossed.load_dataset({dataset!r}), "
            f"family={family!r})\n"
            "assert fit.converged\nfit.fixef, fit.varcorr(), fit.ranef(), fit.predict()\n")
    loaded = _loaded_after(code)
    assert not any(loaded.values()), [m for m, present in loaded.items() if present]


@pytest.mark.parametrize("name", ["LmerFit", "GlmerFit", "lmer", "glmer", "compare"])
def test_public_names_still_resolve(name):
    assert getattr(crossed, name) is not None
    assert name in dir(crossed)


def test_summary_loads_the_layers_it_needs():
    code = ("import pandas as pd\nimport crossed\n"
            f"fit = crossed.lmer('Reaction ~ Days + (Days | Subject)', "
            f"pd.read_csv({str(SLEEPSTUDY)!r}))\n"
            "assert 'Satterthwaite' in str(fit.summary())\n")
    loaded = _loaded_after(code)
    assert loaded["crossed.inference"] and loaded["crossed.display"]
    assert loaded["scipy.stats"]


def test_a_formula_with_expressions_loads_formulaic():
    code = ("import pandas as pd\nimport crossed\n"
            f"fit = crossed.lmer('Reaction ~ poly(Days, 2) + (1 | Subject)', "
            f"pd.read_csv({str(SLEEPSTUDY)!r}))\nassert fit.converged\n")
    assert _loaded_after(code)["formulaic"]


def test_an_unpickled_fit_rebuilds_formulaics_matrices_in_a_fresh_process(tmp_path):
    """formulaic's spec names crossed's materializer: a fresh process that unpickles a fit
    (a Dask worker, a saved fit) registers it before rebuilding the matrices."""
    path = tmp_path / "fit.pkl"
    make = ("import pickle\nimport pandas as pd\nimport crossed\n"
            f"d = pd.read_csv({str(SLEEPSTUDY)!r})\n"
            "fit = crossed.lmer('Reaction ~ poly(Days, 2) + scale(Days) + (1 | Subject)', d)\n"
            f"pickle.dump((fit, fit.predict(d.iloc[[3, 17, 40]])), open({str(path)!r}, 'wb'))\n")
    _loaded_after(make)
    use = ("import pickle\nimport numpy as np\nimport pandas as pd\n"
           f"fit, before = pickle.load(open({str(path)!r}, 'rb'))\n"
           f"d = pd.read_csv({str(SLEEPSTUDY)!r})\n"
           "np.testing.assert_array_equal(fit.predict(d.iloc[[3, 17, 40]]), before)\n")
    assert _loaded_after(use)["formulaic"]
