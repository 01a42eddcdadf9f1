"""Property tests of designs (hypothesis): row order, level names, missing values, scale.

Random data sets (``tests/_propdata.py``): 1-3 grouping factors, crossed or nested
(explicitly or implicitly labelled), 2-15 levels with unbalanced, partly empty cells, a
numeric predictor and a fixed factor or not, random slopes or not, y on scales 1e-3..1e4.
The properties are checked on the design and on the PLS criterion at the *same* theta, so
they hold to rounding (no optimiser involved); tests/engines/test_engine_properties.py
checks the fitted models.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crossed as cx
from _propdata import SETTINGS, cases, level_mapper, random_thetas, relabel
from crossed.design import DataError, Design, build_design
from crossed.formula import parse
from crossed.model.pls import PLS


def design_of(formula: str, data: pd.DataFrame, reference: dict | None = None,
              na_action: str = "omit") -> Design:
    return build_design(parse(formula, reference=reference), data, na_action=na_action)


def criterion(design: Design, theta: np.ndarray, reml: bool, y: np.ndarray | None = None):
    """PLS criterion, fixed effects and spherical random effects at ``theta``."""
    pls = PLS(design.random.blocks, design.X, design.y if y is None else y)
    f = pls.factor(theta)
    beta, u = pls.solve(f)
    return pls.objective(theta, reml), beta, u


@settings(max_examples=40, **SETTINGS)
@given(case=cases(), seed=st.integers(0, 2**32 - 1), reml=st.booleans())
def test_permuting_rows_permutes_the_design_and_keeps_the_criterion(case, seed, reml):
    perm = np.random.default_rng(seed).permutation(len(case.data))
    a = design_of(case.formula, case.data)
    b = design_of(case.formula, case.data.iloc[perm].reset_index(drop=True))
    np.testing.assert_array_equal(b.y, a.y[perm])
    np.testing.assert_array_equal(b.X, a.X[perm])
    assert b.fixed.names == a.fixed.names
    assert b.random.theta_names == a.random.theta_names
    np.testing.assert_array_equal(b.random.theta_lower, a.random.theta_lower)
    for ba, bb in zip(a.random.blocks, b.random.blocks, strict=True):
        assert (bb.group, bb.levels, bb.column_names) == (ba.group, ba.levels, ba.column_names)
        np.testing.assert_array_equal(bb.codes, ba.codes[perm])
        np.testing.assert_array_equal(bb.Z, ba.Z[perm])
    for theta in random_thetas(a.random.theta_lower, seed):
        ca, beta_a, u_a = criterion(a, theta, reml)
        cb, beta_b, u_b = criterion(b, theta, reml)
        assert cb == pytest.approx(ca, rel=1e-10, abs=1e-9)
        np.testing.assert_allclose(beta_b, beta_a, rtol=1e-7, atol=1e-9 * np.abs(a.y).max())
        for ua, ub in zip(u_a, u_b, strict=True):
            np.testing.assert_allclose(ub, ua, rtol=1e-7, atol=1e-9 * np.abs(a.y).max())


@settings(max_examples=40, **SETTINGS)
@given(case=cases(), data=st.data(), reml=st.booleans())
def test_relabelling_levels_changes_only_names(case, data, reml):
    new, maps, ref_a, ref_b = relabel(data.draw, case)
    a = design_of(case.formula, case.data, reference=ref_a)
    b = design_of(case.formula, new, reference=ref_b)
    new_level = level_mapper(maps)
    # fixed effects: the same columns under the new names (trt's reference still first)
    names = {f"trt{old}": f"trt{lv}" for old, lv in maps.get("trt", {}).items()}
    mapped = [names.get(k, k) for k in a.fixed.names]
    assert sorted(mapped) == sorted(b.fixed.names)
    order = [b.fixed.names.index(k) for k in mapped]
    np.testing.assert_array_equal(b.X[:, order], a.X)
    # random effects: the same theta layout, each row in the relabelled level
    assert b.random.theta_names == a.random.theta_names
    for ba, bb in zip(a.random.blocks, b.random.blocks, strict=True):
        assert bb.group == ba.group and bb.column_names == ba.column_names
        assert sorted(bb.levels) == sorted(new_level(ba.group, lv) for lv in ba.levels)
        row_a = np.asarray(ba.levels, dtype=object)[ba.codes]
        row_b = np.asarray(bb.levels, dtype=object)[bb.codes]
        assert [new_level(ba.group, lv) for lv in row_a] == row_b.tolist()
        np.testing.assert_array_equal(bb.Z, ba.Z)
    for theta in random_thetas(a.random.theta_lower, data.draw(st.integers(0, 2**32 - 1))):
        ca, beta_a, _ = criterion(a, theta, reml)
        cb, beta_b, _ = criterion(b, theta, reml)
        assert cb == pytest.approx(ca, rel=1e-10, abs=1e-9)
        np.testing.assert_allclose(beta_b[order], beta_a, rtol=1e-7,
                                   atol=1e-9 * np.abs(a.y).max())


@settings(max_examples=40, **SETTINGS)
@given(case=cases(), seed=st.integers(0, 2**32 - 1), reml=st.booleans(),
       log_c=st.floats(-3, 4))
def test_scaling_y_shifts_the_criterion_by_the_known_amount(case, seed, reml, log_c):
    # profiled deviance: ML  log|L|² + n (1 + log(2π r²/n)),
    #                    REML log|L|² + log|R_X|² + (n-p) (1 + log(2π r²/(n-p))),
    # and r² (the penalised RSS) scales by c², so the criterion shifts by 2 n log c (ML) or
    # 2 (n - p) log c (REML) at every theta; β and u scale by c
    c = 10.0**log_c
    d = design_of(case.formula, case.data)
    n, p = d.X.shape
    shift = 2.0 * (n - p if reml else n) * np.log(c)
    for theta in random_thetas(d.random.theta_lower, seed):
        c1, beta1, u1 = criterion(d, theta, reml)
        c2, beta2, u2 = criterion(d, theta, reml, y=c * d.y)
        assert c2 - shift == pytest.approx(c1, rel=1e-9, abs=1e-8)
        np.testing.assert_allclose(beta2 / c, beta1, rtol=1e-7, atol=1e-9 * np.abs(d.y).max())
        for ua, ub in zip(u1, u2, strict=True):
            np.testing.assert_allclose(ub / c, ua, rtol=1e-7, atol=1e-9 * np.abs(d.y).max())


@settings(max_examples=30, **SETTINGS)
@given(case=cases(slopes=False), data=st.data())
def test_missing_values_drop_rows_and_say_so(case, data):
    df = case.data.copy()
    n = len(df)
    used = ["y", *case.groups, *(c for c in ("x", "trt") if c in df)]
    cols = data.draw(st.lists(st.sampled_from([*used, "junk"]), min_size=1, max_size=3))
    for col in cols:
        rows = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=max(1, n // 8)))
        df.loc[rows, col] = np.nan if col in ("y", "x", "junk") else None
    expected = int(df[used].isna().any(axis=1).sum())
    kept = df.dropna(subset=used).reset_index(drop=True)
    try:
        reference = design_of(case.formula, kept)
    except DataError:  # a factor lost its second level, or too few rows are left
        with pytest.raises(DataError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cx.lmer(case.formula, df)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = cx.lmer(case.formula, df)
    dropped = [str(w.message) for w in caught if "dropped for missing values" in str(w.message)]
    assert fit.n_dropped == expected and fit.nobs == n - expected
    if expected:
        assert dropped and dropped[0].startswith(f"{expected} of {n} rows dropped")
        assert f"{expected} rows dropped for missing values" in fit.messages
        with pytest.raises(DataError, match="rows have missing values in"):
            cx.lmer(case.formula, df, na_action="raise")
    else:  # NaN in the unused column only: nothing dropped, nothing said
        assert not dropped and not any("dropped" in m for m in fit.messages)
    # the fit is the fit of the complete rows
    np.testing.assert_array_equal(fit.design.y, reference.y)
    np.testing.assert_array_equal(fit.design.X, reference.X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (singular fits: the data's)
        same = cx.lmer(case.formula, kept)
    assert fit.deviance == pytest.approx(same.deviance, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(fit.beta, same.beta, rtol=1e-12, atol=1e-12)
