"""What a follower's fetcher sends and how it takes the answers (Kafka 2.8's
ReplicaFetcherThread.buildFetch and AbstractFetcherThread.processFetchRequest): the
request's fields, its partitions grouped by topic, a partition whose log failed left out
of the session, and answers for a partition set aside meanwhile ignored. A scripted
leader connection; no logs (nothing to truncate)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any, cast

import pytest

from broker.fetcher import (
    FetchState,
    ReplicaFetcherManager,
    ReplicaFetcherThread,
    _answers_current_state,
)
from storage.errors import CorruptRecordError, KafkaStorageError
from tests.unit.test_fetcher_capped_session import fetch_once as fetch
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
F, L = 2, 1  # the follower, its leader


class Scripted:
    """Answers each Fetch with the next scripted {partition: error code} (records b"x"
    when no error), session 7, or a scripted error for the whole request; keeps each
    request's body and each connection's timeout."""

    def __init__(self, *answers: Mapping[TopicPartition, int] | ErrorCode) -> None:
        self.answers = list(answers)
        self.requests: list[Mapping[str, Any]] = []
        self.timeouts: list[float] = []
        self.empty: set[TopicPartition] = set()  # answered with no records

    def connect(self, _endpoint: tuple[str, int], _client: str, timeout: float) -> Scripted:
        self.timeouts.append(timeout)
        return self

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.FETCH
        self.requests.append(body)
        answer = self.answers.pop(0)
        if isinstance(answer, ErrorCode):  # the whole request refused
            return {"error_code": answer, "session_id": 0, "responses": []}
        return {
            "error_code": 0,
            "session_id": 7,
            "responses": [
                {
                    "topic": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "error_code": code,
                            "high_watermark": 10,
                            "log_start_offset": 0,
                            "records": None if code or tp in self.empty else b"x",
                        }
                    ],
                }
                for tp, code in answer.items()
            ],
        }

    def close(self) -> None:
        pass


class Sink:
    """Applies fetched records as the replica manager does (the next fetch offset: one
    more per answer); raises for the partitions whose log failed."""

    def __init__(self) -> None:
        self.applied: list[TopicPartition] = []
        self.failing: set[TopicPartition] = set()
        self.corrupt: set[TopicPartition] = set()  # the leader's records fail validation
        self.moved_on: set[TopicPartition] = set()  # no longer followed at that epoch
        self.while_applying: list[Any] = []  # called as records are applied

    def __call__(
        self, tp: TopicPartition, _leader: int, _epoch: int, _records: Any, _hw: int, _start: int
    ) -> int | None:
        if tp in self.failing:
            raise KafkaStorageError(f"the directory of {tp} failed")
        if tp in self.corrupt:
            raise CorruptRecordError("bad CRC", position=0, offset=10)
        if tp in self.moved_on:
            return None
        for hook in self.while_applying:
            hook()
        self.applied.append(tp)
        return 10 + self.applied.count(tp)


class LogStarts:
    """Our logs' start offsets (0 unless set): all that a fetch reads of the follower's
    logs."""

    def __init__(self, **starts: int) -> None:
        self.starts = {TopicPartition(n[0], int(n[1:])): o for n, o in starts.items()}

    def follower_log_start(self, tp: TopicPartition) -> int:
        return self.starts.get(tp, 0)


def fetcher_of(
    leader: Scripted, sink: Sink | None = None, follower_log: Any = None, **kwargs: Any
) -> ReplicaFetcherThread:
    fetcher = ReplicaFetcherThread(
        F, L, ("127.0.0.1", 1), sink or Sink(), follower_log, connect=leader.connect, **kwargs
    )
    fetcher.add_all([(tp, FetchState(10, 5, truncating=False)) for tp in (A0, A1, B0)])
    return fetcher


def test_a_fetch_is_a_replicas_long_poll_with_the_configured_sizes() -> None:
    """Kafka's ReplicaFetcherThread.buildFetch: the broker's id as replica id,
    replica.fetch.wait.max.ms and replica.fetch.min.bytes (1: the leader answers once it
    has anything, and waits otherwise), the response and per-partition maxima, read
    uncommitted; one topic entry per topic, its partitions in order; the connection's
    timeout leaves room for the long poll."""
    leader = Scripted({})
    fetcher = fetcher_of(
        leader,
        max_wait_ms=5000,
        max_bytes=3000,
        partition_max_bytes=700,
        socket_timeout_s=1.0,
    )
    fetch(fetcher)
    (body,) = leader.requests
    assert (body["replica_id"], body["max_wait_ms"], body["min_bytes"]) == (F, 5000, 1)
    assert (body["max_bytes"], body["isolation_level"]) == (3000, 0)
    assert [(t["topic"], [p["partition"] for p in t["partitions"]]) for t in body["topics"]] == [
        ("a", [0, 1]),
        ("b", [0]),
    ]
    partitions = [p for t in body["topics"] for p in t["partitions"]]
    assert {(p["fetch_offset"], p["current_leader_epoch"]) for p in partitions} == {(10, 5)}
    assert {p["partition_max_bytes"] for p in partitions} == {700}
    assert leader.timeouts == [6.0]


def test_a_partition_whose_log_failed_is_forgotten_by_the_session() -> None:
    """markPartitionFailed removes the partition from the fetcher: the next incremental
    fetch forgets it, so the leader stops reading it for this follower."""
    sink = Sink()
    sink.failing = {A1}
    leader = Scripted({A0: 0, A1: 0, B0: 0}, {})
    fetcher = fetcher_of(leader, sink)
    fetch(fetcher)
    assert fetcher.fetched() == {A0, B0}
    fetch(fetcher)
    assert [dict(f) for f in leader.requests[1]["forgotten_topics_data"]] == [
        {"topic": "a", "partitions": [1]}
    ]
    listed = {
        (t["topic"], p["partition"]) for t in leader.requests[1]["topics"] for p in t["partitions"]
    }
    assert listed == {("a", 0), ("b", 0)}  # their new fetch offsets


def test_an_answer_for_a_partition_set_aside_meanwhile_is_ignored() -> None:
    """processFetchRequest takes an answer only for a partition ready to fetch: a
    partition set aside (a fenced epoch answered in the same response, a corrupt batch)
    does not take the records of a second answer for it."""
    sink = Sink()
    leader = Scripted({A0: ErrorCode.FENCED_LEADER_EPOCH})
    fetcher = fetcher_of(leader, sink)
    fetch(fetcher)
    request = fetcher._build_fetch()
    assert request is not None
    assert A0 not in request.listed
    fetcher._partition_answered(
        request,
        A0,
        {"error_code": 0, "high_watermark": 10, "log_start_offset": 0, "records": b"x"},
    )
    assert sink.applied == []
    assert fetcher.partitions[A0].fetch_offset == 10


def test_a_fetch_refused_as_a_whole_fails_the_round_and_closes_the_session() -> None:
    """An error for the whole request other than the session's own: the round fails (the
    fetcher backs off and reconnects, as on a broken connection), and the next fetch is a
    full one closing session 7 (Kafka's FetchSessionHandler.handleError: a new session,
    closing the existing one), not an incremental one taken as answered."""
    leader = Scripted({A0: 0, A1: 0, B0: 0}, ErrorCode.UNKNOWN_SERVER_ERROR, {})
    fetcher = fetcher_of(leader)
    fetch(fetcher)
    request = fetcher._build_fetch()
    assert request is not None
    with pytest.raises(OSError, match="UNKNOWN_SERVER_ERROR"):
        fetcher._fetch_once(request)
    fetcher._close()  # as the fetcher's loop does on the error
    fetch(fetcher)
    assert (leader.requests[2]["session_id"], leader.requests[2]["session_epoch"]) == (7, 0)


def test_a_partition_followed_anew_while_its_records_were_applied_keeps_its_new_state() -> None:
    """A LeaderAndIsr (a new leader epoch) makes the partition's new state while the
    answer's records are being appended: the answer moves the state it was for, not the
    new one, which is truncated and fetched from its own offset (Kafka's
    processFetchRequest updates a partition's state only if it is still the one fetched)."""
    sink = Sink()
    leader = Scripted({A0: 0})
    fetcher = fetcher_of(leader, sink)
    newer = FetchState(10, 6)
    sink.while_applying.append(lambda: fetcher.add_all([(A0, newer)]))
    fetch(fetcher)
    assert sink.applied == [A0]
    assert fetcher.partitions[A0] is newer
    assert (newer.fetch_offset, newer.leader_epoch, newer.truncating) == (10, 6, True)


def test_an_answer_is_taken_only_for_the_partitions_current_fetch_position() -> None:
    """processFetchRequest's check: the answer was read at the partition's fetch offset
    and leader epoch (what the leader's session held: a capped session may still hold an
    older one), the partition is not set aside, and, with a log to truncate, not waiting
    to be truncated (a new leader epoch's state at the same offset, say)."""
    ready = FetchState(10, 6, truncating=False)
    assert _answers_current_state((10, 6), ready, 1.0, True)
    assert not _answers_current_state((10, 5), ready, 1.0, True)  # an older epoch's
    assert not _answers_current_state((9, 6), ready, 1.0, True)
    assert not _answers_current_state((10, 6), None, 1.0, True)  # no longer followed
    aside = FetchState(10, 6, delayed_until=2.0, truncating=False)
    assert not _answers_current_state((10, 6), aside, 1.0, True)
    assert _answers_current_state((10, 6), aside, 2.0, True)
    truncating = FetchState(10, 6)
    assert not _answers_current_state((10, 6), truncating, 1.0, True)
    assert _answers_current_state((10, 6), truncating, 1.0, False)  # nothing to truncate


def forgotten(body: Mapping[str, Any]) -> set[TopicPartition]:
    return {
        TopicPartition(t["topic"], p)
        for t in body["forgotten_topics_data"]
        for p in t["partitions"]
    }


def test_a_partition_answered_out_of_range_leaves_the_session_until_reset() -> None:
    """A partition to be reset (OFFSET_OUT_OF_RANGE) is not ready to fetch: the next
    incremental fetch forgets it (Kafka's session builder lists only partitions ready to
    fetch), so the leader does not answer it again from the offset out of its range."""
    leader = Scripted({A0: 0, A1: 0, B0: 0}, {A1: ErrorCode.OFFSET_OUT_OF_RANGE}, {})
    fetcher = fetcher_of(leader, follower_log=LogStarts())
    fetch(fetcher)
    fetch(fetcher)
    assert fetcher.partitions[A1].out_of_range
    fetch(fetcher)
    assert forgotten(leader.requests[2]) == {A1}


def test_a_partition_with_a_corrupt_answer_leaves_the_session_for_the_backoff() -> None:
    """processFetchRequest: records failing validation are logged and the partition set
    aside for replica.fetch.backoff.ms (delayPartitions): forgotten by the session
    meanwhile, the others fetched on."""
    sink = Sink()
    leader = Scripted({A0: 0, A1: 0, B0: 0}, {A1: 0}, {})
    fetcher = fetcher_of(leader, sink, backoff_ms=60_000)
    fetch(fetcher)
    sink.corrupt = {A1}
    fetch(fetcher)
    assert fetcher.fetched() == {A0, A1, B0}
    assert fetcher.partitions[A1].fetch_offset == 11
    fetch(fetcher)
    assert forgotten(leader.requests[2]) == {A1}


def test_an_empty_answer_for_a_partition_that_moved_on_meanwhile_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The replica manager does not apply an answer for a leader epoch the partition no
    longer follows (the next LeaderAndIsr's state is on its way to the fetcher): an empty
    answer is no "Offset mismatch"; the partition is not failed, nothing is logged."""
    sink = Sink()
    leader = Scripted({A0: 0, A1: 0, B0: 0}, {A0: 0})
    fetcher = fetcher_of(leader, sink)
    fetch(fetcher)
    sink.moved_on = leader.empty = {A0}
    with caplog.at_level(logging.WARNING, logger="broker.fetcher"):
        fetch(fetcher)
    assert caplog.records == []
    assert fetcher.fetched() == {A0, A1, B0}
    assert fetcher.partitions[A0].fetch_offset == 11


def test_only_errors_other_than_leadership_ones_are_logged_as_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A leader that does not lead the partition (yet) at our epoch is routine during a
    leadership change: set aside quietly. A leader that cannot read the partition
    (CORRUPT_MESSAGE) is logged as an error, as Kafka's processFetchRequest does."""
    leader = Scripted(
        {
            A0: ErrorCode.NOT_LEADER_OR_FOLLOWER,
            A1: ErrorCode.FENCED_LEADER_EPOCH,
            B0: ErrorCode.CORRUPT_MESSAGE,
        }
    )
    fetcher = fetcher_of(leader)
    with caplog.at_level(logging.INFO, logger="broker.fetcher"):
        fetch(fetcher)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert [level for level, _ in logged] == [logging.ERROR]
    assert "b-0" in logged[0][1]
    assert "CORRUPT_MESSAGE" in logged[0][1]
    assert all(s.delayed_until > 0 for s in fetcher.partitions.values())


def test_the_manager_gives_every_fetcher_the_brokers_replica_fetch_settings() -> None:
    """replica.fetch.response.max.bytes, replica.fetch.max.bytes, replica.fetch.min.bytes
    and replica.socket.timeout.ms reach each leader's fetcher and its requests (they were
    accepted and had no effect)."""

    def refuse(endpoint: tuple[str, int], _client: str, _timeout: float) -> Any:
        raise ConnectionRefusedError(f"no leader at {endpoint}")  # the fetcher backs off

    manager = ReplicaFetcherManager(
        F,
        Sink(),
        {L: ("127.0.0.1", 1)}.get,
        max_wait_ms=400,
        backoff_ms=60_000,
        max_bytes=3000,
        partition_max_bytes=700,
        min_bytes=64,
        socket_timeout_s=2.5,
        connect=refuse,
    )
    try:
        manager.follow([(A0, L, 5, 10)])
        fetcher = manager._fetchers[L]
        assert (fetcher.max_bytes, fetcher.partition_max_bytes) == (3000, 700)
        assert (fetcher.min_bytes, fetcher.socket_timeout_s) == (64, 2.5)
        request = fetcher._build_fetch()
        assert request is not None
        body = fetcher._request_body(request)
        assert (body["min_bytes"], body["max_bytes"], body["max_wait_ms"]) == (64, 3000, 400)
        assert [p["partition_max_bytes"] for t in body["topics"] for p in t["partitions"]] == [700]
    finally:
        manager.close()


def test_the_managers_fetchers_connect_with_replica_socket_receive_buffer_bytes() -> None:
    """replica.socket.receive.buffer.bytes is the SO_RCVBUF of each fetcher's connection
    to its leader (Kafka's ReplicaFetcherBlockingSend gives it to its NetworkClient)."""
    with socket.socket() as scratch:
        scratch.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 7000)
        expected = scratch.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    endpoints: dict[int, tuple[str, int]] = {}
    manager = ReplicaFetcherManager(F, Sink(), endpoints.get, receive_buffer_bytes=7000)
    with socket.create_server(("127.0.0.1", 0)) as leader:
        conn = manager.connect(leader.getsockname(), "replica-fetcher-2", 5.0)
        try:
            assert isinstance(conn, KafkaConnection)
            assert conn._sock is not None
            assert conn._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == expected
            assert (conn.client_id, conn.timeout_s) == ("replica-fetcher-2", 5.0)
        finally:
            conn.close()
    manager.close()


def log_starts_listed(body: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(t["topic"], p["partition"]): p["log_start_offset"]
        for t in body["topics"]
        for p in t["partitions"]
    }


def test_a_fetch_tells_the_leader_each_partitions_log_start_and_its_moves() -> None:
    """Kafka 2.8's ReplicaFetcherThread.buildFetch sends the follower's own log start
    offset with each partition (the leader's low watermark for DeleteRecords is the
    lowest of its replicas'), and FetchSessionHandler lists a partition again when it
    changed: after an answer that moved our log start (following the leader's) and
    nothing else, the next incremental fetch lists that partition with it. The fetcher
    sent 0 always, and never listed such a partition again."""
    logs = LogStarts(a0=3, b0=7)

    def sink(tp: TopicPartition, *_: Any) -> int:
        logs.starts[tp] = 5  # as the leader's log start moved ours up
        return 10  # no records: where it fetched from

    leader = Scripted({}, {A0: 0}, {})
    leader.empty = {A0}
    fetcher = fetcher_of(leader, cast(Any, sink), follower_log=logs)
    fetch(fetcher)
    assert log_starts_listed(leader.requests[0]) == {A0: 3, A1: 0, B0: 7}
    fetch(fetcher)
    assert log_starts_listed(leader.requests[1]) == {}
    assert fetcher.fetched() == {A0, A1, B0}
    fetch(fetcher)
    assert log_starts_listed(leader.requests[2]) == {A0: 5}
