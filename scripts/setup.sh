#!/usr/bin/env bash
# Create .venv with crossed installed (editable) and the given extras; idempotent.
# usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "crossed needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    # Debian's python3 ships venv separately
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf .venv && "$PY" -m venv .venv
    else
      echo "python3 -m venv failed: install your distribution's python3-venv package" >&2
      exit 1
    fi
  fi
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.installed-$(echo "$extras" | tr ',' '-')-$(cat pyproject.toml | md5sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "crossed: installing crossed${extras:+ [$extras]} and its dependencies into .venv" \
       "(first run, or pyproject.toml changed: a few minutes)..." >&2
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e "$spec"
  touch "$stamp"
fi
