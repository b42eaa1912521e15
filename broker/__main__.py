"""`python -m broker server.properties [--override key=value]...`: run one broker.

SIGTERM, SIGINT or SIGHUP (its terminal closed, its ssh session dropped) starts a
controlled shutdown; the process exits 0 once it is done. SIGHUP ignored at start (nohup)
stays ignored.
A bad configuration is a clear message and exit code 1 before anything starts.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

# Set by a stop signal (stop_signals): stop (a controlled shutdown once started).
_stop = threading.Event()
_signals: list[int] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _signals.append(signum)
    _stop.set()


def stop_signals(*, hup_ignored: bool) -> tuple[signal.Signals, ...]:
    """The signals that stop the broker cleanly. SIGHUP is one, as for Kafka (the JVM runs
    its shutdown hook on HUP): left to its default action it killed the broker at once,
    with no controlled shutdown nor clean-shutdown marker. Unless it was ignored at start:
    nohup's broker must outlive its terminal."""
    if hup_ignored:
        return (signal.SIGTERM, signal.SIGINT)
    return (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _catch_stop_signals() -> None:
    hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    for signum in stop_signals(hup_ignored=hup_ignored):
        signal.signal(signum, _on_signal)


if __name__ == "__main__":
    # Before the imports below, which take a third of a second: a SIGTERM while the
    # broker is still starting is a stop like any other (it shuts down once started, and
    # exits 0), not death by the signal's default action.
    _catch_stop_signals()

import argparse  # noqa: E402  (after the signal handlers, on purpose)
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

from broker.config import ConfigError, load_broker_config  # noqa: E402
from broker.server import (  # noqa: E402
    KafkaServer,
    limit_malloc_arenas,
    set_gc_thresholds,
    set_switch_interval,
)
from election.registration import RegistrationCancelled  # noqa: E402
from storage.errors import LogDirLockedError  # noqa: E402
from zkdata.client import CancelledWhileDisconnected  # noqa: E402


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
        server = KafkaServer(config, stop_requested=_stop)
    except CancelledWhileDisconnected as e:
        # Asked to stop while establishing its id with ZooKeeper out of reach: nothing
        # was registered or served.
        logging.getLogger(__name__).info("stopped while starting: %s", e)
        return 0
    except (ValueError, LogDirLockedError) as e:
        # LogDirLockedError: another broker runs on these log directories; nothing of
        # theirs was touched.
        print(f"broker: {e}", file=sys.stderr)
        return 1
    _catch_stop_signals()
    if _signals:
        # Nothing registered or served yet: nothing to move away.
        logging.getLogger(__name__).info(
            "received %s before starting: not starting", signal.Signals(_signals[0]).name
        )
        return 0 if server.shutdown() else 1
    if os.environ.get("ZKCTL_TRACEMALLOC"):
        _trace_memory(Path(config.log_dirs[0]) if config.log_dirs else Path.cwd())
    try:
        server.startup()
    except (RegistrationCancelled, CancelledWhileDisconnected) as e:
        logging.getLogger(__name__).info("stopped while starting: %s", e)
        return 0 if server.shutdown() else 1
    except Exception as e:
        logging.getLogger(__name__).exception("start-up failed")
        print(f"broker {server.broker_id}: start-up failed: {e}", file=sys.stderr)
        server.shutdown()
        return 1
    while not _stop.wait(1.0):
        pass
    logging.getLogger(__name__).info("received %s", signal.Signals(_signals[-1]).name)
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
