"""EMMs, contrasts and joint tests on a rank-deficient fit against emmeans 1.8.4.1 (nonEst).

exist_multi without the cell es:t3:soft: lme4 drops ``languagees:taskt3:modesoft``; every
mean or contrast that involves the empty cell is ``nonEst`` in emmeans. R code::

    library(lme4); library(lmerTest); library(emmeans)
    emm_options(lmer.df = "satterthwaite")
    d <- read.csv("exist_multi.csv", stringsAsFactors = TRUE)
    d <- d[!(d$language == "es" & d$task == "t3" & d$mode == "soft"), ]
    m <- lmer(delta ~ language * task * mode + (1 | architecture), data = d)
    emmeans(m, "language"); pairs(emmeans(m, "language"))
    emmeans(m, "task"); pairs(emmeans(m, "task"))
    e <- emmeans(m, ~ language * task)
    pairs(e); pairs(e, adjust = "bonferroni"); pairs(e, adjust = "holm")
    pairs(e, adjust = "fdr"); pairs(e, adjust = "sidak")
    contrast(emmeans(m, "task"), "trt.vs.ctrl")
    joint_tests(m); joint_tests(m, by = "mode"); emmeans(m, ~ 1)
"""

import warnings

import numpy as np
import pytest

import crossed as cx
from crossed.inference.emmeans import NONEST, emmeans, joint_tests

NAN = np.nan
# pairs(emmeans(m, ~ language * task)): 15 contrasts, 5 of them nonEst
PAIR_EST = [0.1004792385667, 0.2575246764733, 0.1998365256650, 0.1129465127333, NAN,
            0.1570454379067, 0.0993572870983, 0.0124672741667, NAN, -0.0576881508083,
            -0.1445781637400, NAN, -0.0868900129317, NAN, NAN]
PAIR_P = {
    "tukey": [1.12270262262e-05, 1.13153930670e-12, 1.29698585205e-10, 1.99242794929e-06, NAN,
              9.27727339395e-09, 1.31785763662e-05, 9.49521310832e-01, NAN,
              7.54124778995e-03, 3.78836564341e-08, NAN, 8.21613532781e-05, NAN, NAN],
    "bonferroni": [1.26933592793e-05, 1.24919482258e-12, 1.38857385024e-10,
                   2.21866467334e-06, NAN, 1.00575064686e-08, 1.49248713866e-05, 1.0, NAN,
                   9.99257508786e-03, 4.12715857469e-08, NAN, 9.52804932478e-05, NAN, NAN],
    "holm": [8.46223951951e-06, 1.24919482258e-12, 1.29600226022e-10, 1.62702076045e-06,
             NAN, 8.71650560612e-09, 8.95492283196e-06, 1.0, NAN, 4.66320170767e-03,
             3.30172685976e-08, NAN, 5.08162630655e-05, NAN, NAN],
    "fdr": [2.11555987988e-06, 1.24919482258e-12, 6.94286925118e-11, 4.43732934668e-07, NAN,
            3.35250215620e-09, 2.13212448380e-06, 5.92332365343e-01, NAN, 1.11028612087e-03,
            1.03178964367e-08, NAN, 1.19100616560e-05, NAN, NAN],
    "sidak": [1.26932840889e-05, 1.24900090270e-12, 1.38857259024e-10, 2.21866237649e-06,
              NAN, 1.00575064943e-08, 1.49247674367e-05, 9.99466009094e-01, NAN,
              9.94611194095e-03, 4.12715853715e-08, NAN, 9.52762567914e-05, NAN, NAN],
}


@pytest.fixture(scope="module")
def fit(exist_missing_cell_fit):
    """exist_multi without the cell es:t3:soft (lme4 drops languagees:taskt3:modesoft)."""
    return exist_missing_cell_fit


def _emm(fit, spec, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return emmeans(fit, spec, **kw)


def _same(ours, theirs, rtol, atol=0.0):
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    ok = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[ok], theirs[ok], rtol=rtol, atol=atol)


def test_fit_dropped_the_empty_cell(fit):
    assert fit.design.fixed.dropped == ("languagees:taskt3:modesoft",)


def test_means_over_the_empty_cell_are_nonest(fit):
    tab = _emm(fit, "language").table()
    assert list(tab["note"]) == ["", NONEST]
    assert tab.loc[1, ["estimate", "std_error", "df", "conf_low", "conf_high"]].isna().all()
    _same(tab["estimate"], [0.234073184298, NAN], 1e-7)
    _same(tab["std_error"], [0.0212864551013, NAN], 1e-5)
    _same(tab["df"], [2.14465002421, NAN], 1e-4)
    tab = _emm(fit, "task").table()
    assert list(tab["note"]) == ["", "", NONEST]
    _same(tab["estimate"], [0.307323961417, 0.128882979631, NAN], 1e-7)
    _same(tab["std_error"], [0.0216851484359, 0.0216851484359, NAN], 1e-5)
    _same(tab["df"], [2.30889968662, 2.30889968701, NAN], 1e-4)


