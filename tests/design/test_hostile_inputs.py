"""Hostile data and new data found by adversarial probing (issue 14): each case is a clear
error naming the culprit, or R's answer."""

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from _hostile import hostile_data, quiet_lmer
from crossed import DataError
from crossed.design.frame import level_label, r_number

_data = hostile_data
_quiet = quiet_lmer


def test_duplicated_used_column_is_refused_by_name():
    d = _data()
    with pytest.raises(DataError, match="'x' appears 2 times"):
        crossed.lmer("y ~ x + (1 | g)", pd.concat([d, d[["x"]]], axis=1))


def test_duplicated_unused_column_is_fine():
    d = _data()
    fit = _quiet("y ~ x + (1 | g)", pd.concat([d, d[["f"]]], axis=1))
    assert fit.nobs == len(d)


def test_duplicated_column_in_new_data_is_refused_by_name():
    d = _data()
    fit = _quiet("y ~ x + (1 | g)", d)
    with pytest.raises(DataError, match="'x' appears 2 times in the new data"):
        fit.predict(pd.concat([d.head(3), d.head(3)[["x"]]], axis=1))


# Rscript -e 'as.character(c(2^62, 2^62 + 1024, 123456789012345678, 2^70))'
# [1] "4611686018427387904" "4611686018427388928" "123456789012345680" "1.18059162071741e+21"
@pytest.mark.parametrize("value,label", [
    (2.0**62, "4611686018427387904"), (2.0**62 + 1024, "4611686018427388928"),
    (123456789012345678.0, "123456789012345680"), (2.0**70, "1.18059162071741e+21"),
    (1e15 + 1, "1e+15"),
])
def test_large_whole_numbers_are_labelled_as_r_writes_them(value, label):
    assert r_number(value) == label


def test_large_integer_ids_stay_distinct_levels():
    # 64-bit IDs used to be labelled with 15 significant digits, so all became one level
    d = _data()
    d["z"] = d["g"] + 2**62
    fit = _quiet("y ~ x + (1 | z)", d)
    assert fit.ngroups == {"z": 8}
    assert level_label(np.int64(2**62 + 1)) == "4611686018427387905"
    ref = _quiet("y ~ x + (1 | g)", d)
    np.testing.assert_allclose(fit.fixef.to_numpy(), ref.fixef.to_numpy(), rtol=1e-6)


# R: lmer(y ~ factor(f, levels = c("a", "b")) + (1|g), d) drops the 'c' rows (NA levels);
# formulaic coded them as the reference level 'a', keeping all 120 rows: a wrong fit
@pytest.mark.parametrize("levels", ["['a', 'b']", "['a']", "['b', 'c']"])
def test_values_outside_C_levels_are_refused(levels):
    with pytest.raises(DataError, match=r"outside the levels given to C\(") as err:
        _quiet(f"y ~ x + C(f, levels={levels}) + (1 | g)", _data())
    assert "C(f, levels=" in str(err.value)


def test_C_levels_listing_every_value_is_fine():
    fit = _quiet("y ~ x + C(f, levels=['c', 'a', 'b']) + (1 | g)", _data())
    assert fit.nobs == 120
    assert [n[-1] for n in fit.fixef_names[2:]] == ["a", "b"]


def test_values_outside_C_levels_in_a_random_term_are_refused():
    with pytest.raises(DataError, match=r"outside the levels given to C\("):
        _quiet("y ~ x + (C(f, levels=['a', 'b']) | h)", _data())


@pytest.mark.parametrize("column,shown", [("b", "FALSE, TRUE"), ("f", "a, b, c")])
def test_non_numeric_response_names_its_values(column, shown):
    # said "dtype category" for a boolean or text column
    d = _data().assign(b=lambda t: t.x > 0)
    with pytest.raises(DataError, match=f"response '{column}' is not numeric.*{shown}"):
        crossed.lmer(f"{column} ~ x + (1 | g)", d)


def test_a_response_too_small_to_square_is_refused_by_name():
    # the message said "values too large to square"; lme4 fits y * 1e-200 (its optimiser
    # works on the scaled criterion); crossed asks to rescale
    d = _data()
    with pytest.raises(DataError, match="response 'y' varies by too little"):
        crossed.lmer("y ~ x + (1 | g)", d.assign(y=d.y * 1e-200))
    fit = _quiet("y ~ x + (1 | g)", d.assign(y=d.y * 1e-20))
    ref = _quiet("y ~ x + (1 | g)", d)
    np.testing.assert_allclose(fit.fixef.to_numpy() * 1e20, ref.fixef.to_numpy(), rtol=1e-5)


