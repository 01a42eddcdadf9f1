"""fit.rePCA() against lme4 1.1-31's ``summary(rePCA(m))``.

The R code is tests/data/reference/selection/selection.R (its ``pca`` and ``raw``): for each
case, on R's refit with the highest log-likelihood among its optimisers (lme4's default
nloptwrap stops at a lower one on the singular ``face_slope``, where crossed reaches the
higher), ``summary(rePCA(m))$importance`` (rounded by R to 5 digits in the proportions) and
``rePCA(m)[[g]]$sdev`` unrounded. The sd are singular values of Λ_g, so they agree as θ does:
to 5e-5 absolute (lme4's own optimisers give sds 1.7e-5 apart on carrots); the proportions
to 2e-5 (R's rounding to 5 digits plus that).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import crossed as cx

HERE = Path(__file__).resolve().parents[1]
REF = json.loads((HERE / "data/reference/selection/selection.json").read_text())


def _data(name: str) -> pd.DataFrame:
    if name == "carrots":
        d = pd.read_csv(HERE / "data/carrots.csv")
        for c in ("Consumer", "Product", "Homesize"):
            d[c] = d[c].astype(str)
        return d
    if name == "face_slope":
        return pd.read_csv(HERE / "data/face_slope_lmm.csv")
    return cx.load_dataset(name)


CASES = {
    "sleepstudy": lambda: cx.lmer("Reaction ~ Days + (Days | Subject)", _data("sleepstudy")),
    "face_slope": lambda: cx.lmer("y ~ x + (1 + x | g)", _data("face_slope")),
    "carrots_two": lambda: cx.lmer(
        "Preference ~ sens2 + Homesize + (1 + sens2 | Consumer) + (1 | Product)",
        _data("carrots")),
    "cbpp": lambda: cx.glmer("cbind(incidence, size - incidence) ~ period + (1 | herd)",
                             cx.load_dataset("cbpp"), family="binomial"),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, object]:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return request.param, CASES[request.param]()


def test_repca_matches_lme4(case: tuple[str, object]) -> None:
    name, fit = case
    table = fit.rePCA()  # type: ignore[attr-defined]
    ref = REF[name]
    assert list(table.columns) == ["group", "component", "sd", "proportion", "cumulative"]
    assert list(dict.fromkeys(table.group)) == list(ref["repca"])  # lme4's order of factors
    # R's refit with the highest log-likelihood (lme4's default stops lower on face_slope)
    for group, r in ref["best_repca"].items():
        rows = table[table.group == group]
        sdev = np.atleast_1d(ref["best_repca_sdev"][group])
        assert rows.component.tolist() == list(range(1, len(sdev) + 1))
        # (R's own optimisers' sds differ by 1.7e-5 on carrots: the tolerance is θ's)
        np.testing.assert_allclose(rows.sd, sdev, atol=5e-5, rtol=0)
        np.testing.assert_allclose(rows.proportion, np.atleast_1d(r["proportion"]),
                                   atol=2e-5, rtol=0)
        np.testing.assert_allclose(rows.cumulative, np.atleast_1d(r["cumulative"]),
                                   atol=2e-5, rtol=0)


def test_singular_term_is_flagged() -> None:
    from crossed.inference.repca import deficient_groups

    with pytest.warns(Warning):
        fit = CASES["face_slope"]()
    assert fit.is_singular
    assert deficient_groups(fit.rePCA()) == ["g"]
    ok = CASES["sleepstudy"]()
    assert deficient_groups(ok.rePCA()) == []


def test_display_and_uncorrelated_terms_share_a_factor() -> None:
    """``(Days || Subject)`` is two lme4 terms on one factor: one PCA over both (lme4's
    ``bdiag`` of the factor's templates), whose sds are the two θ, largest first."""
    fit = cx.lmer("Reaction ~ Days + (Days || Subject)", cx.load_dataset("sleepstudy"))
    table = fit.rePCA()
    assert table.group.tolist() == ["Subject", "Subject"]
    np.testing.assert_allclose(table.sd, sorted(fit.theta, reverse=True), rtol=1e-12)
    assert "rePCA" in repr(table) and "<table" in table._repr_html_()


def test_r_layout(case: tuple[str, object]) -> None:
    """``r_names=True``: ``summary(rePCA(m))[[g]]$importance`` as R lays it out (R rounds
    the proportions to 5 digits: compared at that)."""
    name, fit = case
    out = fit.rePCA(r_names=True)  # type: ignore[attr-defined]
    ref = REF[name]["best_repca"]
    assert list(out) == list(ref)
    for group, r in ref.items():
        imp = out[group]
        assert list(imp.index) == ["Standard deviation", "Proportion of Variance",
                                   "Cumulative Proportion"]
        k = len(np.atleast_1d(r["sd"]))
        assert list(imp.columns) == [f"PC{j + 1}" for j in range(k)]
        np.testing.assert_allclose(imp.loc["Proportion of Variance"],
                                   np.atleast_1d(r["proportion"]), atol=2e-5)
