"""Which changes wake a long-polling fetch: new data and partition state changes wake
followers' and consumers' fetches; a high watermark move alone wakes only consumers'.
A follower still gets the new high watermark: with its next records, or when its long
poll ends. A fetch asking for min_bytes waits until that many are readable."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.apis import _enough
from broker.config import BrokerConfig
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import LEADER, T0, Loopback, fetch_body, make_leader
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition


def _long_poll(
    replica_id: int, wake: bool, monkeypatch: pytest.MonkeyPatch, max_wait_ms: int = 400
) -> tuple[float, list[float]]:
    """A session fetch waiting ``max_wait_ms``, during which a high watermark move
    (wake=False) or a data/state change (wake=True) is notified 50 ms in: (seconds it took,
    when it read its partitions again, in seconds from its start). Tests of a fetch woken
    early wait 3 s (the whole wait: woken, it finds nothing to answer) and bound the wake
    well below it, so a loaded machine's delays cannot pass for a long poll waited out."""
    apis, _replicas, _zk = make_leader([T0])
    conn = Loopback(apis)
    first = fetch_body({T0: 0}, replica_id=replica_id)
    session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
    rereads: list[float] = []
    reads: list[float] = []
    read = apis._read_fetch

    def counting(ctx: Any, rid: int, *again: Any) -> Any:
        if reads:  # not the request's first read
            rereads.append(time.monotonic() - started)
        reads.append(time.monotonic() - started)
        return read(ctx, rid, *again)

    monkeypatch.setattr(apis, "_read_fetch", counting)
    body = fetch_body({}, session_id=session_id, epoch=1, replica_id=replica_id)
    body["max_wait_ms"] = max_wait_ms

    def notify() -> None:
        time.sleep(0.05)
        apis.wake_fetches(wake)

    started = time.monotonic()
    notifier = threading.Thread(target=notify)
    notifier.start()
    conn.request(ApiKey.FETCH, 12, body)
    notifier.join(60)  # a bound that only catches a hang
    assert not notifier.is_alive(), "notifier still running after 60 s"
    return time.monotonic() - started, rereads


def test_a_high_watermark_move_does_not_wake_a_followers_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    took, rereads = _long_poll(2, False, monkeypatch)
    assert took >= 0.39
    # Not woken, but read once more when the long poll ends: the move is answered then.
    assert len(rereads) == 1
    assert rereads[0] >= 0.39


def test_a_high_watermark_move_wakes_a_consumers_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    _took, rereads = _long_poll(-1, False, monkeypatch, 3000)
    assert rereads
    assert rereads[0] < 2.5


def test_new_data_wakes_a_followers_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    _took, rereads = _long_poll(2, True, monkeypatch, 3000)
    assert rereads
    assert rereads[0] < 2.5


