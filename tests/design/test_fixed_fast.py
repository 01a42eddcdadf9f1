"""The direct coding of simple fixed parts and random-term expressions (intercept +
numeric columns + factors, ``design/fixed.py``) against formulaic's route: the same X (or
Z) bit for bit (and memory order), names, term labels, assignment, and the same matrices
rebuilt on new rows."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import crossed.design.fixed as fixed_mod
from crossed.design import DataError, build_design
from crossed.design.fixed import build_fixed, build_matrix
from crossed.design.frame import prepare
from crossed.formula import parse


@contextlib.contextmanager
def formulaic_route():
    """Every matrix built inside goes through formulaic (restored after, on failure too;
    hypothesis' tests cannot take the function-scoped ``monkeypatch``)."""
    orig = fixed_mod._coded_columns
    fixed_mod._coded_columns = lambda rhs, frame: None
    try:
        yield
    finally:
        fixed_mod._coded_columns = orig


def both_routes(rhs: str, frame: pd.DataFrame):
    fast = build_fixed(rhs, frame)
    with formulaic_route():
        general = build_fixed(rhs, frame)
    return fast, general


def assert_same(fast, general) -> None:
    np.testing.assert_array_equal(fast.X, general.X)
    assert fast.X.flags.f_contiguous == general.X.flags.f_contiguous
    assert fast.X.flags.c_contiguous == general.X.flags.c_contiguous
    assert fast.X.dtype == general.X.dtype
    assert fast.names == general.names
    assert fast.term_labels == general.term_labels
    assert fast.assign == general.assign
    assert fast.dropped == general.dropped


def prepared(formula: str, data: pd.DataFrame, reference=None) -> tuple[str, pd.DataFrame]:
    spec = parse(formula, reference=reference)
    return spec.fixed, prepare(spec, data).data


def table(seed: int = 1, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "y": rng.normal(size=n),
        "x": rng.normal(size=n),
        "z": rng.integers(0, 5, size=n),
        "f": rng.choice(["b", "a", "C", "c", "10", "9"], size=n),
        "g": rng.choice(["u", "v"], size=n),
        "flag": rng.choice([True, False], size=n),
        "Informed.liking": rng.normal(size=n),
        "grp": rng.choice(list("pqrstu"), size=n),
    })


CASES = [
    ("y ~ f + (1 | grp)", None),
    ("y ~ f + x + (1 | grp)", None),
    ("y ~ x + f + g + (1 | grp)", None),
    ("y ~ 1 + g + f + z + (1 | grp)", {"f": "c"}),
    ("y ~ flag + Informed.liking + (1 | grp)", None),
    ("y ~ f + g + flag + (x | grp)", {"g": "v", "flag": "TRUE"}),
]


@pytest.mark.parametrize(("formula", "reference"), CASES)
def test_direct_coding_matches_formulaic(formula, reference):
    rhs, frame = prepared(formula, table(), reference)
    fast, general = both_routes(rhs, frame)
    assert fast.spec.formulaic is None and general.spec.formulaic is not None
    assert_same(fast, general)
    np.testing.assert_array_equal(fast.spec.build(frame), general.spec.build(frame))
    new = frame.iloc[::-3].reset_index(drop=True)
    for col in new.columns:  # new data arrive as labels, not categoricals
        if isinstance(new[col].dtype, pd.CategoricalDtype):
            new[col] = new[col].astype(object)
    np.testing.assert_array_equal(fast.spec.build(new), general.spec.build(new))


INTERACTION_CASES = [
    "y ~ f * g + (1 | grp)",
    "y ~ x * f + z + (1 | grp)",
    "y ~ g:f + f + g + (1 | grp)",  # the variables in the order they first appear
    "y ~ g * flag * z + (1 | grp)",
    "y ~ x * z * g + (1 | grp)",  # two numeric variables in a term: one product
    "y ~ x + x:g + (1 | grp)",  # g by contrasts beside x
    "y ~ g * flag + flag * f + (1 | grp)",
]


@pytest.mark.parametrize("formula", INTERACTION_CASES)
def test_direct_coding_of_interactions_matches_formulaic(formula):
    rhs, frame = prepared(formula, table(2, 200))
    fast, general = both_routes(rhs, frame)
    assert fast.spec.formulaic is None and general.spec.formulaic is not None
    assert_same(fast, general)
    new = frame.iloc[::-3].reset_index(drop=True)
    for col in new.columns:
        if isinstance(new[col].dtype, pd.CategoricalDtype):
            new[col] = new[col].astype(object)
    np.testing.assert_array_equal(fast.spec.build(new), general.spec.build(new))


