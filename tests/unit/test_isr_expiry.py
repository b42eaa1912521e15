"""The ISR expiry scan (broker/isr_expiry.py) reads only the partitions a follower may
have fallen behind in. These tests check that it names exactly the followers a read of
every partition would, driving a real replica manager through its own paths: leaderships
given and taken, appends, follower fetches in sessions and out of them, session rounds
that list nothing, sessions forgetting partitions or replaced, and time passing. No
ZooKeeper."""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

import broker.replica_manager
from broker.config import BrokerConfig
from broker.fetch_session import CachedPartition, FetchSession
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.beside import running_beside
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

ME = 1
FOLLOWERS = (2, 3)
REPLICAS = [ME, *FOLLOWERS]
TPS = [TopicPartition("t", i) for i in range(2)]
LAG_MS = 30_000


class Cluster:
    """A replica manager leading (or following) TPS, its followers' sessions (two each),
    and the time its clock reads."""

    def __init__(self, directory: Path) -> None:
        config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
        self.logs = LogManager([directory / "data"], config)
        self.rm = ReplicaManager(
            ME,
            cast(Any, None),
            StateChangeLog(directory, ME),
            logs=self.logs,
            replica_lag_time_max_ms=LAG_MS,
        )
        self.now = 1_000_000_000
        self.epochs: dict[TopicPartition, int] = {}
        self.sessions = {r: [self._session(r), self._session(r)] for r in FOLLOWERS}

    def _session(self, r: int) -> FetchSession:
        return FetchSession(r * 10, True, {}, self.now, replica_id=r)

    def clock_ms(self) -> int:
        return self.now

    def close(self) -> None:
        self.rm.close()
        self.logs.close()

    def lead(self, tp: TopicPartition, leader: int, isr: list[int]) -> None:
        new = tp not in self.epochs
        self.epochs[tp] = self.epochs.get(tp, 0) + 1
        if leader not in isr:
            isr = [leader, *isr]
        request = leader_and_isr_request(tp, leader, self.epochs[tp], isr, REPLICAS, is_new=new)
        self.rm.become_leader_or_follower(request)

    def append(self, tp: TopicPartition, records: int) -> None:
        self.rm.append_as_leader(tp, build_batch([b"v"] * records), 1)

    def fetch(self, tp: TopicPartition, r: int, behind: int, session: int | None) -> None:
        p = self.rm.partitions.get(tp)
        if p is None:
            return
        offset = max(p.log_start_offset, p.log_end_offset - behind)
        clock = None
        if session is not None:
            fetch_session = self.sessions[r][session]
            fetch_session.partitions[tp] = CachedPartition(tp, offset, 1 << 20, -1, partition=p)
            clock = fetch_session.clock
        self.rm.record_follower_fetches(r, [(p, offset)], clock)

    def round(self, r: int, session: int) -> None:
        """A session's fetch round that lists no partition (none moved)."""
        self.rm.record_follower_fetches(r, [], self.sessions[r][session].clock)

    def tick(self, ms: int) -> None:
        """Time passes and every session fetches a round that lists nothing: each clock
        is fresh, so only what the partitions' own changes show can make one lag."""
        self.now += ms
        for r, sessions in self.sessions.items():
            for s in range(len(sessions)):
                self.round(r, s)

    def catch_up(self, session: int) -> None:
        """Every follower fetches every partition at its leader's log end."""
        for tp in TPS:
            for r in FOLLOWERS:
                self.fetch(tp, r, 0, session)

    def forget(self, tp: TopicPartition, r: int, session: int) -> None:
        self.sessions[r][session].update({}, [tp])

    def renew(self, r: int, session: int) -> None:
        """The follower's session is evicted: a new one, with a new clock, replaces it."""
        self.sessions[r][session] = self._session(r)

    def scan(self) -> set[tuple[TopicPartition, int]]:
        return {
            (p.topic_partition, r)
            for r, partitions in self.rm.followers_out_of_sync().items()
            for p in partitions
        }

    def read_everything(self) -> set[tuple[TopicPartition, int]]:
        """What a read of every partition led finds out of sync (the scan before)."""
        found = set()
        for tp, p in self.rm.partitions.items():
            if p.leader != ME or p.stale:
                continue
            leo = p.log_end_offset
            for r, state in p.followers.pairs():
                if r in p.isr and self.now - state.caught_up_ms(leo) > LAG_MS:
                    found.add((tp, r))
        return found


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory() as directory:
        c = Cluster(Path(directory))
        try:
            with mock.patch.object(broker.replica_manager, "_now_ms", c.clock_ms):
                yield c
        finally:
            c.close()


