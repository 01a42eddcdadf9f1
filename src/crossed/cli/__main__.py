import sys

from crossed.cli import main

sys.exit(main())
