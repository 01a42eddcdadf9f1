"""``GlmerFit.coef_table`` arguments checked (its numbers: test_glmm_native.py)."""

from __future__ import annotations

import pytest
from test_glmm import _fit


def test_coef_table_level_is_checked():
    # before: TypeError "'<' not supported between instances of 'int' and 'str'"
    with pytest.raises(ValueError, match="level must be a number between 0 and 1"):
        _fit().coef_table(level="0.9")
    table = _fit().coef_table(level=0.9)
    assert list(table.columns)[:3] == ["term", "estimate", "std_error"]
    assert table.attrs["conf_level"] == 0.9