tp_index = st.integers(0, len(TPS) - 1)
follower = st.sampled_from(FOLLOWERS)
session = st.integers(0, 1)
op = st.one_of(
    st.tuples(
        st.just("lead"), tp_index, st.sampled_from(REPLICAS), st.lists(follower, unique=True)
    ),
    st.tuples(st.just("append"), tp_index, st.integers(1, 3)),
    st.tuples(st.just("fetch"), tp_index, follower, st.integers(0, 4), session | st.none()),
    st.tuples(st.just("round"), follower, session),
    st.tuples(st.just("forget"), tp_index, follower, session),
    st.tuples(st.just("renew"), follower, session),
    st.tuples(st.just("wait"), st.integers(0, 2 * LAG_MS)),
    st.tuples(st.just("tick"), st.integers(1, 2 * LAG_MS)),
    st.tuples(st.just("catch_up"), session),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(op, st.booleans()), max_size=100))
def test_a_scan_names_the_followers_a_read_of_every_partition_names(
    ops: list[tuple[Any, bool]],
) -> None:
    with cluster() as c:
        for tp in TPS:
            c.lead(tp, ME, list(REPLICAS))
        for (name, *args), scan_after in ops:
            if name == "lead":
                index, leader, isr = args
                c.lead(TPS[index], leader, isr)
            elif name == "append":
                c.append(TPS[args[0]], args[1])
            elif name == "fetch":
                index, r, behind, s = args
                c.fetch(TPS[index], r, behind, s)
            elif name == "round":
                c.round(*args)
            elif name == "forget":
                index, r, s = args
                c.forget(TPS[index], r, s)
            elif name == "renew":
                c.renew(*args)
            elif name == "wait":
                c.now += args[0]
            elif name == "tick":
                c.tick(args[0])
            else:
                assert name == "catch_up"
                c.catch_up(args[0])
            if scan_after:
                assert c.scan() == c.read_everything()
        assert c.scan() == c.read_everything()
        c.now += LAG_MS + 1  # every clock now too old: a read of every partition
        assert c.scan() == c.read_everything()


