"""Generated parts of the docs: tables that come from stored results, never typed by hand.

A page holds such a part between ``<!-- docs: generated NAME -->`` and
``<!-- docs: end generated -->``. :func:`generate` gives NAME's Markdown; the site's build
(this module is a MkDocs hook) replaces the region with it, and the executed-docs test
(``tests/docs``) fails when the page's copy differs, so that the Markdown source reads the
same as the site. ``CROSSED_DOCS_UPDATE=1 python -m pytest tests/docs`` rewrites the copies.

- ``engines-timing``: the timing table of ``docs/engines.md``, from the run stored by
  ``benchmarks/bench_engines.py --json benchmarks/stored/engines.json`` (its date, commit,
  machine and versions come with it).
- ``simulate-speed``: the speed table of ``docs/simulation.md``, from
  ``benchmarks/bench_simulate.py --json benchmarks/stored/simulate.json``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "stored"

_REGION = re.compile(r"(<!--\s*docs:\s*generated\s+([\w-]+)\s*-->\n)(.*?)"
                     r"(<!--\s*docs:\s*end generated\s*-->)", re.S)


def _load(name: str):
    """A benchmark script as a module (``benchmarks/NAME.py``)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def engines_timing() -> str:
    """The engines' timing table (``docs/engines.md``) from the stored run."""
    stored = json.loads((RESULTS / "engines.json").read_text())
    return _load("bench_engines").render_stored(stored)


def simulate_speed() -> str:
    """The simulation page's speed table (``docs/simulation.md``) from the stored run."""
    stored = json.loads((RESULTS / "simulate.json").read_text())
    return _load("bench_simulate").render_stored(stored)


GENERATORS = {"engines-timing": engines_timing, "simulate-speed": simulate_speed}


def generate(name: str) -> str:
    """The Markdown of the generated part NAME."""
    if name not in GENERATORS:
        raise KeyError(f"no generator {name!r} in docs/_hooks/generated.py "
                       f"(known: {', '.join(GENERATORS)})")
    return GENERATORS[name]()


def fill(markdown: str) -> str:
    """``markdown`` with every generated region holding what its generator gives now."""
    return _REGION.sub(lambda m: m.group(1) + "\n" + generate(m.group(2)).strip("\n")
                       + "\n\n" + m.group(4), markdown)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - MkDocs' signature
    return fill(markdown)
