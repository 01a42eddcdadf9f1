"""The executed-docs rules themselves (tests/docs/docs_runner.py), on small pages: every
shown digit is checked, in outputs, comments, prose and tables."""

from __future__ import annotations

import pytest
from docs_runner import compare_output, format_like, numbers_in, rounds_to, run_page


def test_a_number_must_round_to_the_shown_digits():
    assert rounds_to("78.896092", "78.89609")
    assert not rounds_to("78.896092", "78.896078")      # drift in the 6th decimal
    assert not rounds_to("2.486", "2.487")
    assert rounds_to(0.31612, "0.316") and not rounds_to(0.3166, "0.316")
    assert rounds_to("0.0125", "0.012") and rounds_to("0.0125", "0.013")   # a printed tie
    assert rounds_to(2.47e-9, "2.5e\u221209") and rounds_to(1165.4, "1,165")
    assert not rounds_to("0.5", "0.50") or rounds_to("0.50", "0.5")
    assert format_like(-0.0042015, "\u22120.004202") == "\u22120.004202"
    assert format_like(47.146, "47.2") == "47.1"
    assert numbers_in("0.316 (0.126\u20130.566), 1,145 rows, sys01, p = 7e-87.") == \
        ["0.316", "0.126", "0.566", "1,145", "7e-87"]


@pytest.mark.parametrize("shown, ok", [
    ("x  3.263828e-06  (0.234\u20130.833)", True),
    ("x  3.263829e-06  (0.234\u20130.833)", False),
    ("x  3.26383e-06  (0.234\u20130.833)", True),
    ("x  3.263828e-06  (0.234\u20130.834)", False),
    ("y  3.263828e-06  (0.234\u20130.833)", False),
])
def test_every_shown_digit_of_an_output_is_checked(shown, ok):
    assert (compare_output("x 3.263828e-06 (0.234\u20130.833)", shown) is None) is ok


PAGE = """# p

```python
import pandas as pd
v = 0.31612                 # `0.316`
tab = pd.DataFrame({"f": [0.5], "rate": [(0.54512, 0.2341, 0.8329)]})
print(round(v, 4))
```

```
0.3161
```

The rate is 0.545 (0.234–0.833)<!-- = tab.rate[0] --> and v is 0.32<!-- = v -->.

<!-- docs: table tab -->
| fraction | rate (CI) |
|---|---|
| 0.50 | 0.545 (0.234–0.833) |
"""


@pytest.mark.parametrize("change", [None, ("0.3161\n", "0.3162\n"), ("`0.316`", "`0.317`"),
                                    ("is 0.545", "is 0.546"), ("v is 0.32", "v is 0.31"),
                                    ("| 0.545 (0.234–0.833) |", "| 0.545 (0.234–0.832) |"),
                                    ("| 0.50 |", "| 0.51 |")])
def test_a_page_fails_when_any_shown_digit_changes(tmp_path, change):
    page = tmp_path / "p.md"
    page.write_text(PAGE if change is None else PAGE.replace(*change))
    run = run_page(page)
    assert bool(run.failures) is (change is not None), run.failures


def test_update_rewrites_the_numbers_at_the_shown_digits(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(PAGE.replace("is 0.545", "is 0.600").replace("| 0.50 |", "| 0.40 |"))
    run_page(page, update=True)
    assert page.read_text() == PAGE
    assert not run_page(page).failures


def test_a_table_of_results_needs_its_computation(tmp_path):
    page = tmp_path / "p.md"
    text = PAGE.replace("<!-- docs: table tab -->\n", "")
    text = text[:text.index("The rate is")] + text[text.index("| fraction"):]
    page.write_text(text)
    assert any("docs: table" in f for f in run_page(page).failures)
    page.write_text(text.replace("| fraction", "<!-- docs: table tab -->\n| fraction"))
    assert not run_page(page).failures


def test_a_marker_naming_what_comes_later_checks_its_whole_paragraph(tmp_path):
    """A marker evaluated at the end of the page (its names are defined further down)
    checks the numbers its paragraph writes before it, across lines, as any other."""
    text = ("# p\n\nThe table has 6 systems ×\n61 languages<!-- = [n_sys, n_lang] -->.\n\n"
            "```python\nn_sys, n_lang = 6, 61\n```\n")
    page = tmp_path / "p.md"
    page.write_text(text)
    assert not run_page(page).failures
    page.write_text(text.replace("has 6 systems", "has 7 systems"))
    assert any("shown 7" in f for f in run_page(page).failures)
