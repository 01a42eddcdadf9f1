"""``fit.step()`` against lmerTest 3.1-3's ``step(fit)`` (r_ci.R): ham (three random
intercepts, a three-way fixed interaction) and sleepstudy with a nuisance covariate.
Tolerances: log-likelihoods and LRTs 1e-6 relative, F tests 1e-5 relative (Satterthwaite df
1e-5), the same eliminations in the same order and the same final model."""

import numpy as np
import pandas as pd
import pytest

import crossed as cx
from r_ci_cases import answers, data, num

HAM = ("Informed.liking ~ Product * Information * Gender + (1 | Consumer) + "
       "(1 | Product:Consumer) + (1 | Information:Consumer)")


def _ham():
    return data("ham.csv", ("Consumer", "Product", "Information", "Gender"))


def _sleep():
    d = data("sleepstudy.csv", ("Subject",)).copy()
    d["noise"] = np.sin(np.arange(1, len(d) + 1))
    return d


def _check(st, ref):
    rand = st.random
    assert list(rand["term"]) == [r["term"] for r in ref["random"]]
    np.testing.assert_allclose(rand["eliminated"], [num(r["Eliminated"]) for r in ref["random"]])
    np.testing.assert_allclose(rand["loglik"], [r["logLik"] for r in ref["random"]], rtol=1e-6)
    np.testing.assert_allclose(rand["statistic"], [num(r["LRT"]) for r in ref["random"]],
                               rtol=1e-5)
    fixed = st.fixed
    assert list(fixed["term"]) == [r["term"] for r in ref["fixed"]]
    np.testing.assert_allclose(fixed["eliminated"], [r["Eliminated"] for r in ref["fixed"]])
    np.testing.assert_allclose(fixed["statistic"], [r["F value"] for r in ref["fixed"]],
                               rtol=1e-5)
    np.testing.assert_allclose(fixed["den_df"], [r["DenDF"] for r in ref["fixed"]], rtol=1e-5)
    np.testing.assert_allclose(fixed["p_value"], [r["Pr(>F)"] for r in ref["fixed"]],
                               rtol=1e-4)
    assert st.formula == ref["final"]


def test_step_ham_matches_lmertest():
    ref = answers()["step_ham"]
    st = cx.lmer(HAM, _ham()).step()
    _check(st, ref)
    fe = pd.Series(ref["fixef"])
    np.testing.assert_allclose(st.model.fixef[fe.index], fe, rtol=1e-6)
    # R 4.2.2, lmerTest 3.1-3: options(width = 200); print(step(lmer(HAM, ham)))
    # (trailing blanks stripped)
    assert [line.rstrip() for line in repr(st).splitlines()] == HAM_STEP_PRINT.splitlines()
    page = st._repr_html_()
    for head in ("Eliminated", "logLik", "Pr(&gt;Chisq)", "NumDF", "Pr(&gt;F)",
                 "(1 | Information:Consumer)", "Product:Information:Gender"):
        assert head in page
    assert "5.0" not in page and "nan" not in page.lower()


HAM_STEP_PRINT = """\
Backward reduced random-effect table:

                           Eliminated npar  logLik    AIC     LRT Df Pr(>Chisq)
<none>                                  20 -1348.2 2736.3
(1 | Information:Consumer)          1   19 -1348.9 2735.8   1.521  1    0.21751
(1 | Consumer)                      0   18 -1350.4 2736.8   3.010  1    0.08273 .
(1 | Product:Consumer)              0   18 -1431.0 2898.1 164.263  1    < 2e-16 ***
---
Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1

Backward reduced fixed-effect table:
Degrees of freedom method: Satterthwaite

                           Eliminated  Sum Sq Mean Sq NumDF DenDF F value  Pr(>F)
Product:Information:Gender          1  5.9915  1.9972     3   316  1.1994 0.31010
Product:Gender                      2  1.7436  0.5812     3   237  0.3484 0.79036
Information:Gender                  3  1.4075  1.4075     1   319  0.8436 0.35905
Gender                              4  1.4656  1.4656     1    79  0.8789 0.35135
Product:Information                 5 10.3873  3.4624     3   320  2.0765 0.10321
Product                             0 19.3466  6.4489     3   240  3.8291 0.01048 *
Information                         0  6.5201  6.5201     1   323  3.8714 0.04997 *
---
Signif. codes:  0 ‘***’ 0.001 ‘**’ 0.01 ‘*’ 0.05 ‘.’ 0.1 ‘ ’ 1

Model found:
Informed.liking ~ Product + Information + (1 | Consumer) + (1 | Product:Consumer)"""


def test_step_sleepstudy_matches_lmertest():
    st = cx.lmer("Reaction ~ Days * noise + (Days | Subject)", _sleep()).step()
    _check(st, answers()["step_sleep"])


def test_keep_and_no_reduction():
    fit = cx.lmer("Reaction ~ Days * noise + (Days | Subject)", _sleep())
    st = fit.step(keep=["Days:noise"])
    assert st.formula == "Reaction ~ Days + noise + Days:noise + (Days | Subject)"
    assert (st.fixed["eliminated"] == 0).all()
    st = fit.step(reduce_fixed=False, reduce_random=False)
    assert st.model is fit
    with pytest.raises(ValueError, match="keep names no fixed term"):
        fit.step(keep=["nope"])
