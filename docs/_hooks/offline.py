"""MkDocs hook: the built site loads nothing from another site, and no link is fetched.

MkDocs never fetches links; with ``strict: true`` it fails on internal links to missing
pages or anchors. This hook adds the other half of an offline build: after the build it
reads every page and fails when a page would load a resource (script, style sheet, font,
image, iframe) over the network. Links to other sites (``<a href="https://...">``) are
allowed: they are not fetched when the site is built or opened.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

_LOADS = re.compile(
    r"<(?:script|img|iframe|source)\b[^>]*\bsrc=[\"'](?:https?:)?//[^\"']+[\"']"
    r"|<link\b[^>]*\bhref=[\"'](?:https?:)?//[^\"']+[\"'][^>]*>"
    r"|@import\s+url\([\"']?(?:https?:)?//", re.IGNORECASE)


def _network_loads(text: str) -> list[str]:
    found = []
    for m in _LOADS.finditer(text):
        tag = m.group(0)
        if tag.lower().startswith("<link") and not re.search(
                r"rel=[\"'](stylesheet|preload|icon|preconnect|modulepreload)", tag, re.I):
            continue  # rel="canonical" and the like: not loaded
        found.append(tag[:120])
    return found


def on_post_build(config, **kwargs):
    site = Path(config.site_dir)
    problems = []
    for page in site.rglob("*.html"):
        for tag in _network_loads(page.read_text(errors="replace")):
            problems.append(f"{page.relative_to(site)}: {tag}")
    for css in site.rglob("*.css"):
        for tag in _network_loads(css.read_text(errors="replace")):
            problems.append(f"{css.relative_to(site)}: {tag}")
    if problems:
        raise PluginError("pages load resources from the network (the site must build "
                          "and read offline):\n" + "\n".join(problems[:20]))
