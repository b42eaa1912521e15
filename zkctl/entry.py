"""The ``zkctl`` console script's entry point (and ``python -m zkctl``'s): it imports the
command line's modules itself, so that a Ctrl-C while they load (about half a second on
a slow machine) ends as one later does, one line and exit 130, not in a traceback."""

from __future__ import annotations

import importlib
import sys


def run() -> int:
    try:
        cli = importlib.import_module("zkctl.cli")
    except KeyboardInterrupt:
        try:
            sys.stderr.write("zkctl: interrupted\n")
            sys.stderr.flush()
        except OSError:  # a terminal that hung up takes no line
            pass
        return 130
    return int(cli.main())
