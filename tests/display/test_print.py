"""``repr(fit)``: lme4's ``print(fit)`` (``print.merMod``) for an lmer and a glmer fit.

The texts below are R 4.2.2's (lme4 1.1-31, lmerTest 3.1-3); only the first line (lme4
names its class, crossed its engine) and the ``Data:`` line (R's name of the data frame)
differ, and are compared apart. Trailing blanks are stripped on both sides.

    library(lmerTest)
    print(lmer(Reaction ~ Days + (Days | Subject), sleepstudy))
    print(lmer(Reaction ~ Days + (Days | Subject), sleepstudy, REML = FALSE))
    print(glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp,
                family = binomial))
"""

import warnings

import pytest

import crossed as cx

SLEEP_REML = """\
Formula: Reaction ~ Days + (Days | Subject)
REML criterion at convergence: 1743.628
Random effects:
 Groups   Name        Std.Dev. Corr
 Subject  (Intercept) 24.741
          Days         5.922   0.07
 Residual             25.592
Number of obs: 180, groups:  Subject, 18
Fixed Effects:
(Intercept)         Days
     251.41        10.47"""

SLEEP_ML = """\
Formula: Reaction ~ Days + (Days | Subject)
      AIC       BIC    logLik  deviance  df.resid
1763.9393 1783.0971 -875.9697 1751.9393       174
Random effects:
 Groups   Name        Std.Dev. Corr
 Subject  (Intercept) 23.780
          Days         5.717   0.08
 Residual             25.592
Number of obs: 180, groups:  Subject, 18
Fixed Effects:
(Intercept)         Days
     251.41        10.47"""

CBPP = """\
  Approximation) [glmerMod]
 Family: binomial  ( logit )
Formula: cbind(incidence, size - incidence) ~ period + (1 | herd)
     AIC      BIC   logLik deviance df.resid
194.0531 204.1799 -92.0266 184.0531       51
Random effects:
 Groups Name        Std.Dev.
 herd   (Intercept) 0.6421
Number of obs: 56, groups:  herd, 15
Fixed Effects:
(Intercept)      period2      period3      period4
    -1.3983      -0.9919      -1.1282      -1.5797"""


def _body(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()[1:]
            if not line.startswith("   Data:")]


@pytest.mark.parametrize("reml, expected, title", [
    (True, SLEEP_REML, "Linear mixed model fit by REML [native engine]"),
    (False, SLEEP_ML, "Linear mixed model fit by maximum likelihood [native engine]")])
def test_lmer_fit_prints_as_lme4(reml, expected, title):
    fit = cx.lmer("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"),
                  reml=reml)
    text = repr(fit)
    assert text.splitlines()[0] == title
    assert _body(text) == expected.splitlines()
    assert str(fit) == text
    assert fit.describe().startswith("<LmerFit ")


def test_glmer_fit_prints_as_lme4():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                       cx.load_dataset("cbpp"), family="binomial")
    text = repr(fit)
    assert text.splitlines()[0] == ("Generalized linear mixed model fit by maximum "
                                    "likelihood (Laplace")
    body = _body(text)
    # lme4 prints period4 as -1.5797 (its estimate -1.579745); crossed's is -1.579750
    # (agreement to 5e-6, the GLMM engine's tolerance against lme4), which rounds up
    assert body[:-1] == CBPP.splitlines()[:-1]
    assert body[-1].split()[:3] == ["-1.3983", "-0.9919", "-1.1282"]
    assert body[-1].split()[3] in ("-1.5797", "-1.5798")


def test_glmm_drop1_prints_the_none_row_blank_as_r():
    """R 4.2.2, lme4 1.1-31: ``drop1(glmer(cbind(incidence, size - incidence) ~ period +
    (1 | herd), cbpp, binomial), test = "Chisq")`` prints::

               npar    AIC   LRT   Pr(Chi)
        <none>      194.05
        period    3 213.66 25.61 1.151e-05 ***

    (before: the <none> row read NA in npar, statistic and p_value). The values stay
    missing (NaN / <NA>) in the data."""
    import warnings

    import crossed as cx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                     cx.load_dataset("cbpp"), family="binomial")
    tab = g.drop1()
    assert tab.isna().iloc[0].sum() == 3
    first = str(tab).splitlines()[1]
    assert first.split() == ["<none>", "194.1"] and "NA" not in first
    html = tab._repr_html_()
    assert ">NA<" not in html and '<td class="num"></td>' in html
    assert "NA" not in tab.formatted().iloc[0].tolist()


def test_compare_prints_the_first_models_test_cells_blank_as_r():
    """lme4's ``anova(m0, m1)`` prints the smaller model's Chisq, Df and Pr(>Chisq) blank
    (before: ``NA``); the values stay missing in the data."""
    d = cx.load_dataset("sleepstudy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = cx.compare(cx.lmer("Reaction ~ 1 + (Days | Subject)", d),
                         cx.lmer("Reaction ~ Days + (Days | Subject)", d))
    assert tab[["statistic", "df", "p_value"]].iloc[0].isna().all()
    first = str(tab).splitlines()[2]
    assert "NA" not in first and first.split()[-1] == "1775"
    assert ">NA<" not in tab._repr_html_()
