"""What a benchmark ran on: the BLAS libraries and kernels in use, the versions of the
numerical libraries, the machine's CPU and its load (issue 16, part 5).

:func:`environment` is called in each worker (the process that fits) and in the driver;
:func:`describe` turns the records into the lines the report prints.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

__all__ = ["BLAS_VARIABLES", "blas_summary", "cpu_model", "describe", "environment",
           "load_average", "nlopt_library"]

BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                  "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables that choose the BLAS kernel or its threads."""
PACKAGES = ("numpy", "scipy", "nlopt", "qdldl", "pandas", "threadpoolctl")


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (``os.getloadavg``)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return []


def blas_summary() -> list[dict]:
    """The BLAS/LAPACK/OpenMP libraries loaded in this process, through threadpoolctl:
    library (``internal_api``), version, kernel (``architecture``: OpenBLAS' core type),
    threads and file name. numpy and scipy.linalg are imported first so that both their
    BLAS builds are listed."""
    try:
        import numpy  # noqa: F401
        import scipy.linalg  # noqa: F401
        from threadpoolctl import threadpool_info
    except ImportError as exc:
        return [{"error": f"threadpoolctl unavailable: {exc}"}]
    out = []
    for info in threadpool_info():
        out.append({
            "api": info.get("internal_api"),
            "version": info.get("version"),
            "kernel": info.get("architecture"),
            "threads": info.get("num_threads"),
            "file": Path(info.get("filepath", "")).name,
        })
    return out


def versions() -> dict[str, str]:
    """Installed versions of the numerical packages (``not installed`` when absent)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def nlopt_library() -> str:
    """The NLopt library crossed's compiled optimiser runs call (the system's, or the
    Python package's, whose wheels are built without optimisation):
    ``crossed.engines.native.optimize.nlopt_library``."""
    try:
        from crossed.engines.native.optimize import nlopt_library as bound
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"unknown ({exc})"
    return Path(bound() or "none (NLopt's Python interface)").name


def environment() -> dict:
    """A JSON-able record of this process's environment: CPU, cores, load, the BLAS
    variables set, the BLAS libraries and kernels in use, package versions."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load": load_average(),
        "blas_variables": {k: os.environ[k] for k in BLAS_VARIABLES if k in os.environ},
        "blas": blas_summary(),
        "versions": versions(),
    }


def kernel_label(env: dict) -> str:
    """``openblas 0.3.31 SkylakeX, 1 thread`` for each distinct BLAS library in ``env``."""
    parts: list[str] = []
    for lib in sorted(env.get("blas", []), key=lambda x: str(x.get("file"))):
        if "error" in lib:
            parts.append(lib["error"])
            continue
        text = f"{lib['api']} {lib['version']} {lib['kernel'] or ''}".strip()
        text += f", {lib['threads']} thread{'s' if lib['threads'] != 1 else ''} ({lib['file']})"
        if text not in parts:
            parts.append(text)
    return "; ".join(parts) or "unknown"


def describe(driver_start: dict, driver_end: dict, records: dict[str, dict[str, dict]]
             ) -> list[str]:
    """Markdown lines on the environment: the machine and its load over the run, the BLAS
    variables, the Python libraries' versions and kernels, and per peer the BLAS that its
    worker used and the load during its fits."""
    variables = driver_start.get("blas_variables") or {}
    var_text = ", ".join(f"{k}={v}" for k, v in variables.items()) or "none set"
    v = driver_start.get("versions", {})
    lines = [
        "",
        "Environment:",
        "",
        f"- machine: {driver_start.get('cpu')}, {driver_start.get('cores')} cores; load"
        f" average (1/5/15 min) {driver_start.get('load')} at the start,"
        f" {driver_end.get('load')} at the end",
        f"- BLAS variables: {var_text}",
        f"- BLAS in the driver: {kernel_label(driver_start)}",
        "- versions: " + ", ".join(f"{k} {v[k]}" for k in PACKAGES if k in v),
        f"- NLopt library of crossed's optimiser runs (in the driver): {nlopt_library()}",
    ]
    seen = set()
    for case, by_peer in records.items():
        for peer, record in by_peer.items():
            env = record.get("env")
            if not env:
                continue
            label = kernel_label(env) if "blas" in env else env.get("blas_text", "unknown")
            key = (peer, label)
            if key not in seen:
                seen.add(key)
                lines.append(f"- {peer}: {label}")
            lines.append(f"  - {case}: load {env.get('load')} before the fits,"
                         f" {env.get('load_after')} after")
    return lines