def test_pairs_report_no_p_value_for_a_nonest_contrast(fit):
    # before: "en - es" got estimate 0.0126 and p = 0.25 (emmeans: nonEst)
    tab = _emm(fit, "language").pairs()
    assert tab["note"].tolist() == [NONEST]
    assert tab[["estimate", "std_error", "df", "statistic", "p_value"]].isna().all(axis=None)


def test_tukey_family_counts_every_mean(fit):
    tab = _emm(fit, "task").pairs()
    assert tab["note"].tolist() == ["", NONEST, NONEST]
    row = tab.iloc[0]
    assert row["estimate"] == pytest.approx(0.178440981786, rel=1e-7)
    assert row["std_error"] == pytest.approx(0.0101387845159, rel=1e-5)
    assert row["df"] == pytest.approx(19.9999999976, rel=1e-4)
    assert row["statistic"] == pytest.approx(17.5998396559, rel=1e-5)
    # "tukey method for comparing a family of 3 estimates": R's ptukey at p ~ 4e-13 is
    # 1 - (lower tail), accurate to ~1e-13 absolute
    assert row["p_value"] == pytest.approx(3.68260977268e-13, abs=1e-12)
    assert tab.iloc[1:][["estimate", "p_value", "conf_low"]].isna().all(axis=None)


@pytest.mark.parametrize("adjust", sorted(PAIR_P))
def test_adjustments_count_nonest_contrasts_in_the_family(fit, adjust):
    tab = _emm(fit, "language:task").pairs(adjust=adjust)
    _same(tab["estimate"], PAIR_EST, 1e-7, 1e-9)
    _same(tab["std_error"], [NAN if np.isnan(e) else 0.0143384065684 for e in PAIR_EST], 1e-5)
    _same(tab["p_value"], PAIR_P[adjust], 1e-4, 1e-11)
    assert tab.attrs["adjust"] == adjust


def test_trt_vs_ctrl(fit):
    tab = _emm(fit, "task").contrast("trt.vs.ctrl")
    _same(tab["estimate"], [-0.178440981786, NAN], 1e-7)
    _same(tab["p_value"], [2.48467912911e-13, NAN], 1e-4, 1e-11)


def test_joint_tests_test_the_estimable_part(fit):
    tab = joint_tests(fit)
    assert tab["term"].tolist() == ["task", "language:task", "task:mode",
                                    "language:task:mode", "(confounded)"]
    assert tab["note"].tolist() == ["e", "e", "e", "e", ""]
    assert tab["num_df"].tolist() == [1, 1, 1, 1, 6]
    np.testing.assert_allclose(tab["den_df"], 20, rtol=1e-6)
    # emmeans prints F to 3 decimals; its (confounded) F is built from the rounded F's
    np.testing.assert_allclose(tab["statistic"],
                               [309.754, 60.842, 115.537, 21.573, 7.74033333333], rtol=1e-3)
    np.testing.assert_allclose(tab["p_value"][:4], [1.22099380432e-13, 1.71938040185e-07,
                                                    9.26866495533e-10, 1.56259556970e-04],
                               rtol=1e-5)
    assert tab["p_value"].iloc[4] == pytest.approx(2.12923120409e-04, rel=2e-3)
    assert any("non-estimability" in m for m in tab.attrs["messages"])


def test_confounded_row_asymptotic(fit):
    # emm_options(lmer.df = "asymptotic"); joint_tests(m): (confounded) 6 Inf 7.74033333333
    # p 2.41736169598e-08 (from the rounded F's; before: NaN)
    row = joint_tests(fit, ddf="none").set_index("term").loc["(confounded)"]
    assert np.isinf(row["den_df"]) and row["num_df"] == 6
    assert row["statistic"] == pytest.approx(7.74033333333, rel=1e-3)
    assert row["p_value"] == pytest.approx(2.41736169598e-08, rel=5e-3)


def test_joint_tests_by(fit):
    tab = joint_tests(fit, by="mode")
    assert list(zip(tab["term"], tab["mode"], strict=True)) == [
        ("language", "hard"), ("task", "hard"), ("task", "soft"), ("language:task", "hard"),
        ("language:task", "soft"), ("(confounded)", "soft")]
    assert tab["num_df"].tolist() == [1, 2, 1, 2, 1, 2]
    assert tab["note"].tolist() == ["", "", "e", "", "e", ""]
    np.testing.assert_allclose(tab["statistic"],
                               [8.987, 215.011, 23.468, 39.067, 4.978, 3.237], atol=6e-4)
    np.testing.assert_allclose(tab["p_value"][:5], [7.11121614753e-03, 3.00582086865e-14,
                                                    9.83745949364e-05, 1.23630002409e-07,
                                                    3.72711405365e-02], rtol=1e-5)


def test_full_rank_fit_has_no_note_column():
    d = cx.load_dataset("exist_multi")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cx.lmer("delta ~ language * task * mode + (1 | architecture)", d)
    assert "note" not in _emm(full, "task").pairs().columns
    assert "note" not in _emm(full, "task").table().columns
    assert "note" not in joint_tests(full).columns
    assert "(confounded)" not in set(joint_tests(full)["term"])
