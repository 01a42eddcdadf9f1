"""Command-line interface: a thin layer over the public API.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (called with the parsed arguments, returning an exit code).

Every failure ends the command with one line on stderr, ``crossed: error: <message>``
(plain text, no ANSI escape codes), and exit code 2; warnings are one line each,
``crossed: note: <message>``; bad input (a missing or unreadable
file, a malformed formula, an unknown column, ...) is described as such. Anything else is
a bug in crossed: its line says so, and ``--debug`` (or ``CROSSED_DEBUG=1`` in the
environment) prints the traceback as well.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
import warnings
from typing import Any

__all__ = ["EXIT_ERROR", "build_parser", "describe_error", "main", "plain_message"]

_COMMAND_MODULES = (
    "crossed.cli.fit",
    "crossed.cli.resample",
    "crossed.cli.anova",
    "crossed.cli.emmeans",
    "crossed.cli.specs",
    "crossed.cli.report",
    "crossed.cli.headroom",
    "crossed.cli.select_random",
    "crossed.cli.all_fit",
    "crossed.cli.engines",
)

#: Exit code of every failure (argparse's for bad arguments, too).
EXIT_ERROR = 2

# CSI sequences (colours, cursor moves) and the other two-character escapes
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line too (the usage is in ``--help``)."""

    def error(self, message: str):
        print(f"crossed: error: {plain_message(message)}; see '{self.prog} --help'",
              file=sys.stderr)
        sys.exit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    """The ``crossed`` argument parser with every registered sub-command."""
    parser = _Parser(
        prog="crossed", description="Mixed-effects analysis of evaluation results.",
        epilog="Errors end with one line 'crossed: error: ...' and exit code 2; --debug or "
               "CROSSED_DEBUG=1 also prints the traceback.")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error (also: CROSSED_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def plain_message(text: str) -> str:
    """One line of plain text: ANSI escape codes removed, lines and spaces joined."""
    return " ".join(_ANSI.sub("", str(text)).split())


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that describe bad input (data, formula, arguments, files) or resources."""
    errors: list[type[BaseException]] = [ValueError, KeyError, OSError, SyntaxError,
                                         ImportError, MemoryError]
    try:
        from formulaic.errors import FormulaicError
    except ImportError:  # pragma: no cover - formulaic is a dependency
        pass
    else:
        errors.append(FormulaicError)
    return tuple(errors)


def describe_error(exc: BaseException) -> str:
    """The message of an input error, as one line of plain text."""
    if isinstance(exc, SyntaxError):
        text = f": {exc.text.strip()!r}" if exc.text and exc.text.strip() else ""
        return plain_message(f"invalid expression in the formula{text} ({exc.msg})")
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return plain_message(f"not found: {exc.args[0]!r}")
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return plain_message(f"{where}: {exc.strerror}" if where != "" else exc.strerror)
    if isinstance(exc, ImportError) and not str(exc):
        return plain_message(f"a required module is missing ({exc.name})")
    return plain_message(str(exc) or type(exc).__name__)


def _debugging(argv: list[str] | None) -> bool:
    args = sys.argv[1:] if argv is None else argv
    return os.environ.get("CROSSED_DEBUG", "") not in ("", "0") or "--debug" in args


def _quiet_stdout() -> None:
    """After a broken pipe (``crossed ... | head``): send the rest of stdout nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. captured)
        pass


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one plain line, ``crossed: note: <message>`` (no source line, no
    category; a message's own ``NOTE:`` prefix is not repeated)."""
    from crossed.cli._tables import note_text

    return f"crossed: note: {note_text(plain_message(str(message)))}\n"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code (0, or 2 after an error).

    argparse's own usage errors and ``--help`` still raise ``SystemExit`` (code 2 and 0).
    """
    debug = _debugging(argv)
    saved = warnings.formatwarning       # (catch_warnings does not restore this one)
    if not debug:                        # only the printed text: recording is unchanged
        warnings.formatwarning = _format_warning
    try:
        return _main(argv, debug)
    finally:
        warnings.formatwarning = saved


# control characters that a terminal would act on (colours, cursor moves, bells, title
# changes): those in data (level or column names) are shown escaped, as Python writes them
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0b, 0x20),
                                       *range(0x7f, 0xa0))}


class _TerminalText:
    """``sys.stdout`` for a terminal: text written through it has its control characters
    escaped (``\\x1b`` for ESC), so that a level name holding an escape sequence cannot
    recolour, move or retitle the user's terminal. Everything else is the stream's."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text.translate(_CONTROLS))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _terminal_stdout() -> Any:
    """The stream to print to: :class:`_TerminalText` around a terminal's stdout (output
    piped to a file or another program is left byte for byte as written)."""
    stream = sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return _TerminalText(stream) if tty else stream


def _main(argv: list[str] | None, debug: bool) -> int:
    saved = sys.stdout
    sys.stdout = _terminal_stdout()
    try:
        return _run(argv, debug)
    finally:
        sys.stdout = saved


def _run(argv: list[str] | None, debug: bool) -> int:
    try:
        args = build_parser().parse_args(argv)
        code = int(args.func(args) or 0)
        try:
            sys.stdout.flush()               # a full disk or closed pipe shows up here
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write the output: {exc.strerror}") from None
        return code
    except KeyboardInterrupt:
        print("crossed: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_ERROR
    except Exception as exc:
        if debug:
            traceback.print_exc(file=sys.stderr)
        if isinstance(exc, _user_errors()):
            message = describe_error(exc)
        else:
            message = plain_message(
                f"internal error ({type(exc).__name__}: {exc}); this is a bug in crossed, "
                "please report it" + ("" if debug else " with the traceback that "
                                                       "--debug or CROSSED_DEBUG=1 prints"))
        print(f"crossed: error: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
