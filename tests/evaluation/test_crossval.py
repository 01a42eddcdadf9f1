"""cx.cross_validate: folds, OLS against NumPy, mixed models against refits by hand."""

import warnings

import numpy as np
import pytest

import crossed as cx
from crossed.evaluation.crossval import fold_indices, ols


@pytest.fixture(scope="module")
def data():
    return cx.load_dataset("exist_multi")


def test_fold_indices(data):
    folds = fold_indices(data, folds=4, seed=3)
    allrows = np.sort(np.concatenate(folds))
    np.testing.assert_array_equal(allrows, np.arange(len(data)))
    assert [len(f) for f in folds] == [9, 9, 9, 9]
    again = fold_indices(data, folds=4, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(folds, again, strict=True))
    logo = fold_indices(data, folds=None, group="task")
    assert len(logo) == 3
    for f in logo:
        assert data["task"].iloc[f].nunique() == 1
    grouped = fold_indices(data, folds=2, group="architecture", seed=0)
    for f in grouped:
        held = set(data["architecture"].iloc[f])
        rest = set(data["architecture"].drop(index=f))
        assert not held & rest
    with pytest.raises(ValueError, match="folds"):
        fold_indices(data, folds=1)


def test_ols_matches_numpy(data):
    fit = ols("delta ~ language + task", data)
    X = np.column_stack([np.ones(len(data)), data["language"] == "es",
                         data["task"] == "t2", data["task"] == "t3"]).astype(float)
    beta, *_ = np.linalg.lstsq(X, data["delta"].to_numpy(), rcond=None)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-10)
    assert fit.names == ("(Intercept)", "languagees", "taskt2", "taskt3")
    np.testing.assert_allclose(fit.predict(data.iloc[:5]), X[:5] @ beta)
    with pytest.raises(ValueError, match="not seen when fitting"):
        fit.predict(data.iloc[:2].assign(task="t9"))


def test_cross_validate_against_refits(data):
    formulas = ["delta ~ language * task + (1 | architecture)", "delta ~ language + task"]
    cv = cx.cross_validate(data, formulas, folds=3, seed=7, names=["mixed", "ols"])
    assert list(cv.summary["spec"]) == ["mixed", "ols"]
    assert list(cv.folds.columns) == ["spec", "formula", "fold", "n_train", "n_test", "mae",
                                      "rmse"]
    folds = fold_indices(data, folds=3, seed=7)
    errs_m, errs_o = [], []
    for test in folds:
        train = data.drop(index=test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = cx.lmer(formulas[0], train)
        errs_m.append(data["delta"].iloc[test] - m.predict(data.iloc[test]))
        o = ols(formulas[1], train)
        errs_o.append(data["delta"].iloc[test] - o.predict(data.iloc[test]))
    e_m, e_o = np.concatenate(errs_m), np.concatenate(errs_o)
    s = cv.summary.set_index("spec")
    assert s.loc["mixed", "mae"] == pytest.approx(np.mean(np.abs(e_m)), rel=1e-10)
    assert s.loc["mixed", "rmse"] == pytest.approx(np.sqrt(np.mean(e_m**2)), rel=1e-10)
    assert s.loc["ols", "mae"] == pytest.approx(np.mean(np.abs(e_o)), rel=1e-10)
    assert s.loc["mixed", "folds"] == 3
    assert len(cv.predictions) == 2 * len(data)


def test_leave_one_group_out_predicts_new_levels(data):
    cv = cx.cross_validate(data, ["delta ~ language * task + (1 | architecture)"],
                           group="architecture", folds=None)
    assert cv.summary["folds"].iloc[0] == 3
    assert np.isfinite(cv.summary["mae"].iloc[0])
    with pytest.raises(ValueError, match="different responses"):
        cx.cross_validate(data, ["delta ~ language + (1 | task)", "y ~ language"])


def test_arguments_in_the_wrong_order_or_of_the_wrong_type_are_named():
    # before: the table's column names (or the formula's characters) were read as formulas
    d = cx.load_dataset("exist_multi")
    with pytest.raises(TypeError, match=r"cross_validate\(data, formulas\): data must be a "
                                        r"pandas DataFrame, got str \(arguments in the other"):
        cx.cross_validate("delta ~ language + (1 | task)", d)
    with pytest.raises(TypeError, match="each formula must be a string"):
        cx.cross_validate(d, [3])
    with pytest.raises(TypeError, match="folds must be a whole number >= 2"):
        cx.cross_validate(d, "delta ~ language + (1 | task)", folds="5")


def test_leaving_out_the_levels_of_a_one_level_group_is_refused():
    # before: "the data table is empty (0 rows)" from the fit of the empty training set
    d = cx.load_dataset("exist_multi").assign(site="only")
    with pytest.raises(ValueError, match="group column 'site' has 1 level \\('only'\\)"):
        cx.cross_validate(d, "delta ~ language + (1 | task)", group="site", folds=None)


def test_one_formula_string_is_a_list_of_one():
    d = cx.load_dataset("exist_multi")
    one = cx.cross_validate(d, "delta ~ language + (1 | task)", folds=3)
    assert len(one.summary) == 1


def test_an_empty_table_is_refused_as_such():
    # before: "folds must be between 2 and the number of rows (0)"
    d = cx.load_dataset("exist_multi").iloc[:0]
    with pytest.raises(ValueError, match="the data table is empty"):
        cx.cross_validate(d, "delta ~ language + (1 | task)")