@pytest.mark.parametrize("formula", [
    "y ~ g + g:f + (1 | grp)",  # f coded by indicators of every level in g:f (no margin f)
    "y ~ x * z * Informed.liking + (1 | grp)",  # three numeric variables in a term
    "y ~ (f + g)^2 + (1 | grp)",
    "y ~ 0 + f * g + (1 | grp)",
    "y ~ f * g - f:g + (1 | grp)",
    "y ~ f * g:flag + (1 | grp)",
])
def test_interactions_formulaic_must_code_keep_its_route(formula):
    rhs, frame = prepared(formula, table(2, 200))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast, general = both_routes(rhs, frame)
    assert fast.spec.formulaic is not None
    assert_same(fast, general)


def test_fixed_factor_of_one_level_or_rank_deficiency_takes_formulaic_route():
    data = table()
    data["h"] = data["g"]  # h and g carry the same indicator: one is dropped
    rhs, frame = prepared("y ~ g + h + (1 | grp)", data)
    with pytest.warns(UserWarning, match="rank deficient"):
        fast, general = both_routes(rhs, frame)
    assert fast.spec.formulaic is not None  # the general route says what it drops
    assert_same(fast, general)


def test_unseen_level_on_new_data_is_refused():
    rhs, frame = prepared("y ~ f + x + (1 | grp)", table())
    fx = build_fixed(rhs, frame)
    new = pd.DataFrame({"f": ["a", "zz"], "x": [0.0, 1.0]})
    with pytest.raises(DataError, match="zz"):
        fx.spec.build(new)


@pytest.mark.parametrize(("formula", "seed"), [
    ("y ~ f + x + g + (1 | grp)", 3),
    ("y ~ x * g + (1 | grp)", 4),  # an interaction
    ("y ~ x + (1 + g | grp)", 5),  # a factor slope
])
def test_fit_is_unchanged_by_the_direct_coding(formula, seed):
    import crossed

    data = table(seed, 150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = crossed.lmer(formula, data)
        with formulaic_route():
            general = crossed.lmer(formula, data)
    assert fast.deviance == general.deviance
    np.testing.assert_array_equal(fast.theta, general.theta)
    np.testing.assert_array_equal(fast.beta, general.beta)
    pd.testing.assert_frame_equal(fast.ranef(), general.ranef())
    newdata = data.iloc[:9]
    np.testing.assert_array_equal(fast.predict(newdata), general.predict(newdata))


_LEVELS = st.sampled_from(["a", "b", "B", "a b", "x.y", "10", "9", "-1", "é", "T", "c]"])


def generated_terms(seed: int, nfactors: int, numeric: bool, levels: list[str]
                    ) -> tuple[pd.DataFrame, list[str]]:
    """A table of 40 rows with ``nfactors`` factors of the given level labels (every level
    present), a numeric column ``x`` when ``numeric``, and their names in a random order."""
    rng = np.random.default_rng(seed)
    n = 40
    data = {"y": rng.normal(size=n), "grp": rng.choice(list("pqrs"), size=n)}
    terms = []
    for k in range(nfactors):
        lv = levels[: 2 + (seed + k) % max(1, len(levels) - 1)]
        col = rng.choice(lv, size=n)
        col[: len(lv)] = lv  # every level occurs
        data[f"f{k}"] = col
        terms.append(f"f{k}")
    if numeric:
        data["x"] = rng.normal(size=n) * 10.0 ** rng.integers(-2, 3)
        terms.insert(int(rng.integers(0, len(terms) + 1)), "x")
    return pd.DataFrame(data), terms


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nfactors=st.integers(1, 3), numeric=st.booleans(),
       levels=st.lists(_LEVELS, min_size=2, max_size=6, unique=True))
