"""A watch session: the ZooKeeper source feeding the model, for a renderer to show.

The source's thread and anyone calling `note` (the demo) only put observations on a queue;
the renderer's thread calls `pump`, which applies them to the model in order. So the model
has one owner and needs no lock, and a burst of observations costs one redraw.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from watch import model
from watch.model import Event, Note, Observation, WatchState
from watch.zk_source import PER_PARTITION_WATCHES, ZkSource
from zkdata.client import ZkClient


class Watcher:
    def __init__(
        self,
        zk: ZkClient,
        *,
        title: str = "",
        per_partition_watches: int = PER_PARTITION_WATCHES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._queue: queue.SimpleQueue[list[Observation]] = queue.SimpleQueue()
        self._clock = clock
        self.title = title
        # A status line the demo sets (what it is doing), with a running clock from
        # `banner_since` when set: at "{elapsed}" in the text, else at its end
        # ("broker 2 was SIGKILLed 2.1 s ago").
        self.banner = ""
        self.banner_since: float | None = None
        self.state: WatchState = model.initial_state(clock())
        self.source = ZkSource(
            zk, self._queue.put, per_partition_watches=per_partition_watches, clock=clock
        )

    def start(self) -> None:
        self.source.start()

    def stop(self) -> None:
        self.source.stop()

    def wait_ready(self, timeout: float) -> bool:
        """Until the first full read is done (and its watches set): what happens after is
        seen as a change, not as the state found at the start."""
        return self.source.ready.wait(timeout)

    def set_banner(self, text: str, *, since: float | None = None) -> None:
        self.banner, self.banner_since = text, since

    def note(
        self, text: str, *, ts: float | None = None, source: str = "demo", severity: str = "info"
    ) -> None:
        """A timeline line from outside ZooKeeper (thread-safe)."""
        self._queue.put([Note(self._clock() if ts is None else ts, text, source, severity)])

    def request_summary(self) -> None:
        """A timeline line summarising the cluster once what was observed so far is applied
        (the source sends it between its re-reads: see ZkSource.request_summary)."""
        self.source.request_summary()

    def pump(self, timeout: float) -> list[Event]:
        """Apply what has been observed, waiting up to `timeout` for something; the new
        timeline events."""
        try:
            batches = [self._queue.get(timeout=timeout)] if timeout > 0 else []
        except queue.Empty:
            return []
        while True:
            try:
                batches.append(self._queue.get_nowait())
            except queue.Empty:
                break
        events: list[Event] = []
        for batch in batches:
            self.state, more = model.reduce_all(self.state, batch)
            events.extend(more)
        return events
