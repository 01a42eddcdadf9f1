"""The reference grid's arguments (``at=``) refused with messages naming them."""

from __future__ import annotations

import pytest

from reference import fit_case


@pytest.mark.parametrize("at", [[1], "Days", 3])
def test_at_that_is_not_a_dict_is_refused_naming_it(at):
    fit = fit_case("sleepstudy_slopes")
    # before: dict(at) raised "cannot convert dictionary update sequence element #0 ..."
    with pytest.raises(TypeError, match="at must be a dict"):
        fit.emmeans("1", at=at)
