"""Files the CLI commands write: checked before any work is done, written with clear errors."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["check_output", "check_output_dir", "write_output"]


def check_output(path: str | Path, option: str = "-o") -> Path:
    """Refuse an output file that cannot be written, before any work is done.

    Parameters
    ----------
    path : str or Path
        The file a command will write.
    option : str
        The option that named it (for the message).

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        ``path`` is a directory, its directory does not exist, or it cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{option} {str(path)!r}: the directory {str(parent)!r} does not "
                         "exist")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise ValueError(f"{option} {str(path)!r}: permission denied")
    return path


def check_output_dir(path: str | Path, option: str) -> Path:
    """Refuse an output directory that is a file or cannot be created or written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a file, not a directory")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir() and not os.access(existing, os.W_OK):
        raise ValueError(f"{option} {str(path)!r}: permission denied")
    if not existing.is_dir():
        raise ValueError(f"{option} {str(path)!r}: {str(existing)!r} is not a directory")
    return path


def write_output(path: str | Path, write: Callable[[Path], object],
                 option: str = "-o") -> Path:
    """Call ``write(path)``; an operating-system error (a full disk, say) becomes a
    ValueError naming the file."""
    path = Path(path)
    try:
        write(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ValueError(f"cannot write {option} {str(path)!r}: {reason}") from None
    return path
