"""Execute the code blocks of a Markdown page and compare the outputs it shows.

The rules (``docs/contributing-docs.md`` says the same for writers):

- A ```` ```python ```` block runs in the page's namespace (one namespace per page, blocks
  in order). Like a notebook cell, every top-level expression statement whose value is not
  ``None`` is displayed (``repr``), unless the line ends with ``;``; matplotlib objects are
  not displayed. ``print`` output is captured too.
- A ```` ```bash ```` / ```` ```console ```` block runs each ``crossed ...`` command (a
  ``$`` prompt is allowed) through the command line's ``main`` in this process.
- A fenced block without a language (or ``text``) that follows an executed block with only
  blank lines or a ``<details><summary>output</summary>`` line between them is that block's
  shown output: it is compared with what the block printed, numbers with a tolerance of one
  unit in the last shown digit or 0.1% (the last digits of a fit depend on the BLAS kernel),
  everything else exactly. A line ``...`` stands for any number of lines.
- A block preceded by ``<!-- docs: not-executed (reason) -->`` is not run (installation
  commands, a Dask cluster); the reason is required. Any other block that cannot run fails
  the test.
- With ``CROSSED_DOCS_UPDATE=1`` the shown outputs are rewritten with what the code prints.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "PageRun", "compare_output", "parse_blocks", "run_page"]

FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
MARKER = re.compile(r"<!--\s*docs:\s*(not-executed|slow)\b\s*(.*?)\s*-->")
EXECUTED = {"python", "bash", "console", "shell", "sh"}
OUTPUT = {"", "text", "output"}


@dataclass
class Block:
    lang: str
    start: int          # line index of the opening fence
    end: int            # line index of the closing fence
    code: str
    marker: tuple[str, str] | None = None
    output_of: int | None = None   # index of the executed block this output belongs to


@dataclass
class PageRun:
    path: Path
    executed: int = 0
    not_executed: list[tuple[int, str]] = field(default_factory=list)
    compared: int = 0
    failures: list[str] = field(default_factory=list)


def parse_blocks(lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    i = 0
    last_exec_end: int | None = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).lower()
        j = i + 1
        while j < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[j]):
            j += 1
        code = "\n".join(line[len(indent):] for line in lines[i + 1:j])
        marker = None
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and (mm := MARKER.search(lines[k])):
            marker = (mm.group(1), mm.group(2))
        block = Block(lang, i, j, code, marker)
        if lang in OUTPUT and last_exec_end is not None:
            between = [ln.strip() for ln in lines[last_exec_end + 1:i]]
            if all(not b or b == "<details><summary>output</summary>" for b in between):
                block.output_of = len(blocks) - 1 - next(
                    n for n, b in enumerate(reversed(blocks)) if b.lang in EXECUTED)
        blocks.append(block)
        if lang in EXECUTED:
            last_exec_end = j
        i = j + 1
    return blocks


# ------------------------------------------------------------------ running
def _displayable(value: object) -> bool:
    if value is None:
        return False
    mod = type(value).__module__ or ""
    if mod.startswith("matplotlib"):
        return False
    try:
        import numpy as np

        if isinstance(value, np.ndarray) and value.dtype == object and value.size and \
                type(value.flat[0]).__module__.startswith("matplotlib"):
            return False
    except ImportError:  # pragma: no cover
        pass
    return True


def _run_python(code: str, namespace: dict, filename: str) -> str:
    tree = ast.parse(code, filename)
    src_lines = code.splitlines()
    shown: list[str] = []
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for node in tree.body:
            if isinstance(node, ast.Expr):
                last = src_lines[node.end_lineno - 1].split("#")[0].rstrip()
                value = eval(compile(ast.Expression(node.value), filename, "eval"), namespace)
                if _displayable(value) and not last.endswith(";"):
                    printed = out.getvalue()
                    if printed:
                        shown.append(printed.rstrip("\n"))
                        out.seek(0)
                        out.truncate()
                    shown.append(repr(value))
            else:
                exec(compile(ast.Module([node], []), filename, "exec"), namespace)
    if out.getvalue():
        shown.append(out.getvalue().rstrip("\n"))
    return "\n\n".join(shown)


def _run_shell(code: str) -> str:
    from crossed.cli import main

    outputs = []
    for raw in code.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        args = shlex.split(line, comments=True)
        if not args or args[0] != "crossed":
            raise ValueError(f"not a crossed command (mark the block not-executed): {raw}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code_ = main(args[1:])
        if code_:
            raise RuntimeError(f"{line!r} exited with {code_}")
        outputs.append(out.getvalue().rstrip("\n"))
    return "\n".join(o for o in outputs if o)


# ------------------------------------------------------------------ comparing
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?$")


def _close(actual: str, expected: str) -> bool:
    if actual == expected:
        return True
    if not (_NUM.match(actual) and _NUM.match(expected)):
        return False
    a, e = float(actual.rstrip("%")), float(expected.rstrip("%"))
    mant = expected.rstrip("%").lower().split("e")[0]
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    exp = int(expected.lower().split("e")[1].rstrip("%")) if "e" in expected.lower() else 0
    unit = 10.0 ** (exp - decimals)
    return math.isclose(a, e, rel_tol=1e-3, abs_tol=1.01 * unit)


def _lines_match(actual: str, expected: str) -> bool:
    at, et = actual.split(), expected.split()
    return len(at) == len(et) and all(_close(a, e) for a, e in zip(at, et, strict=True))


def compare_output(actual: str, expected: str) -> str | None:
    """None when ``actual`` shows ``expected`` (see the module docstring), else a message."""
    act = [ln.rstrip() for ln in actual.strip("\n").splitlines()]
    exp = [ln.rstrip() for ln in expected.strip("\n").splitlines()]
    segments: list[list[str]] = [[]]
    for ln in exp:
        if ln.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(ln)
    pos = 0
    for n, seg in enumerate(segments):
        if not seg:
            continue
        anchored = n == 0
        found = None
        for start in range(pos, len(act) - len(seg) + 1):
            if all(_lines_match(act[start + k], seg[k]) for k in range(len(seg))):
                found = start
                break
            if anchored:
                break
        if found is None:
            return ("expected lines not found in order:\n" + "\n".join(seg)
                    + "\n--- actual output ---\n" + "\n".join(act))
        pos = found + len(seg)
    if len(segments) == 1 and pos != len(act):
        return "extra output lines:\n" + "\n".join(act[pos:]) + \
            "\n--- actual output ---\n" + "\n".join(act)
    return None


# ------------------------------------------------------------------ a page
def run_page(path: Path, update: bool = False) -> PageRun:
    """Run every block of ``path``; with ``update``, rewrite its shown outputs."""
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    # a notebook shows every column of a table: so do the shown outputs
    pd.set_option("display.width", 250, "display.max_columns", 40)
    lines = path.read_text().splitlines()
    blocks = parse_blocks(lines)
    run = PageRun(path)
    namespace: dict = {"__name__": "__docs__"}
    printed: dict[int, str] = {}
    for idx, b in enumerate(blocks):
        where = f"{path.name}:{b.start + 1}"
        if b.lang in EXECUTED:
            if b.marker and b.marker[0] == "not-executed":
                if not b.marker[1]:
                    run.failures.append(f"{where}: not-executed needs a reason")
                run.not_executed.append((b.start + 1, b.marker[1]))
                continue
            try:
                if b.lang == "python":
                    printed[idx] = _run_python(b.code, namespace, where)
                else:
                    printed[idx] = _run_shell(b.code)
                run.executed += 1
            except Exception as exc:  # reported with the block's line
                run.failures.append(f"{where}: {type(exc).__name__}: {exc}")
                printed[idx] = None  # type: ignore[assignment]
        elif b.output_of is not None and printed.get(b.output_of) is not None:
            run.compared += 1
            msg = compare_output(printed[b.output_of], b.code)
            if msg and not update:
                run.failures.append(f"{where}: shown output differs: {msg}")
    if update:
        new = list(lines)
        for b in reversed(blocks):
            if b.output_of is not None and printed.get(b.output_of) is not None:
                indent = FENCE.match(lines[b.start]).group(1)  # type: ignore[union-attr]
                body = [indent + ln if ln else ln
                        for ln in printed[b.output_of].splitlines()]
                new[b.start + 1:b.end] = [ln.rstrip() for ln in body]
        path.write_text("\n".join(new) + "\n")
    return run
