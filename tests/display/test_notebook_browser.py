"""Every result object of both fit classes, as a notebook shows it, rendered in headless
Chromium at 1280 px (the page of ``scripts/notebook_page.py``, which also makes the
screenshots in docs/img/): each object has crossed's HTML view (not a ``<pre>`` of its
text, not pandas' bare table), with a table under a header row, the term names, and no
horizontal overflow of its output block."""

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")  # bootstrap and check() import crossed.plots lazily

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import notebook_page as nb  # noqa: E402

needs_chromium = pytest.mark.skipif(nb.CHROMIUM is None and not os.environ.get("CI"),
                                    reason="chromium not installed (CI installs it)")

LMM_BLOCKS = ["fit", "fit.summary()", "fit.coef_table()", "fit.anova()", "fit.eta_squared()",
              "fit.emmeans('Days', at=...)", "emm.pairs()", "fit.emtrends('1', 'Days')",
              "fit.varcorr()", "fit.ranef()", "cx.compare(null, fit)", "fit.ranova()",
              "fit.confint()", "fit.step()", "fit.influence('Subject')", "fit.r2()",
              "fit.icc()", "fit.check()", "cx.power_sim(fit, 'Days')", "cx.bootstrap(fit)"]
GLMM_BLOCKS = ["fit", "fit.summary()", "fit.coef_table()", "fit.anova()", "fit.drop1()",
               "fit.emmeans('period')", "emm.pairs()", "fit.emmeans('period', type='response')",
               "resp.pairs()", "emm.regrid().pairs()", "fit.varcorr()", "fit.ranef()",
               "cx.compare(null, fit)", "fit.confint()", "fit.r2()", "fit.check()",
               "cx.bootstrap(fit)"]
# the blocks that name the fixed-effect terms, and the terms
TERMS = {"lmm": (["fit", "fit.summary()", "fit.coef_table()", "fit.confint()",
                  "cx.bootstrap(fit)"], ["(Intercept)", "Days"]),
         "glmm": (["fit", "fit.summary()", "fit.coef_table()", "fit.confint()"],
                  ["(Intercept)", "period2", "period3", "period4"])}


@pytest.fixture(scope="module", params=["lmm", "glmm"])
def rendered(request, tmp_path_factory):
    assert nb.CHROMIUM is not None, "CI must have chromium (.ci/run installs it)"
    objects = nb.lmm_objects(nsim=10) if request.param == "lmm" else nb.glmm_objects(nsim=10)
    page = nb.notebook_html(request.param, objects)
    return request.param, nb.probe(page, tmp_path_factory.mktemp(request.param))


@needs_chromium
def test_every_object_has_its_html_view_with_headed_tables(rendered):
    kind, result = rendered
    blocks = {b["name"]: b for b in result["blocks"]}
    assert list(blocks) == (LMM_BLOCKS if kind == "lmm" else GLMM_BLOCKS)
    for name, b in blocks.items():
        assert b["html"], f"{name} has no _repr_html_ (a notebook shows its text)"
        assert b["crossed"], f"{name} is not shown by crossed's display layer"
        assert b["tables"] >= 1 and b["headed"] == b["tables"], (name, b)
    names, terms = TERMS[kind]
    for name in names:
        for term in terms:
            assert term in blocks[name]["text"], (name, term)


@needs_chromium
def test_no_block_overflows_at_1280_px(rendered):
    _, result = rendered
    assert result["width"] == nb.WIDTH
    assert result["pageScrollWidth"] <= result["width"]
    for b in result["blocks"]:
        assert b["clientWidth"] > 600, b["name"]
        assert b["scrollWidth"] <= b["clientWidth"], (b["name"], b["scrollWidth"],
                                                     b["clientWidth"])
        assert b["beyond"] == 0, b["name"]
    assert result["overflowing"] == []


@needs_chromium
def test_the_views_read_as_r_prints(rendered):
    kind, result = rendered
    blocks = {b["name"]: b for b in result["blocks"]}
    fit = blocks["fit"]["text"]
    if kind == "lmm":
        assert "REML criterion at convergence" in fit and "Scaled residuals" in fit
        assert "Number of obs: 180, groups:  Subject, 18" in fit
        step = blocks["fit.step()"]["text"]
        for head in ("Eliminated", "npar", "logLik", "Pr(>Chisq)", "NumDF", "Pr(>F)",
                     "Model found"):
            assert head in step
        # integer columns as integers, missing cells blank (lmerTest's layout)
        assert "Days in (Days | Subject)\t0\t4\t-893.23\t1794.5\t42.837\t2\t" in step
        assert "<none>\t\t6\t" in step and "nan" not in step.lower()
        assert "yes" in blocks["fit.influence('Subject')"]["text"]
        # effectsize's default interval: one-sided, upper bound 1
        assert "One-sided CIs: upper bound fixed at [1.00]." in blocks["fit.eta_squared()"]["text"]
    else:
        for piece in ("AIC", "BIC", "logLik", "deviance", "Number of obs: 56, groups:  herd, 15",
                      "Scaled residuals"):
            assert piece in fit
        # emmeans' defaults: the logit scale, its pairs log odds ratios; odds ratios on
        # request (type='response'), differences of probabilities after regrid()
        emm = blocks["fit.emmeans('period')"]["text"]
        assert "Results are given on the logit (not the response) scale." in emm
        assert "Confidence level used: 0.95" in emm
        assert "period1 - period2" in blocks["emm.pairs()"]["text"]
        assert "log odds ratio (not the response) scale" in blocks["emm.pairs()"]["text"]
        resp = blocks["fit.emmeans('period', type='response')"]["text"]
        assert "prob" in resp and "Intervals are back-transformed from the logit scale" in resp
        assert "period1 / period2" in blocks["resp.pairs()"]["text"]
        assert "odds_ratio" in blocks["resp.pairs()"]["text"].replace("\u200b", "")
        assert "period1 - period2" in blocks["emm.regrid().pairs()"]["text"]
        assert not any("Degrees-of-freedom method" in b["text"] for b in blocks.values())
