"""Numbers as R prints them (crossed._format), checked against R 4.2.2's output."""

import math

import pytest

from crossed._format import (
    format_number_column,
    format_pvalue_emmeans,
    format_pvalue_r,
    format_pvalues_r,
    is_pvalue_column,
)

# R: format(x, digits = 4), printed by R 4.2.2 (strings without R's padding)
R_FORMAT = [
    ([251.405, 10.467, 6.8232], ["251.405", "10.467", "6.823"]),
    ([1e-10, 0.5], ["1e-10", "5e-01"]),
    ([0.000123, 0.04], ["0.000123", "0.040000"]),
    ([3.0, 4.0], ["3", "4"]),
    ([1234567.0, 2.0], ["1234567", "2"]),
    ([-0.5, 12.25, math.nan], ["-0.50", "12.25", "NA"]),
    ([0.0, 1.0], ["0", "1"]),
    ([4.5e-7], ["4.5e-07"]),
]


@pytest.mark.parametrize(("values", "expected"), R_FORMAT)
def test_column_as_r_formats_it(values, expected):
    assert format_number_column(values, 4) == expected


def test_pvalues_as_format_pval():
    # R: format.pval(c(2e-20, 3.26382e-06, 0.0102, 0.52694), digits = 3)
    assert format_pvalues_r([2e-20, 3.26382e-06, 0.0102, 0.52694]) == \
        ["< 2e-16", "3.26e-06", "0.0102", "0.5269"]
    assert format_pvalue_r(0.0) == "< 2e-16"
    assert format_pvalue_r(math.nan) == "NA"


def test_pvalues_as_emmeans_prints_them():
    assert format_pvalue_emmeans(0.0) == "<.0001"          # a Tukey p of 0
    assert format_pvalue_emmeans(3e-5) == "<.0001"
    assert format_pvalue_emmeans(0.04863) == "0.0486"
    assert format_pvalue_emmeans(math.nan) == "NA"


def test_pvalue_columns_by_name():
    assert is_pvalue_column("p_value") and is_pvalue_column("sim_uniformity_p")
    assert not is_pvalue_column("estimate") and not is_pvalue_column("npar")
