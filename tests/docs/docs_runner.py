"""Execute the code blocks of a Markdown page and check every number it shows.

The rules (``docs/contributing-docs.md`` says the same for writers):

- A ```` ```python ```` block runs in the page's namespace (one namespace per page, blocks
  in order). Like a notebook cell, every top-level expression statement whose value is not
  ``None`` is displayed (``repr``), unless the line ends with ``;``; matplotlib objects are
  not displayed. ``print`` output is captured too.
- A ```` ```bash ```` / ```` ```console ```` block runs each ``crossed ...`` command (a
  ``$`` prompt is allowed) through the command line's ``main`` in this process.
- A fenced block without a language (or ``text``) that follows an executed block with only
  blank lines or a ``<details><summary>output</summary>`` line between them is that block's
  shown output. It is compared with what the block printed: the text exactly (runs of
  spaces aside), and every number at the digits the page shows: the printed number,
  rounded to the shown digits, must be the shown number (no tolerance). A line ``...``
  stands for any number of lines.
- A comment of a Python statement that writes numbers in inline code (`` `0.4178` ``)
  shows values of that statement: each must be, at its digits, one of the numbers the
  statement displays or prints (for an assignment: the value assigned), in order.
- A number in the prose followed by ``<!-- = EXPR -->`` is checked against EXPR,
  evaluated in the page's namespace after the blocks above it, or at the end of the page
  when it names something defined further down (k numbers before the marker when EXPR
  gives k values). A line ``<!-- docs: table EXPR -->`` before a Markdown
  table checks the table against EXPR (a DataFrame or list of rows: a number or tuple of
  numbers per cell is compared at the shown digits, a string exactly, None not at all); a
  table right after a code block without that line fails.
- ``<!-- docs: generated NAME -->`` ... ``<!-- docs: end generated -->`` holds what
  ``docs/_hooks/generated.py`` produces for NAME (the benchmark tables, from the stored
  results in ``benchmarks/stored/``); the site's build fills it in the same way.
- A block preceded by ``<!-- docs: not-executed (reason) -->`` is not run (installation
  commands, a Dask cluster); the reason is required. Any other block that cannot run fails
  the test.
- With ``CROSSED_DOCS_UPDATE=1`` the shown outputs that differ are rewritten with what the
  code prints, and the checked prose and table numbers with the computed values at the
  digits the page shows (a shown output that still holds is left as it is).
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import shlex
import tokenize
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
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


def _comments(code: str) -> dict[int, str]:
    """Comment text by (1-based) line of a block's code."""
    found: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT:
                found[tok.start[0]] = tok.string
    except (tokenize.TokenError, IndentationError):  # pragma: no cover - ast parsed it
        pass
    return found


def _check_comment(comment: str, shown: str) -> str | None:
    """The numbers in a comment's inline code (`` `...` ``) against what its statement
    showed: each must round to one of the statement's numbers, in order (None when they
    do, else a message)."""
    wanted = [n for code in re.findall(r"`([^`]*)`", comment) for n in _PIECE.findall(code)]
    if not wanted:
        return None
    have = _PIECE.findall(shown)
    pos = 0
    for w in wanted:
        while pos < len(have) and not rounds_to(have[pos], w):
            pos += 1
        if pos == len(have):
            return f"the comment {comment.strip()!r} shows {w}, which is not in what the " \
                   f"statement shows:\n{shown[:2000]}"
        pos += 1
    return None


