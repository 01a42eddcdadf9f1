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
    assert "Model found" in repr(st)


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
