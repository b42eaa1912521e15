"""Which ISR followers fell out of sync, without reading every partition led each time.

Every replica.lag.time.max.ms / 2 a leader asks which followers in its partitions' ISRs
have not been caught up for longer than replica.lag.time.max.ms (Kafka's maybeShrinkIsr).
Read partition by partition, that is a pass of Python over every partition led: 40-100 ms
every 15 s on a broker of 100,000 partitions, while its other threads wait for the GIL
(acknowledgements up to 30 ms late).

Most partitions of such a broker are quiet: each follower's position is the leader's log
end, and it fetches in a session whose clock stands for its caught-up time
(FollowerState.caught_up_ms is at least that clock). No follower of a quiet partition is
out of sync while its sessions' clocks are younger than the lag time. So a scan reads
only the partitions on the watch list, which whatever may end a partition's quiet puts it
on (an append, a follower fetching behind the log end or in another session, a new
leadership), and those it found not quiet. It reads every partition led, as the scan did
before, only when a clock the partitions read named is older than the lag time (a session
that stopped: its follower may be out of sync anywhere) or its session forgot a partition
(``FetchClock.forgot``: that follower state's clock is gone), or when over half the
partitions it led then (and over an eighth of those hosted) are watched (one pass over
all is faster than taking each off the list: a load on every partition). What it keeps
between scans is that set of clocks, not a list of the quiet partitions (a broker at
100,000 partitions is near its memory goal). While a follower is down its clock stays
old, and every scan reads every partition, as before, until it fetches again. A scan
names the followers a read of every partition would (tests/unit/test_isr_expiry.py checks
that against one).

Watching is marked after the change it follows, and a scan takes a partition off the
list before it reads the partition: a change made during a scan is read by that scan or
the next, never lost.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from zkdata.znodes import TopicPartition

if TYPE_CHECKING:
    from broker.fetch_session import FetchClock
    from broker.replica_manager import Partition


class IsrExpiry:
    """The ISR expiry scan's memory: the watch list and the clocks partitions named.

    ``watch`` may be called from any thread; ``out_of_sync`` runs one scan at a time."""

    __slots__ = ("_clocks", "_led", "_lock", "_watched", "partitions_read")

    def __init__(self) -> None:
        # Written by any thread (one dict store each: no lock), emptied by the scan.
        self._watched: dict[TopicPartition, Partition] = {}
        # The clocks the partitions read since the last read of all named (None: none
        # made yet).
        self._clocks: set[FetchClock] | None = None
        self._led = 0  # partitions led at the last read of all
        self._lock = threading.Lock()
        #: How many partitions the last scan read.
        self.partitions_read = 0

    def watch(self, p: Partition) -> None:
        """Read ``p`` at the next scan: called after a change that may end its quiet."""
        self._watched[p.topic_partition] = p

    def out_of_sync(
        self,
        now_ms: int,
        max_lag_ms: int,
        broker_id: int,
        partitions: Mapping[TopicPartition, Partition],
    ) -> dict[int, list[Partition]]:
        """The partitions ``broker_id`` leads (the current one in ``partitions``, not
        stale) whose ISR holds a follower not caught up within ``max_lag_ms`` of
        ``now_ms``, by follower."""
        oldest = now_ms - max_lag_ms
        lagging: dict[int, list[Partition]] = {}
        with self._lock:
            watched, clocks = self._watched, self._clocks
            if (
                clocks is None
                # Most partitions led watched (a load on all): one pass over every
                # partition is faster than taking each off the list (passing a followed
                # one costs a tenth of reading a watched one, about).
                or len(watched) * 2 > max(self._led, len(partitions) // 4)
                or any(c.ms < oldest or c.forgot for c in clocks)
            ):
                for c in clocks or ():
                    c.forgot = False  # before the reads: a later forgetting is seen next
                clocks = self._clocks = set()
                watched.clear()  # before the reads: what changed before is read below
                to_read = list(partitions.values())  # each the current one
                current = None
                self._led = 0
            else:
                to_read = []
                for tp in list(watched):
                    # Taken off before it is read: a change after this watches it again.
                    p = watched.pop(tp, None)
                    if p is not None:
                        to_read.append(p)
                current = partitions.get
            self.partitions_read = len(to_read)
            add_clock = clocks.add
            for p in to_read:
                if (
                    p.leader != broker_id
                    or p.stale
                    or (current is not None and current(p.topic_partition) is not p)
                ):
                    continue  # a new leadership of it, if any, is watched
                if current is None:
                    self._led += 1
                leo = p.log_end_offset
                isr = p.isr
                quiet = True
                for r, state in p.followers.pairs():
                    if r in isr and now_ms - state.caught_up_ms(leo) > max_lag_ms:
                        if (named := lagging.get(r)) is None:
                            named = lagging[r] = []
                        named.append(p)
                    clock = state.clock
                    if clock is None:
                        quiet = False
                    else:
                        add_clock(clock)
                        if state.fetch_offset < leo:
                            quiet = False
                if not quiet:
                    # Not over a newer one a change just watched.
                    watched.setdefault(p.topic_partition, p)
        return lagging