def test_property_direct_coding_matches_formulaic(seed, nfactors, numeric, levels):
    data, terms = generated_terms(seed, nfactors, numeric, levels)
    formula = "y ~ " + " + ".join(terms) + " + (1 | grp)"
    rhs, frame = prepared(formula, data)
    fast = build_fixed(rhs, frame)
    with formulaic_route(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        general = build_fixed(rhs, frame)
    assert_same(fast, general)


@pytest.mark.parametrize("name", ["blurb_ccmem", "exist_multi_full"])
def test_design_of_a_reference_case_is_unchanged(name):
    from reference import load_case

    case = load_case(name)
    spec = parse(case.formula, reference=case.reference)
    fast = build_design(spec, case.data)
    with formulaic_route():
        general = build_design(spec, case.data)
    assert_same(fast.fixed, general.fixed)


def matrix_routes(expr: str, frame, codings=None):
    """A random-term expression's (Z, names, spec) coded here and by formulaic."""
    fast = build_matrix(expr, frame, codings=codings)
    with formulaic_route():
        general = build_matrix(expr, frame, codings=codings)
    return fast, general


def assert_same_matrix(fast, general) -> None:
    (Zf, names_f, _), (Zg, names_g, _) = fast, general
    np.testing.assert_array_equal(Zf, Zg)
    assert (Zf.flags.f_contiguous, Zf.flags.c_contiguous, Zf.dtype) == (
        Zg.flags.f_contiguous, Zg.flags.c_contiguous, Zg.dtype)
    assert names_f == names_g


RANDOM_CASES = [
    ("y ~ x + (1 + f | grp)", "1 + f", None),
    ("y ~ x + (1 + x + f | grp)", "1 + x + f", {"f": "c"}),
    ("y ~ x + (f + x | grp)", "f + x", None),
    ("y ~ x + (1 + flag + g | grp)", "1 + flag + g", {"flag": "TRUE"}),
    ("y ~ x + (g || grp)", "g", None),
]


@pytest.mark.parametrize(("formula", "expr", "reference"), RANDOM_CASES)
def test_random_term_coding_matches_formulaic(formula, expr, reference):
    spec = parse(formula, reference=reference)
    frame = prepare(spec, table())
    for data in (frame, frame.data):  # the prepared columns (a fit's), and a table
        fast, general = matrix_routes(expr, data)
        assert fast[2].formulaic is None and general[2].formulaic is not None
        assert_same_matrix(fast, general)
        # each term's columns, as the LRTs read them (a factor: all its columns)
        assert fast[2].width == general[2].width == fast[0].shape[1]
        terms = [(str(s.term), list(s.columns)) for s in general[2].formulaic.structure]
        positions = dict(fast[2].direct_terms())
        assert [len(positions[t if t != "1" else "1"]) for t, _ in terms] == [
            len(c) for _, c in terms]
    new = frame.data.iloc[::-3].reset_index(drop=True)
    for col in new.columns:  # new data arrive as labels, not categoricals
        if isinstance(new[col].dtype, pd.CategoricalDtype):
            new[col] = new[col].astype(object)
    np.testing.assert_array_equal(fast[2].build(new), general[2].build(new))


@pytest.mark.parametrize(("expr", "codings"), [
    ("1 + o", {"o": "poly"}),  # an ordered factor: R's contr.poly
    ("0 + f", None),  # no intercept: every level its column
    ("1 + f:g", None),  # an interaction
    ("1 + g * flag", None),  # (the LRTs read an interaction's name from formulaic's terms)
])
def test_random_terms_of_other_codings_stay_with_formulaic(expr, codings):
    data = table()
    data["o"] = pd.Categorical(data["g"], categories=["v", "u"], ordered=True)
    frame = prepare(parse(f"y ~ x + ({expr} | grp)"), data)
    fast, general = matrix_routes(expr, frame, codings=codings)
    assert fast[2].formulaic is not None
    assert_same_matrix(fast, general)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nfactors=st.integers(1, 2), numeric=st.booleans(),
       intercept=st.booleans(), levels=st.lists(_LEVELS, min_size=2, max_size=5, unique=True))
def test_property_random_term_coding_matches_formulaic(seed, nfactors, numeric, intercept,
                                                      levels):
    data, terms = generated_terms(seed, nfactors, numeric, levels)
    expr = " + ".join((["1"] if intercept else []) + terms)
    frame = prepare(parse(f"y ~ 1 + ({expr} | grp)"), data)
    fast = build_matrix(expr, frame)
    with formulaic_route():
        general = build_matrix(expr, frame)
    assert fast[2].formulaic is None
    assert_same_matrix(fast, general)


_VARIABLES = ("f", "g", "flag", "x", "z")


@settings(max_examples=60, deadline=None)
@given(terms=st.lists(st.lists(st.sampled_from(_VARIABLES), min_size=1, max_size=3, unique=True),
                      min_size=1, max_size=4),
       stars=st.lists(st.booleans(), min_size=4, max_size=4), seed=st.integers(0, 2**16))
def test_property_interactions_match_formulaic(terms, stars, seed):
    """Generated fixed parts of products (``a * b``, ``a:b``) and main effects, coded
    directly where they qualify, else by formulaic: the same matrix, names and terms."""
    rhs_terms = [(" * " if star else ":").join(t) for t, star in zip(terms, stars, strict=False)]
    formula = "y ~ " + " + ".join(rhs_terms) + " + (1 | grp)"
    rhs, frame = prepared(formula, table(seed, 240))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = build_fixed(rhs, frame)
        with formulaic_route():
            general = build_fixed(rhs, frame)
    assert_same(fast, general)
