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
