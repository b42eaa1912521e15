"""``python -m zkctl``: the same as the ``zkctl`` console script."""

import sys

from zkctl.cli import main

sys.exit(main())
