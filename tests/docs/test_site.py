"""The docs site's build hooks (docs/_hooks): the offline check and the generated API pages.
The site itself is built by .ci/run (`mkdocs build --strict`)."""

from __future__ import annotations

import importlib.util
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
