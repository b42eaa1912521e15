"""`zkctl report` at scale: events per second of the whole report (Spark, local mode) over
generated state-change logs of 1M and 10M events, against a floor measured in the same run:
a plain single-process Python reading of the same files (counting lines and parsing each
line's JSON), which any analysis of these logs has to do at least.

    .venv/bin/python benchmarks/report.py [--events 1000000,10000000] [--partitions 2000]
        [--brokers 5] [--master local[*]] [--conf spark.KEY=VALUE]... [--keep DIR]

The whole report is what `zkctl report` does, end to end: start Spark, read and classify
every line, analyse, write the Parquet tables, summary.json and report.html, and stop Spark.
Logs come from `pipeline.generate` (the controller's own decision code, in simulated time);
generating them is not timed against anything. Prints one JSON object: per size, events/s
of the report and of the floor, their ratio, where the report's time went (by its progress
stages), and a check that the report read every line and found the generator's incidents
(a size failing it stops the benchmark with an error: its events/s would be no figure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, sizes

from pipeline import generate, inputs, job


def python_floor(files: list[str]) -> tuple[float, int]:
    """Read every file line by line and parse each line's JSON, in this one process;
    returns (seconds, lines)."""
    loads = json.loads
    lines = 0
    started = time.perf_counter()
    for name in files:
        with open(name, "rb") as f:
            for line in f:
                loads(line)
                lines += 1
    return time.perf_counter() - started, lines


def one_size(events: int, a: argparse.Namespace, root: Path) -> dict[str, Any]:
    logs, out = root / f"logs-{events}", root / f"report-{events}"
    started = time.perf_counter()
    generate_s: float | None = None
    if a.keep is not None and (logs / "truth.json").exists():  # kept from an earlier run
        truth = json.loads((logs / "truth.json").read_text())
    else:
        truth = generate.generate(
            generate.Options(
                brokers=a.brokers,
                partitions=a.partitions,
                failovers=10**9,  # until target_lines
                target_lines=events,
                out=logs,
                seed=1,
            )
        )
        generate_s = round(time.perf_counter() - started, 1)
    source = inputs.resolve(inputs.LogSource("bench", str(logs)))
    files = list(source.files)

    floor_s, floor_lines = python_floor(files)

    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    report = job.run(
        job.ReportOptions(
            sources=[inputs.LogSource("bench", str(logs))],
            out=str(out),
            master=a.master,
            conf=dict(a.conf),
        ),
        lambda text: marks.append((time.perf_counter() - t0, text)),
    )
    report_s = time.perf_counter() - t0
    stages: dict[str, float] = {}
    for (t, text), (t_next, _) in zip(marks, [*marks[1:], (report_s, "")], strict=True):
        stages[text.split(" (")[0][:60]] = round(t_next - t, 2)
    summary = report.summary
    lines = truth["total_lines"]
    found = sum(c["incidents"]["total"] for c in summary["clusters"].values())
    result = {
        "events": lines,
        "bytes": source.bytes,
        "files": len(files),
        "incidents": len(truth["incidents"]),
        "report_s": round(report_s, 2),
        "report_events_per_s": round(lines / report_s),
        "floor_s": round(floor_s, 2),
        "floor_events_per_s": round(floor_lines / floor_s),
        "report_over_floor": round(report_s / floor_s, 2),
        "stages_s": stages,
        "generate_s": generate_s,  # null: logs kept from an earlier run
        "check": {
            "every_line_ok": summary["lines"]["ok"] == lines == floor_lines,
            "incidents_found": found,
            "incidents_match": found == len(truth["incidents"]),
        },
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    if a.keep is None:
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    if not (result["check"]["every_line_ok"] and result["check"]["incidents_match"]):
        # A report that missed lines or incidents did less than the work timed: its
        # events/s is no figure.
        raise RuntimeError(f"the report of {lines} events failed its check: {result['check']}")
    return result


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r} is not spark.KEY=VALUE")
    return key, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--events", type=sizes, default="1000000,10000000", help="sizes, comma-separated"
    )
    parser.add_argument("--partitions", type=at_least(1), default=2000)
    parser.add_argument("--brokers", type=at_least(1), default=5)
    parser.add_argument("--master", default=job.DEFAULT_MASTER)
    parser.add_argument("--conf", type=_conf, action="append", default=[])
    parser.add_argument(
        "--keep", type=Path, default=None, help="write logs and reports here (reuse logs there)"
    )
    a = parser.parse_args()

    root = a.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    root.mkdir(parents=True, exist_ok=True)
    runs = []
    try:
        for events in a.events:
            runs.append(one_size(events, a, root))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)  # progress, per size
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    import pyspark

    print(
        json.dumps(
            {
                "benchmark": "zkctl report (whole report, Spark local mode) over generated"
                " state-change logs; floor: one Python process counting lines and parsing"
                " their JSON",
                "runs": runs,
                "brokers": a.brokers,
                "partitions": a.partitions,
                "master": a.master,
                "conf": dict(a.conf),
                "cores": os.cpu_count(),
                "spark": pyspark.__version__,
                "python": platform.python_version(),
            },
            indent=1,
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
