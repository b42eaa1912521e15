"""An incremental fetch looks at what changed, not at every partition of its session.

A leader of tens of thousands of partitions used to walk all of a session's partitions
whenever anything changed anywhere: each append to one partition cost every follower's
next fetch a pass over every partition it follows here (a 30,000-partition cluster under
100 messages/s to one partition kept its leader busy 96% of a core). The change journal
(broker/fetch_session.ChangeJournal) names the partitions that changed; these tests hold
the handler to reading those, and to everything that must still reach a fetcher: records
a max_bytes cut left out, partitions stopped, and large changes (looked at in full).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import BrokerConfig
from broker.fetch_session import CachedPartition, ChangeJournal, FetchSession, PartitionRequest
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    Loopback,
    fetch_body,
    leader_and_isr,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

PARTITIONS = [TopicPartition("j", p) for p in range(64)]


class Leader:
    """A leader of PARTITIONS (with logs), its fetch handler, and counts of what its
    fetch handler looks at: partitions read, and passes over a whole session."""

    def __init__(self, tmp_path: Path) -> None:
        config = BrokerConfig.from_properties(
            {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(LEADER)}
        )
        self.logs = LogManager([tmp_path / "data"], config)
        self.apis, self.replicas, _zk = make_leader(PARTITIONS, logs=self.logs)
        self.conn = Loopback(self.apis)
        self.reads: list[TopicPartition] = []
        self.scans = 0

    def count(self, monkeypatch: pytest.MonkeyPatch) -> None:
        read = self.replicas.leader_partition
        scan = self.apis._scan_session

        def counting_read(tp: TopicPartition, epoch: int) -> Any:
            self.reads.append(tp)
            return read(tp, epoch)

        def counting_scan(*args: Any) -> Any:
            self.scans += 1
            return scan(*args)

        monkeypatch.setattr(self.replicas, "leader_partition", counting_read)
        monkeypatch.setattr(self.apis, "_scan_session", counting_scan)

    def session(self) -> int:
        """A follower's session of every partition, past its first look at all of them."""
        got = self.conn.request(ApiKey.FETCH, 12, fetch_body(dict.fromkeys(PARTITIONS, 0)))
        session_id = int(got["session_id"])
        idle = self.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
        assert idle["responses"] == []
        return session_id

    def append(self, tp: TopicPartition) -> None:
        error, _p, info, message = self.replicas.append_as_leader(tp, build_batch([b"record"]), 1)
        assert error == ErrorCode.NONE, message
        assert info is not None


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    leader = Leader(tmp_path)
    yield leader
    leader.logs.close()


