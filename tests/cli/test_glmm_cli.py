"""``crossed fit --family`` and ``crossed report --family``: GLMMs from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crossed.cli import main

DATA = Path(__file__).parents[1] / "data" / "glmm"
CBPP = str(DATA / "cbpp.csv")
CBPP_F = "cbind(incidence, size - incidence) ~ period + (1 | herd)"


def run(argv: list[str]) -> int:
    """``main(argv)``'s exit code (argparse's own errors exit with SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_fit_binomial_summary(capsys):
    assert main(["fit", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period"]) == 0
    out = capsys.readouterr().out
    assert "Generalized linear mixed model fit by maximum likelihood" in out
    assert " Family: binomial  ( logit )" in out
    assert "z value" in out


def test_fit_json_matches_api(capsys):
    import pandas as pd

    import crossed as cx

    assert main(["fit", str(DATA / "grouseticks.csv"), "TICKS ~ YEAR + (1 | BROOD)",
                 "--family", "poisson", "--factor", "YEAR", "BROOD", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    g = pd.read_csv(DATA / "grouseticks.csv", dtype={"YEAR": str, "BROOD": str})
    fit = cx.glmer("TICKS ~ YEAR + (1 | BROOD)", g, family="poisson")
    assert out["family"] == "poisson" and out["link"] == "log"
    assert out["loglik"] == pytest.approx(fit.loglik, rel=1e-10)
    assert [c["estimate"] for c in out["coefficients"]] == pytest.approx(list(fit.beta))


def test_weights_and_offset_columns(capsys, tmp_path):
    # a proportion with --weights trials is the cbind fit
    import pandas as pd

    cb = pd.read_csv(DATA / "cbpp.csv")
    cb["prop"] = cb["incidence"] / cb["size"]
    path = tmp_path / "cbpp_prop.csv"
    cb.to_csv(path, index=False)
    assert main(["fit", str(path), "prop ~ period + (1 | herd)", "--family", "binomial",
                 "--weights", "size", "--factor", "herd", "period", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["fit", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd", "period",
                 "--json"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["loglik"] == pytest.approx(b["loglik"], rel=1e-8)


@pytest.mark.parametrize("argv, message", [
    (["--weights", "size"], "--weights: only with --family"),
    (["--family", "gaussian"], "invalid choice: 'gaussian'"),
    (["--family", "binomial", "--offset", "nope"], "--offset: column 'nope'"),
    (["--family", "binomial", "--ml"], "--ml is for linear mixed models"),
])
def test_bad_options_one_line(capsys, argv, message):
    assert run(["fit", CBPP, CBPP_F, "--factor", "herd", "period", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("crossed: error: ") and message in err[0]


def test_binary_response_outside_01(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("y,g\n0,a\n2,a\n1,b\n0,b\n")
    assert main(["fit", str(path), "y ~ 1 + (1 | g)", "--family", "binomial"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "outside [0, 1]" in err[0]


def test_report_glmm(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    assert main(["report", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for section in ("Fixed effects (Wald z tests", "Likelihood-ratio tests",
                    "Nakagawa R²", "Estimated marginal means: period", "odds ratios",
                    "Random effects", "Residual checks", "GLMM, binomial family"):
        assert section in text
    assert text.count("data:image/png;base64,") >= 3


def test_report_glmm_refuses_compare(capsys, tmp_path):
    assert main(["report", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period", "--compare", "incidence ~ 1 + (1 | herd)",
                 "-o", str(tmp_path / "r.html")]) == 2
    assert "for linear mixed models" in capsys.readouterr().err


def test_compare_engines_family(capsys):
    assert main(["compare-engines", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period", "--engines", "native,statsmodels"]) == 0
    out = capsys.readouterr().out
    assert "(GLMM, binomial)" in out and "-2 log-likelihood (Laplace)" in out
    assert "variational Bayes" in out


def test_spec_item_level_says_family(capsys):
    assert main(["spec", "item_level", "outcome=correct", "systems=system", "items=item"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("item_level: correct ~ system + (1 | item)")
    assert "family: binomial" in out


def test_pirls_mode(capsys):
    """--pirls exact fits the Laplace approximation at the exact modes (cbpp: 5.6e-4 below
    lme4's criterion, as mixedlm's); refused without --family."""
    import crossed as cx

    assert main(["fit", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd", "period",
                 "--pirls", "exact", "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert main(["fit", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd", "period",
                 "--json"]) == 0
    lme4 = json.loads(capsys.readouterr().out)
    assert exact["loglik"] > lme4["loglik"]
    import pandas as pd

    d = pd.read_csv(CBPP, dtype={"herd": str, "period": str})
    fit = cx.glmer(CBPP_F, d, control=cx.LmerControl(pirls="exact"))
    assert exact["loglik"] == pytest.approx(fit.loglik, rel=1e-12)
    assert run(["fit", CBPP, "incidence ~ period + (1 | herd)", "--pirls", "exact"]) != 0
    assert "--pirls: only with --family" in capsys.readouterr().err


def test_named_glmm_specification_fits_a_glmm(capsys, tmp_path):
    """`crossed fit DATA item_level:...` fits the specification's family (before: a linear
    mixed model of the 0/1 response, the family dropped)."""
    import crossed as cx

    path = tmp_path / "irt.csv"
    cx.datasets.item_level_irt(seed=1).to_csv(path, index=False)
    named = "item_level:outcome=correct;systems=system;items=item;groups=dataset"
    assert main(["fit", str(path), named, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["family"] == "binomial" and out["formula"] == "correct ~ system + (1 | dataset/item)"
    assert main(["compare-engines", str(path), named, "--engines", "native"]) == 0
    assert "(GLMM, binomial)" in capsys.readouterr().out


def test_named_glmm_specification_refused_where_lmms_are_compared(capsys, tmp_path):
    import crossed as cx

    path = tmp_path / "irt.csv"
    cx.datasets.item_level_irt(seed=1).to_csv(path, index=False)
    named = "item_level:outcome=correct;systems=system;items=item;groups=dataset"
    assert run(["compare-specs", str(path), named, "correct ~ system + (1 | item)",
                "--focus", "system"]) != 0
    assert "binomial GLMM specification" in capsys.readouterr().err


def test_pirls_failing_at_the_start_is_an_input_error(capsys, tmp_path):
    # before the merge with main: an AssertionError; main: PirlsError, which the command
    # line called "an internal error ... a bug in crossed"
    path = tmp_path / "zero_trials.csv"
    path.write_text("x,g,s\n" + "".join(f"{i + 1},{'pqrs'[i % 4]},{i % 4}\n"
                                         for i in range(12)))
    code = main(["fit", str(path), "cbind(s, s) ~ x + (1 | g)", "--family", "binomial"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "cannot start the GLMM of 'cbind(s, s)'" in err and "bug" not in err


def test_anova_and_emmeans_take_family(capsys):
    """``crossed anova`` and ``crossed emmeans`` accept --family as ``fit`` does: the
    tables equal the API's (Wald chi-square tests; emmeans on the asked scale)."""
    import pandas as pd

    import crossed as cx

    data = pd.read_csv(CBPP, dtype={"herd": str, "period": str})
    fit = cx.glmer(CBPP_F, data, family="binomial")
    assert main(["anova", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["test"] == "Chisq" and out["eta_squared"] is None
    # (the command line orders herd's levels numerically, as R's factor(): the optimiser
    # stops within its tolerance of the same optimum)
    stat = fit.anova()["statistic"].to_numpy()
    np.testing.assert_allclose([r["statistic"] for r in out["anova"]], stat, rtol=1e-4)
    assert main(["emmeans", CBPP, CBPP_F, "period", "--family", "binomial", "--factor",
                 "herd", "period", "--scale", "link", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mine = fit.emmeans("period", type="link").table()["estimate"].to_numpy()
    np.testing.assert_allclose([r["estimate"] for r in out["emmeans"]], mine, rtol=1e-4)
    assert main(["anova", CBPP, CBPP_F, "--family", "binomial", "--factor", "herd",
                 "period"]) == 0
    assert "Wald chi-square tests" in capsys.readouterr().out


def test_emmeans_scale_defaults_to_emmeans_link_scale(capsys):
    """``crossed emmeans --family`` without ``--scale``: emmeans' default, the link scale
    (logits, log odds ratios); ``--scale response``: probabilities and odds ratios;
    ``--scale regrid``: probabilities and their differences (emmeans' regrid())."""
    import pandas as pd

    import crossed as cx

    data = pd.read_csv(CBPP, dtype={"herd": str, "period": str})
    emm = cx.glmer(CBPP_F, data, family="binomial").emmeans("period")
    base = ["emmeans", CBPP, CBPP_F, "period", "--family", "binomial", "--factor", "herd",
            "period", "--json"]
    got = {}
    for scale in (None, "response", "regrid"):
        assert main(base + ([] if scale is None else ["--scale", scale])) == 0
        got[scale] = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose([r["estimate"] for r in got[None]["emmeans"]],
                               emm.table()["estimate"], rtol=1e-4)
    np.testing.assert_allclose([r["estimate"] for r in got[None]["contrasts"]],
                               emm.pairs()["estimate"], rtol=1e-4)
    np.testing.assert_allclose([r["prob"] for r in got["response"]["emmeans"]],
                               emm.table(type="response")["prob"], rtol=1e-4)
    np.testing.assert_allclose([r["odds_ratio"] for r in got["response"]["contrasts"]],
                               emm.pairs(type="response")["odds_ratio"], rtol=1e-4)
    np.testing.assert_allclose([r["estimate"] for r in got["regrid"]["contrasts"]],
                               emm.regrid().pairs()["estimate"], rtol=1e-4)
    assert [r["contrast"] for r in got["regrid"]["contrasts"]][0] == "period1 - period2"
    assert main(base[:-1]) == 0
    text = capsys.readouterr().out
    assert "link scale" in text and "Degrees-of-freedom method" not in text