def _consumer_fetch(
    tmp_path: Path,
    min_bytes: int,
    session: bool,
    append_after_s: float | None,
    max_wait_ms: int = 30_000,
) -> tuple[float, int, int]:
    """A consumer's fetch of T0 from offset 0 (one batch of 3 values there, readable),
    waiting up to ``max_wait_ms`` (30 s: a fetch answered early is bounded well below it,
    whatever the machine's load) for ``min_bytes``, sessionless or in an incremental session; with
    ``append_after_s``, a second batch is appended that long after it starts. Returns
    (seconds it took, its error code, the record bytes answered)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        batch = build_batch([b"v" * 20] * 3)
        assert replicas.append_as_leader(T0, bytearray(batch), 1)[0] == ErrorCode.NONE
        conn = Loopback(apis)
        body = fetch_body({T0: 0}, replica_id=-1)
        if session:
            # A first full fetch at the log end makes the session: nothing to read there.
            first = fetch_body({T0: 3}, replica_id=-1)
            session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
            body = fetch_body({T0: 0}, session_id=session_id, epoch=1, replica_id=-1)
        body["min_bytes"] = min_bytes
        body["max_wait_ms"] = max_wait_ms

        def append_later(delay: float) -> None:
            time.sleep(delay)
            replicas.append_as_leader(T0, build_batch([b"w" * 20] * 3), 1)

        appender = None
        if append_after_s is not None:
            appender = threading.Thread(target=append_later, args=(append_after_s,))
            appender.start()
        started = time.monotonic()
        got = conn.request(ApiKey.FETCH, 12, body)
        took = time.monotonic() - started
        if appender is not None:
            appender.join(60)  # a bound that only catches a hang
            assert not appender.is_alive(), "appender still running after 60 s"
        part = got["responses"][0]["partitions"][0]
        return took, part["error_code"], len(part["records"])
    finally:
        logs.close()


@pytest.mark.parametrize("session", [False, True])
def test_a_consumers_fetch_waits_for_min_bytes_until_max_wait(
    tmp_path: Path, session: bool
) -> None:
    """Fewer bytes readable than min_bytes: the fetch waits out max_wait_ms, then answers
    with what there is, as Kafka's fetchMessages does. It was answered at once, as soon as
    any byte was readable, so a consumer asking for large fetches spun on small ones."""
    took, error, size = _consumer_fetch(tmp_path, 1_000_000, session, None, 2000)
    assert error == ErrorCode.NONE
    assert size > 0
    assert took >= 1.9


@pytest.mark.parametrize("session", [False, True])
def test_a_consumers_fetch_is_answered_once_appends_bring_min_bytes(
    tmp_path: Path, session: bool
) -> None:
    """Woken by an append, the fetch counts the bytes readable again: two batches reach
    min_bytes (one does not), and it is answered then, not at max_wait_ms."""
    one = len(build_batch([b"v" * 20] * 3))
    took, error, size = _consumer_fetch(tmp_path, one + 1, session, 0.2)
    assert error == ErrorCode.NONE
    assert size >= 2 * one - 8  # both batches (timestamps' varints may differ)
    assert 0.15 <= took < 15


def test_a_min_bytes_of_one_answers_at_once(tmp_path: Path) -> None:
    took, error, size = _consumer_fetch(tmp_path, 1, False, None)
    assert (error, size > 0) == (ErrorCode.NONE, True)
    assert took < 15


@pytest.mark.parametrize("replica_id", [-1, 2])
@pytest.mark.parametrize("session", [False, True])
def test_a_min_bytes_of_zero_answers_at_once_with_nothing_readable(
    session: bool, replica_id: int
) -> None:
    """min_bytes 0 (a consumer's fetch.min.bytes may be 0) asks for no data: Kafka's
    fetchMessages answers at once (bytesReadable >= fetchMinBytes). It long-polled for
    max_wait_ms, waiting for a byte."""
    apis, replicas, _zk = make_leader([T0])
    try:
        conn = Loopback(apis)
        body = fetch_body({T0: 0}, replica_id=replica_id)
        if session:
            # An idle incremental round: nothing listed, nothing changed.
            first = fetch_body({T0: 0}, replica_id=replica_id)
            session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
            body = fetch_body({}, session_id=session_id, epoch=1, replica_id=replica_id)
        body["min_bytes"] = 0
        body["max_wait_ms"] = 30_000
        started = time.monotonic()
        got = conn.request(ApiKey.FETCH, 12, body)
        took = time.monotonic() - started
        assert got["error_code"] == ErrorCode.NONE
        assert took < 15
    finally:
        replicas.close()


def _min_bytes_fetch(
    tmp_path: Path,
    *,
    segment_bytes: int,
    batches: int,
    value_size: int,
    min_bytes: int,
    partition_max_bytes: int,
    max_bytes: int = 50 << 20,
    at_segment_tail: bool = False,
    session: bool = False,
    replica_id: int = -1,
    max_wait_ms: int = 30_000,
) -> tuple[float, int, int, int]:
    """A fetch of T0 (``batches`` batches of one ``value_size`` value, in segments of
    ``segment_bytes``) asking for ``min_bytes``, from offset 0 or (``at_segment_tail``)
    from the last batch of the first segment, sessionless or in an incremental session,
    by a consumer or a follower. Returns (seconds it took, error, record bytes answered,
    the size of a batch)."""
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "x:2181", "broker.id": "1", "log.segment.bytes": str(segment_bytes)}
    )
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        for _ in range(batches):
            assert replicas.append_as_leader(T0, build_batch([b"x" * value_size]), 1)[0] == 0
        log = replicas.partitions[T0].log
        assert log is not None
        bases = log.segment_base_offsets()
        offset = bases[1] - 1 if at_segment_tail else 0
        conn = Loopback(apis)
        body = fetch_body({T0: offset}, replica_id=replica_id)
        if session:
            first = fetch_body({T0: log.log_end_offset}, replica_id=replica_id)
            session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
            assert session_id
            body = fetch_body({T0: offset}, session_id=session_id, epoch=1, replica_id=replica_id)
        body["topics"][0]["partitions"][0]["partition_max_bytes"] = partition_max_bytes
        body.update(min_bytes=min_bytes, max_bytes=max_bytes, max_wait_ms=max_wait_ms)
        started = time.monotonic()
        got = conn.request(ApiKey.FETCH, 12, body)
        took = time.monotonic() - started
        part = got["responses"][0]["partitions"][0]
        size = len(log.read(0, 1).to_bytes())
        return took, part["error_code"], len(part["records"]), size
    finally:
        logs.close()


@pytest.mark.parametrize("replica_id", [-1, 2])
@pytest.mark.parametrize("session", [False, True])
def test_a_fetch_at_a_segments_last_batch_is_answered_at_once_with_more_further_on(
    tmp_path: Path, session: bool, replica_id: int
) -> None:
    """The fetch offset in the last batch of a segment, the high watermark (a follower: the
    log end) segments further on: Kafka 2.8's DelayedFetch completes it at once (Case F,
    "the fetch offset locates not on the last segment of the log"). Reads stay within a
    segment, and the one batch read was counted against min_bytes: the fetch waited out
    max_wait_ms however much came after."""
    took, error, size, batch = _min_bytes_fetch(
        tmp_path,
        segment_bytes=2000,
        batches=12,
        value_size=400,
        min_bytes=1500,  # under what is readable in all, over what is left in the segment
        partition_max_bytes=1 << 20,
        at_segment_tail=True,
        session=session,
        replica_id=replica_id,
    )
    assert (error, size) == (ErrorCode.NONE, batch)
    assert took < 15


@pytest.mark.parametrize("session", [False, True])
def test_min_bytes_of_a_partitions_max_bytes_is_reached_by_a_lagging_consumer(
    tmp_path: Path, session: bool
) -> None:
    """fetch.min.bytes = max.partition.fetch.bytes = 1 MiB, 3 MB readable: Kafka 2.8's
    DelayedFetch (Case G) counts min(bytes readable, partition max bytes) = 1 MiB and
    completes at once. The whole batches read (just under 1 MiB) were counted: every
    fetch of a consumer catching up waited out max_wait_ms."""
    took, error, size, batch = _min_bytes_fetch(
        tmp_path,
        segment_bytes=1 << 30,
        batches=300,
        value_size=10_000,
        min_bytes=1 << 20,
        partition_max_bytes=1 << 20,
        session=session,
    )
    assert error == ErrorCode.NONE
    assert (1 << 20) - batch < size <= 1 << 20
    assert took < 15


def test_min_bytes_counts_a_partitions_readable_bytes_beyond_the_requests_max_bytes(
    tmp_path: Path,
) -> None:
    """Kafka's DelayedFetch counts each partition's readable bytes up to its partition max
    bytes, whatever the request's max_bytes lets this answer carry: 500 kB asked for, 100 kB
    answered (the request's max), 1 MiB counted, answered at once."""
    took, error, size, batch = _min_bytes_fetch(
        tmp_path,
        segment_bytes=1 << 30,
        batches=300,
        value_size=10_000,
        min_bytes=500_000,
        partition_max_bytes=1 << 20,
        max_bytes=100_000,
    )
    assert error == ErrorCode.NONE
    assert 100_000 - batch < size <= 100_000
    assert took < 15


def test_min_bytes_still_waits_for_bytes_not_yet_readable(tmp_path: Path) -> None:
    """Less readable (in one segment, up to the high watermark) than min_bytes: the fetch
    waits out max_wait_ms, then answers with what there is."""
    took, error, size, batch = _min_bytes_fetch(
        tmp_path,
        segment_bytes=1 << 30,
        batches=3,
        value_size=400,
        min_bytes=4 * 450,
        partition_max_bytes=1 << 20,
        max_wait_ms=1000,
    )
    assert (error, size) == (ErrorCode.NONE, 3 * batch)
    assert took >= 0.9


def test_enough_is_min_bytes_readable_and_at_least_one_unless_none_is_asked() -> None:
    assert _enough(0, 0)
    assert _enough(0, -1)
    assert not _enough(0, 1)
    assert _enough(1, 1)
    assert not _enough(5, 6)
    assert _enough(6, 6)


def test_a_sessionless_fetch_is_read_again_only_for_a_change_of_its_partitions(
    tmp_path: Path,
) -> None:
    """Every librdkafka consumer fetches without a session: each append anywhere re-read
    every partition each waiting consumer listed (20 appends to another partition: 2,000
    reads of a fetch of 100). Kafka 2.8's purgatory keys a waiting fetch by its partitions
    (tryCompleteElseWatch; an append checks only its own). An append to one it lists
    still answers it."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    idle = [TopicPartition("idle", i) for i in range(100)]
    hot = TopicPartition("hot", 0)
    apis, replicas, _zk = make_leader([*idle, hot], isr=(LEADER,), logs=logs)
    try:
        reads: list[TopicPartition] = []
        leader_partition = replicas.leader_partition

        def counting(tp: TopicPartition, *args: Any) -> Any:
            if tp != hot:  # an append to hot looks it up too
                reads.append(tp)
            return leader_partition(tp, *args)

        replicas.leader_partition = counting  # type: ignore[method-assign, assignment]  # passes its arguments on
        body = fetch_body({tp: 0 for tp in idle}, replica_id=-1, epoch=-1)  # sessionless
        body["max_wait_ms"] = 30_000  # answered by the append to idle-7 below
        answers: list[Any] = []
        fetch = threading.Thread(
            target=lambda: answers.append(Loopback(apis).request(ApiKey.FETCH, 11, body))
        )
        fetch.start()
        deadline = time.monotonic() + 10
        while len(reads) < len(idle) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(reads) == len(idle)  # its first read
        time.sleep(0.1)  # now waiting
        batch = build_batch([b"x"])
        for _ in range(20):
            assert replicas.append_as_leader(hot, bytearray(batch), 1)[0] == ErrorCode.NONE
        time.sleep(0.1)
        assert len(reads) == len(idle)  # not read again
        assert not answers
        assert replicas.append_as_leader(idle[7], bytearray(batch), 1)[0] == ErrorCode.NONE
        fetch.join(10)  # a bound that only catches a hang
        assert not fetch.is_alive()
        (answer,) = answers
        got = {
            (t["topic"], p["partition_index"]): len(p["records"] or b"")
            for t in answer["responses"]
            for p in t["partitions"]
        }
        assert [k for k, size in got.items() if size] == [("idle", 7)]
    finally:
        replicas.close()
        logs.close()