def _run_python(code: str, namespace: dict, filename: str,
                failures: list[str] | None = None) -> str:
    """Run a block like a notebook cell and return what it shows. A comment of a statement
    (on its lines, or on comment lines after it) with numbers in inline code is checked
    against what the statement shows: its displayed value (for an assignment, the value
    assigned) and what it printed."""
    tree = ast.parse(code, filename)
    src_lines = code.splitlines()
    comments = _comments(code)
    shown: list[str] = []
    out = io.StringIO()
    body = tree.body
    with contextlib.redirect_stdout(out):
        for n, node in enumerate(body):
            last_line = body[n + 1].lineno - 1 if n + 1 < len(body) else len(src_lines)
            own = [comments[k] for k in range(node.lineno, last_line + 1) if k in comments
                   and (k <= node.end_lineno or not src_lines[k - 1].split("#")[0].strip())]
            before = len(out.getvalue())
            value, stmt_out = None, None
            if isinstance(node, ast.Expr):
                last = src_lines[node.end_lineno - 1].split("#")[0].rstrip()
                value = eval(compile(ast.Expression(node.value), filename, "eval"), namespace)
                if _displayable(value) and not last.endswith(";"):
                    printed = out.getvalue()
                    if printed:
                        stmt_out = printed[before:]
                        shown.append(printed.rstrip("\n"))
                        out.seek(0)
                        out.truncate()
                    shown.append(repr(value))
            else:
                exec(compile(ast.Module([node], []), filename, "exec"), namespace)
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    with contextlib.suppress(Exception):
                        value = eval(ast.unparse(targets[0]), namespace)
            if failures is not None and any("`" in c for c in own):
                text = out.getvalue()[before:] if stmt_out is None else stmt_out
                text += "\n" + repr(value) if value is not None else ""
                for c in own:
                    if (msg := _check_comment(c, text)):
                        failures.append(f"{filename} (line {node.lineno} of the block): {msg}")
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
# A number as the docs write it: an optional sign (also U+2212), digits with an optional
# decimal point (thousands separated by commas allowed), an optional exponent.
NUMBER = re.compile(r"(?:(?<![\w.])[-+\u2212])?(?<![A-Za-z_.\d])(?<![A-Za-z_][-+\u2212])"
                    r"(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+(?:\.\d+)?|\.\d+)"
                    r"(?:[eE][-+\u2212]?\d+)?(?!\w|\.\d)")
# In printed output a number may be glued to text (``sys01``, ``lr1e-5``, ``(0.234–0.833)``):
# there every run of digits is a number and the text around it is compared exactly.
_PIECE = re.compile(r"[-+\u2212]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+\u2212]?\d+)?")


def _decimal(text: str) -> Decimal:
    return Decimal(text.replace("\u2212", "-").replace(",", "").lstrip("+"))


def _quantum(shown: str) -> Decimal:
    """One unit in the last digit ``shown`` writes (``0.545`` → 0.001, ``2.5e-09`` →
    1e-10, ``1,165`` → 1)."""
    return Decimal(1).scaleb(_decimal(shown).as_tuple().exponent)


def rounds_to(value: float | str | Decimal, shown: str) -> bool:
    """True when ``value`` rounded to the digits ``shown`` writes is ``shown``.

    ``value`` is the computed number (a float, or the text the code printed). The rule is
    strict: no tolerance, the value must round to the shown digits (a value exactly half a
    unit from two shown values, which a printed value can be, rounds either way). A shown
    value with more digits than the printed one must equal it."""
    want = _decimal(shown)
    if isinstance(value, str):
        got = _decimal(value)
    elif isinstance(value, Decimal):
        got = value
    else:
        if not math.isfinite(float(value)):
            return False
        got = Decimal(repr(float(value)))
    q = _quantum(shown)
    if got.as_tuple().exponent > q.as_tuple().exponent and not isinstance(value, float):
        return got == want                      # the page shows more digits than printed
    return want in (got.quantize(q, ROUND_HALF_EVEN), got.quantize(q, ROUND_HALF_UP))


def format_like(value: float, shown: str) -> str:
    """``value`` written with the digits, exponent style, sign character and thousands
    separators of ``shown`` (how ``CROSSED_DOCS_UPDATE`` rewrites a checked number)."""
    q = _quantum(shown)
    d = Decimal(repr(float(value))).quantize(q, ROUND_HALF_EVEN)
    m = re.match(r"([-+\u2212]?)([\d.,]+)(?:[eE]([-+\u2212]?)(\d+))?$", shown)
    if m and m.group(3) is not None:                       # scientific: keep the exponent
        exp = int(_decimal("1e" + m.group(3).replace("\u2212", "-") + m.group(4))
                  .as_tuple().exponent)
        decimals = len(m.group(2).split(".")[1]) if "." in m.group(2) else 0
        text = f"{float(value):.{decimals}e}"
        mant, e = text.split("e")
        if int(e) != exp:                              # the value moved to another decade
            exp = int(e)
        text = f"{float(mant):.{decimals}f}e{'-' if exp < 0 else '+' if '+' in shown else ''}" \
            f"{abs(exp):0{len(m.group(4))}d}"
        d_text = text
    else:
        decimals = max(0, -q.as_tuple().exponent)
        d_text = f"{abs(d):,.{decimals}f}" if "," in shown else f"{abs(d):.{decimals}f}"
        d_text = ("-" if d < 0 else "+" if shown.startswith("+") else "") + d_text
    if "\u2212" in shown or (shown.startswith("\u2212")):
        d_text = d_text.replace("-", "\u2212")
    elif "\u2212" not in shown and d_text.startswith("-") and "\u2212" in shown:
        d_text = "\u2212" + d_text[1:]
    return d_text


