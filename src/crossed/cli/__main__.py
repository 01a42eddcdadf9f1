import sys

from crossed.cli import main

__all__: list[str] = []

sys.exit(main())
