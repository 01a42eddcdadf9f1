"""MkDocs hook: the Sphinx roles of the docstrings become links in the API reference.

The docstrings name other objects the Sphinx way (``:func:`crossed.lmer```,
``:attr:`LmerFit.converged```, ``:class:`~crossed.model.result.LmerResult```,
``:meth:`PLS.factor <crossed.model.pls.PLS.factor>```); mkdocstrings-python renders
Markdown and knows no roles, so without this hook the pages would show them verbatim
(``:func:`` then the name in code).

After every page is rendered, the hook collects the ids of the documented objects
(mkdocstrings gives each heading its dotted path, ``crossed.model.pls.PLS.factor``), then
rewrites every role in every page: a role whose target is documented becomes a link to it,
any other (a pandas name, a private helper) becomes the name in code. A target is looked
up as written, then as the end of a documented path (``LmerFit.converged`` is
``crossed.LmerFit.converged``); where several paths end so, the one on the same page wins,
then the shortest (the public name). As in Sphinx, ``~`` shows the last part of the name
only and ``title <target>`` shows the title.
"""

from __future__ import annotations

import html as _html
import logging
import re

from mkdocs.plugins import event_priority
from mkdocs.utils import get_relative_url

ROLES = ("func", "meth", "class", "attr", "mod", "data", "exc", "obj")

# a role as Markdown renders it: the backticks became <code>
_ROLE = re.compile(r":(?:py:)?(" + "|".join(ROLES) + r"):<code>([^<]*)</code>")
# an object's anchor as mkdocstrings renders it: a heading whose name span tells the kind
# (function, class, attribute, module), or a bare anchor (a module shown without heading)
_ID = re.compile(r'<(h[1-6]|a) id="(crossed(?:\.\w+)*)"[^>]*>'
                 r'(?:\s*<span class="doc doc-object-name doc-(\w+)-name">)?')
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
# the kind of object each role names (griffe's kinds: a method is a function)
_KIND = {"func": "function", "meth": "function", "class": "class", "exc": "class",
         "attr": "attribute", "data": "attribute", "mod": "module"}
log = logging.getLogger("mkdocs.hooks.roles")

# documented object path -> (url of the page that documents it, its kind); filled as the
# pages render
_anchors: dict[str, tuple[str, str]] = {}


def collect_ids(content: str) -> list[tuple[str, str]]:
    """(dotted path, kind) of each object mkdocstrings documented on a rendered page."""
    return [(path, kind or "module") for _, path, kind in _ID.findall(content)]


def resolve(role: str, target: str, anchors: dict[str, tuple[str, str]],
            page_url: str) -> str | None:
    """The documented path that ``target`` names, or None when nothing documented has it.

    ``anchors`` maps each documented path to its page's url and its kind; ``page_url`` is
    the url of the page the role is on. The target is looked up as written, then, from the
    longest package prefix down, as any documented path with that prefix and that end
    (``crossed.fit.LmerFit`` is the ``crossed.LmerFit`` that ``crossed.fit`` re-exports;
    ``LmerFit.converged`` is ``crossed.LmerFit.converged``). Among several, an object of
    the role's kind wins, then one on the same page, then the shortest path. An attribute
    or method that is not documented (no docstring) resolves to its class."""
    name = re.sub(r"\s+", "", target).lstrip(".").removesuffix("()")
    if not name:
        return None
    if name in anchors:
        return name
    parts = name.split(".")
    want = _KIND.get(role)
    for k in range(len(parts) - 1, -1, -1):
        head = ".".join(parts[:k]) + "." if k else ""
        tail = "." + ".".join(parts[k:])
        found = [p for p in anchors if p.startswith(head) and p.endswith(tail)]
        if found:
            return min(found, key=lambda p: (anchors[p][1] != want, anchors[p][0] != page_url,
                                             p.count("."), p))
    if role in {"attr", "meth"} and len(parts) > 1:
        return resolve("class", ".".join(parts[:-1]), anchors, page_url)
    return None


def render(role: str, text: str, anchors: dict[str, tuple[str, str]], page_url: str) -> str:
    """The HTML of one role: a link to the documented object, else the name in code.

    ``text`` is what was between the backticks, HTML-escaped as Markdown left it."""
    raw = " ".join(_html.unescape(text).split())
    titled = _TITLED.match(raw)
    if titled:
        shown, target = titled.group(1), titled.group(2)
    else:
        target = raw.lstrip("~")
        shown = target.rsplit(".", 1)[-1] if raw.startswith("~") else target
    path = resolve(role, target, anchors, page_url)
    code = f"<code>{_html.escape(shown, quote=False)}</code>"
    if path is None:
        log.debug("%s: :%s:`%s` names nothing documented: shown as code", page_url, role, raw)
        return code
    href = get_relative_url(anchors[path][0], page_url) + "#" + path
    return (f'<a class="autorefs autorefs-internal" href="{_html.escape(href)}" '
            f'title="{_html.escape(path)}">{code}</a>')


def rewrite(content: str, anchors: dict[str, tuple[str, str]], page_url: str) -> str:
    """``content`` (a rendered page) with every role rendered by :func:`render`."""
    return _ROLE.sub(lambda m: render(m.group(1), m.group(2), anchors, page_url), content)


def on_pre_build(config, **kwargs):  # noqa: ARG001 - MkDocs' signature
    _anchors.clear()


@event_priority(-100)  # after mkdocstrings has rendered the docstrings into the page
def on_page_content(html, page, config, files):  # noqa: ARG001 - MkDocs' signature
    for path, kind in collect_ids(html):
        _anchors.setdefault(path, (page.url, kind))
    return html


@event_priority(-100)  # every page is rendered by now, and none is written yet
def on_env(env, config, files):  # noqa: ARG001 - MkDocs' signature
    for file in files.documentation_pages():
        page = file.page
        if page is not None and page.content:
            page.content = rewrite(page.content, _anchors, page.url)
    return env