def numbers_in(text: str) -> list[str]:
    """The numbers a piece of prose or a table cell writes, in order."""
    return [m.group(0) for m in NUMBER.finditer(text)]


def _close(actual: str, expected: str) -> bool:
    """One whitespace-separated token of printed output against the page's: the text
    between numbers equal, each number of the page's the printed one at the page's digits."""
    if actual == expected:
        return True
    a_nums, e_nums = _PIECE.findall(actual), _PIECE.findall(expected)
    if len(a_nums) != len(e_nums) or _PIECE.split(actual) != _PIECE.split(expected):
        return False
    return all(rounds_to(a, e) for a, e in zip(a_nums, e_nums, strict=True))


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


# ------------------------------------------------------------------ prose and tables
CHECK = re.compile(r"(?<!`)<!--\s*=\s*(.+?)\s*-->")
TABLE = re.compile(r"^\s*<!--\s*docs:\s*table\s+(.+?)\s*-->\s*$")
GENERATED = re.compile(r"^\s*<!--\s*docs:\s*generated\s+([\w-]+)\s*-->\s*$")
GENERATED_END = re.compile(r"^\s*<!--\s*docs:\s*end generated\s*-->\s*$")


def _values(value) -> list:
    """A computed value as a flat list of numbers (a scalar, a sequence, a Series)."""
    if hasattr(value, "to_numpy"):          # a DataFrame or Series: its values, row by row
        value = value.to_numpy()
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _values(v)]
    return [value]


def _is_number(x) -> bool:
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool) or \
        type(x).__module__ == "numpy" and hasattr(x, "dtype") and x.dtype.kind in "iuf"


def _check_numbers(shown: list[tuple[int, int, int, str]], values: list, what: str,
                   failures: list[str], edits: list[tuple[int, int, int, str]] | None
                   ) -> None:
    """``shown``: (line, start, end, text) of the numbers the page writes; ``values``: the
    computed numbers, as many. Each shown number must be its value at the shown digits;
    ``edits`` collects the rewrites (``CROSSED_DOCS_UPDATE``)."""
    if len(shown) != len(values):
        failures.append(f"{what}: the page shows {len(shown)} numbers "
                        f"({', '.join(t for *_, t in shown)}), the computation gives "
                        f"{len(values)} ({values})")
        return
    for (line, start, end, text), v in zip(shown, values, strict=True):
        if not _is_number(v):
            failures.append(f"{what}: {v!r} is not a number (shown: {text})")
        elif not rounds_to(float(v), text):
            if edits is None:
                failures.append(f"{what}: shown {text}, computed {float(v)!r} "
                                f"({format_like(float(v), text)} at the shown digits)")
            else:
                edits.append((line, start, end, format_like(float(v), text)))


