"""``python -m zkctl``: the same as the ``zkctl`` console script."""

import sys

from zkctl.entry import run

sys.exit(run())
