"""Satterthwaite's method (inference/satterthwaite.py): the inverse of the deviance's
Hessian in the variance parameters. The df themselves are validated against lmerTest in
``test_ddf.py``."""

from __future__ import annotations

import numpy as np
import pytest

from crossed.inference.satterthwaite import _pinv_psd


def test_a_hessian_that_is_not_finite_gives_nan_df_with_a_warning():
    """Nearly collinear predictors (x ≈ 2000 and x²) can leave the deviance not finite
    beside the optimum in the formula's parametrisation: no df rather than LAPACK's
    'Eigenvalues did not converge'."""
    H = np.array([[1.0, np.nan], [np.nan, 2.0]])
    with pytest.warns(UserWarning, match="Satterthwaite df are not available"):
        A = _pinv_psd(H)
    assert A.shape == (2, 2) and np.all(np.isnan(A))
