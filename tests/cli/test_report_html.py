"""crossed report writes a self-contained HTML file; headless Chromium renders its figures."""

import base64
import os
import re
import shutil
import subprocess

import pytest

from crossed.cli import main

pytest.importorskip("matplotlib")

FULL = "delta ~ language * task * mode + (1 | architecture)"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    code = main(["report", "exist_multi", FULL, "--focus", "language", "-o", str(path),
                 "--compare", "delta ~ language + task + mode + (1 | architecture)"])
    assert code == 0
    return path


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    for section in ("Fixed effects", "ANOVA (Type III)", "Estimated marginal means: language",
                    "Random effects", "Residual checks", "Specifications compared"):
        assert section in text
    # nothing loaded from elsewhere: every image is inline data
    srcs = re.findall(r'<img[^>]*src="([^"]+)"', text)
    assert len(srcs) >= 4
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(https?:)?//', text)
    for fig in ("fig-interaction", "fig-emmeans", "fig-residuals"):
        assert f'id="{fig}"' in text


CHROMIUM_JS = """
<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.querySelectorAll('figure.crossed-figure img'));
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
  const el = document.createElement('div');
  el.id = 'crossed-check';
  el.textContent = 'figures=' + imgs.length + ' rendered=' + ok.length;
  document.body.appendChild(el);
});
</script>
"""


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium not installed (CI installs it)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    assert CHROMIUM is not None, "CI must have chromium (.ci/run installs it)"
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>",
                                                                CHROMIUM_JS + "</body>"),
                     encoding="utf-8")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"figures=(\d+) rendered=(\d+)", dom)
    assert m, dom[-2000:]
    total, rendered = int(m.group(1)), int(m.group(2))
    assert total >= 4
    assert rendered == total


def test_cross_classified_report(tmp_path):
    """A CCMEM report shows the system × dataset design and the systems' adjusted means."""
    path = tmp_path / "ccmem.html"
    code = main(["report", "blurb_like",
                 "cross_classified:response=score;nuisance=lr;slopes=none",
                 "--systems", "model", "-o", str(path)])
    assert code == 0
    text = path.read_text(encoding="utf-8")
    assert 'id="fig-crossed-design"' in text
    assert "Adjusted means: model" in text and "BioLinkBERT" in text
    assert "Largest model × dataset interaction effects" in text


def _rendered(page_path, tmp_path):
    """The report as headless Chromium lays it out at 1280 px (scripts/notebook_page.py's
    probe: widths, images, text)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import notebook_page as nb

    return nb.probe(page_path.read_text(encoding="utf-8"), tmp_path)


def _fits_the_page(result):
    assert result["width"] == 1280
    assert result["pageScrollWidth"] <= result["width"], "the page scrolls sideways"
    assert result["overflowing"] == [], result["overflowing"]
    assert result["images"] >= 3 and result["imagesRendered"] == result["images"]


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium not installed (CI installs it)")
def test_report_with_specifications_compared_fits_the_page(report, tmp_path):
    """The demo's report (scripts/demo): the comparison of specifications, fit criteria
    and residual checks in two tables, stays within the page at 1280 px."""
    result = _rendered(report, tmp_path)
    _fits_the_page(result)
    text = result["text"]
    assert "Specifications compared" in text and "Residual checks of each specification" in text
    assert "(Intercept)" in text and "languagees" in text


@pytest.fixture(scope="module")
def glmm_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("glmm") / "r.html"
    code = main(["report", "item_level_binary", "correct ~ system + (1 | dataset/item)",
                 "--family", "binomial", "-o", str(path)])
    assert code == 0
    return path


def test_glmm_report_has_a_summary_and_a_capped_caterpillar(glmm_report):
    text = glmm_report.read_text(encoding="utf-8")
    assert "<h2>Summary</h2>" in text
    assert "estimated marginal probabilities of correct (response scale): s01 0.433" in text
    assert "likelihood-ratio χ²(9) = 1401, p &lt; 0.0001" in text
    assert "pairwise odds ratios are significant" in text
    assert ("Conditional modes of (1 | item:dataset) with 95% intervals: the 15 lowest and "
            "15 highest of its 5,000 levels are shown.") in text
    assert "<td>systems02</td>" in text and "<td>(Intercept)</td>" in text


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium not installed (CI installs it)")
def test_glmm_report_renders_within_the_page(glmm_report, tmp_path):
    """The GLMM report at 1280 px: no horizontal scrollbar (the long PIRLS note of the
    model block wraps), every figure rendered, the caterpillar of 5,000 items no taller
    than the page's other figures allow, term names in the tables."""
    result = _rendered(glmm_report, tmp_path)
    _fits_the_page(result)
    text = result["text"]
    for term in ("(Intercept)", "systems02", "systems10"):
        assert term in text
    assert "PIRLS" in text
    assert any("15 highest of its 5,000 levels" in c for c in result["captions"])
