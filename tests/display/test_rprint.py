"""R's digits in the text summaries (crossed.display.rprint), against R 4.2.2's printed
text (lme4 1.1-31, lmerTest 3.1-3) on sleepstudy, the README's exist_multi model and a
cbpp GLMM.

Two checks per model: the formatting functions given R's own numbers (full precision,
below) print R's text character for character (trailing spaces included); and the fit's
``summary()`` prints the same block: exactly for the two LMMs (crossed's optimum agrees
with lme4's to every printed digit), for the GLMM with the same layout and at most 3
lines whose last digit differs (crossed's Laplace optimum differs from lme4's by ~1e-4).

The R code (run with Rscript; the text is what ``print(summary(m))`` writes)::

    suppressMessages({library(lmerTest); library(lme4)})
    d <- read.csv("src/crossed/data/exist_multi.csv")
    ms <- list(
      sleepstudy = lmer(Reaction ~ Days + (Days | Subject), sleepstudy),
      exist_multi = lmer(delta ~ language * task * mode + (1 | architecture), d),
      cbpp = glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp,
                   family = binomial))
    for (n in names(ms)) print(summary(ms[[n]]))
    options(digits = 17)
    for (n in names(ms)) {
      m <- ms[[n]]; s <- summary(m); vc <- as.data.frame(VarCorr(m))
      print(unname(as.vector(coef(s)))); print(colnames(coef(s)))
      print(vc$vcov); print(vc$sdcor)
      print(unname(quantile(residuals(m, type = "pearson", scaled = TRUE))))
    }
    format.pval(c(2.07e-09, 0.00123, 0.000558, 0.000221), digits = 3)
    format.pval(c(0.5, 0.0012, 3e-5), digits = 3)
    format.pval(c(1e-20, 3.26e-6), digits = 3); format.pval(c(1e-20, 0.5), digits = 3)
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from crossed._format import format_pvalues_r
from crossed.display.lmer import SIGNIF_CODES
from crossed.display.rprint import format_coefmat, format_quantiles, format_vc_table

R_TEXT = {
    "sleepstudy": [
        'Scaled residuals: ',
        '    Min      1Q  Median      3Q     Max ',
        '-3.9536 -0.4634  0.0231  0.4634  5.1793 ',
        '',
        'Random effects:',
        ' Groups   Name        Variance Std.Dev. Corr',
        ' Subject  (Intercept) 612.10   24.741       ',
        '          Days         35.07    5.922   0.07',
        ' Residual             654.94   25.592       ',
        'Number of obs: 180, groups:  Subject, 18',
        '',
        'Fixed effects:',
        '            Estimate Std. Error      df t value Pr(>|t|)    ',
        '(Intercept)  251.405      6.825  17.000  36.838  < 2e-16 ***',
        'Days          10.467      1.546  17.000   6.771 3.26e-06 ***',
        '---',
        'Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1',
    ],
    "exist_multi": [
        'Scaled residuals: ',
        '     Min       1Q   Median       3Q      Max ',
        '-1.88546 -0.41769 -0.08053  0.66611  1.40508 ',
        '',
        'Random effects:',
        ' Groups       Name        Variance  Std.Dev.',
        ' architecture (Intercept) 0.0012164 0.03488 ',
        ' Residual                 0.0005664 0.02380 ',
        'Number of obs: 36, groups:  architecture, 3',
        '',
        'Fixed effects:',
        '                           Estimate Std. Error       df t value Pr(>|t|)    ',
        '(Intercept)                 0.43054    0.02438  3.92094  17.662 6.96e-05 ***',
        'languagees                 -0.15436    0.01943 22.00000  -7.944 6.63e-08 ***',
        'taskt2                     -0.41360    0.01943 22.00000 -21.285 3.61e-16 ***',
        'taskt3                     -0.13049    0.01943 22.00000  -6.715 9.47e-07 ***',
        'modesoft                   -0.14596    0.01943 22.00000  -7.512 1.65e-07 ***',
        'languagees:taskt2           0.25235    0.02748 22.00000   9.183 5.56e-09 ***',
        'languagees:taskt3           0.10543    0.02748 22.00000   3.837 0.000897 ***',
        'languagees:modesoft         0.10776    0.02748 22.00000   3.921 0.000731 ***',
        'taskt2:modesoft             0.31214    0.02748 22.00000  11.359 1.13e-10 ***',
        'taskt3:modesoft             0.03508    0.02748 22.00000   1.277 0.215009    ',
        'languagees:taskt2:modesoft -0.18836    0.03886 22.00000  -4.847 7.64e-05 ***',
        'languagees:taskt3:modesoft -0.10430    0.03886 22.00000  -2.684 0.013557 *  ',
        '---',
        'Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1',
    ],
    "cbpp": [
        'Scaled residuals: ',
        '    Min      1Q  Median      3Q     Max ',
        '-2.3816 -0.7889 -0.2026  0.5142  2.8791 ',
        '',
        'Random effects:',
        ' Groups Name        Variance Std.Dev.',
        ' herd   (Intercept) 0.4123   0.6421  ',
        'Number of obs: 56, groups:  herd, 15',
        '',
        'Fixed effects:',
        '            Estimate Std. Error z value Pr(>|z|)    ',
        '(Intercept)  -1.3983     0.2312  -6.048 1.47e-09 ***',
        'period2      -0.9919     0.3032  -3.272 0.001068 ** ',
        'period3      -1.1282     0.3228  -3.495 0.000474 ***',
        'period4      -1.5797     0.4220  -3.743 0.000182 ***',
        '---',
        'Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1',
    ],
}

# R's numbers (options(digits = 17)): coef(summary(m)) column by column, VarCorr's vcov and
# sdcor (as.data.frame order), the scaled Pearson residuals' quantiles
R_NUMBERS = {
    "sleepstudy": dict(
        terms=["(Intercept)", "Days"],
        columns=["Estimate", "Std. Error", "df", "t value", "Pr(>|t|)"],
        coef=[251.405104848485, 10.467285959596, 6.82459669495491, 1.54578964390598,
              16.9997262884927, 16.9999837255917, 36.8380896462844, 6.77148148899918,
              1.17155811120826e-17, 3.26382446992738e-06],
        blocks=[("Subject", ["(Intercept)", "Days"], [612.100158024769, 35.0717144509388],
                 [24.7406579949841, 5.92213765889808],
                 np.array([[1.0, 0.0655512382381282], [0.0655512382381282, 1.0]])),
                ("Residual", [""], [654.940008259961], [25.5917957216753], None)],
        q=[-3.95356734536703, -0.463397683127066, 0.0231176647794387, 0.463402078150267,
           5.17926037341145]),
    "exist_multi": dict(
        terms=["(Intercept)", "languagees", "taskt2", "taskt3", "modesoft",
               "languagees:taskt2", "languagees:taskt3", "languagees:modesoft",
               "taskt2:modesoft", "taskt3:modesoft", "languagees:taskt2:modesoft",
               "languagees:taskt3:modesoft"],
        columns=["Estimate", "Std. Error", "df", "t value", "Pr(>|t|)"],
        coef=[0.430543038266668, -0.154357278700002, -0.413595899646668,
              -0.130488652333335, -0.145958915133335, 0.252349653716669, 0.105434534033335,
              0.107756080266669, 0.312142446346669, 0.0350842792000019, -0.188364528683337,
              -0.10430486066667, 0.0243769365186935, 0.0194311020264981, 0.0194311020264981,
              0.0194311020264981, 0.0194311020264981, 0.027479728017729, 0.027479728017729,
              0.027479728017729, 0.027479728017729, 0.027479728017729, 0.0388622040529963,
              0.0388622040529962, 3.92093909400153, 22.0000000041385, 22.0000000041483,
              22.0000000053452, 22.0000000047007, 22.0000000039324, 22.0000000044369,
              22.0000000043623, 22.0000000041121, 22.0000000049349, 22.0000000041279,
              22.0000000047871, 17.6619009503719, -7.94382523901659, -21.2852518134406,
              -6.71545299671567, -7.51161282228314, 9.1831205008238, 3.83681141113598,
              3.92129355127346, 11.3590078528174, 1.27673313132382, -4.84698522056198,
              -2.68396667683669, 6.96239361312777e-05, 6.63450873154207e-08,
              3.61088542406696e-16, 9.47358706229388e-07, 1.65259562715029e-07,
              5.55868258921279e-09, 0.000897207718863185, 0.000730598317700761,
              1.13238001712655e-10, 0.215008864794941, 7.63629219848061e-05,
              0.0135572468250969],
        blocks=[("architecture", ["(Intercept)"], [0.00121635351316298],
                 [0.0348762600225852], None),
                ("Residual", [""], [0.000566351588946268], [0.0237981425524403], None)],
        q=[-1.88545797198331, -0.417686421388852, -0.0805336710821217, 0.66610900227022,
           1.40508456983605]),
    "cbpp": dict(
        terms=["(Intercept)", "period2", "period3", "period4"],
        columns=["Estimate", "Std. Error", "z value", "Pr(>|z|)"],
        coef=[-1.39834286447115, -0.991924974975739, -1.12821621594334, -1.57974541364919,
              0.231214048099463, 0.303150644541277, 0.32283015322584, 0.422049159426317,
              -6.04782830440134, -3.27205299687456, -3.49476715439924, -3.74303651213643,
              1.46811288411447e-09, 0.00106769560037947, 0.000474475493714369,
              0.000181809798518987],
        blocks=[("herd", ["(Intercept)"], [0.412253792094153], [0.642069927729179], None)],
        q=[-2.38163599828346, -0.788935381221341, -0.202627053141524, 0.514254129255799,
           2.87908806084978]),
}

MODELS = ["sleepstudy", "exist_multi", "cbpp"]


def _block(lines: list[str], start: str, stop: str) -> list[str]:
    a = lines.index(start)
    b = next(i for i in range(a + 1, len(lines)) if lines[i].startswith(stop))
    return lines[a + 1:b]


def _fit(name: str):
    if name == "sleepstudy":
        return cx.lmer("Reaction ~ Days + (Days | Subject)", cx.load_dataset("sleepstudy"))
    if name == "exist_multi":
        return cx.lmer("delta ~ language * task * mode + (1 | architecture)",
                       cx.load_dataset("exist_multi"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                        cx.load_dataset("cbpp"), family="binomial")


@pytest.mark.parametrize("name", MODELS)
def test_formatting_of_r_numbers_is_r_text(name: str) -> None:
    """Given R's numbers, the three blocks are R's text, character for character."""
    r, text = R_NUMBERS[name], R_TEXT[name]
    k = len(r["columns"])
    coefs = pd.DataFrame(np.asarray(r["coef"]).reshape(k, -1).T, columns=r["columns"],
                         index=r["terms"])
    fixed, stars = format_coefmat(coefs)
    assert stars
    assert fixed + ["---", SIGNIF_CODES] == text[text.index("Fixed effects:") + 1:]
    assert format_vc_table(r["blocks"]) == _block(text, "Random effects:", "Number of obs")
    assert format_quantiles(r["q"]) == text[1:3]


_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]\d+)?")


def _last_unit(shown: str) -> float:
    """One unit of the last digit of a printed number (``0.3032``: 1e-4; ``1.47e-09``:
    1e-11)."""
    mant, _, exp = shown.partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


@pytest.mark.parametrize("name", MODELS)
def test_summary_prints_r_digits(name: str) -> None:
    """The fit's summary: R's blocks (the GLMM's last digits aside, same layout)."""
    ours = _fit(name).summary().splitlines()
    a = ours.index("Scaled residuals: ")
    ours = ours[a:a + len(R_TEXT[name])]
    theirs = R_TEXT[name]
    if name == "cbpp":  # crossed's Laplace optimum is lme4's to ~1e-4: the last digit may differ
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        for x, y in zip(ours, theirs, strict=True):
            if x != y:  # the same words; each number at most one unit of its last digit off
                assert _NUMBER.sub("#", x) == _NUMBER.sub("#", y), (x, y)
                for a, b in zip(_NUMBER.findall(x), _NUMBER.findall(y), strict=True):
                    assert abs(float(a) - float(b)) <= 1.0001 * _last_unit(b), (x, y)
    else:
        assert ours == theirs


def test_readme_model_digits_are_r_digits() -> None:
    """The issue's example: R prints 0.43054 / 0.02438 and a variance of 0.0012164."""
    text = _fit("exist_multi").summary()
    assert "0.43054    0.02438" in text and "0.0012164" in text


def test_no_stars_no_legend() -> None:
    """printCoefmat prints stars, and the legend, only when some p-value is below 0.1."""
    coefs = pd.DataFrame({"Estimate": [0.1, 0.2], "Std. Error": [0.5, 0.4],
                          "z value": [0.2, 0.5], "Pr(>|z|)": [0.84, 0.62]}, index=["a", "b"])
    lines, stars = format_coefmat(coefs)
    assert not stars and lines[0] == "  Estimate Std. Error z value Pr(>|z|)"


@pytest.mark.parametrize(("p", "expected"), [
    ([2.07e-09, 0.00123, 0.000558, 0.000221], ["2.07e-09", "0.001230", "0.000558", "0.000221"]),
    ([0.5, 0.0012, 3e-5], ["0.5000", "0.0012", "3e-05"]),
    ([1e-20, 3.26e-6], ["< 2e-16", "3.26e-06"]),
    ([1e-20, 0.5], ["<2e-16", "0.5"]),
])
def test_format_pval_is_r(p: list[float], expected: list[str]) -> None:
    """R's format.pval(p, digits = 3): the 1e-4 split and the '<2e-16' spacing."""
    assert format_pvalues_r(p, r_spacing=True) == expected
    assert format_pvalues_r([1e-20, 0.5]) == ["< 2e-16", "0.5"]  # result tables' spacing


def test_both_summaries_use_the_same_legend() -> None:
    for name in ("sleepstudy", "cbpp"):
        assert SIGNIF_CODES in _fit(name).summary().splitlines()


def test_lmm_without_ddf_prints_lme4s_table() -> None:
    """``summary(ddf="none")`` is lme4's ``summary(lme4::lmer(Reaction ~ Days +
    (Days | Subject), sleepstudy))``: no df, no p-values, so no stars and no legend."""
    text = _fit("sleepstudy").summary(ddf="none").splitlines()
    a = text.index("Fixed effects:")
    assert text[a + 1:a + 5] == [
        "            Estimate Std. Error t value",
        "(Intercept)  251.405      6.825  36.838",
        "Days          10.467      1.546   6.771",
        "",
    ]
    assert SIGNIF_CODES not in text


def test_rounding_is_rs() -> None:
    """printCoefmat rounds with R's ``round`` (R 4.2.2: ``round(0.15, 1)`` 0.1,
    ``round(2.675, 2)`` 2.67, ``round(2.5)`` 2), not NumPy's (0.2, 2.68)."""
    from crossed.display.rprint import _round_half_even

    got = _round_half_even(np.array([0.15, 2.675, 2.5, np.nan, 1e30]), 1)
    np.testing.assert_array_equal(got[:3], [0.1, 2.7, 2.5])
    np.testing.assert_array_equal(_round_half_even(np.array([2.675, 0.285]), 2), [2.67, 0.28])
    assert _round_half_even(np.array([2.5]), 0)[0] == 2.0
    assert np.isnan(got[3]) and got[4] == 1e30
