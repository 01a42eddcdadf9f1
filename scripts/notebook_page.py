"""Every result object of both fit classes on one notebook-style HTML page, rendered in
headless Chromium: the page builder of ``tests/display/test_notebook_browser.py`` and of
``scripts/screenshots`` (which writes ``docs/img/notebook_lmm.png``,
``docs/img/notebook_glmm.png`` and ``docs/img/report_glmm.png``).

Each object is shown as Jupyter shows an output: its ``_repr_html_`` when it has one, else
its text in a ``<pre>``; each output sits in a block ``div.cell`` (``data-name``: the code
that made it) of a 1280-pixel-wide page whose output area scrolls sideways as Jupyter's
does. :data:`PROBE` is the script injected into a page: it writes what it measured
(for every block: tables, header rows, width of the content against the width of the
block) as JSON into ``#crossed-probe``, read back from ``--dump-dom``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crossed as cx

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]
WIDTH = 1280

LMM = "Reaction ~ Days + (Days | Subject)"
GLMM = "cbind(incidence, size - incidence) ~ period + (1 | herd)"

_STYLE = """<style>
body{margin:0;padding:16px 24px;font-family:-apple-system,'Segoe UI',Helvetica,Arial,
sans-serif;font-size:14px;color:#222;background:#fff}
h2{font-size:18px;margin:8px 0 12px}
.cell{display:flex;margin:0 0 14px;border-top:1px solid #eee;padding-top:6px}
.prompt{flex:0 0 auto;width:150px;color:#d84315;font-family:monospace;font-size:12px;
padding-top:2px}
.prompt .code{color:#303f9f;white-space:pre-wrap;word-break:break-all}
.output{flex:1 1 auto;min-width:0;overflow-x:auto}
.output pre{margin:0;font-size:12.5px}
</style>"""

PROBE = """<script>
window.addEventListener('load', () => {
  const blocks = Array.from(document.querySelectorAll('div.cell')).map(cell => {
    const out = cell.querySelector('div.output');
    const tables = Array.from(out.querySelectorAll('table'));
    const wide = Array.from(out.querySelectorAll('*')).filter(
        e => e.getBoundingClientRect().right > out.getBoundingClientRect().right + 1).length;
    return {name: cell.dataset.name, html: cell.dataset.html === '1',
            crossed: out.querySelector('div.crossed-result') !== null,
            tables: tables.length,
            headed: tables.filter(t => t.querySelector('thead tr th, tr th')).length,
            scrollWidth: out.scrollWidth, clientWidth: out.clientWidth,
            beyond: wide, text: out.innerText.slice(0, 4000)};
  });
  const imgs = Array.from(document.querySelectorAll('img'));
  const result = {width: document.documentElement.clientWidth,
                  pageScrollWidth: document.documentElement.scrollWidth,
                  height: document.documentElement.scrollHeight, blocks: blocks,
                  text: document.body.innerText.slice(0, 60000),
                  captions: Array.from(document.querySelectorAll('figcaption'))
                      .map(c => c.innerText),
                  images: imgs.length,
                  imagesRendered: imgs.filter(i => i.complete && i.naturalWidth > 50).length,
                  overflowing: Array.from(document.querySelectorAll('body *')).filter(
                      e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0
                           && getComputedStyle(e).overflowX !== 'visible'
                           && !['HTML', 'BODY'].includes(e.tagName))
                      .map(e => e.tagName + '.' + e.className + '#' + e.id)};
  const el = document.createElement('pre');
  el.id = 'crossed-probe';
  el.textContent = JSON.stringify(result);
  document.body.appendChild(el);
});
</script>"""


def _quiet(make: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


def lmm_objects(nsim: int = 20) -> list[tuple[str, Any]]:
    """(code, object) for every result of an LMM on sleepstudy, as a notebook shows them."""
    data = cx.load_dataset("sleepstudy")
    fit = _quiet(lambda: cx.lmer(LMM, data))
    null = _quiet(lambda: cx.lmer("Reaction ~ 1 + (Days | Subject)", data))
    emm = _quiet(lambda: fit.emmeans("Days", at={"Days": [0, 3, 6, 9]}))
    return [
        ("fit", fit),
        ("fit.summary()", fit.summary()),
        ("fit.coef_table()", fit.coef_table()),
        ("fit.anova()", fit.anova()),
        ("fit.eta_squared()", _quiet(fit.eta_squared)),
        ("fit.emmeans('Days', at=...)", emm),
        ("emm.pairs()", _quiet(emm.pairs)),
        ("fit.emtrends('1', 'Days')", _quiet(lambda: fit.emtrends("1", "Days"))),
        ("fit.varcorr()", fit.varcorr()),
        ("fit.ranef()", fit.ranef()),
        ("cx.compare(null, fit)", _quiet(lambda: cx.compare(null, fit))),
        ("fit.ranova()", _quiet(fit.ranova)),
        ("fit.confint()", _quiet(fit.confint)),
        ("fit.step()", _quiet(fit.step)),
        ("fit.influence('Subject')", _quiet(lambda: fit.influence("Subject"))),
        ("fit.r2()", fit.r2()),
        ("fit.icc()", fit.icc()),
        ("fit.check()", _quiet(lambda: fit.check(seed=1))),
        ("cx.power_sim(fit, 'Days')", _quiet(lambda: cx.power_sim(fit, "Days", nsim=nsim,
                                                                  seed=1))),
        ("cx.bootstrap(fit)", _quiet(lambda: cx.bootstrap(fit, nsim=nsim, seed=1))),
    ]


def glmm_objects(nsim: int = 20) -> list[tuple[str, Any]]:
    """(code, object) for every result of a binomial GLMM on cbpp."""
    data = cx.load_dataset("cbpp")
    fit = _quiet(lambda: cx.glmer(GLMM, data, family="binomial"))
    null = _quiet(lambda: cx.glmer("cbind(incidence, size - incidence) ~ 1 + (1 | herd)",
                                   data, family="binomial"))
    emm = _quiet(lambda: fit.emmeans("period"))  # emmeans' default: the logit scale
    resp = _quiet(lambda: fit.emmeans("period", type="response"))
    return [
        ("fit", fit),
        ("fit.summary()", fit.summary()),
        ("fit.coef_table()", fit.coef_table()),
        ("fit.anova()", fit.anova()),
        ("fit.drop1()", _quiet(fit.drop1)),
        ("fit.emmeans('period')", emm),
        ("emm.pairs()", _quiet(emm.pairs)),
        ("fit.emmeans('period', type='response')", resp),
        ("resp.pairs()", _quiet(resp.pairs)),
        ("emm.regrid().pairs()", _quiet(lambda: emm.regrid().pairs())),
        ("fit.varcorr()", fit.varcorr()),
        ("fit.ranef()", fit.ranef()),
        ("cx.compare(null, fit)", _quiet(lambda: cx.compare(null, fit))),
        ("fit.confint()", _quiet(fit.confint)),
        ("fit.r2()", _quiet(fit.r2)),
        ("fit.check()", _quiet(lambda: fit.check(seed=1))),
        ("cx.bootstrap(fit)", _quiet(lambda: cx.bootstrap(fit, nsim=nsim, seed=1))),
    ]


def notebook_html(title: str, objects: list[tuple[str, Any]]) -> str:
    """The page: one ``div.cell`` per object, its ``_repr_html_`` (``data-html="1"``) or,
    as Jupyter falls back, its ``repr`` in a ``<pre>``."""
    cells = []
    for i, (code, obj) in enumerate(objects, start=1):
        view = getattr(obj, "_repr_html_", None)
        body = view() if callable(view) else None
        has_html = body is not None
        if body is None:
            body = f"<pre>{html.escape(repr(obj))}</pre>"
        cells.append(f'<div class="cell" data-name="{html.escape(code)}" '
                     f'data-html="{int(has_html)}"><div class="prompt">Out[{i}]:'
                     f'<div class="code">{html.escape(code)}</div></div>'
                     f'<div class="output">{body}</div></div>')
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title>{_STYLE}</head><body>"
            f"<h2>{html.escape(title)}</h2>{''.join(cells)}</body></html>")


def _chromium(args: list[str], timeout: int = 180) -> str:
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "HOME": profile}).stdout


def probe(page: str, directory: Path, height: int = 900) -> dict[str, Any]:
    """Render ``page`` (HTML text) at 1280 px with :data:`PROBE` injected; what it
    measured."""
    path = Path(directory) / "probe.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium([f"--window-size={WIDTH},{height}", "--virtual-time-budget=10000",
                     "--dump-dom", path.as_uri()])
    m = re.search(r'<pre id="crossed-probe">(.*?)</pre>', dom, re.S)
    if m is None:
        raise RuntimeError("the probe did not run: " + dom[-2000:])
    return dict(json.loads(html.unescape(m.group(1))))


def screenshot(page: str, out: Path, directory: Path, max_height: int = 16000) -> Path:
    """A PNG of the whole page (its height measured first) at 1280 px."""
    height = min(int(probe(page, directory)["height"]) + 20, max_height)
    path = Path(directory) / "shot.html"
    path.write_text(page, encoding="utf-8")
    _chromium([f"--window-size={WIDTH},{height}", "--virtual-time-budget=10000",
               f"--screenshot={Path(out).resolve()}", path.as_uri()])
    return Path(out)
