"""Data checks (issue 14 §2): every column type read as R reads it, or a clear error.

R's answers are in the comments next to each test (R 4.2, lme4 1.1-31).
"""

from __future__ import annotations

import datetime
import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed.design.frame import level_label, r_number
from reference import load_table

FORMULA = "Reaction ~ Days + (1 | Subject)"


@pytest.fixture(scope="module")
def sleep():
    data = load_table("sleepstudy.csv", ("Subject",))
    return data.assign(Days=data["Days"].astype(float))


def _quiet(formula, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return crossed.lmer(formula, data, **kw)


# ------------------------------------------------------------------ R's labels
# Rscript -e 'as.character(c(308, 0.1, 1e-5, 1e5, 123456, 1/3, 0.001, 5e-5, 3e-4, 1e20,
#                            1.5e15, -2.5, 0))'
@pytest.mark.parametrize("value,label", [
    (308.0, "308"), (0.1, "0.1"), (1e-5, "1e-05"), (1e5, "1e+05"), (123456.0, "123456"),
    (1 / 3, "0.333333333333333"), (0.001, "0.001"), (5e-5, "5e-05"), (3e-4, "3e-04"),
    (1e20, "1e+20"), (1.5e15, "1.5e+15"), (-2.5, "-2.5"), (-0.0, "0"),
])
def test_numbers_are_labelled_as_r_writes_them(value, label):
    assert r_number(value) == label


@pytest.mark.parametrize("value,label", [
    (308, "308"), (np.int64(308), "308"), (308.0, "308"), (np.float32(308), "308"),
    ("308", "308"), ("308.0", "308.0"), (True, "TRUE"), (np.bool_(False), "FALSE"),
    (pd.Timestamp("2024-01-31"), "2024-01-31"),
])
def test_level_labels_are_rs_as_character(value, label):
    assert level_label(value) == label


# ------------------------------------------------------------------ item 4: look-alikes
def test_number_and_text_labels_are_one_level(sleep):
    """An object column holding '308' and 308 is one subject, as R's factor() sees it.

    Before: 19 levels (two labelled '308'). R: nlevels(factor(as.character(...))) is 18."""
    data = sleep.assign(Subject=sleep["Subject"].astype(int).astype(object))
    data.loc[:4, "Subject"] = data.loc[:4, "Subject"].astype(str)
    assert data["Subject"].map(type).nunique() == 2  # really mixed
    fit = crossed.lmer(FORMULA, data)
    ref = crossed.lmer(FORMULA, sleep)
    assert fit.ngroups == {"Subject": 18}
    assert fit.deviance == pytest.approx(ref.deviance, rel=1e-10)


def test_mixed_fixed_factor_has_rs_levels(sleep):
    """['1', 1, '2'] is the factor with levels "1", "2" (no spurious level).

    R: levels(factor(c('1', 1, '2'))) is "1" "2";
    d$g <- rep(c("1","1","2"), length.out = 180)
    fixef(lmer(Reaction ~ g + (1|Subject), d)): (Intercept) 297.64307385068, g2 2.59445344795
    """
    g = np.array(["1", 1, "2"], dtype=object)[np.arange(len(sleep)) % 3]
    fit = crossed.lmer("Reaction ~ g + (1 | Subject)", sleep.assign(g=g))
    assert list(fit.fixef_names) == ["(Intercept)", "g2"]
    np.testing.assert_allclose(fit.fixef, [297.64307385068, 2.59445344795], rtol=1e-6)


def test_true_and_one_stay_apart():
    """Python hashes True like 1; R's labels "TRUE" and "1" are two levels."""
    from crossed.design.frame import labels_of

    labels = labels_of(pd.Series([1, True, 1.0, "TRUE", None, False, 0], dtype=object))
    assert labels[:4].tolist() == ["1", "TRUE", "1", "TRUE"] and pd.isna(labels[4])
    assert labels[5:].tolist() == ["FALSE", "0"]


def test_float_grouping_levels_are_labelled_like_r(sleep):
    """Subjects stored as floats are labelled '308', not '308.0' (R: factor(308) -> "308")."""
    fit = crossed.lmer(FORMULA, sleep.assign(Subject=sleep["Subject"].astype(float)))
    assert "308" in set(fit.ranef()["level"])


# ------------------------------------------------------------------ item 10: values
@pytest.mark.parametrize("column", ["Days", "Reaction"])
@pytest.mark.parametrize("formula", [FORMULA, "Reaction ~ Days + (Days | Subject)"])
def test_infinite_values_are_refused_naming_the_column(sleep, column, formula):
    """Before: with (1|g) Days was dropped as 'rank deficient', with (Days|g) LinAlgError.
    lme4: 'NA/NaN/Inf in foreign function call' (x) and "NA/NaN/Inf in 'y'" (y)."""
    data = sleep.copy()
    data.loc[3, column] = -np.inf
    with pytest.raises(crossed.DataError, match=f"'{column}' has 1 infinite value") as info:
        crossed.lmer(formula, data)
    assert "row 3" in str(info.value)


@pytest.mark.parametrize("column", ["Days", "Reaction"])
def test_values_too_large_to_fit_are_refused(sleep, column):
    """1e300 overflows when squared. Before: LinAlgError or a silently dropped predictor.
    lme4 (x): 'objective in x0 returns NA'; (y): fits with sigma = Inf."""
    data = sleep.copy()
    data.loc[3, column] = 1e300
    with pytest.raises(crossed.DataError, match=f"'{column}' has values too large"):
        crossed.lmer("Reaction ~ Days + (Days | Subject)", data)


def test_infinite_values_made_by_an_expression_are_refused(sleep):
    with pytest.raises(crossed.DataError, match=r"np.log\(Days\)") as info:
        _quiet("Reaction ~ np.log(Days) + (1 | Subject)", sleep)  # log(0) = -inf
    assert "infinite" in str(info.value)


def test_values_are_checked_after_the_formula_like_r(sleep):
    """R checks the model matrix, not the raw column: 1/Inf is 0 and log(1e300) is finite.

    R: d$x <- d$Days + 1; d$x[4] <- Inf; fixef(lmer(Reaction ~ I(1/x) + (1|Subject), d))
       -> 323.5919464 -86.0493029
       d$z <- d$Days + 1; d$z[4] <- 1e300; fixef(lmer(Reaction ~ log(z) + (1|Subject), d))
       -> 298.59143043443 -0.01564284661"""
    x = sleep["Days"] + 1.0
    data = sleep.assign(x=x.where(x.index != 3, np.inf), z=x.where(x.index != 3, 1e300))
    fit = crossed.lmer("Reaction ~ I(1 / x) + (1 | Subject)", data)
    np.testing.assert_allclose(fit.fixef, [323.5919464, -86.0493029], rtol=1e-6)
    fit = crossed.lmer("Reaction ~ np.log(z) + (1 | Subject)", data)
    np.testing.assert_allclose(fit.fixef, [298.59143043443, -0.01564284661], rtol=1e-6)


def test_badly_scaled_predictor_warns_like_lme4_and_fits(sleep):
    """lme4: 'Some predictor variables are on very different scales: consider rescaling',
    and fixef Days = 1.046729e-11 (10.4673 / 1e12)."""
    data = sleep.assign(Days=sleep["Days"] * 1e12)
    with pytest.warns(UserWarning, match="very different scales: consider rescaling") as rec:
        fit = crossed.lmer(FORMULA, data)
    assert any("Days" in str(w.message) for w in rec)
    assert fit.fixef["Days"] == pytest.approx(1.046729e-11, rel=1e-5)


def test_well_scaled_predictors_do_not_warn(sleep):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        crossed.lmer(FORMULA, sleep)


def test_constant_response_is_refused(sleep):
    """Before: sigma 2.5e-8 silently with (1|g), LinAlgError with (Days|g).
    lme4 fits it with sigma = 0 and convergence warnings."""
    for formula in (FORMULA, "Reaction ~ Days + (Days | Subject)"):
        with pytest.raises(crossed.DataError, match="'Reaction' is constant"):
            crossed.lmer(formula, sleep.assign(Reaction=3.0))


def test_binary_response_warns_and_names_the_glmm(sleep):
    """lme4's lmer fits a 0/1 response without a word; crossed fits it (a linear
    probability model is a choice) and says how to fit the logistic GLMM instead."""
    binary = sleep.assign(Reaction=(sleep["Reaction"] > 300).astype(int))
    with pytest.warns(crossed.BinaryResponseWarning,
                      match=r"'Reaction' takes only the values 0 and 1.*family=\"binomial\""):
        crossed.lmer(FORMULA, binary)
    import warnings

    with warnings.catch_warnings():  # a proportion is not binary
        warnings.simplefilter("error", crossed.BinaryResponseWarning)
        crossed.lmer(FORMULA, binary.assign(Reaction=binary["Reaction"] * 0.5 + 0.25
                                            * (binary["Days"] % 2)))


# ------------------------------------------------------------------ item 11: dtypes
def _dtype_cases(sleep):
    n = len(sleep)
    days = sleep["Days"]
    subj = sleep["Subject"]
    half = np.where(days < 5, "early", "late")
    start = pd.Timestamp("2024-01-01")
    return {
        # column dtype: (formula, data, expected: "same" fit as the plain one, or error text)
        "int64 predictor": ("Reaction ~ x + (1 | Subject)",
                            sleep.assign(x=days.astype("int64")), "numeric"),
        "Int64 predictor": ("Reaction ~ x + (1 | Subject)",
                            sleep.assign(x=days.astype("Int64")), "numeric"),
        "Float64 predictor": ("Reaction ~ x + (1 | Subject)",
                              sleep.assign(x=days.astype("Float64")), "numeric"),
        "float32 predictor": ("Reaction ~ x + (1 | Subject)",
                              sleep.assign(x=days.astype("float32")), "numeric"),
        "Float64 response": ("y ~ Days + (1 | Subject)",
                             sleep.assign(y=sleep["Reaction"].astype("Float64")), "response"),
        "string factor": ("Reaction ~ x + (1 | Subject)",
                          sleep.assign(x=pd.array(half, dtype="string")), "factor"),
        "object factor": ("Reaction ~ x + (1 | Subject)",
                          sleep.assign(x=half.astype(object)), "factor"),
        "categorical factor": ("Reaction ~ x + (1 | Subject)",
                               sleep.assign(x=pd.Categorical(half)), "factor"),
        "bool factor": ("Reaction ~ x + (1 | Subject)", sleep.assign(x=days >= 5), "bool"),
        "boolean factor": ("Reaction ~ x + (1 | Subject)",
                           sleep.assign(x=(days >= 5).astype("boolean")), "bool"),
        "Int64 grouping": ("Reaction ~ Days + (1 | g)",
                           sleep.assign(g=subj.astype(int).astype("Int64")), "grouping"),
        "categorical grouping": ("Reaction ~ Days + (1 | g)",
                                 sleep.assign(g=pd.Categorical(subj)), "grouping"),
        "datetime grouping": ("Reaction ~ Days + (1 | g)",
                              sleep.assign(g=start + pd.to_timedelta(
                                  subj.astype(int) - 300, unit="D")), "grouping"),
        "timedelta grouping": ("Reaction ~ Days + (1 | g)",
                               sleep.assign(g=pd.to_timedelta(subj.astype(int), unit="h")),
                               "grouping"),
        "datetime predictor": ("Reaction ~ x + (1 | Subject)",
                               sleep.assign(x=start + pd.to_timedelta(days, unit="D")),
                               "'x' holds dates or durations"),
        "datetime tz predictor": ("Reaction ~ x + (1 | Subject)",
                                  sleep.assign(x=(start + pd.to_timedelta(days, unit="D")
                                                  ).dt.tz_localize("UTC")),
                                  "'x' holds dates or durations"),
        "timedelta predictor": ("Reaction ~ x + (1 | Subject)",
                                sleep.assign(x=pd.to_timedelta(days, unit="D")),
                                "'x' holds dates or durations"),
        "period predictor": ("Reaction ~ x + (1 | Subject)",
                             sleep.assign(x=pd.period_range("2024-01", periods=n, freq="M")),
                             "'x' holds dates or durations"),
        "complex predictor": ("Reaction ~ x + (1 | Subject)",
                              sleep.assign(x=days.astype(complex)), "'x' holds complex"),
        "object numbers predictor": ("Reaction ~ x + (1 | Subject)",
                                     sleep.assign(x=days.astype(object)),
                                     "'x' holds numbers in a column of dtype object"),
        "object lists": ("Reaction ~ x + (1 | Subject)",
                         sleep.assign(x=[[1]] * n), "'x' holds a value of type list"),
        "date objects predictor": ("Reaction ~ x + (1 | Subject)",
                                   sleep.assign(x=[datetime.date(2024, 1, 1)] * n),
                                   "'x' holds dates or durations"),
        "date objects grouping": ("Reaction ~ Days + (1 | g)",
                                  sleep.assign(g=[datetime.date(2024, 1, 1) + datetime.timedelta(
                                      days=int(v) - 300) for v in subj]), "grouping"),
        "dict objects": ("Reaction ~ Days + (1 | g)", sleep.assign(g=[{"a": 1}] * n),
                         "'g' holds a value of type dict"),
    }


DTYPE_CASES = list(_dtype_cases(load_table("sleepstudy.csv", ("Subject",)).assign(
    Days=lambda d: d["Days"].astype(float))))


@pytest.mark.parametrize("case", DTYPE_CASES)
def test_every_dtype_is_read_as_r_would_or_refused(sleep, case):
    """The table of issue 14 §2 item 11: each column type gives R's fit (the same as its
    plain numpy/str equivalent) or a DataError naming the column."""
    formula, data, expected = _dtype_cases(sleep)[case]
    if expected in ("numeric", "response", "grouping"):
        ref = _quiet(FORMULA, sleep)
        fit = _quiet(formula, data)
        assert fit.deviance == pytest.approx(ref.deviance, rel=1e-8)
        np.testing.assert_allclose(fit.beta, ref.beta, rtol=1e-6)
        if expected == "grouping":
            assert fit.ngroups == {"g": 18}
    elif expected in ("factor", "bool"):
        half = np.where(sleep["Days"] < 5, "early", "late")
        ref = _quiet("Reaction ~ x + (1 | Subject)", sleep.assign(x=half))
        fit = _quiet(formula, data)
        name = "xTRUE" if expected == "bool" else "xlate"
        assert list(fit.fixef_names) == ["(Intercept)", name]
        assert fit.fixef[name] == pytest.approx(ref.fixef["xlate"], rel=1e-8)  # TRUE: late
    else:
        with pytest.raises(crossed.DataError, match=expected):
            _quiet(formula, data)


def test_datetime_grouping_levels_are_dates(sleep):
    start = pd.Timestamp("2024-01-01")
    data = sleep.assign(g=start + pd.to_timedelta(sleep["Subject"].astype(int) - 300, unit="D"))
    fit = crossed.lmer("Reaction ~ Days + (1 | g)", data)
    assert "2024-01-09" in set(fit.ranef()["level"])  # R: as.character(as.Date(...))


@pytest.mark.parametrize("missing", [pd.NA, None, np.nan])
def test_nullable_missing_values_are_counted_like_nan(sleep, missing):
    """pd.NA in an Int64 / string column is a missing value, dropped and reported."""
    data = sleep.assign(x=sleep["Days"].astype("Int64"),
                        s=pd.array(sleep["Subject"], dtype="string"))
    data.loc[2, "x"] = missing
    data.loc[[5, 6], "s"] = missing
    with pytest.warns(UserWarning, match="3 of 180 rows dropped") as rec:
        fit = crossed.lmer("Reaction ~ x + (1 | s)", data)
    assert "x (1)" in str(rec[0].message) and "s (2)" in str(rec[0].message)
    assert fit.nobs == 177


def test_ordered_categorical_gets_polynomial_contrasts(sleep):
    """As R: an ordered factor is coded with contr.poly (``x.L``), silently; an unordered
    one, or contrasts={"x": "treatment"}, with treatment contrasts."""
    half = np.where(sleep["Days"] < 5, "early", "late")
    data = sleep.assign(x=pd.Categorical(half, categories=["early", "late"], ordered=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = crossed.lmer("Reaction ~ x + (1 | Subject)", data)
    assert list(fit.fixef_names) == ["(Intercept)", "x.L"]
    # contr.poly(2) = (-1, 1)/sqrt(2): the slope is the treatment difference / sqrt(2)
    treat = crossed.lmer("Reaction ~ x + (1 | Subject)", data,
                         contrasts={"x": "treatment"})
    assert list(treat.fixef_names) == ["(Intercept)", "xlate"]
    assert fit.fixef["x.L"] == pytest.approx(treat.fixef["xlate"] / np.sqrt(2), rel=1e-6)


# ------------------------------------------------------------------ whole-matrix check
def test_clearly_finite_agrees_with_the_column_checks():
    """clearly_finite(X) True only where check_finite passes every column (it lets the
    design skip the column-by-column checks); False says only: check each column."""
    from crossed.design.frame import DataError, check_finite, clearly_finite

    big = np.sqrt(np.finfo(float).max / 3) * 1.01  # above the bound for 3 values
    cases = [np.ones((3, 2)), np.zeros((0, 2)), np.array([[1.0, np.inf]] * 3),
             np.array([[1.0, np.nan]] * 3), np.array([[1.0, -np.inf], [2.0, 1.0]]),
             np.array([[big, 1.0]] * 3), np.array([[big, 1.0], [np.nan, 1.0], [np.nan, 1.0]]),
             np.array([[-big, 1.0]] * 3)]
    for X in cases:
        passes = True
        for j in range(X.shape[1]):
            try:
                check_finite("x", X[:, j])
            except DataError:
                passes = False
        assert not clearly_finite(X) or passes
    assert clearly_finite(np.ones((3, 2)))
    assert not clearly_finite(np.array([[1.0, np.nan]] * 3))  # (the columns decide)


@pytest.mark.parametrize("column", ["Reaction", "Days", "Subject"])
def test_a_column_missing_in_every_row_is_named(column):
    # before: "no rows left after dropping rows with missing values", naming nothing
    data = load_table("sleepstudy.csv", factors=("Subject",))
    data[column] = np.nan
    with pytest.raises(crossed.DataError, match=f"'{column}' is missing .* in every row"):
        crossed.lmer(FORMULA, data)


def test_missing_values_spread_over_columns_are_counted():
    data = load_table("sleepstudy.csv", factors=("Subject",))
    data.loc[::2, "Reaction"] = np.nan
    data.loc[1::2, "Days"] = np.nan
    with pytest.raises(crossed.DataError,
                       match=r"one of: 'Reaction' \(90 missing\), 'Days' \(90 missing\)"):
        crossed.lmer(FORMULA, data)


def test_string_levels_are_in_rs_order_on_every_path():
    """A factor of strings gets the same levels (R's order: case-insensitive first, lower
    case before upper on ties) and codes whether it is held as pyarrow strings (the
    dictionary path), as Python objects or as a categorical."""
    pytest.importorskip("pyarrow")
    from crossed.design.frame import _encode_factor

    rng = np.random.default_rng(0)
    words = ["b", "B", "a", "A", "ab", "Ab", "aB", "_x", "1", "10", "9", "é", "E", "z", ""]
    values = [words[i] for i in rng.integers(0, len(words), 300)]
    arrow = _encode_factor(pd.array(values, dtype="string[pyarrow]"))
    plain = _encode_factor(pd.array(np.array(values, dtype=object), dtype=object))
    assert arrow[1] == plain[1] == sorted(set(values), key=lambda s: (s.lower(),
                                                                     s.swapcase()))
    np.testing.assert_array_equal(arrow[0], plain[0])
    assert [arrow[1][c] for c in arrow[0]] == values


@pytest.mark.parametrize(("values", "codes", "labels"), [
    # every category used: the categorical's codes and its order (not sorted)
    (pd.Categorical(["b", "a", "b", "c"], categories=["c", "b", "a"]), [1, 2, 1, 0],
     ["c", "b", "a"]),
    # unused categories dropped, the order of the others kept
    (pd.Categorical(["b", "a", "b"], categories=["c", "b", "z", "a"]), [0, 1, 0],
     ["b", "a"]),
    # numbers as categories: R's labels
    (pd.Categorical([308.0, 309.0, 308.0]), [0, 1, 0], ["308", "309"]),
    # two categories with one R label are one level
    (pd.Categorical(["1", 1, "2"], categories=["1", 1, "2"]), [0, 0, 1], ["1", "2"]),
    # a categorical column's values as pandas gives them (an extension array of a Series)
    (pd.Series(["y", "x", "y"], dtype="category").array, [1, 0, 1], ["x", "y"]),
])
def test_categorical_factor_codes_and_labels(values, codes, labels):
    """A categorical factor's codes and levels: its categories' R labels in its order,
    unused ones dropped and one label one level (R's ``factor`` of the labels)."""
    from crossed.design.frame import _encode_factor

    got_codes, got_labels = _encode_factor(values)
    assert got_codes.dtype == np.int64
    assert got_codes.tolist() == codes and got_labels == labels
    got_codes[0] = 99  # (the codes are a new array, not the categorical's)
    assert pd.Categorical(values).codes[0] != 99
