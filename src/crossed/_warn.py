"""One way to warn: at the user's line, whatever depth inside crossed the warning comes from.

``warnings.warn(..., stacklevel=k)`` needs ``k`` to be the number of crossed frames between
the warning site and the user's code, which differs by call path (``cx.lmer``, ``fit.refit``,
the CLI, a simulation loop). :func:`warn` walks the stack instead: it attributes the warning
to the first frame outside the crossed package, so that the warning's filename and line
are the caller's, ``python -W`` and ``warnings.filterwarnings(module=...)`` filters match
the caller's module, and the "default" action reports it once per user line.
"""

from __future__ import annotations

import sys
import warnings
from types import FrameType

__all__ = ["user_frame", "warn"]

_PACKAGE = __name__.partition(".")[0]  # "crossed"


def _in_package(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == _PACKAGE or name.startswith(_PACKAGE + ".")


def user_frame() -> FrameType | None:
    """The innermost frame of the current stack outside the crossed package (None when
    every frame is crossed's)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _in_package(frame):
        frame = frame.f_back
    return frame


def warn(message: str | Warning, category: type[Warning] = UserWarning) -> None:
    """Issue a warning attributed to the user's code (the first frame outside crossed).

    The warning goes through the :mod:`warnings` machinery as ``warnings.warn`` would
    send it from that frame: filters (by category, message or module), the once-per-
    location registry, ``catch_warnings(record=True)`` and ``pytest.warns`` all apply.

    Parameters
    ----------
    message : str or Warning
        The text, or a warning instance (then its class is the category, as in
        :func:`warnings.warn`).
    category : type of Warning
        Default ``UserWarning``.
    """
    frame = user_frame()
    if frame is None:  # called from crossed's own entry point (python -m crossed...)
        warnings.warn(message, category, stacklevel=2)
        return
    # what warnings.warn does from that frame (without module_globals: as warnings.warn,
    # the source line is read from the file, never through the module's loader)
    module_globals = frame.f_globals
    warnings.warn_explicit(
        message, category, frame.f_code.co_filename, frame.f_lineno,
        module=module_globals.get("__name__", "<string>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
    )
