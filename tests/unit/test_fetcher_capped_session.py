"""A follower's fetch session capped at max_partitions_per_fetch: a partition whose fetch
offset moved is told to the leader only when a later fetch lists it, and meanwhile the
leader may answer it again from the offset its session still holds. Kafka 2.8's
AbstractFetcherThread.processFetchRequest takes a partition's answer only when it was
fetched from the partition's current fetch offset; others are ignored."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread, _Fetch
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    FakeZk,
    Loopback,
    change_partitions,
    forgotten,
    leader_and_isr,
    listed,
    make_leader,
)
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

A = TopicPartition("m", 0)
B = TopicPartition("m", 1)


class Scripted:
    """A leader's connection answering each fetch with the next scripted answer:
    {partition: (records or None, high watermark)}."""

    def __init__(
        self, answers: Sequence[Mapping[TopicPartition, tuple[bytes | None, int]]]
    ) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def request(self, _api_key: int, _api_version: int, body: Mapping[str, Any]) -> Any:
        self.requests.append(dict(body))
        answer = self.answers.pop(0)
        return {
            "error_code": 0,
            "session_id": 7,
            "responses": [
                {
                    "topic": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "error_code": ErrorCode.NONE,
                            "high_watermark": hw,
                            "records": records,
                        }
                    ],
                }
                for tp, (records, hw) in answer.items()
            ],
        }

    def close(self) -> None:
        pass


class Logs:
    """The follower's logs as the sink sees them: records append one offset at the log
    end (the fake leader sends one record a batch)."""

    def __init__(self) -> None:
        self.ends: dict[TopicPartition, int] = {}
        self.appended: list[TopicPartition] = []

    def sink(
        self, tp: TopicPartition, _leader: int, _epoch: int, records: Any, _hw: int, _start: int
    ) -> int | None:
        if records:
            self.appended.append(tp)
            self.ends[tp] = self.ends.get(tp, 0) + 1
        return self.ends.get(tp, 0)


def capped_fetcher(conn: Scripted, logs: Logs, tps: list[TopicPartition]) -> ReplicaFetcherThread:
    fetcher = ReplicaFetcherThread(
        FOLLOWER,
        LEADER,
        ("127.0.0.1", 1),
        logs.sink,
        max_wait_ms=20,
        connect=lambda *_: conn,
        max_partitions_per_fetch=1,
    )
    fetcher.add_all((tp, FetchState(0, 0)) for tp in tps)
    return fetcher


def fetch_once(fetcher: ReplicaFetcherThread) -> None:
    fetch = fetcher._build_fetch()
    assert fetch is not None
    fetcher._fetch_once(fetch)


def test_an_answer_from_the_offset_the_session_held_before_is_ignored() -> None:
    # A's first answer moves it from 0 to 1; the next fetch (capped at one partition)
    # lists B, not A, and the leader answers A again from 0, where its session holds it.
    # Appended at our log end, those records failed A (UnexpectedAppendOffsetError) and
    # the fetcher stopped fetching it.
    conn = Scripted([{A: (b"r0", 1)}, {A: (b"r0", 1), B: (None, 0)}, {}, {A: (None, 1)}])
    logs = Logs()
    fetcher = capped_fetcher(conn, logs, [A, B])
    fetch_once(fetcher)
    assert logs.appended == [A]
    assert fetcher.partitions[A].fetch_offset == 1
    fetch_once(fetcher)
    assert logs.appended == [A]  # the stale answer not applied
    assert fetcher.fetched() == {A, B}
    assert fetcher.partitions[A].fetch_offset == 1
    assert listed(conn.requests[1]) == {B}
    # The session took that answer as told: A is forgotten, then listed anew at its
    # offset (a session answers a partition it holds only with news).
    fetch_once(fetcher)
    assert (listed(conn.requests[2]), forgotten(conn.requests[2])) == (set(), {A})
    fetch_once(fetcher)
    assert listed(conn.requests[3]) == {A}
    assert conn.requests[3]["topics"][0]["partitions"][0]["fetch_offset"] == 1


def test_a_high_watermark_alone_for_the_offset_the_session_held_before_is_ignored() -> None:
    # The leader's byte budget ran out before A: a high watermark alone, for offset 0,
    # while our log ends at 1. Taken as our position, it read as an offset mismatch and
    # failed A.
    conn = Scripted([{A: (b"r0", 1)}])
    logs = Logs()
    fetcher = capped_fetcher(conn, logs, [A, B])
    fetch_once(fetcher)
    only_b = _Fetch(False, 7, 1, {B: (0, 0)})
    fetcher._session_answered(only_b, 7)
    answer = {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": None}
    fetcher._partition_answered(only_b, A, answer)
    assert fetcher.fetched() == {A, B}
    assert fetcher.partitions[A].fetch_offset == 1


def test_capped_fetches_list_changed_partitions_in_the_order_they_changed() -> None:
    # Each fetch lists the partitions waiting longest: none waits forever behind others
    # that keep changing.
    tps = [TopicPartition("m", p) for p in range(40)]
    conn = Scripted([{tp: (b"r", 1)} for tp in tps] * 2)
    logs = Logs()
    fetcher = capped_fetcher(conn, logs, tps)
    for _ in range(len(tps)):
        fetch_once(fetcher)
    # The full fetch listed tps[0], the next ones the rest in order, then tps[0] again
    # (moved by its first answer) ahead of the others moved since.
    assert [next(iter(listed(body))) for body in conn.requests] == tps[:40]
    fetch_once(fetcher)
    assert listed(conn.requests[-1]) == {tps[0]}
    assert fetcher.fetched() == set(tps)


def _logs(path: Path, broker: int) -> LogManager:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": str(broker)})
    return LogManager([path], config)


def test_a_capped_follower_session_keeps_replicating_every_partition(tmp_path: Path) -> None:
    parts = [TopicPartition("m", p) for p in range(12)]
    leader_logs = _logs(tmp_path / "leader", LEADER)
    follower_logs = _logs(tmp_path / "follower", FOLLOWER)
    _apis, leader, _zk = make_leader(parts, logs=leader_logs)
    for tp in parts:
        for _ in range(3):
            assert leader.append_as_leader(tp, build_batch([b"x" * 10]), 1)[0] == 0
    follower = ReplicaManager(
        FOLLOWER, cast(Any, FakeZk()), StateChangeLog(None, FOLLOWER), logs=follower_logs
    )
    follower.become_leader_or_follower(
        leader_and_isr({tp: (LEADER, 0, (LEADER, FOLLOWER)) for tp in parts})
    )
    conn = Loopback(_apis)
    fetcher = ReplicaFetcherThread(
        FOLLOWER,
        LEADER,
        ("127.0.0.1", 1),
        follower.append_as_follower,
        follower,
        max_wait_ms=20,
        backoff_ms=100,
        connect=lambda *_: conn,
        max_partitions_per_fetch=2,
    )
    fetcher.add_all((tp, FetchState(0, 0)) for tp in parts)
    fetcher.start()

    def follower_leo(tp: TopicPartition) -> int:
        log = follower.partitions[tp].log
        assert log is not None
        return log.log_end_offset

    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if all(follower_leo(tp) == 3 for tp in parts) or len(fetcher.fetched()) < len(parts):
                break
            time.sleep(0.01)
        assert fetcher.fetched() == set(parts)
        assert {tp: follower_leo(tp) for tp in parts} == {tp: 3 for tp in parts}
    finally:
        fetcher.stop()
        fetcher.thread.join(5)
        follower.close()
        leader.close()
        leader_logs.close()
        follower_logs.close()


def test_an_answer_dropped_while_set_aside_is_asked_for_again() -> None:
    # A failover's 100K partitions: the new leader answered A UNKNOWN_LEADER_EPOCH (not
    # told of its new leadership yet), which set A aside; the next fetch, capped, listed
    # B and did not reach A to forget it, so the leader's session, holding A, answered it
    # (its high watermark, news since the error) while A was still set aside: dropped.
    # Once A's backoff ended its position was the one the session held, so nothing listed
    # it, and the leader, having sent its news, said nothing more of A: the follower
    # never took an answer for it (a broker back on new disks never caught up on it).
    a, b = TopicPartition("m", 0), TopicPartition("m", 1)
    apis, leader, _zk = make_leader([a, b])  # at leader epoch 0
    taken: list[tuple[TopicPartition, int]] = []

    def sink(tp: TopicPartition, _leader: int, _epoch: int, _r: Any, hw: int, _s: int) -> int:
        taken.append((tp, hw))
        return 0

    conn = Loopback(apis)
    fetcher = ReplicaFetcherThread(
        FOLLOWER,
        LEADER,
        ("127.0.0.1", 1),
        sink,
        max_wait_ms=0,
        backoff_ms=60_000,
        connect=lambda *_: conn,
        max_partitions_per_fetch=1,
    )
    try:
        fetcher.add_all([(a, FetchState(0, 1)), (b, FetchState(0, 1))])
        fetch_once(fetcher)  # full: lists A at leader epoch 1, not the leader's yet
        assert listed(conn.requests[-1]) == {a}
        assert fetcher.partitions[a].delayed_until > time.monotonic()
        change_partitions(apis, {tp: (LEADER, 1, (LEADER, FOLLOWER)) for tp in (a, b)})
        fetch_once(fetcher)  # lists B (the cap); the session answers A too
        assert listed(conn.requests[-1]) == {b}
        assert taken == [(b, 0)]  # A's answer came while it was set aside
        fetcher.partitions[a].delayed_until = 0.0  # its backoff over
        fetcher._dirty[a] = None  # as the end of its backoff marks it
        for _ in range(4):
            fetch_once(fetcher)
        assert (a, 0) in taken
    finally:
        fetcher.stop()
        leader.close()
