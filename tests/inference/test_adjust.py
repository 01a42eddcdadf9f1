"""p-value adjustments against R: ptukey, Tukey with two means, families with nonEst rows."""

import warnings

import numpy as np
import pytest

import crossed as cx
from crossed.inference.adjust import adjust_p, critical_values, ptukey_sf, qtukey

# R 4.2.2:
#   tr <- list(c(3.5,3,10), c(2,5,20), c(4,10,5), c(1,3,1000), c(5,4,2.5), c(3,3,Inf),
#              c(0.5,6,3), c(6,20,40), c(3.2,3,7.3))
#   for (x in tr) cat(ptukey(x[1], x[2], x[3], lower.tail = FALSE), qtukey(0.95, x[2], x[3]))
PTUKEY = [(3.5, 3, 10, 0.0771033108386604, 3.87677674919156),
          (2, 5, 20, 0.626077512411432, 4.23185668293036),
          (4, 10, 5, 0.316346591117709, 6.99469777775759),
          (1, 3, 1000, 0.759345231127488, 3.31944489916007),
          (5, 4, 2.5, 0.135158794645966, 7.86136600469926),
          (3, 3, np.inf, 0.0855425716549576, 3.31449315755301),
          (0.5, 6, 3, 0.998410359308007, 8.03708449909371),
          (6, 20, 40, 0.0150819466422952, 5.35751156564752),
          (3.2, 3, 7.3, 0.125020619349502, 4.1235807566822)]


@pytest.mark.parametrize(("q", "k", "df", "p", "q95"), PTUKEY)
def test_ptukey_and_qtukey_match_r(q, k, df, p, q95):
    assert ptukey_sf(q, k, df) == pytest.approx(p, rel=1e-12)
    assert qtukey(0.95, k, df) == pytest.approx(q95, rel=1e-6)


def test_tukey_with_two_means_is_the_exact_t_p_value():
    # R: 2 * pt(-2.5834, 2) = 0.122831436326; ptukey(2.5834 * sqrt(2), 2, 2,
    # lower.tail = FALSE) = 0.122783801697 (quadrature), what crossed reported before
    p = adjust_p(np.array([2.5834]), np.array([2.0]), np.array([0.122831436326]), "tukey", 2)
    assert p[0] == pytest.approx(0.122831436326, rel=1e-10)
    crit = critical_values(np.array([2.0]), 0.95, "tukey", 2, 1)
    assert crit[0] == pytest.approx(4.30265272974946, rel=1e-10)  # R: qt(0.975, 2)


def test_pairs_of_two_means_are_not_adjusted():
    # emmeans 1.8.4.1, lmer.df = "satterthwaite":
    #   m <- lmer(delta ~ language * task * mode + (1 | architecture), exist_multi)
    #   summary(pairs(emmeans(m, "language")), infer = TRUE)   # same with adjust = "none"
    #   en - es 0.0299960742083 SE 0.00793271418415 df 22.0000000039
    #   CI 0.0135446319066 0.04644751651 p 0.00102658846807
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cx.lmer("delta ~ language * task * mode + (1 | architecture)",
                      cx.load_dataset("exist_multi"))
        tukey = fit.emmeans("language").pairs()
        none = fit.emmeans("language").pairs(adjust="none")
    assert tukey["p_value"].iloc[0] == none["p_value"].iloc[0]
    assert tukey["p_value"].iloc[0] == pytest.approx(0.00102658846807, rel=1e-6)
    assert tukey["conf_low"].iloc[0] == pytest.approx(0.0135446319066, rel=1e-6)
    assert tukey["conf_high"].iloc[0] == pytest.approx(0.04644751651, rel=1e-6)
    assert tukey.attrs["adjust"] == "none"


def test_nan_rows_keep_nan_and_count_in_the_family():
    t = np.array([3.0, np.nan, 1.0])
    df = np.array([10.0, np.nan, 10.0])
    from scipy import stats

    p = 2 * stats.t.sf(np.abs(t), df)
    for method in ("tukey", "sidak", "bonferroni", "holm", "fdr", "dunnettx"):
        out = adjust_p(t, df, p, method, 3)
        assert np.isnan(out[1]) and np.isfinite(out[[0, 2]]).all(), method
    # R: p.adjust(c(p1, NA, p3), "bonferroni", n = 3)
    np.testing.assert_allclose(adjust_p(t, df, p, "bonferroni", 3)[[0, 2]],
                               np.minimum(1, 3 * p[[0, 2]]))
    # R: p.adjust(c(0.01, NA, 0.04), "holm", n = 3) = 0.03 NA 0.08
    np.testing.assert_allclose(adjust_p(t, df, np.array([0.01, np.nan, 0.04]), "holm", 3),
                               [0.03, np.nan, 0.08])
    # R: p.adjust(c(0.01, NA, 0.04), "BH", n = 3) = 0.03 NA 0.06
    np.testing.assert_allclose(adjust_p(t, df, np.array([0.01, np.nan, 0.04]), "fdr", 3),
                               [0.03, np.nan, 0.06])
    assert np.isnan(critical_values(df, 0.95, "tukey", 3, 3)[1])
