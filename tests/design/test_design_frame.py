"""Design.frame: the private table of the used columns, built on first read.

The design of a small table reads its columns as arrays and leaves the table to be built
when something (inference, reports, refits) asks for it. These tests pin the table it
builds to the one pandas' public constructors give, and its behaviour in copies.
"""

from __future__ import annotations

import copy
import pickle
import re
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from crossed.design import build_design
from crossed.formula import parse
from reference import load_table


def _data() -> pd.DataFrame:
    data = load_table("sleepstudy.csv", ("Subject",))
    rng = np.random.default_rng(1)
    return data.assign(
        g=np.where(rng.random(len(data)) < 0.5, "b", "A"),
        flag=rng.random(len(data)) < 0.5,
        unused=np.arange(len(data)),
        o=pd.Categorical(rng.choice(["lo", "mid", "hi"], len(data)),
                         categories=["lo", "mid", "hi", "none"], ordered=True),
    )


FORMULA = "Reaction ~ Days + g + flag + o + (Days | Subject)"


def _design(data: pd.DataFrame | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_design(parse(FORMULA), _data() if data is None else data)


def _expected(data: pd.DataFrame, design) -> pd.DataFrame:
    """The table through pandas' public constructors: numbers as float64, factors as
    unordered categoricals of their R levels (an object index), names an object index."""
    cols = {}
    for c in design.columns:
        if c in design.levels:
            labels = data[c].map(lambda v: {True: "TRUE", False: "FALSE"}.get(v, v)
                                 if isinstance(v, bool | np.bool_) else v).astype(object)
            dtype = pd.CategoricalDtype(pd.Index(design.levels[c], dtype=object),
                                        ordered=False)
            cols[c] = pd.Categorical(labels.to_numpy(), dtype=dtype)
        else:
            cols[c] = data[c].to_numpy(dtype=float)
    out = pd.DataFrame(cols)
    out.columns = pd.Index(list(cols), dtype=object)
    return out


def test_frame_is_the_public_table():
    data = _data()
    design = _design(data)
    assert design.columns == ("Reaction", "Days", "Subject", "g", "flag", "o")
    assert design.levels["g"] == ["A", "b"]
    assert design.levels["flag"] == ["FALSE", "TRUE"]
    assert design.levels["o"] == ["lo", "mid", "hi"]  # (order kept, unused dropped)
    pd.testing.assert_frame_equal(design.frame, _expected(data, design))
    assert design.frame.columns.dtype == object
    assert isinstance(design.frame.index, pd.RangeIndex)
    assert design.frame is design.frame  # built once


def test_frame_after_dropped_rows():
    data = _data()
    data.loc[[3, 7], "Days"] = np.nan
    design = _design(data)
    kept = data.drop(index=[3, 7]).reset_index(drop=True)
    assert design.n_dropped == 2 and len(design.frame) == len(kept)
    pd.testing.assert_frame_equal(design.frame, _expected(kept, design))


def test_frame_survives_copies_pickles_and_replace():
    design = _design()
    for other in (pickle.loads(pickle.dumps(design)), copy.copy(design),
                  copy.deepcopy(design), replace(design, y=design.y + 1.0)):
        pd.testing.assert_frame_equal(other.frame, design.frame)
    state = design.__getstate__()
    assert isinstance(state["_frame_source"], pd.DataFrame)  # the table, not the columns
    # a pickle from before the lazy table kept it under "frame"
    old = copy.copy(design)
    old.__dict__.pop("_frame_source")
    old.__dict__["frame"] = design.frame
    pd.testing.assert_frame_equal(old.frame, design.frame)
    assert replace(design, frame=None).frame is None
    sub = design.subset(np.arange(20))
    pd.testing.assert_frame_equal(sub.frame, design.frame.iloc[:20])


def test_the_design_does_not_share_the_users_columns():
    data = _data()
    design = _design(data)
    data.loc[0, "Reaction"] = -1.0
    data.loc[0, "g"] = "b"
    assert design.y[0] != -1.0
    assert design.frame.loc[0, "Reaction"] != -1.0


@pytest.mark.parametrize(("formula", "named"), [
    ("y ~ poly(x, 2) + (1 | g)", "poly()"),
    ("y ~ scale(x) + (1 | g)", "scale()"),
    ("y ~ x + (scale(x) | g)", "scale()"),
])
def test_stateful_transforms_after_dropped_rows_say_they_differ_from_r(formula, named):
    """R's model.frame evaluates poly() and scale() on every row and drops incomplete rows
    afterwards; crossed evaluates them on the rows kept (fuzzed against lme4: a criterion
    0.077 apart with one missing y). That difference is said, not silent."""
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"x": rng.normal(size=60), "g": list("abcdef") * 10,
                      "y": rng.normal(size=60)})
    d.loc[3, "y"] = np.nan
    with pytest.warns(UserWarning, match=re.escape(named) + r" computed on the rows left "
                      r"after dropping 1 row"):
        build_design(parse(formula), d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complete data: nothing to say
        build_design(parse(formula), d.dropna())


@pytest.mark.parametrize("formula", ["y ~ f + (f || g)", "y ~ f + (0 + f || g)"])
def test_a_factor_in_a_double_bar_term_says_it_differs_from_lme4(formula):
    """lme4 1.1-31 splits || by terms, so a factor's columns stay one correlated block;
    crossed gives each its own variance (afex's expand_re, documented). Said at fit time
    (found by fuzzing: REMLcrit 378.19 against lme4's 376.09 with no word)."""
    d = pd.DataFrame({"f": list("ab") * 30, "g": list("abcdef") * 10,
                      "y": np.random.default_rng(0).normal(size=60)})
    with pytest.warns(UserWarning, match=r"the factor 'f' gets an independent variance"):
        build_design(parse(formula), d)
    d["x"] = d["y"] * 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numeric columns: lme4's || is the same
        build_design(parse("y ~ x + (x || g)"), d)


def test_a_new_response_is_replace_of_y_with_the_table_left_unbuilt():
    """``Design.with_response`` (every simulation refit) is ``replace(design, y=y)``
    field for field, its y frozen and nothing derived carried over, without building the
    table where it was not built (replace reads it)."""
    design = _design()
    design.derived("pls", lambda: "the original's")
    y = design.y[::-1].copy()
    new = design.with_response(y)
    assert type(new) is type(design) and new.y is y and not y.flags.writeable
    assert new.derived("pls", lambda: "its own") == "its own"
    assert "_frame_source" in new.__dict__
    assert not isinstance(new.__dict__["_frame_source"], pd.DataFrame)  # (still columns)
    reference = replace(design, y=y)
    for name in ("spec", "fixed", "random", "n_dropped", "levels", "columns", "weights",
                 "offset", "offset_argument"):
        assert getattr(new, name) is getattr(reference, name)
    pd.testing.assert_frame_equal(new.frame, reference.frame)
    with pytest.raises(Exception, match="new response has missing"):
        design.with_response(np.full(len(y), np.nan))
