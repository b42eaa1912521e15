"""`python -m broker server.properties [--override key=value]...`: run one broker.

SIGTERM or SIGINT starts a controlled shutdown; the process exits 0 once it is done.
A bad configuration is a clear message and exit code 1 before anything starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import tracemalloc
from pathlib import Path
from types import FrameType

from broker.config import ConfigError, load_broker_config
from broker.server import (
    KafkaServer,
    limit_malloc_arenas,
    set_gc_thresholds,
    set_switch_interval,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run one broker.")
    parser.add_argument("config", help="server.properties with Kafka's key names")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="overrides a key of the file",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    args = parser.parse_args(argv)
    set_gc_thresholds()
    set_switch_interval()
    limit_malloc_arenas()
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        config = load_broker_config(args.config, args.override)
    except ConfigError as e:
        print(f"broker: invalid configuration in {args.config}:\n{e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"broker: cannot read {args.config}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        server = KafkaServer(config)
    except ValueError as e:
        print(f"broker: {e}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if os.environ.get("ZKCTL_TRACEMALLOC"):
        _trace_memory(Path(config.log_dirs[0]) if config.log_dirs else Path.cwd())
    try:
        server.startup()
    except Exception as e:
        logging.getLogger(__name__).exception("start-up failed")
        print(f"broker {server.broker_id}: start-up failed: {e}", file=sys.stderr)
        server.shutdown()
        return 1
    while not stop.wait(1.0):
        pass
    return 0 if server.shutdown() else 1


def _trace_memory(directory: Path) -> None:
    """Diagnostics: trace allocations; SIGUSR1 writes the top sites to memory-top.txt."""
    tracemalloc.start(1)

    def dump(_signum: int, _frame: FrameType | None) -> None:
        stats = tracemalloc.take_snapshot().statistics("lineno")
        total = sum(s.size for s in stats)
        lines = [f"traced: {total / 2**20:.1f} MiB in {len(stats)} sites"]
        lines += [f"{s.size / 2**20:8.1f} MiB {s.count:9d}  {s.traceback}" for s in stats[:40]]
        (directory / "memory-top.txt").write_text("\n".join(lines) + "\n")

    signal.signal(signal.SIGUSR1, dump)


if __name__ == "__main__":
    sys.exit(main())
