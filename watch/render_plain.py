"""Without a terminal (or with --plain): the timeline as plain lines, one per event.

    12:00:07.412  zk    broker 3 elected controller, epoch 6 after 4.1 s without a controller
    12:00:07.530  demo  broker 3 took over as controller, epoch 6, 4.2 s after the SIGKILL
    12:00:08.002  log   broker 2 resigned as controller of epoch 5 (session expired)

The second column says where a line comes from: a ZooKeeper watch, the demo's own
actions, or a broker's state-change log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from watch.model import Event
from watch.screen import format_event
from watch.session import Watcher

Write = Callable[[str], None]


def write_events(events: list[Event], write: Write) -> None:
    for event in events:
        write(format_event(event))


def run(
    watcher: Watcher,
    write: Write,
    *,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
) -> None:
    """Print events as they come until `stop` is set or `duration_s` has passed."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    while not (stop is not None and stop.is_set()):
        wait = 0.25
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                break
        write_events(watcher.pump(wait), write)
    write_events(watcher.pump(0), write)
