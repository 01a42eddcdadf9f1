"""Every code block of the documentation (docs/*.md) runs, and the outputs it shows are
what the code prints (tests/docs/docs_runner.py has the rules).

``CROSSED_DOCS_UPDATE=1 python -m pytest tests/docs`` rewrites the shown outputs.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from docs_runner import check_generated, run_page

from conftest import require_r

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
# pages whose blocks take minutes (simulations, resampling): still run by the suite
SLOW = {"simulation.md", "resample.md", "tutorial-cross-classified.md"}
# pages that run R through the lme4 engine (skipped without R, except in CI)
NEEDS_R = {"engines.md"}


@pytest.fixture
def page_dir(tmp_path, monkeypatch):
    """Run from a scratch directory that sees the repository's tests/ and docs/ (pages
    read tests/data/... and write their own files)."""
    for name in ("tests", "docs", "src"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name,
                                               marks=[pytest.mark.slow] if p.name in SLOW
                                               else []) for p in PAGES])
def test_page_runs_and_shows_its_output(page, page_dir):
    if page.name in NEEDS_R:
        require_r()
    update = os.environ.get("CROSSED_DOCS_UPDATE", "") not in ("", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_page(page, update=update)
    print(f"{page.name}: {run.executed} blocks executed, {run.compared} outputs compared, "
          f"not executed: {run.not_executed}")
    assert not run.failures, "\n\n".join(run.failures)


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name) for p in PAGES
                                  if "docs: generated" in p.read_text()])
def test_generated_parts_are_what_the_stored_results_give(page):
    """The tables generated from stored results (timings: benchmarks/stored/) are the
    page's copy; checked without running the page (no R needed)."""
    update = os.environ.get("CROSSED_DOCS_UPDATE", "") not in ("", "0")
    failures = check_generated(page, update=update)
    assert not failures, "\n\n".join(failures)


def test_readme_use_block_runs(tmp_path, page_dir):
    """The README's "Use" block runs as written, on the bundled dataset it loads."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Use\n"):]
    start = section.index("```python\n")
    block = section[start:section.index("\n```\n", start) + 5]
    page = tmp_path / "readme-use.md"
    page.write_text("# README: Use\n\n" + block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_page(page)
    assert run.executed == 1 and not run.failures, "\n\n".join(run.failures)


def test_readme_thresholds_are_the_codes():
    """The README (not an executed page) quotes thresholds and defaults of the code: each
    such phrase is written here from the constant it names, so a changed constant fails
    until the README says the new value."""
    from crossed.formula.grammar import MAX_FORMULA_LENGTH, MAX_TERMS
    from crossed.model.cholesky import MIN_BLOCKED
    from crossed.model.control import LmerControl
    from crossed.model.pls import MAX_DENSE
    from crossed.model.sparse_schur import FILL_FRACTION, SPARSE_FROM

    def sci(x: float) -> str:
        return f"{x:.0e}".replace("e-0", "e-")

    c = LmerControl()
    assert c.xtol_abs == c.ftol_abs
    text = " ".join((ROOT / "README.md").read_text().split())
    phrases = [
        f"over {MAX_FORMULA_LENGTH:,} characters or expanding to over {MAX_TERMS:,} terms",
        f"from {MIN_BLOCKED} rows a blocked factorisation",
        f"(`xtol_abs`, `ftol_abs` {sci(c.ftol_abs)} and nloptr's default `xtol_rel` "
        f"{sci(c.xtol_rel)})",
        f"a bounded θ ends below {sci(c.edge_tol)} (then once, with those θ moved to "
        f"{c.edge_start:g},",
        f"`LmerControl.restarts` ({c.restarts})",
        f"more than {MAX_DENSE:,} random effects together",
        f"Between {SPARSE_FROM:,} and {MAX_DENSE:,} random effects the sparse path is taken "
        f"when its factor holds at most {100 * FILL_FRACTION:g} % of a dense triangle",
    ]
    missing = [p for p in phrases if p not in text]
    assert not missing, missing
