"""The lme4 engine: R through rpy2, what it says when something is missing, lmerTest tables."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import crossed
import crossed.engines.lme4 as lme4_engine
from crossed.engines.errors import EngineUnavailableError
from reference import fit_case, load_table, r_answers

SLEEP = "Reaction ~ Days + (Days | Subject)"


@pytest.fixture(scope="module")
def sleep():
    return load_table("sleepstudy.csv", ("Subject",))


@pytest.fixture(scope="module")
def sleep_fit(r_stack, sleep):
    return crossed.lmer(SLEEP, sleep, engine="lme4")


# ---------------------------------------------------------------- missing software (no R needed)
def test_missing_r_says_what_to_install(monkeypatch):
    monkeypatch.delenv("R_HOME", raising=False)
    monkeypatch.setattr(lme4_engine.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailableError) as info:
        lme4_engine._R()
    msg = str(info.value)
    assert "needs R" in msg and "apt-get install" in msg and "r-base-core" in msg
    assert "r-cran-lme4" in msg and "crossed[r]" in msg


def test_missing_rpy2_says_what_to_install(monkeypatch):
    monkeypatch.setattr(lme4_engine.shutil, "which", lambda name: "/usr/bin/R")
    monkeypatch.setitem(sys.modules, "rpy2.robjects", None)  # import fails
    with pytest.raises(EngineUnavailableError, match=r"rpy2.*pip install 'crossed\[r\]'"):
        lme4_engine._R()


def test_missing_r_package_says_what_to_install(r_stack):
    with pytest.raises(EngineUnavailableError) as info:
        r_stack.require("noSuchPackageXyz")
    msg = str(info.value)
    assert "noSuchPackageXyz is not installed" in msg
    assert "apt-get install -y --no-install-recommends r-cran-nosuchpackagexyz" in msg
    assert "install.packages('noSuchPackageXyz')" in msg
    r_stack.require("lme4")  # present: no error


# ---------------------------------------------------------------- the fit
def test_fit_is_lme4s(sleep_fit):
    r = r_answers("sleepstudy_slopes")
    assert sleep_fit.engine == "lme4" and sleep_fit.opt is None and sleep_fit.converged
    assert sleep_fit.convergence is crossed.ConvergenceStatus.OK
    assert sleep_fit.deviance == pytest.approx(r["deviance"], rel=1e-12)
    np.testing.assert_allclose(sleep_fit.theta, r["theta"], rtol=1e-8)
    np.testing.assert_allclose(sleep_fit.vcov_beta, r["vcov"], rtol=1e-8)
    assert list(sleep_fit.fixef.index) == ["(Intercept)", "Days"]
    assert sleep_fit.engine_info["r_optimizer"] == "nloptwrap"
    # u mapped into crossed's block layout: the conditional modes are lme4's ranef
    modes = sleep_fit.ranef()
    ref = r_answers("sleepstudy_slopes")["ranef"][0]
    vals = np.asarray(ref["values"], dtype=float).reshape(-1, 2)
    np.testing.assert_allclose(modes[modes["term"] == "Days"]["estimate"], vals[:, 1],
                               rtol=1e-6, atol=1e-8)


def test_design_formula(r_stack):
    d = fit_case("pastes_nested", engine="lme4").design
    _, formula = lme4_engine.design_to_r(d)
    assert formula == ".y ~ 0 + .x0 + (1 | .g0) + (1 | .g1)"
    d = fit_case("sleepstudy_slopes", engine="lme4").design
    assert lme4_engine.design_to_r(d)[1] == ".y ~ 0 + .x0 + .x1 + (1 + .z0_1 | .g0)"


def test_singular_fit_warns_once(r_stack):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_case("dyestuff2_singular", engine="lme4")
    assert fit.is_singular and fit.converged and fit.convergence == "singular"
    sing = [w for w in caught if issubclass(w.category, crossed.SingularFitWarning)]
    assert len(sing) == 1
    assert not [w for w in caught if issubclass(w.category, crossed.ConvergenceWarning)]
    assert fit.messages == ("boundary (singular) fit: see help('isSingular')",)


def test_refit_and_ranova_use_lme4(sleep_fit, sleep):
    """Refits, reduced designs (ranova) and ML refits are fitted by lme4 on the design."""
    y = sleep_fit.design.y + 10.0
    again = sleep_fit.refit(y=y)
    assert again.engine == "lme4"
    assert again.beta[0] == pytest.approx(sleep_fit.beta[0] + 10.0, rel=1e-6)
    assert again.deviance == pytest.approx(sleep_fit.deviance, rel=1e-8)
    r = r_answers("sleepstudy_slopes")["ranova"]
    tab = sleep_fit.ranova()
    np.testing.assert_allclose(tab["loglik"], [row["logLik"] for row in r], rtol=1e-8)


def test_uncorrelated_factor_slopes_match_native(r_stack):
    """``||`` on a factor is crossed's (afex's) expansion: lme4 fits the same design."""
    df = load_table("sleepstudy.csv", ("Subject",))
    df["phase"] = np.where(df["Days"] > 4, "late", "early")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = crossed.lmer("Reaction ~ Days + (phase || Subject)", df, engine="lme4")
        b = crossed.lmer("Reaction ~ Days + (phase || Subject)", df)
    assert list(a.theta_names) == ["Subject.(Intercept)", "Subject.phaselate"]
    assert a.deviance == pytest.approx(b.deviance, rel=1e-7)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-3, atol=1e-4)


def test_control_is_refused(r_stack, sleep):
    with pytest.raises(ValueError, match="native engine's optimiser"):
        crossed.lmer(SLEEP, sleep, engine="lme4", control=crossed.LmerControl())


# ---------------------------------------------------------------- lmerTest's tables
def test_lmertest_tables_match_the_reference(r_stack):
    fit = fit_case("cake_split_plot", engine="native")  # any engine's fit
    r = r_answers("cake_split_plot")
    tabs = lme4_engine.lmertest_tables(fit)
    co = tabs["coefficients"]
    assert list(co.columns) == ["term", "estimate", "std_error", "df", "statistic", "p_value",
                                "conf_low", "conf_high"]
    assert list(co["term"]) == [row["term"] for row in r["coef_satterthwaite"]]
    np.testing.assert_allclose(co["df"], [row["df"] for row in r["coef_satterthwaite"]],
                               rtol=1e-6)
    an = tabs["anova"]
    assert list(an["term"]) == [row["term"] for row in r["anova3_satterthwaite"]]
    np.testing.assert_allclose(an["statistic"],
                               [row["F value"] for row in r["anova3_satterthwaite"]], rtol=1e-6)
    kr = lme4_engine.lmertest_tables(fit, ddf="kenward-roger")["coefficients"]
    np.testing.assert_allclose(kr["df"], [row["df"] for row in r["coef_kenward_roger"]],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="ddf must be"):
        lme4_engine.lmertest_tables(fit, ddf="residual")


@pytest.mark.parametrize("message,status", [
    # lme4's own wording (lme4:::checkConv, lme4:::checkHess, optwrap)
    ("Model failed to converge with max|grad| = 0.00262001 (tol = 0.002, component 1)",
     "gradient"),
    ("Model failed to converge with max|relative grad| = 0.1 (tol = 0.01)", "gradient"),
    ("unable to evaluate scaled gradient", "gradient"),
    ("Gradient contains NAs", "gradient"),
    ("Model failed to converge: degenerate  Hessian with 1 negative eigenvalues", "hessian"),
    ("Problem with Hessian check (infinite or missing values?)", "hessian"),
    ("convergence code 5 from nloptwrap: NLOPT_MAXEVAL_REACHED: Optimization stopped "
     "because maxeval (above) was reached.", "max_evaluations"),
    ("convergence code -4 from nloptwrap: NLOPT_ROUNDOFF_LIMITED", "failed"),
    (" Hessian is numerically singular: parameters are not uniquely determined", None),
    ("Model is nearly unidentifiable: large eigenvalue ratio\n - Rescale variables?", None),
    ("fixed-effect model matrix is rank deficient so dropping 1 column / coefficient", None),
])
def test_lme4_messages_map_to_a_status(message, status):
    assert lme4_engine.lme4_issue(message) == status


def test_r_leaves_child_processes_environment_alone(r_stack):
    """R's start-up sets LD_LIBRARY_PATH (its ldpaths, the system's library folder among
    them) in this process's environment; crossed puts it back, so that a Python child
    started after an lme4 fit (a Dask worker, a joblib process) loads its own libpython."""
    import os
    import subprocess

    lme4_engine.r_session()  # (R is started)
    assert "/R/lib" not in os.environ.get("LD_LIBRARY_PATH", "")
    out = subprocess.run([sys.executable, "-c", "import ssl; print('ok')"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
