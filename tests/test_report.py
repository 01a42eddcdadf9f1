"""``crossed.report.build_report`` on awkward data: level names that mathtext or LaTeX
would parse, and focus factors with a single level."""

from __future__ import annotations

import html
import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from crossed.report import build_report  # noqa: E402

MARKUP = ["$\\frac{$", "a_b^c", "C:\\data", "50$ & <b>"]


def _data(levels: list[str], n: int = 96, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    d = pd.DataFrame({"f": np.resize(levels, n), "g": rng.choice([f"g{i}" for i in range(8)], n)})
    d["y"] = rng.normal(size=n) + (d["f"] == levels[1])
    d["k"] = (rng.random(n) < 0.4 + 0.3 * (d["f"] == levels[1])).astype(int)
    return d


def _report(*args, **kwargs) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_report(*args, check=False, **kwargs)


def test_level_names_with_mathtext_and_markup_are_drawn_as_written():
    text = _report(_data(MARKUP), "y ~ f + (1 | g)")
    for level in MARKUP:
        assert html.escape(level) in text
    assert MARKUP[3] not in text  # escaped wherever it is shown
    assert text.count('class="crossed-figure"') >= 3


def test_glmm_report_with_mathtext_level_names():
    text = _report(_data(MARKUP), "k ~ f + (1 | g)", glmm={"family": "binomial"})
    assert html.escape(MARKUP[0]) in text and 'id="fig-emmeans"' in text


def test_a_focus_with_one_level_is_refused_naming_it_and_its_level():
    # before: "not enough values to unpack (expected 2, got 1)"; the fit itself now stops
    # there, as R does (a factor needs two levels in a model formula)
    d = _data(["a", "b"])
    d["h"] = "only"
    with pytest.raises(ValueError, match=r"'h' has a single level \('only'\).*two levels"):
        _report(d, "y ~ 0 + h + f + (1 | g)", focus="h")


def test_choose_focus_refuses_or_passes_over_a_one_level_factor():
    # (a fit whose factor has one level: one given by fit=, built elsewhere)
    from types import SimpleNamespace

    from crossed.report import _choose_focus

    fit = SimpleNamespace(formula="y ~ h + f", design=SimpleNamespace(
        levels={"h": ["only"], "f": ["a", "b"]}))
    with pytest.raises(ValueError, match=r"focus 'h' has a single level in the data "
                                         r"\('only'\)"):
        _choose_focus(fit, ["h", "f"], "h")
    notes: list[str] = []
    assert _choose_focus(fit, ["h", "f"], None, notes) == "f"
    assert notes and "factor 'h' has a single level" in notes[0]


def test_characters_missing_from_the_font_are_one_note():
    # before: one note per character ("Glyph 20013 (...) missing from font(s) DejaVu Sans.")
    text = _report(_data(["中文", "日本語", "한국어"]), "y ~ f + (1 | g)")
    assert "Glyph" not in text
    if "the figures lack" in text:  # (a machine with a CJK font draws them all)
        assert text.count("the figures lack") == 1
    assert "中文" in text and "한국어" in text


def test_two_level_names_holding_a_dash_are_named_whole_in_the_summary():
    # before: "claude - 3 - gpt-4 - mini" was cut at its first " - " ("claude" vs
    # "3 - gpt-4 - mini")
    text = _report(_data(["gpt-4 - mini", "claude - 3"]), "y ~ f + (1 | g)")
    summary = text.split("<h2>Summary</h2>", 1)[1].split("</section>", 1)[0]
    assert "<p>claude - 3 is " in summary and " than gpt-4 - mini (" in summary


def test_the_glmm_reports_fixed_effects_table_names_its_terms():
    """The GLMM report's fixed-effects table had no term names (six unlabelled rows): the
    coefficient table keeps its terms in the index, which the HTML table left out."""
    import re

    import crossed as cx

    data = cx.load_dataset("cbpp")
    text = _report(data, "cbind(incidence, size - incidence) ~ period + (1 | herd)",
                   glmm={"family": "binomial"})
    section = text[text.index("Fixed effects (Wald z tests"):]
    table = section[:section.index("</table>")]
    cells = re.findall(r"<td>([^<]*)</td>", table)
    for term in ("(Intercept)", "period2", "period3", "period4"):
        assert term in cells, term
    assert "<th>term</th>" in table
