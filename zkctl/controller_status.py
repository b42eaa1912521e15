"""`zkctl controller`'s reading of the controller's status file, for a person.

The broker rewrites `broker-status.json` every second (broker/server.py's status(), with
the controller's metrics() inside). `--json` gives that document whole; this says what it
means in a few lines: whether the broker is acting as controller and in which epoch, its
event queue, its requests to brokers, and what its last failover cost. The file is read
from disk, so every field is checked before use: a missing or odd one is left out, never
a traceback.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any


def _plain(value: object) -> str:
    """A value from the file on one line: a string as it is when printable, else quoted."""
    if isinstance(value, str) and value.isprintable():
        return value
    return repr(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _clock(seconds: float) -> str | None:
    """A Unix time as the local time of day; None for one the platform cannot convert."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        return None


def _ms(value: object) -> str:
    ms = _number(value)
    if ms is None:
        return "?"
    return f"{ms:.1f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _count(value: object) -> str:
    n = _number(value)
    return "?" if n is None else f"{int(n):,}"


def _counted(value: object, noun: str) -> str:
    """The count with its noun: singular for one alone ("1 broker", "0 partitions")."""
    n = _number(value)
    one = n is not None and int(n) == 1
    return f"{_count(value)} {noun}{'' if one else 's'}"


def _timings(stats: object) -> str | None:
    """p50/p99/max of an event timing snapshot (controller/events.py's QueueTimeStats)."""
    if not isinstance(stats, Mapping) or not _number(stats.get("count")):
        return None
    count, recent = _number(stats.get("count")), _number(stats.get("recent"))
    # The percentiles are of the events the controller keeps (the last 4,096), the max of all.
    of = (
        f"the last {_count(recent)} of {_counted(count, 'event')}"
        if recent is not None and count is not None and recent < count
        else _counted(count, "event")
    )
    return (
        f"p50 {_ms(stats.get('p50_ms'))}, p99 {_ms(stats.get('p99_ms'))} ({of}), "
        f"max {_ms(stats.get('max_ms'))}"
    )


def _controller_lines(c: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    if c.get("active") is True:
        partitions = _counted(c.get("partitions"), "partition")
        offline = _number(c.get("offline_partitions"))
        if offline is not None:
            partitions += f" ({_count(offline)} offline)"
        lines.append(
            f"Acting as controller in epoch {_plain(c.get('controller_epoch'))}: {partitions}"
        )
    else:
        active_id = c.get("active_controller_id")
        if isinstance(active_id, int) and active_id == c.get("broker_id"):
            # Elected, its failover (loading the cluster) not done yet: not active.
            lines.append("Taking over as controller: its failover is under way")
        else:
            who = f"broker {active_id}" if isinstance(active_id, int) else "none known"
            lines.append(f"Not acting as controller (the controller it knows of: {who})")
    waiting = c.get("event_queue_size")
    current = c.get("current_event")
    lines.append(
        f"Events waiting: {_count(waiting)}; "
        f"{'working on ' + _plain(current) if isinstance(current, str) and current else 'idle'}"
    )
    queued = _timings(c.get("event_queue_time_ms"))
    if queued is not None:
        lines.append(f"Time an event waited: {queued}")
    processed = _timings(c.get("event_process_time_ms"))
    if processed is not None:
        lines.append(f"Time an event took: {processed}")
    channel = c.get("channel_queue_sizes")
    if isinstance(channel, Mapping) and channel:
        # JSON made the broker ids strings: in numeric order all the same.
        ids = sorted(channel, key=lambda b: (len(str(b)), str(b)))
        by_broker = ", ".join(f"broker {_plain(b)}: {_count(channel[b])}" for b in ids)
        superseded = _number(c.get("channel_update_metadata_superseded"))
        dropped = (
            f"; {_count(superseded)} UpdateMetadata dropped as superseded" if superseded else ""
        )
        lines.append(f"Requests waiting to be sent: {by_broker}{dropped}")
    sent_after = c.get("channel_queue_time_ms")
    if isinstance(sent_after, Mapping):
        ids = sorted(sent_after, key=lambda b: (len(str(b)), str(b)))
        timed = [
            f"broker {_plain(b)}: p99 {_ms(t.get('p99_ms'))}, max {_ms(t.get('max_ms'))}"
            for b in ids
            if isinstance(t := sent_after[b], Mapping) and _number(t.get("count"))
        ]
        if timed:
            lines.append(f"Time a request waited to be sent: {'; '.join(timed)}")
    failovers = _number(c.get("failovers"))
    if failovers is not None:
        line = (
            f"Failovers: {_count(failovers)}, resignations: {_count(c.get('resignations'))}, "
            f"unclean elections: {_count(c.get('unclean_elections'))}"
        )
        lines.append(line)
    last = c.get("last_failover")
    if failovers and isinstance(last, Mapping) and _number(last.get("total_ms")) is not None:
        when = _number(last.get("elected_at"))
        clock = _clock(when) if when else None
        at = f" at {clock}" if clock else ""
        lines.append(
            f"Last failover{at}: {_ms(last.get('total_ms'))} for "
            f"{_counted(last.get('partitions'), 'partition')} and "
            f"{_counted(last.get('brokers'), 'broker')} "
            f"(context loaded after {_ms(last.get('load_ms'))}, UpdateMetadata "
            f"queued after {_ms(last.get('update_metadata_ms'))})"
        )
    return lines


def failed_log_dirs(status: Mapping[str, Any]) -> str | None:
    """What a broker's status document says of its failed log directories (KIP-112), or
    None when none failed."""
    dirs = status.get("offline_log_dirs")
    if not isinstance(dirs, list) or not dirs:
        return None
    offline = _number(status.get("offline_partitions"))
    held = (
        f"{_count(offline)} of its partitions offline until it restarts"
        if offline is not None
        else "its partitions there offline until it restarts"
    )
    return f"log directories failed: {', '.join(_plain(d) for d in dirs)} ({held})"


def _broker_line(status: Mapping[str, Any], now: float) -> str:
    parts = [
        f"broker epoch {_plain(status.get('broker_epoch'))}",
        f"pid {_plain(status.get('pid'))}",
    ]
    started = _number(status.get("started_at"))
    if started is not None:
        parts.append(f"up {max(0.0, now - started):.0f} s")
    connected = status.get("zookeeper_connected")
    if isinstance(connected, bool):
        parts.append("ZooKeeper connected" if connected else "ZooKeeper NOT connected")
    restarts = status.get("zookeeper_connection_restarts")
    if _number(restarts):
        parts.append(
            f"its ZooKeeper connection started again {_counted(restarts, 'time')} after an error"
        )
    replicas, leaders = _number(status.get("partitions")), _number(status.get("leaders"))
    if replicas is not None:
        hosted = f"hosts {_counted(replicas, 'replica')}"
        if leaders is not None:
            hosted += f", leads {_count(leaders)}"
        parts.append(hosted)
    served = _number(status.get("requests_handled"))
    if served is not None:
        parts.append(f"{_counted(served, 'request')} served")
    failed = failed_log_dirs(status)
    if failed is not None:
        parts.append(failed)
    return "Broker: " + "; ".join(parts)


def describe(status: Mapping[str, Any], now: float | None = None) -> list[str]:
    """What a broker's status document says about it as controller, one line each."""
    now = time.time() if now is None else now
    lines: list[str] = []
    controller = status.get("controller")
    if isinstance(controller, Mapping):
        lines += _controller_lines(controller)
    else:
        lines.append("No controller metrics in it")
    lines.append(_broker_line(status, now))
    return lines
