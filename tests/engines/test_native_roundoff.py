"""NLopt's "roundoff limited" stop is a result, not a crash (found by adversarial probing).

NLopt's Python binding raises ``nlopt.RoundoffLimited`` where R's nloptr returns status -4
with its best point; a REML fit of ``y ~ x + (1|g)`` on the data below raised it from the
boundary restart and the exception escaped ``lmer``.
"""

import warnings

import nlopt
import numpy as np
import pandas as pd

import crossed
from crossed.engines.native import LmerControl
from crossed.engines.native.optimize import bobyqa


def _roundoff_data() -> pd.DataFrame:
    rng = np.random.default_rng(1037)
    n = int(rng.integers(15, 70))
    d = pd.DataFrame({"a": rng.choice(list("pqr")[:int(rng.integers(2, 4))], n),
                      "b": rng.choice(["u", "v"], n), "c": rng.choice(["m", "n"], n),
                      "k": rng.integers(0, 3, n), "x": rng.normal(size=n),
                      "g": rng.integers(0, int(rng.integers(2, 6)), n),
                      "h": rng.choice(list("ST"), n)})
    if rng.random() < 0.4:
        d = d[~((d.a == d.a.iloc[0]) & (d.b == "u"))]
    d["y"] = rng.normal(size=len(d)) + (d.a == "p") * rng.normal()
    return d


def test_a_fit_whose_optimiser_stops_roundoff_limited_matches_lme4():
    # d <- read.csv("roundoff.csv"); m <- lmer(y ~ x + (1|g), d)
    # REMLcrit(m) 116.323897341; theta 0 (singular)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("y ~ x + (1 | g)", _roundoff_data())
    assert fit.deviance <= 116.323897341 * (1 + 1e-9)
    assert abs(fit.deviance - 116.323897341) < 1e-6
    assert fit.is_singular


def test_bobyqa_keeps_the_best_point_when_nlopt_raises_roundoff_limited(monkeypatch):
    real = nlopt.opt.optimize

    def optimize_then_give_up(self, x0):
        real(self, x0)
        raise nlopt.RoundoffLimited("NLopt roundoff-limited")

    monkeypatch.setattr(nlopt.opt, "optimize", optimize_then_give_up)
    res = bobyqa(lambda x: float((x[0] - 0.3) ** 2 + 1.0), np.array([1.0]),
                 np.array([0.0]), LmerControl())
    assert res.return_code == -4 and res.message == "roundoff limited"
    assert abs(res.theta_final[0] - 0.3) < 1e-3 and abs(res.fmin - 1.0) < 1e-6
