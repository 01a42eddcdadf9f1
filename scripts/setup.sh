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
# the compiled core (meson.build) needs a C compiler and Python's headers
if ! command -v cc >/dev/null 2>&1 || [ ! -f "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc python3-dev >/dev/null
  else
    echo "crossed compiles its core at install: install a C compiler and Python's headers" \
         "(Debian: apt-get install build-essential python3-dev)" >&2
    exit 1
  fi
fi
# NLopt built with the compiler's optimisation (Debian's libnlopt0, which R's nloptr uses):
# crossed's optimiser runs call it where it takes the steps of NLopt's Python package, whose
# wheels are built without optimisation, bit for bit (engines/native/optimize.py); optional
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] &&
   ! ldconfig -p 2>/dev/null | grep -q 'libnlopt\.so\.0 '; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnlopt0 >/dev/null; } ||
    echo "crossed: libnlopt0 not installed; NLopt's Python package is used (slower)" >&2
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.installed-$(echo "$extras" | tr ',' '-')-$(cat pyproject.toml meson.build | md5sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "crossed: installing crossed${extras:+ [$extras]} and its dependencies into .venv" \
       "(first run, or pyproject.toml changed: a few minutes)..." >&2
  .venv/bin/python -m pip install -q --upgrade pip
  # the compiled core (meson.build) is built by meson-python; an editable install rebuilds
  # it on import when a .pyx changes, with the build tools of this environment, so they are
  # installed here and the install does not isolate the build; so are the build requirements
  # of every package built from its source distribution in the same install (rpy2 3.5, the
  # `r` extra: setuptools with bdist_wheel, wheel, and cffi, without which its build skips
  # the interface to R and the package installs broken)
  .venv/bin/python -m pip install -q "meson-python>=0.15" "meson>=1.1" "cython>=3.0.8" ninja \
    "scipy>=1.11.1" "setuptools>=70.1" wheel "cffi>=1.15"
  # (CYTHON: the rebuild on import finds this Cython without the environment on PATH;
  # build/venv: this environment's build directory, apart from .venv-oldest's;
  # RPY2_CFFI_MODE=ABI: rpy2's interface to R by cffi's ABI mode, which needs R and, for the
  # link test rpy2's build runs in any mode, libpcre2-dev (.ci/run); its API mode also links
  # R's BLAS and fails without libblas-dev)
  RPY2_CFFI_MODE="${RPY2_CFFI_MODE:-ABI}" \
  PATH="$PWD/.venv/bin:$PATH" CYTHON="$PWD/.venv/bin/cython" .venv/bin/python -m pip install \
    -q --no-build-isolation -Cbuild-dir=build/venv -e "$spec"
  touch "$stamp"
fi
