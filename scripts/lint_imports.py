"""Run import-linter's contracts (pyproject.toml) on the source tree.

The editable install (meson-python) finds ``crossed`` through a meta-path finder whose
package path is not a folder, so import-linter's graph builder would find no module in it
and every contract would hold trivially. Here the finder is left out and ``src/`` goes
first on the path: the graph is that of the files in ``src/crossed`` (checked).

usage: .venv/bin/python scripts/lint_imports.py   (exit status: import-linter's)
"""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "MesonpyMetaFinder"]
sys.path.insert(0, str(SRC))

import importlib.util  # noqa: E402

from importlinter.cli import lint_imports  # noqa: E402

if __name__ == "__main__":
    spec = importlib.util.find_spec("crossed")
    found = list(spec.submodule_search_locations or []) if spec else []
    if found != [str(SRC / "crossed")]:  # (the graph must be built from these files)
        sys.exit(f"import-linter would read crossed from {found}, not {SRC / 'crossed'}")
    sys.exit(lint_imports(no_cache=True))