def test_an_append_to_one_partition_is_read_alone(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = leader.session()
    hot = PARTITIONS[5]
    leader.append(hot)
    leader.count(monkeypatch)
    got = leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
    answered = response_partitions(got)
    assert list(answered) == [hot]
    assert answered[hot]["records"]
    assert leader.scans == 0
    assert leader.reads == [hot]
    # The follower lists it at its new position: that one is read, nothing else.
    leader.reads.clear()
    leader.conn.request(ApiKey.FETCH, 12, fetch_body({hot: 1}, session_id=session_id, epoch=3))
    assert leader.scans == 0
    assert set(leader.reads) == {hot}


def test_a_change_to_much_of_a_session_is_looked_at_in_one_pass(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = leader.session()
    leader.count(monkeypatch)
    moved = PARTITIONS[:40]
    leader.replicas.become_leader_or_follower(
        leader_and_isr({tp: (LEADER, 1, (LEADER, FOLLOWER)) for tp in moved})
    )
    got = leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
    assert leader.scans == 1
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == dict.fromkeys(
        moved, ErrorCode.FENCED_LEADER_EPOCH
    )


def test_records_a_max_bytes_cut_left_out_come_in_the_next_rounds(leader: Leader) -> None:
    session_id = leader.session()
    data = PARTITIONS[:4]
    for tp in data:
        leader.append(tp)
    positions = dict.fromkeys(PARTITIONS, 0)
    answered: list[TopicPartition] = []
    listing: dict[TopicPartition, int] = {}
    for epoch in range(2, 6):
        body = fetch_body(listing, session_id=session_id, epoch=epoch)
        body["max_bytes"] = 1  # one partition's batch per answer (KIP-74's first one)
        got = response_partitions(leader.conn.request(ApiKey.FETCH, 12, body))
        with_records = [tp for tp, p in got.items() if p["records"]]
        assert len(with_records) <= 1
        answered += with_records
        listing = {tp: positions[tp] + 1 for tp in with_records}
        positions.update(listing)
    # Nothing changed after the appends, yet every partition's records came, one a round
    # (not after the session's next look at everything, seconds later).
    assert sorted(answered) == sorted(data)


def test_a_batch_over_the_bytes_left_for_it_comes_in_the_next_round(leader: Leader) -> None:
    session_id = leader.session()
    small, big = PARTITIONS[:2]
    leader.append(small)
    error, _p, _info, message = leader.replicas.append_as_leader(
        big, build_batch([b"x" * 50_000]), 1
    )
    assert error == ErrorCode.NONE, message
    body = fetch_body({}, session_id=session_id, epoch=2)
    body["max_bytes"] = 1000
    got = response_partitions(leader.conn.request(ApiKey.FETCH, 12, body))
    # Only the first partition with records may go over max_bytes (KIP-74).
    assert [tp for tp, p in got.items() if p["records"]] == [small]
    # Nothing changes after: the batch left out comes next, not after the session's next
    # look at everything, seconds later.
    body = fetch_body({small: 1}, session_id=session_id, epoch=3)
    body["max_bytes"] = 1000
    got = response_partitions(leader.conn.request(ApiKey.FETCH, 12, body))
    assert [tp for tp, p in got.items() if p["records"]] == [big]


def test_a_stopped_partition_is_answered_with_an_error_at_once(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = leader.session()
    leader.count(monkeypatch)
    stopped = PARTITIONS[7]
    leader.replicas.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": stopped.topic,
                    "partition_states": [
                        {
                            "partition_index": stopped.partition,
                            "leader_epoch": 0,
                            "delete_partition": False,
                        }
                    ],
                }
            ],
        }
    )
    got = leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        stopped: ErrorCode.NOT_LEADER_OR_FOLLOWER
    }
    assert leader.scans == 0


def test_what_a_long_poll_found_before_it_was_woken_is_answered_too(leader: Leader) -> None:
    session_id = leader.session()
    x, y = PARTITIONS[1], PARTITIONS[2]
    leader.append(x)
    got = leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
    assert response_partitions(got)[x]["records"]
    # The follower lists x at its log end: the high watermark moves to 1, which alone
    # does not answer a follower's fetch; it waits, and y's append wakes it.
    body = fetch_body({x: 1}, session_id=session_id, epoch=3)
    body["max_wait_ms"] = 10_000
    appender = threading.Timer(0.2, leader.append, (y,))
    appender.start()
    try:
        got = leader.conn.request(ApiKey.FETCH, 12, body)
    finally:
        appender.join(60)  # a bound that only catches a hang
        assert not appender.is_alive(), "appender still running after 60 s"
    answered = response_partitions(got)
    assert set(answered) == {x, y}
    assert answered[x]["high_watermark"] == 1
    assert answered[y]["records"]


# The journal itself, against a model: every change ever recorded, in order.

_TPS = [TopicPartition("m", p) for p in range(6)]
_changes = st.one_of(st.none(), st.lists(st.sampled_from(_TPS), max_size=12))


@given(st.integers(min_value=1, max_value=10), st.lists(_changes, max_size=40))
def test_the_journal_answers_what_changed_since_or_that_it_does_not_know(
    capacity: int, records: list[list[TopicPartition] | None]
) -> None:
    journal = ChangeJournal(capacity)
    # (generation before, generation after, the change) for every record so far.
    history: list[tuple[int, int, list[TopicPartition] | None]] = []

    def truth(since: int) -> list[TopicPartition] | None:
        out: list[TopicPartition] = []
        for before, _after, change in history:
            if before >= since:
                if change is None:
                    return None
                out += change
        return out

    seen = [journal.generation]
    for change in records:
        before = journal.generation
        journal.record(change)
        after = journal.generation
        assert after >= before + (1 if change is None else len(change))
        history.append((before, after, change))
        seen.append(after)
        for generation in seen:
            got = journal.since(generation)
            expected = truth(generation)
            if expected is None:
                assert got is None
            else:
                assert got is None or got == expected
        # The latest change is always known, unless it was unknown or too large.
        if change is not None and len(change) <= capacity:
            assert journal.since(before) == change
        assert journal.since(after) == []


