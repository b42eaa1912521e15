"""Without a terminal (or with --plain): the timeline as plain lines, one per event.

    12:00:07.412  zk    broker 3 elected controller, epoch 6 after 4.1 s without a controller
    12:00:07.530  demo  broker 3 took over as controller, epoch 6, 4.2 s after the SIGKILL
    12:00:08.002  log   broker 2 resigned as controller of epoch 5 (session expired)

The second column says where a line comes from: a ZooKeeper watch, the demo's own
actions, or a broker's state-change log.
"""

from __future__ import annotations

import bisect
import errno
import os
import select
import stat
import threading
import time
from collections.abc import Callable
from typing import TextIO

from watch.model import Event, event_time
from watch.screen import format_event
from watch.session import Watcher

Write = Callable[[str], None]


def write_events(events: list[Event], write: Write) -> None:
    for event in events:
        write(format_event(event))


# Lines are held this long and printed in time order: a broker's state-change log is read
# five times a second, so its lines come in up to 0.2 s after they were written, when what
# ZooKeeper showed next may already be in.
HOLD_S = 0.5


def _reader_gone_poll(stdout: TextIO | None) -> select.poll | None:
    """A poll that sees the reader of `stdout` go away, where `stdout` is a pipe: on a
    quiet cluster no line is written for minutes, and a write is what raises
    BrokenPipeError (`zkctl watch | head` would hold its ZooKeeper session until the next
    event). None for a terminal or a file, which have no reader to lose."""
    if stdout is None:
        return None
    try:
        fd = stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
    except (OSError, ValueError):  # no file behind it (a test's capture), or closed
        return None
    poll = select.poll()
    poll.register(fd, select.POLLERR | select.POLLHUP)  # the write end of a pipe: POLLERR
    return poll


def run(
    watcher: Watcher,
    write: Write,
    *,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
    clock: Callable[[], float] = time.time,
    stdout: TextIO | None = None,
) -> None:
    """Print events in time order, each about HOLD_S after it happened, until `stop` is set
    or `duration_s` has passed; then what is still held. BrokenPipeError once the reader of
    `stdout` (what `write` writes to), a pipe, has gone, even with no line to write."""
    reader_gone = _reader_gone_poll(stdout)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    held: list[Event] = []

    def release(until: float | None) -> None:
        held.sort(key=event_time)  # stable: events of one moment keep their order
        n = len(held) if until is None else bisect.bisect_right(held, until, key=event_time)
        ready = held[:n]
        del held[:n]
        write_events(ready, write)

    while not (stop is not None and stop.is_set()):
        if reader_gone is not None and reader_gone.poll(0):
            raise BrokenPipeError(errno.EPIPE, "the reader of stdout went away")
        wait = 0.25
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                break
        held.extend(watcher.pump(wait))
        release(clock() - HOLD_S)
    held.extend(watcher.pump(0))
    release(None)