def test_an_idle_leader_reads_no_partition_until_a_session_clock_is_too_old() -> None:
    with cluster() as c:
        for tp in TPS:
            c.lead(tp, ME, list(REPLICAS))
            c.append(tp, 2)
        c.catch_up(0)  # every follower at the log end, in its session
        expiry = c.rm._isr_expiry

        def read_by_scan() -> int:
            assert c.scan() == set()
            return expiry.partitions_read

        assert read_by_scan() == len(TPS)  # the first reads every partition
        for _ in range(5):
            c.tick(LAG_MS // 2)  # the sessions keep fetching; nothing moves
            assert read_by_scan() == 0
        # An append: that partition is read until its followers catch up.
        c.append(TPS[0], 1)
        assert read_by_scan() == 1
        assert read_by_scan() == 1
        c.catch_up(0)
        assert read_by_scan() == 1  # found quiet again
        assert read_by_scan() == 0
        # Follower 3's session stops fetching: every partition is read once its clock is
        # older than the lag time, and 3 named.
        c.now += LAG_MS // 2
        c.round(2, 0)
        assert read_by_scan() == 0
        c.now += LAG_MS // 2 + 1
        c.round(2, 0)
        assert c.scan() == {(tp, 3) for tp in TPS}
        assert expiry.partitions_read == len(TPS)


def test_a_forgotten_partition_is_read_again_and_its_follower_named() -> None:
    with cluster() as c:
        for tp in TPS:
            c.lead(tp, ME, list(REPLICAS))
            for r in FOLLOWERS:
                c.fetch(tp, r, 0, 0)
        assert c.scan() == set()
        # Follower 2 stops fetching TPS[1] (its session forgets it) while the session
        # goes on fetching the others.
        c.forget(TPS[1], 2, 0)
        c.now += LAG_MS + 1
        for r in FOLLOWERS:
            c.round(r, 0)
        assert c.scan() == {(TPS[1], 2)}


def test_fetches_and_appends_beside_scans_are_never_missed() -> None:
    """Threads append and fetch while scans run; once they stop, and the lag time has
    passed with only some followers fetching, a scan names what a full read names."""
    with cluster() as c:
        for tp in TPS:
            c.lead(tp, ME, list(REPLICAS))

        def produce() -> None:
            for tp in TPS:
                c.append(tp, 1)

        def follow(r: int) -> None:
            for tp in TPS:
                c.fetch(tp, r, 0, 0)

        with running_beside(produce, *(functools.partial(follow, r) for r in FOLLOWERS)):
            for _ in range(200):
                c.scan()
        for tp in TPS:
            assert c.rm.append_as_leader(tp, build_batch([b"w"]), 1)[0] == ErrorCode.NONE
            c.fetch(tp, 2, 0, 0)  # 2 caught up; 3 left behind the last append
        c.now += LAG_MS + 1
        c.round(2, 0)
        assert c.scan() == c.read_everything() == {(tp, 3) for tp in TPS}


@contextlib.contextmanager
def quiet_cluster() -> Iterator[Cluster]:
    """Every partition led here, with records, and every follower at the log end in its
    session 0, found quiet by a scan."""
    with cluster() as c:
        for tp in TPS:
            c.lead(tp, ME, list(REPLICAS))
            c.append(tp, 3)
        c.catch_up(0)
        assert c.scan() == set()
        yield c


def test_a_follower_fetching_from_behind_the_log_end_is_read_again() -> None:
    with quiet_cluster() as c:
        # Follower 2 fetches from below where it was (it truncated): no longer caught up,
        # though its session keeps fetching.
        c.fetch(TPS[0], 2, 1, 0)
        for _ in range(3):
            c.tick(LAG_MS // 2)
        assert c.scan() == c.read_everything() == {(TPS[0], 2)}


def test_a_follower_fetching_in_another_session_is_read_by_that_session_clock() -> None:
    with quiet_cluster() as c:
        c.fetch(TPS[0], 2, 0, 1)  # in its session 1 now, which then stops fetching
        for _ in range(3):
            c.now += LAG_MS // 2
            for r in FOLLOWERS:
                c.round(r, 0)  # session 0 goes on fetching
        assert c.scan() == c.read_everything() == {(TPS[0], 2)}


def test_a_new_leadership_is_read_though_no_session_clock_is_old() -> None:
    with quiet_cluster() as c:
        # A newer leader epoch of TPS[0] (the controller bumped it): new follower
        # states, which no session has fetched in yet, while the sessions go on.
        c.lead(TPS[0], ME, list(REPLICAS))
        for _ in range(3):
            c.tick(LAG_MS // 2)
        assert c.scan() == c.read_everything() == {(TPS[0], r) for r in FOLLOWERS}


def test_a_leader_of_few_partitions_reads_only_those_appended_to() -> None:
    with cluster() as c:
        c.lead(TPS[0], ME, list(REPLICAS))
        for i in range(20):
            c.lead(TopicPartition("followed", i), 2, list(REPLICAS))
        c.append(TPS[0], 1)
        c.catch_up(0)
        assert c.scan() == set()
        assert c.rm._isr_expiry.partitions_read == 21  # the first reads every one
        c.append(TPS[0], 1)
        assert c.scan() == set()
        assert c.rm._isr_expiry.partitions_read == 1  # not a pass over the 20 followed