def test_an_unknown_change_makes_every_session_look_at_everything(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = leader.session()
    leader.count(monkeypatch)
    leader.apis.wake_fetches(True, None)  # some partitions changed, which is not known
    leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
    assert leader.scans == 1


# The sweep: what nobody notifies is seen, a part of the session each round.


def test_a_change_nobody_notifies_is_seen_by_the_sweep_without_a_pass_over_everything(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader.replicas.replica_lag_time_max_ms = 400  # every partition looked at each 100 ms
    session_id = leader.session()
    moved = PARTITIONS[9]
    leader.append(moved)
    got = leader.conn.request(
        ApiKey.FETCH, 12, fetch_body({moved: 1}, session_id=session_id, epoch=2)
    )
    assert response_partitions(got)[moved]["high_watermark"] == 1
    leader.count(monkeypatch)
    # As retention or DeleteRecords would: the log start moves, and no fetch is told.
    log = leader.replicas.partitions[moved].log
    assert log is not None
    assert log.maybe_increment_log_start_offset(1)
    epoch = 3
    deadline = time.monotonic() + 30  # only against a hang
    while True:
        got = leader.conn.request(
            ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=epoch)
        )
        epoch += 1
        answered = response_partitions(got)
        if moved in answered:
            break
        assert time.monotonic() < deadline, "the sweep never looked at the partition"
        time.sleep(0.01)
    assert answered[moved]["log_start_offset"] == 1
    assert leader.scans == 0


def test_the_sweep_records_every_follower_position_a_part_each_round(
    leader: Leader, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader.replicas.replica_lag_time_max_ms = 400
    session_id = leader.session()
    leader.count(monkeypatch)
    recorded: set[TopicPartition] = set()
    record = leader.replicas.record_follower_fetches

    def recording(replica_id: int, fetches: Any, clock: Any = None) -> None:
        fetches = list(fetches)
        recorded.update(p.topic_partition for p, _offset in fetches)
        record(replica_id, fetches, clock)

    monkeypatch.setattr(leader.replicas, "record_follower_fetches", recording)
    epoch = 2
    deadline = time.monotonic() + 30
    while recorded != set(PARTITIONS):
        assert time.monotonic() < deadline, f"{len(recorded)} of {len(PARTITIONS)} recorded"
        leader.conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=epoch))
        epoch += 1
        time.sleep(0.01)
    assert leader.scans == 0
    # Nothing changed: no partition was read, only looked at.
    assert leader.reads == []


def _session(n: int, now_ms: int) -> FetchSession:
    req = PartitionRequest(0, 1 << 20, 0, -1, -1)
    tps = [TopicPartition("s", p) for p in range(n)]
    return FetchSession(1, True, {tp: CachedPartition.from_request(tp, req) for tp in tps}, now_ms)


@given(
    st.integers(min_value=0, max_value=50),
    st.integers(min_value=1, max_value=1000),
    st.lists(st.integers(min_value=0, max_value=400), max_size=60),
)
def test_a_sweep_looks_at_each_partition_once_on_schedule_then_starts_again(
    n: int, interval: int, steps: list[int]
) -> None:
    session = _session(n, 0)
    session.restart_sweep(0)
    started = now = 0
    seen: list[TopicPartition] = []
    for step in steps:
        now += step
        got = [cp.topic_partition for cp in session.sweep_due(now, interval)]
        if not got and len(seen) == n and now > started:  # done: the next sweep began
            started, seen = now, []
            continue
        seen += got
        elapsed = now - started
        # Never ahead of the interval's schedule, and all of it once the interval is up.
        assert len(seen) <= (n if elapsed >= interval else n * elapsed // interval)
        if elapsed >= interval:
            assert len(seen) == n
        assert len(set(seen)) == len(seen)
        assert set(seen) <= set(session.partitions)


def test_a_sweep_skips_partitions_forgotten_meanwhile() -> None:
    session = _session(4, 0)
    session.restart_sweep(0)
    forgotten = TopicPartition("s", 1)
    session.update({}, [forgotten])
    got = [cp.topic_partition for cp in session.sweep_due(1000, 1000)]
    assert got == [TopicPartition("s", p) for p in (0, 2, 3)]
