"""The docs site's build hooks (docs/_hooks): the offline check, the generated API pages, the
Sphinx roles as links; and the site itself, built as .ci/run builds it (`mkdocs build
--strict`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hook(name: str):
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_offline_check_finds_network_loads_only():
    offline = _hook("offline")
    page = ('<a href="https://example.org">ok</a><link rel="canonical" href="https://x.org/">'
            '<script src="https://cdn.example.org/x.js"></script>'
            '<link rel="stylesheet" href="//fonts.example.org/css">'
            '<img src="img/a.png"><script src="assets/x.js"></script>')
    found = offline._network_loads(page)
    assert len(found) == 2
    assert "cdn.example.org" in found[0] and "fonts.example.org" in found[1]


def test_api_pages_cover_every_public_package():
    pages = _hook("api_pages")._pages()
    src = ROOT / "src" / "crossed"
    for pkg in src.iterdir():
        if pkg.is_dir() and (pkg / "__init__.py").exists() and not pkg.name.startswith("_"):
            assert f"api/crossed.{pkg.name}.md" in pages, pkg.name
    inference = pages["api/crossed.inference.md"]
    assert "::: crossed.inference.emmeans" in inference
    assert "_format" not in "".join(pages)


def test_generated_parts_are_filled_in_when_the_site_is_built():
    generated = _hook("generated")
    page = (ROOT / "docs" / "engines.md").read_text()
    assert generated.fill(page) == page          # the page's copy is what the build makes
    emptied = page.replace(generated.engines_timing().strip("\n"), "")
    assert "InstEval" not in emptied.split("docs: generated engines-timing")[1].split(
        "docs: end generated")[0]
    assert generated.fill(emptied) == page


def test_roles_become_links_to_the_documented_object_else_code():
    roles = _hook("roles")
    anchors = {"crossed.LmerFit": ("api/crossed/", "class"),
               "crossed.fit.lmer.LmerFit": ("api/crossed.fit/", "class"),
               "crossed.LmerFit.emmeans": ("api/crossed/", "function"),
               "crossed.evaluation.ablation": ("api/crossed.evaluation/", "module"),
               "crossed.evaluation.ablation.ablation": ("api/crossed.evaluation/", "function"),
               "crossed.model.pls.PLS.factor": ("api/crossed.model/", "function")}
    page = "api/crossed.model/"
    # as written, ~ shows the last part, an explicit title shows the title
    assert roles.render("meth", "crossed.LmerFit.emmeans", anchors, page) == (
        '<a class="autorefs autorefs-internal" href="../crossed/#crossed.LmerFit.emmeans" '
        'title="crossed.LmerFit.emmeans"><code>crossed.LmerFit.emmeans</code></a>')
    assert ">emmeans</code></a>" in roles.render("meth", "~crossed.LmerFit.emmeans",
                                                  anchors, page)
    titled = roles.render("meth", "PLS.factor &lt;crossed.model.pls.PLS.factor&gt;",
                          anchors, page)
    assert 'href="./#crossed.model.pls.PLS.factor"' in titled
    assert "<code>PLS.factor</code>" in titled
    # a re-export (crossed.fit.LmerFit) and a short name find the documented object (the
    # shortest path: the public name); the role's kind picks the function over the module
    # of the same name
    assert roles.resolve("class", "crossed.fit.LmerFit", anchors, page) == (
        "crossed.fit.lmer.LmerFit")
    assert roles.resolve("class", "LmerFit", anchors, page) == "crossed.LmerFit"
    assert roles.resolve("func", "ablation", anchors, page) == (
        "crossed.evaluation.ablation.ablation")
    assert roles.resolve("mod", "ablation", anchors, page) == "crossed.evaluation.ablation"
    # an attribute without a docstring (not documented) links to its class
    assert roles.resolve("attr", "LmerFit.converged", anchors, page) == "crossed.LmerFit"
    # nothing documented: the name in code, no link
    assert roles.render("class", "pandas.DataFrame", anchors, page) == (
        "<code>pandas.DataFrame</code>")
    html = ('<p>See :func:<code>crossed.evaluation.ablation.ablation</code> and '
            ':py:attr:<code>_private</code>.</p>')
    out = roles.rewrite(html, anchors, page)
    assert ":func:" not in out and ":py:attr:" not in out
    assert out.endswith(" and <code>_private</code>.</p>")
    found = roles.collect_ids('<h3 id="crossed.LmerFit" class="doc doc-heading">\n  <span '
                              'class="doc doc-object-name doc-class-name">LmerFit</span>'
                              '<a id="crossed.model"></a>')
    assert found == [("crossed.LmerFit", "class"), ("crossed.model", "module")]


def test_site_builds_and_shows_no_raw_sphinx_role(tmp_path):
    """The whole site (``mkdocs build --strict``, as .ci/run builds it): no page shows a
    Sphinx role verbatim, and a role of the API reference became a link."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    # in this process: a subprocess would inherit what rpy2 put in the environment
    # (LD_LIBRARY_PATH with R's libraries) when the lme4-engine tests ran first
    site = tmp_path / "site"
    build(load_config(str(ROOT / "mkdocs.yml"), site_dir=str(site), strict=True))
    raw = re.compile(r":(?:py:)?(?:func|meth|class|attr|mod|data|exc|obj):(?:`|<code>)")
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20
    shown = {str(p.relative_to(site)): raw.findall(p.read_text()) for p in pages}
    assert {k: v for k, v in shown.items() if v} == {}
    assert not raw.search((site / "search" / "search_index.json").read_text())
    # the main page's "See :func:`crossed.engines.refit.refit_glmer`" is a link now
    main = (site / "api" / "crossed" / "index.html").read_text()
    assert re.search(r'<a class="autorefs autorefs-internal" href="\.\./crossed\.engines/'
                     r'#crossed\.engines\.refit\.refit_glmer"[^>]*><code>crossed\.engines\.'
                     r'refit\.refit_glmer</code></a>', main)