def _check_prose(lines: list[str], lo: int, hi: int, namespace: dict, where: str,
                 failures: list[str], edits: list | None,
                 deferred: list | None = None, back_lo: int | None = None) -> list[int]:
    """Numbers followed by ``<!-- = EXPR -->`` in lines[lo:hi]: EXPR is evaluated in the
    page's namespace (after the blocks above it) and gives the number before the marker,
    or k numbers for the k numbers before it (back to the previous marker, within the
    paragraph). A marker whose names are defined only further down (an introduction that
    quotes a result) goes to ``deferred``, evaluated when the page has run (``back_lo``: how
    far back its paragraph may reach then)."""
    checked = []
    for i in range(lo, hi):
        prev_end = 0
        for m in CHECK.finditer(lines[i]):
            checked.append(i)
            found = [(i, prev_end + n.start(), prev_end + n.end(), n.group(0))
                     for n in NUMBER.finditer(CHECK.sub(_blank, lines[i][prev_end:m.start()]))]
            back = i - 1
            while prev_end == 0 and back >= (lo if back_lo is None else back_lo) \
                    and lines[back].strip():
                text = lines[back]
                ends = [c.end() for c in CHECK.finditer(text)]
                start = ends[-1] if ends else 0
                found = [(back, start + n.start(), start + n.end(), n.group(0))
                         for n in NUMBER.finditer(text[start:])] + found
                if ends:
                    break
                back -= 1
            prev_end = m.end()
            try:
                vals = _values(eval(m.group(1), namespace))
            except NameError as exc:
                if deferred is None:
                    failures.append(f"{where}:{i + 1}: <!-- = {m.group(1)} --> failed: "
                                    f"NameError: {exc}")
                else:
                    deferred.append((i, i + 1, lo))
                continue
            except Exception as exc:
                failures.append(f"{where}:{i + 1}: <!-- = {m.group(1)} --> failed: "
                                f"{type(exc).__name__}: {exc}")
                continue
            _check_numbers(found[len(found) - len(vals):] if len(vals) <= len(found) else found,
                           vals, f"{where}:{i + 1} (<!-- = {m.group(1)} -->)", failures, edits)
    return checked


def _blank(m: re.Match) -> str:
    return " " * len(m.group(0))


def _cells(line: str) -> list[tuple[int, int]]:
    """(start, end) of each cell of a Markdown table row (``\\|`` does not split)."""
    bars = [m.start() for m in re.finditer(r"(?<!\\)\|", line)]
    return [(bars[k] + 1, bars[k + 1]) for k in range(len(bars) - 1)]


def _check_table(lines: list[str], at: int, expr: str, namespace: dict, where: str,
                 failures: list[str], edits: list | None) -> None:
    """The Markdown table after a ``<!-- docs: table EXPR -->`` line against EXPR: a
    DataFrame (or list of rows) with a row per body row and a column per column. A computed
    cell that is a number, or a tuple/list of numbers, gives the numbers the shown cell
    writes (at the shown digits); a string is the cell's text exactly; None is not
    compared."""
    i = at + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    start = i
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        i += 1
    body = list(range(start + 2, i))
    label = f"{where}:{at + 1} (table {expr})"
    if len(body) < 1:
        failures.append(f"{label}: no Markdown table follows")
        return
    try:
        value = eval(expr, namespace)
    except Exception as exc:
        failures.append(f"{label}: failed: {type(exc).__name__}: {exc}")
        return
    rows = [list(r) for r in value.itertuples(index=False)] if hasattr(value, "itertuples") \
        else [list(r) for r in value]
    if len(rows) != len(body):
        failures.append(f"{label}: {len(body)} rows shown, {len(rows)} computed")
        return
    for li, row in zip(body, rows, strict=True):
        cells = _cells(lines[li])
        if len(cells) != len(row):
            failures.append(f"{label}: line {li + 1} has {len(cells)} cells, the computed "
                            f"row {len(row)}")
            continue
        for (c0, c1), v in zip(cells, row, strict=True):
            text = lines[li][c0:c1]
            if v is None:
                continue
            if isinstance(v, str):
                if text.strip().replace("\\|", "|") != v:
                    failures.append(f"{label}: line {li + 1}: shown {text.strip()!r}, "
                                    f"computed {v!r}")
                continue
            found = [(li, c0 + n.start(), c0 + n.end(), n.group(0))
                     for n in NUMBER.finditer(text)]
            _check_numbers(found, _values(v), f"{label}: line {li + 1}", failures, edits)


