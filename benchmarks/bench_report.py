"""The report benchmark under the `bench_*` name the other benchmarks use; it is
benchmarks/report.py (same arguments, same output).

    .venv/bin/python benchmarks/bench_report.py [--events 1000000,10000000] ...
"""

from __future__ import annotations

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).with_name("report.py")), run_name="__main__")
