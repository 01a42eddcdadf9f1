"""``python -m crossed``: the command line (:func:`crossed.cli.main`), as ``crossed``."""

import sys

from crossed.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
