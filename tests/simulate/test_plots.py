"""The simulation figures draw (matplotlib, Agg backend)."""

import matplotlib

matplotlib.use("Agg")

import crossed as cx  # noqa: E402
from crossed import simulate as cs  # noqa: E402

RM = {"subject": "model", "within": ["language", "task", "mode"], "effect": "language"}


def test_figures(exist_fit, truth):
    import matplotlib.pyplot as plt

    abl = cx.ablation(cx.load_dataset("exist_multi"), exist_fit.formula,
                      cs.emm_contrast("language"), fractions=[0.05, 0.2], reps=3, seed=1,
                      rm_anova=RM)
    fig = abl.plot()
    assert len(fig.axes) == 2
    curve = cx.power_curve(truth, "x", along="g", breaks=[4, 10], nsim=5, seed=1)
    assert curve.plot().axes
    assert cx.bootstrap(truth, "fixef", nsim=10, seed=1).plot().axes
    assert len(exist_fit.check(seed=1).plot().axes) == 2
    plt.close("all")
