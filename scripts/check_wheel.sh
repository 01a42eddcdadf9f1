#!/usr/bin/env bash
# Build the sdist and the wheel, install the wheel into a clean virtual environment (no
# editable install, the repository not on the path) and run the smoke test there.
# usage: scripts/check_wheel.sh [PYTHON]   (default: .venv/bin/python, which has `build`)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-.venv/bin/python}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$PY" -m build --outdir "$out/dist" . >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
ls "$out/dist"
wheel="$(ls "$out"/dist/crossed-*.whl)"
ls "$out"/dist/crossed-*.tar.gz >/dev/null
# the wheel holds the package data and the typing marker (checked again after install)
"$PY" - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["crossed/py.typed", "crossed/data/exist_multi.csv",
        "crossed/formulas/repeated_measures.toml", "crossed/formulas/cross_classified.toml"]
missing = [n for n in need if n not in names]
assert not missing, f"not in the wheel: {missing}"
# the compiled core (meson.build), not its Cython sources
for module in ("crossed/design/_rank.", "crossed/model/_core.", "crossed/model/_gradient.",
               "crossed/inference/_hessian.", "crossed/model/glmm/_scalar.",
               "crossed/engines/native/_nlopt."):
    assert any(n.startswith(module) and n.endswith(".so") for n in names), \
        f"the compiled core ({module}*.so) is not in the wheel"
assert not any(n.endswith(".pyx") for n in names), "Cython sources in the wheel"
PY
# a clean environment; --system-site-packages lets pip reuse installed dependencies offline
python3 -m venv "$out/venv"
"$out/venv/bin/python" -m pip install -q ${PIP_WHEEL_OPTS:-} "$wheel"
cp scripts/smoke_wheel.py "$out/smoke_wheel.py"
# without a compiler on PATH (the venv's own scripts alone): the wheel carries the built core
(cd "$out" && env -u PYTHONPATH PATH="$out/venv/bin" "$out/venv/bin/python" -I smoke_wheel.py)
