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


def _readme_section(text: str, heading: str) -> tuple[int, int]:
    """Start and end of the README section ``heading`` (up to the next ``## ``)."""
    start = text.index(f"\n{heading}\n") + 1
    end = text.index("\n## ", start) + 1
    return start, end


def test_readme_glmm_section_runs_and_shows_its_output(tmp_path, page_dir):
    """The README's GLMM section runs as an executed page: its outputs are what the code
    prints, and the prose numbers it marks are R's (``CROSSED_DOCS_UPDATE=1`` rewrites
    them in the README). R 4.2.2, lme4 1.1-31, emmeans 1.8.4, performance 0.10.2:

        g <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp,
                   family = binomial)
        joint_tests(g)                       # F 8.496 on 3 df: chi-square 25.49
        summary(emmeans(g, ~ period, type = "response"), infer = TRUE)
        #  period   prob     SE  df asymp.LCL asymp.UCL
        #  1      0.1981 0.0367 Inf    0.1357     0.280 ...
        contrast(emmeans(g, ~ period), "trt.vs.ctrl", type = "response")
        #  period2 / period1  0.371 0.112 Inf 1 -3.272 0.0031
        #  period3 / period1  0.324 0.104 Inf 1 -3.495 0.0014
        #  period4 / period1  0.206 0.087 Inf 1 -3.743 0.0005
        r2_nakagawa(g)                       # conditional 0.187, marginal 0.085
    """
    readme = ROOT / "README.md"
    text = readme.read_text()
    start, end = _readme_section(text, "## Generalised linear mixed models")
    page = tmp_path / "readme-glmm.md"
    page.write_text("```python\nimport crossed as cx\n```\n\n" + text[start:end])
    update = os.environ.get("CROSSED_DOCS_UPDATE", "") not in ("", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_page(page, update=update)
    if update:
        body = page.read_text().split("```\n\n", 1)[1]
        readme.write_text(text[:start] + body + text[end:])
    assert run.executed == 4 and run.compared >= 7, run
    assert not run.failures, "\n\n".join(run.failures)


def test_readme_quick_start_is_two_commands():
    """The Quick start stays what it is: ./scripts/demo and ./scripts/test."""
    text = (ROOT / "README.md").read_text()
    start, end = _readme_section(text, "## Quick start")
    block = text[start:end].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[0] for line in block.splitlines()] == ["./scripts/demo",
                                                                "./scripts/test"]


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