def generated_regions(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, first line, end-marker line) of each ``<!-- docs: generated NAME -->`` ...
    ``<!-- docs: end generated -->`` region."""
    found = []
    for i, line in enumerate(lines):
        if (m := GENERATED.match(line)):
            j = next((k for k in range(i + 1, len(lines)) if GENERATED_END.match(lines[k])),
                     None)
            if j is None:
                raise ValueError(f"line {i + 1}: generated region without its end marker")
            found.append((m.group(1), i + 1, j))
    return found


def check_generated(path: Path, update: bool = False) -> list[str]:
    """Each generated region of a page holds what its generator (docs/_hooks/generated.py)
    produces now; with ``update`` the regions are rewritten."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "docs_generated", path.parent / "_hooks" / "generated.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)  # type: ignore[union-attr]
    lines = path.read_text().splitlines()
    failures = []
    new = list(lines)
    for name, lo, hi in reversed(generated_regions(lines)):
        want = gen.generate(name).strip("\n").splitlines()
        have = [ln for ln in lines[lo:hi]]
        while have and not have[0].strip():
            have.pop(0)
        while have and not have[-1].strip():
            have.pop()
        if have != want:
            if update:
                new[lo:hi] = ["", *want, ""]
            else:
                failures.append(f"{path.name}:{lo}: the generated region {name!r} is not what "
                                f"docs/_hooks/generated.py produces (CROSSED_DOCS_UPDATE=1 "
                                f"rewrites it):\n" + "\n".join(want))
    if update and new != lines:
        path.write_text("\n".join(new) + "\n")
    return failures


# ------------------------------------------------------------------ a page
def run_page(path: Path, update: bool = False) -> PageRun:
    """Run every block of ``path`` and check every number it shows: the outputs, the
    commented values, the prose numbers marked ``<!-- = EXPR -->`` and the tables marked
    ``<!-- docs: table EXPR -->`` (each evaluated after the blocks above it). With
    ``update``, rewrite them with what the code gives, at the digits the page shows."""
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
    edits: list | None = [] if update else None

    deferred: list[tuple[int, int, int]] = []

    def prose(lo: int, hi: int) -> None:
        run.compared += len(_check_prose(lines, lo, hi, namespace, path.name, run.failures,
                                         edits, deferred))
        for i in range(lo, hi):
            if (m := TABLE.match(lines[i])):
                run.compared += 1
                _check_table(lines, i, m.group(1), namespace, path.name, run.failures, edits)

    for b in blocks:       # a table of results right after a block must say where it comes from
        j = b.end + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if (b.lang in EXECUTED or b.output_of is not None) and j < len(lines) \
                and lines[j].lstrip().startswith("|"):
            run.failures.append(f"{path.name}:{j + 1}: a Markdown table right after a code "
                                f"block shows results: precede it with "
                                f"<!-- docs: table EXPR --> (EXPR computing its rows)")
    prose_from = 0
    for idx, b in enumerate(blocks):
        where = f"{path.name}:{b.start + 1}"
        prose(prose_from, b.start)
        prose_from = b.end + 1
        if b.lang in EXECUTED:
            if b.marker and b.marker[0] == "not-executed":
                if not b.marker[1]:
                    run.failures.append(f"{where}: not-executed needs a reason")
                run.not_executed.append((b.start + 1, b.marker[1]))
                continue
            try:
                if b.lang == "python":
                    printed[idx] = _run_python(b.code, namespace, where, run.failures)
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
    prose(prose_from, len(lines))
    for lo, hi, back_lo in deferred:   # markers that name what the page defines further down
        _check_prose(lines, lo, hi, namespace, path.name, run.failures, edits, back_lo=back_lo)
    if update:
        new = list(lines)
        for line, start, end, text in sorted(set(edits or []), reverse=True):
            new[line] = new[line][:start] + text + new[line][end:]
        for b in reversed(blocks):
            if b.output_of is not None and printed.get(b.output_of) is not None:
                indent = FENCE.match(lines[b.start]).group(1)  # type: ignore[union-attr]
                body = [indent + ln if ln else ln
                        for ln in printed[b.output_of].splitlines()]
                if compare_output(printed[b.output_of], b.code) is None:
                    continue      # the shown output holds: keep its digits and its `...`
                new[b.start + 1:b.end] = [ln.rstrip() for ln in body]
        path.write_text("\n".join(new) + "\n")
    return run
