"""Regenerate the small CSVs used by extra.R (run from the repository root).

theta_order.csv: synthetic, 200 rows; g1, g3, g4 with 5 levels and g2 with 10, so that lme4's
term ordering (ties, untied, mixed) can be checked. exist_multi_missing_cell.csv: exist_multi
without the language == "es" & task == "t3" cell (a rank-deficient interaction).
sleepstudy_days2.csv: sleepstudy with Days2 = 2 * Days (an exactly collinear column).
"""

import numpy as np
import pandas as pd

import crossed

OUT = "tests/data/reference/extra"

rng = np.random.default_rng(20261122)
n = 200
g1 = rng.integers(0, 5, n)
g2 = rng.integers(0, 10, n)
g3 = rng.integers(0, 5, n)
g4 = rng.integers(0, 5, n)
x = rng.normal(size=n)
e1, e2, e3, e4 = (rng.normal(scale=s, size=k) for s, k in [(1.0, 5), (1.5, 10), (0.7, 5),
                                                             (0.5, 5)])
s2 = rng.normal(scale=0.5, size=10)
y = 3 + 0.5 * x + e1[g1] + e2[g2] + s2[g2] * x + e3[g3] + e4[g4] + rng.normal(size=n)
pd.DataFrame({"g1": [f"a{i}" for i in g1], "g2": [f"b{i}" for i in g2],
              "g3": [f"c{i}" for i in g3], "g4": [f"d{i}" for i in g4],
              "x": np.round(x, 6), "y": np.round(y, 6)}).to_csv(f"{OUT}/theta_order.csv",
                                                                 index=False)

em = crossed.load_dataset("exist_multi")
em[~((em.language == "es") & (em.task == "t3"))].to_csv(
    f"{OUT}/exist_multi_missing_cell.csv", index=False)

ss = pd.read_csv("tests/data/sleepstudy.csv", dtype={"Subject": str})
ss["Days2"] = 2 * ss["Days"]
ss.to_csv(f"{OUT}/sleepstudy_days2.csv", index=False)
