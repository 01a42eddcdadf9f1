"""Regenerate tests/data/aso_deepsig.json: deepsig's ``aso`` on seeded examples.

deepsig (PyPI, in the ``dev`` extra) is the reference implementation of ASO used by
Dror et al. / Ulmer et al.; run with ``python tests/evaluation/resample/make_aso_reference.py``.
The first case is the example of deepsig's README (documented result: min_eps = 0.225).
"""

import json
from pathlib import Path

import numpy as np
from deepsig import aso

CASES = []
# deepsig README: N = 5 seeds, my model ~ N(0.9, 0.8), baseline ~ N(0, 1), seed 1234
np.random.seed(1234)  # noqa: NPY002 - the README example uses the legacy global RNG
CASES.append({"name": "readme",
              "a": np.random.normal(0.9, 0.8, 5).tolist(),  # noqa: NPY002
              "b": np.random.normal(0, 1, 5).tolist(),  # noqa: NPY002
              "iterations": 1000, "seed": 1234})
for name, la, lb, sd, n, seed in [("close_20", 0.50, 0.45, 0.10, 20, 1),
                                  ("same_10", 0.0, 0.0, 1.0, 10, 2),
                                  ("same_30", 5.0, 5.0, 2.0, 30, 3),
                                  ("overlap_8", 0.3, 0.0, 0.5, 8, 4),
                                  ("separated_15", 0.8, 0.2, 0.1, 15, 5)]:
    rng = np.random.default_rng(seed)
    CASES.append({"name": name, "a": rng.normal(la, sd, n).tolist(),
                  "b": rng.normal(lb, sd, n).tolist(), "iterations": 4000, "seed": seed})

for case in CASES:
    case["eps_min"] = float(aso(np.array(case["a"]), np.array(case["b"]), seed=case["seed"],
                                num_bootstrap_iterations=case["iterations"],
                                show_progress=False))
    print(case["name"], case["eps_min"])

out = Path(__file__).resolve().parents[2] / "data" / "aso_deepsig.json"
out.write_text(json.dumps({"generator": "deepsig 1.2.8 aso(confidence_level=0.95, dt=0.005)",
                           "cases": CASES}, indent=1))
