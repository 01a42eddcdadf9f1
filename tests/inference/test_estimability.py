"""The one estimability implementation (emmeans / estimability 1.4.1) against R.

R code::

    library(estimability)
    X <- cbind(1, c(1,1,0,0,0,0), c(0,0,1,1,0,0), c(0,0,0,0,1,1), c(1,0,1,0,1,0))
    X <- cbind(X, X[,2] + 2*X[,5])
    nb <- nonest.basis(X)
    L <- rbind(c(1,1,0,0,0,0), c(0,1,-1,0,0,0), c(0,0,0,0,1,0), c(0,1,0,0,0,1),
               c(1,0,0,0,0,0))
    is.estble(L, nb); is.estble(X, nb); estble.subspace(L, nb)
"""

import warnings

import numpy as np

import crossed as cx
import crossed.simulate as cs
from crossed.inference.estimability import (
    estimable_subspace,
    fit_null_basis,
    is_estimable,
    nonest_basis,
    r_qr,
)

X = np.column_stack([np.ones(6), [1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1],
                     [1, 0, 1, 0, 1, 0]])
X = np.column_stack([X, X[:, 1] + 2 * X[:, 4]])
L = np.array([[1, 1, 0, 0, 0, 0], [0, 1, -1, 0, 0, 0], [0, 0, 0, 0, 1, 0],
              [0, 1, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0]], dtype=float)
# R's nonest.basis(X) and estble.subspace(L, nb)
R_NBASIS = np.array([[-0.413027649010049, 0.300462520741977],
                     [0.104028436083645, -0.580520603805337],
                     [0.413027649010050, -0.300462520741977],
                     [0.413027649010048, -0.300462520741977],
                     [-0.617998425852808, -0.560116166126719],
                     [0.308999212926404, 0.280058083063360]])
R_SUBSPACE = np.array([
    [-0.6229928047157832, -1.152156254493247, 0.529163449777462, 0, 0.5760781272466233, 0],
    [0.9718120910943755, 0.445827596668471, 0.525984494425904, 0, 0.0270862016657649, 0.5],
    [0.0281879089056232, 0.554172403331529, -0.525984494425905, 0, -0.0270862016657651, 0.5]])


def _same_span(a, b):
    ra = np.linalg.matrix_rank(a, tol=1e-9)
    return ra == np.linalg.matrix_rank(b, tol=1e-9) == np.linalg.matrix_rank(
        np.vstack([a, b]), tol=1e-9)


def test_null_basis_spans_r_null_space():
    nb = nonest_basis(X)
    assert nb.shape == (6, 2)
    np.testing.assert_allclose(nb.T @ nb, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(X @ nb, 0, atol=1e-12)
    assert _same_span(nb.T, R_NBASIS.T)
    assert nonest_basis(X[:, :5][:, [0, 1, 2, 4]]) is None


def test_is_estimable_as_r():
    nb = nonest_basis(X)
    assert not is_estimable(L, nb).any()  # R: FALSE x 5
    assert is_estimable(X, nb).all()
    assert is_estimable(L, None).all()


def test_estimable_subspace_spans_r():
    sub = estimable_subspace(L, nonest_basis(X))
    assert sub.shape == (3, 6)
    assert _same_span(sub, R_SUBSPACE)
    assert is_estimable(sub, nonest_basis(X)).all()


def test_r_qr_moves_dependent_columns_last():
    # R: qr(X)$pivot == c(1, 2, 3, 5, 4, 6), rank 4
    Q, R, rank, pivot = r_qr(X)
    assert rank == 4 and pivot.tolist() == [0, 1, 2, 4, 3, 5]
    np.testing.assert_allclose(Q @ R, X[:, pivot], atol=1e-12)


def test_one_implementation_for_emmeans_and_simulation_tests():
    d = cx.load_dataset("exist_multi")
    cell = ((d["language"] == "es") & (d["task"] == "t3") & (d["mode"] == "soft")).to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cx.lmer("delta ~ language * task * mode + (1 | architecture)", d)
        sub = cx.lmer("delta ~ language * task * mode + (1 | architecture)", d[~cell])
        refit = full.refit(rows=~cell)
        nb = fit_null_basis(sub)
        assert fit_null_basis(full) is None and nb.basis.shape == (12, 1)
        for spec, contrast in (("language", "en - es"), ("task", "t1 - t2"),
                               ("task", "t1 - t3")):
            direct = sub.emmeans(spec).pairs()
            row = direct.set_index("contrast").loc[contrast]
            res = cs.emm_contrast(spec, contrast=contrast)(full)(refit, ~cell)
            assert (res["status"] == "ok") == bool(np.isfinite(row["estimate"]))
            if res["status"] == "ok":
                np.testing.assert_allclose(res["estimate"], row["estimate"], rtol=1e-8)
                np.testing.assert_allclose(res["p_value"], direct.set_index(
                    "contrast").loc[contrast, "p_value"] if len(direct) == 1 else
                    sub.emmeans(spec).pairs(adjust="none").set_index(
                        "contrast").loc[contrast, "p_value"], rtol=1e-6)