@pytest.mark.parametrize("formula", ["y ~ y + x + (1 | g)", "y ~ y * x + (1 | g)"])
def test_the_response_as_a_predictor_is_refused(formula):
    # R: "the response appeared on the right-hand side and was dropped"; crossed fitted
    # y on y (slope 1, residual 0)
    with pytest.raises(DataError, match="the response 'y' is also a term of the fixed part"):
        crossed.lmer(formula, _data())


def test_reference_level_of_a_numeric_column_says_how_to_make_it_a_factor():
    # said "'z' is not a factor in the model" although C(z) is one
    d = _data().assign(z=lambda t: t.g % 3)
    with pytest.raises(DataError, match="'z', a numeric column: convert it to strings"):
        crossed.lmer("y ~ C(z) + (1 | g)", d, reference={"z": 2})
    as_text = _quiet("y ~ C(z) + (1 | g)", d.assign(z=d.z.astype(str)), reference={"z": 2})
    ordered = _quiet("y ~ C(z, levels=[2, 0, 1]) + (1 | g)", d)
    np.testing.assert_allclose(as_text.fixef.to_numpy(), ordered.fixef.to_numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "float32"])
def test_transforms_of_narrow_numeric_columns_compute_in_doubles(dtype):
    # I(x * x) of an int8 column wrapped around (10000 -> 16) and predict() (which
    # computes in doubles) disagreed with fitted(); R computes in doubles
    d = _data()
    d["z"] = (d["g"] * 15).astype(dtype)
    fit = _quiet("y ~ I(z * z) + (1 | g)", d)
    ref = _quiet("y ~ I(z * z) + (1 | g)", d.assign(z=d["z"].astype(float)))
    np.testing.assert_allclose(fit.fixef.to_numpy(), ref.fixef.to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(fit.predict(d), fit.fitted(), rtol=1e-10)


def test_factor_of_a_numeric_column_keeps_rs_level_names():
    # R: lmer(y ~ factor(g) + ...) names factor(g)1 (not 1.0), factor(z)0.5, factor(z)1e-05
    d = _data()
    assert _quiet("y ~ C(g) + (1 | h)", d).fixef_names[1:3] == ("C(g)1", "C(g)2")
    assert _quiet("y ~ C(z) + (1 | h)", d.assign(z=d.g * 1e-5)).fixef_names[1] == "C(z)1e-05"


@pytest.mark.parametrize("formula,names", [
    ("y ~ f*x + (1 | g)", ("(Intercept)", "fb", "fc", "x", "fb:x", "fc:x")),
    ("y ~ `f*x` + (1 | g)", ("(Intercept)", "f*x")),
])
def test_a_column_named_like_an_operator_needs_backticks(formula, names):
    # a column named "f*x" was used for the bare term f*x (R: f + x + f:x)
    d = _data()
    d["f*x"] = d["g"] * 1.0
    assert _quiet(formula, d).fixef_names == names


def test_a_column_named_a_colon_b_does_not_hide_the_interaction():
    d = _data().assign(a=lambda t: t.f, b=lambda t: t.h)
    d["a:b"] = d["x"]
    assert "a:b" not in _quiet("y ~ a:b + (1 | g)", d).fixef_names
    assert _quiet("y ~ `a:b` + (1 | g)", d).fixef_names == ("(Intercept)", "a:b")


def test_a_fixed_part_with_as_many_columns_as_rows_is_refused():
    # x read as a factor (crossed fit --factor x): 120 levels; the REML criterion divided
    # by n - p = 0 (ZeroDivisionError); lme4: "objective in x0 returns NA"
    d = _data().assign(x=lambda t: t.x.astype(str))
    with pytest.raises(DataError, match="no residual degrees of freedom"):
        _quiet("y ~ f * x + (1 | g)", d)


def test_distinct_numbers_merged_into_one_grouping_level_are_reported():
    # Rscript -e 'nlevels(factor(c(1e15 + 1, 1e15 + 2)))'  -> 1 (R merges silently)
    d = _data().assign(z=lambda t: (1e15 + t.g).astype(float))
    with pytest.warns(UserWarning, match="grouping column 'z': the distinct values"):
        fit = crossed.lmer("y ~ x + (1 | z)", d)
    assert fit.ngroups["z"] < 8  # R's levels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        crossed.lmer("y ~ x + (1 | z)", d.assign(z=d.g.astype(float)))  # nothing merged
    assert not [w for w in caught if "distinct values" in str(w.message)]
