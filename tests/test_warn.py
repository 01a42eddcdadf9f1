"""crossed._warn.warn: every warning is reported at the user's line, however deep inside
crossed it is raised, and the warnings machinery (filters, recording) still applies."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import crossed
from crossed._warn import user_frame, warn
from crossed.evaluation.resample.table import from_items
from reference import load_table

HERE = __file__


@pytest.fixture(scope="module")
def dyestuff2() -> pd.DataFrame:
    return load_table("Dyestuff2.csv", ("Batch",))


@pytest.fixture(scope="module")
def sleep() -> pd.DataFrame:
    return load_table("sleepstudy.csv", ("Subject",))


def test_singular_fit_warns_at_the_callers_line(dyestuff2):
    with pytest.warns(crossed.SingularFitWarning) as rec:
        fit = crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    assert fit.is_singular
    assert [w.filename for w in rec] == [HERE]


def test_refit_warns_at_the_callers_line(dyestuff2):
    """A longer path (fit.refit -> engines.fit_with -> native engine) lands on the same
    frame: before, a fixed stacklevel pointed into crossed for such paths."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    with pytest.warns(crossed.SingularFitWarning) as rec:
        fit.refit(y=fit.design.y * 2.0)
    assert [w.filename for w in rec] == [HERE]


def test_design_warning_inside_lmer_is_at_the_callers_line(sleep):
    data = sleep.assign(Days=sleep["Days"] * 1e12)
    with pytest.warns(UserWarning, match="consider rescaling") as rec:
        crossed.lmer("Reaction ~ Days + (1 | Subject)", data)
    assert {w.filename for w in rec} == {HERE}


def test_method_warning_is_at_the_callers_line(sleep):
    data = sleep.assign(half=np.where(sleep["Days"] < 5, "early", "late"),
                        odd=np.where(sleep["Days"] % 2 == 1, "odd", "even"))
    fit = crossed.lmer("Reaction ~ half * odd + (1 | Subject)", data)
    with pytest.warns(UserWarning, match="involvement in interactions") as rec:
        fit.emmeans("half")
    assert [w.filename for w in rec] == [HERE]


def test_warnings_from_paths_of_other_depths_are_at_the_callers_line(sleep):
    """Before, with fixed stacklevels: both pointed into crossed (fit.py, and
    evaluation/resample/table.py)."""
    fit = crossed.lmer("Reaction ~ Days + (1 | Subject)", sleep)
    with pytest.warns(UserWarning, match="only partial effect sizes") as rec:
        fit.eta_squared(partial=False)
    assert [w.filename for w in rec] == [HERE]
    rng = np.random.default_rng(0)
    items = pd.DataFrame({"system": np.repeat(["a", "b", "c"], 20),
                          "task": np.tile(np.repeat(["t1", "t2"], 10), 3),
                          "item": np.tile(np.arange(10), 6), "score": rng.random(60)})
    items = items[~((items["system"] == "c") & (items["task"] == "t2"))]
    with pytest.warns(UserWarning, match="dropped 1 systems") as rec:
        from_items(items, "score", n_boot=5)
    assert [w.filename for w in rec] == [HERE]


def test_filters_by_category_and_recording_still_work(dyestuff2):
    with warnings.catch_warnings():
        warnings.simplefilter("error", crossed.SingularFitWarning)
        with pytest.raises(crossed.SingularFitWarning):
            crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=crossed.SingularFitWarning)
        crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    assert not [w for w in caught if issubclass(w.category, crossed.SingularFitWarning)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    assert [w.filename for w in caught
            if issubclass(w.category, crossed.SingularFitWarning)] == [HERE]


def test_module_filters_match_the_callers_module(dyestuff2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module=__name__)
        crossed.lmer("Yield ~ 1 + (1 | Batch)", dyestuff2)
    assert caught == []


def test_warn_called_from_outside_crossed_warns_at_that_line():
    with pytest.warns(RuntimeWarning, match="direct") as rec:
        warn("direct", RuntimeWarning)
    assert rec[0].filename == HERE
    with pytest.warns(UserWarning) as rec:
        warn(UserWarning("an instance"))
    assert str(rec[0].message) == "an instance"
    assert user_frame().f_code.co_filename == HERE
