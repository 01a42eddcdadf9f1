"""MkDocs hook: the API reference, one page per package of ``src/crossed``, generated at
build time from the source tree, so that a new module appears without editing the site.

Each page renders the numpydoc docstrings of the package and of every public module in
it (names without a leading underscore) with mkdocstrings.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

SRC = Path(__file__).resolve().parents[2] / "src" / "crossed"


def _public(path: Path) -> bool:
    return not path.name.startswith("_") or path.name == "__init__.py"


def _modules(package: Path) -> list[str]:
    """Dotted names of the public modules and subpackages under ``package`` (itself not
    included), in file order."""
    out = []
    for p in sorted(package.rglob("*.py")):
        rel = p.relative_to(SRC.parent)
        parts = list(rel.with_suffix("").parts)
        if any(part.startswith("_") and part != "__init__" for part in parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if name != ".".join(package.relative_to(SRC.parent).parts):
            out.append(name)
    return out


def _pages() -> dict[str, str]:
    """path in the site -> Markdown."""
    pages = {"api/crossed.md": "# crossed\n\nThe names `import crossed as cx` gives.\n\n"
             "::: crossed\n    options:\n      show_submodules: false\n"}
    for entry in sorted(SRC.iterdir()):
        if entry.name.startswith("_") or entry.name in {"data", "formulas"}:
            continue
        if entry.is_dir() and (entry / "__init__.py").exists():
            name = f"crossed.{entry.name}"
            body = [f"# {name}\n", f"::: {name}\n    options:\n      members: []\n"]
            for mod in _modules(entry):
                body.append(f"## {mod}\n\n::: {mod}\n    options:\n      heading_level: 3\n"
                            "      show_root_heading: false\n")
            pages[f"api/{name}.md"] = "\n".join(body)
        elif entry.suffix == ".py":
            name = f"crossed.{entry.stem}"
            pages[f"api/{name}.md"] = f"# {name}\n\n::: {name}\n"
    return pages


def on_config(config, **kwargs):
    nav = config.nav or []
    nav.append({"API reference": list(_pages())})
    config.nav = nav
    return config


def on_files(files, config, **kwargs):
    for path, content in _pages().items():
        files.append(File.generated(config, path, content=content))
    # the changelog lives at the repository root (CHANGELOG.md)
    changelog = SRC.parents[1] / "CHANGELOG.md"
    files.append(File.generated(config, "changelog.md", content=changelog.read_text()))
    return files
