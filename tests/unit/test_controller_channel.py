"""The controller's channel to one broker, against an in-process server speaking the Kafka
protocol: requests leave one at a time in the controller's order, each built once (the next
one while the broker works on the current), are sent again on a new connection when one
breaks, and are all reported abandoned when the broker leaves the channel."""

from __future__ import annotations

import dataclasses
import gc
import logging
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.channel import ControllerChannelManager
from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.request_batch import BrokerRequest, RequestBatch
from tests.unit.test_wire_client import read_exactly
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.protocol import decode_request_body, decode_request_header, encode_response, frame_size
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

DEADLINE_S = 30  # only catches a hang


def update_metadata_label(body: dict[str, Any]) -> str:
    """An UpdateMetadata told apart by its partitions: ``um:t-0,t-1`` (sorted)."""
    return "um:" + ",".join(
        f"{topic}-{p}"
        for topic, p in sorted(
            (t["topic_name"], p["partition_index"])
            for t in body["topic_states"]
            for p in t["partition_states"]
        )
    )


def partitions_label(kind: str, body: dict[str, Any]) -> str:
    """A LeaderAndIsr (``lai``) or StopReplica (``sr``) told apart by its partitions:
    ``lai:orders-1``."""
    return f"{kind}:" + ",".join(
        f"{t['topic_name']}-{p['partition_index']}"
        for t in body["topic_states"]
        for p in t["partition_states"]
    )


class Server:
    """Answers Metadata requests, on any number of connections, one request at a time;
    ``hang_up_on`` names topics whose first request is answered by closing the
    connection; ``before_answer(topic)`` runs before each answer."""

    def __init__(
        self,
        delay_s: float = 0.0,
        hang_up_on: frozenset[str] = frozenset(),
        before_answer: Callable[[str], None] | None = None,
    ) -> None:
        self.delay_s = delay_s
        self.before_answer = before_answer
        self.hang_up_on = set(hang_up_on)
        self.received: list[str] = []
        # Each UpdateMetadata received, as partition -> (leader, leader epoch), and the
        # live brokers it names.
        self.update_metadata: list[tuple[dict[int, tuple[int, int]], list[int]]] = []
        self.connections = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                prefix = read_exactly(conn, 4)
                frame = read_exactly(conn, frame_size(prefix)) if prefix else None
                if frame is None:
                    return
                header, offset = decode_request_header(frame)
                key, version = header["request_api_key"], header["request_api_version"]
                body = decode_request_body(key, version, frame, offset)
                if key == ApiKey.UPDATE_METADATA:
                    topic = update_metadata_label(body)
                    self.update_metadata.append(
                        (
                            {
                                p["partition_index"]: (p["leader"], p["leader_epoch"])
                                for t in body["topic_states"]
                                for p in t["partition_states"]
                            },
                            [b["id"] for b in body["live_brokers"]],
                        )
                    )
                elif key in (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA):
                    topic = partitions_label("lai" if key == ApiKey.LEADER_AND_ISR else "sr", body)
                else:
                    topic = body["topics"][0]["name"]
                self.received.append(topic)
                if topic in self.hang_up_on:
                    self.hang_up_on.discard(topic)
                    return
                if self.before_answer is not None:
                    self.before_answer(topic)
                time.sleep(self.delay_s)
                reply: dict[str, Any] = {
                    "brokers": [],
                    "controller_id": 1,
                    "topics": [{"name": topic}],
                }
                if key == ApiKey.UPDATE_METADATA:
                    reply = {"error_code": 0}
                elif key == ApiKey.LEADER_AND_ISR:
                    reply = {"error_code": 0, "topics": []}
                elif key == ApiKey.STOP_REPLICA:
                    reply = {"error_code": 0, "partition_errors": []}
                conn.sendall(encode_response(key, version, header["correlation_id"], reply))

    def close(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def make(**kwargs: Any) -> Server:
        made.append(Server(**kwargs))
        return made[-1]

    yield make
    for s in made:
        s.close()


class Built:
    """Counts how often each request's body is built."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    def request(self, topic: str) -> BrokerRequest:
        def make_body() -> dict[str, Any]:
            with self.lock:
                self.counts[topic] = self.counts.get(topic, 0) + 1
            return {"topics": [{"name": topic}]}

        return BrokerRequest(7, ApiKey.METADATA, 9, make_body)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Connected:
    """A channel with one broker, the server; what it answered and abandoned."""

    def __init__(self, server: Server, socket_timeout_s: float = 10) -> None:
        self.answered: list[tuple[BrokerRequest, dict[str, Any]]] = []
        self.abandoned: list[BrokerRequest] = []
        self.channel = ControllerChannelManager(
            1,
            lambda request, response: self.answered.append((request, response)),
            socket_timeout_s=socket_timeout_s,
            on_abandon=self.abandoned.append,
        )
        self.channel.add_broker(7, "127.0.0.1", server.port)

    def answered_topics(self) -> list[str]:
        return [response["topics"][0]["name"] for _, response in self.answered]


def test_requests_leave_in_order_each_built_once(servers: Callable[..., Server]) -> None:
    server = servers(delay_s=0.002)
    built = Built()
    c = Connected(server)
    topics = [f"t{i}" for i in range(40)]
    requests = [built.request(t) for t in topics]
    try:
        # In two sends, the second while the first is in flight.
        c.channel.send(requests[:10])
        c.channel.send(requests[10:])
        wait_until(lambda: len(c.answered) == len(requests), "every answer")
    finally:
        c.channel.close()
    assert server.received == topics
    assert [r for r, _ in c.answered] == requests
    assert c.answered_topics() == topics
    assert built.counts == {t: 1 for t in topics}
    assert server.connections == 1
    assert c.abandoned == []


def test_a_broken_connection_sends_the_request_again_in_order(
    servers: Callable[..., Server],
) -> None:
    server = servers(hang_up_on=frozenset({"t3", "t7"}))
    built = Built()
    c = Connected(server)
    topics = [f"t{i}" for i in range(10)]
    try:
        c.channel.send([built.request(t) for t in topics])
        wait_until(lambda: len(c.answered) == len(topics), "every answer")
    finally:
        c.channel.close()
    # Each hang-up: the request is sent again, and nothing after it went first.
    resent = ["t0", "t1", "t2", "t3", "t3", "t4", "t5", "t6", "t7", "t7", "t8", "t9"]
    assert server.received == resent
    assert c.answered_topics() == topics
    assert server.connections == 3
    # Sent again as it was encoded, although the one behind it was built meanwhile.
    assert built.counts == {t: 1 for t in topics}


def test_a_broker_leaving_abandons_what_it_was_sent_and_what_waited(
    servers: Callable[..., Server],
) -> None:
    server = servers(delay_s=0.2)
    built = Built()
    c = Connected(server)
    requests = [built.request(f"t{i}") for i in range(6)]
    c.channel.send(requests)
    wait_until(lambda: len(server.received) >= 2, "two requests to arrive")
    c.channel.remove_broker(7)
    wait_until(lambda: len(c.answered) + len(c.abandoned) == len(requests), "every request's fate")
    c.channel.close()
    # Answered ones first, in order; all the others abandoned, the one taken ahead too.
    assert [r for r, _ in c.answered] + c.abandoned == requests
    assert len(c.abandoned) >= 3


def test_the_next_request_is_built_while_the_broker_works(
    servers: Callable[..., Server],
) -> None:
    built = Built()
    topics = [f"t{i}" for i in range(5)]
    not_ahead: list[str] = []

    def hold(topic: str) -> None:
        """Answer t_i only once t_i+1 was built (after 5 s anyway, noted)."""
        i = topics.index(topic)
        deadline = time.monotonic() + 5
        while i + 1 < len(topics) and topics[i + 1] not in built.counts:
            if time.monotonic() > deadline:
                not_ahead.append(topic)
                return
            time.sleep(0.002)

    c = Connected(servers(before_answer=hold))
    try:
        c.channel.send([built.request(t) for t in topics])
        wait_until(lambda: len(c.answered) == len(topics), "every answer")
    finally:
        c.channel.close()
    assert not_ahead == []
    assert built.counts == {t: 1 for t in topics}


class _Body(dict[str, Any]):
    """A body that can be watched for being let go of (a plain dict cannot)."""


def test_a_body_is_held_encoded_while_its_request_waits_for_the_answer(
    servers: Callable[..., Server],
) -> None:
    """The dicts a body is made of are let go of once it is encoded: a 100,000-partition
    StopReplica's are 18.4 MB, its encoding 1.0 MB. A request sent again after a hang-up
    is the same."""
    made: list[weakref.ref[_Body]] = []
    alive_while_answered: list[bool] = []

    def request(topic: str) -> BrokerRequest:
        def make_body() -> dict[str, Any]:
            body = _Body(topics=[{"name": topic}])
            made.append(weakref.ref(body))
            return body

        return BrokerRequest(7, ApiKey.METADATA, 9, make_body)

    def look(topic: str) -> None:
        gc.collect()
        alive_while_answered.append(any(r() is not None for r in made))

    server = servers(hang_up_on=frozenset({"t1"}), before_answer=look)
    c = Connected(server)
    topics = ["t0", "t1", "t2"]
    try:
        c.channel.send([request(t) for t in topics])
        wait_until(lambda: len(c.answered) == len(topics), "every answer")
    finally:
        c.channel.close()
    assert server.received == ["t0", "t1", "t1", "t2"]
    assert c.answered_topics() == topics
    assert alive_while_answered == [False, False, False]  # the hang-up is not answered


# --- UpdateMetadata replaced by newer UpdateMetadata waiting behind it ---------------------

TOPIC = "orders"
ORDERS_ID = uuid.UUID(int=7)


class Tracker(str):
    """Stands for the event a request belongs to: compares as its name, and notes when
    the channel says the request was written to the broker's socket."""

    def __new__(cls, name: str, written: list[str]) -> Tracker:
        tracker = super().__new__(cls, name)
        tracker.written_log = written
        return tracker

    written_log: list[str]

    def written(self, request: BrokerRequest) -> None:
        self.written_log.append(str(self))


def update_metadata(
    partitions: list[int] | None,
    name: str,
    written: list[str] | None = None,
    *,
    deleting: bool = False,
    leader: int = 7,
    leader_epoch: int = 1,
    live: tuple[int, ...] = (7,),
    topic_id: uuid.UUID | None = ORDERS_ID,
    port: int = 9,
) -> BrokerRequest:
    """Broker 7's UpdateMetadata for these partitions of ``orders`` (None: all three),
    built by the controller's request batch; its tracker is ``name``, noting in
    ``written`` when it is written. ``deleting``: the topic is being deleted (its
    partitions' leader is sent as -2). Every partition has ``leader`` at ``leader_epoch``;
    ``live``: the brokers it says are live."""
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    if deleting:
        ctx.topics_to_be_deleted.add(TOPIC)
    if topic_id is not None:
        ctx.topic_ids[TOPIC] = topic_id
    ctx.add_live_brokers(
        {b: (BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", port),)), 10 * b) for b in live}
    )
    for p in range(3):
        tp = TopicPartition(TOPIC, p)
        ctx.update_assignment(tp, ReplicaAssignment((7,)))
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(leader, leader_epoch, (leader,), 0), 3
        )
    batch = RequestBatch()
    batch.add_update_metadata(
        [7], None if partitions is None else [TopicPartition(TOPIC, p) for p in partitions]
    )
    [request] = batch.build(ctx, 1)
    return dataclasses.replace(
        request, tracker=Tracker(name, written if written is not None else [])
    )


def leader_and_isr(
    partitions: list[int], name: str, *, stop_replica: bool = False
) -> BrokerRequest:
    """Broker 7's LeaderAndIsr (or, ``stop_replica``, StopReplica) for these partitions of
    ``orders``, built by the controller's request batch; its tracker is ``name``."""
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.topic_ids[TOPIC] = ORDERS_ID
    ctx.add_live_brokers({7: (BrokerRegistration(7, (EndPoint("PLAINTEXT", "h", 9),)), 70)})
    batch = RequestBatch()
    for p in partitions:
        tp = TopicPartition(TOPIC, p)
        lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(7, 5, (7,), 0), 3)
        ctx.update_assignment(tp, ReplicaAssignment((7,)))
        ctx.leadership[tp] = lice
        if stop_replica:
            batch.add_stop_replica([7], tp, delete_partition=False)
        else:
            batch.add_leader_and_isr_many([([7], tp, lice, ReplicaAssignment((7,)))], is_new=False)
    [request] = batch.build(ctx, 1)
    return dataclasses.replace(request, tracker=Tracker(name, []))


class Held:
    """A channel whose broker holds its answer to ``hold`` until released, with the
    request after it already taken ahead: whatever is sent meanwhile waits in the queue."""

    def __init__(self, servers: Callable[..., Server]) -> None:
        self.release = threading.Event()
        self.built = Built()

        def before_answer(topic: str) -> None:
            if topic == "hold":
                self.release.wait(DEADLINE_S)

        self.server = servers(before_answer=before_answer)
        self.c = Connected(self.server)
        self.c.channel.send([self.built.request("hold"), self.built.request("taken-ahead")])
        wait_until(lambda: "taken-ahead" in self.built.counts, "the next request built ahead")

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.c.channel.close()

    def answer_all(self, count: int) -> None:
        """Let the broker answer ``hold``; wait for ``count`` answers in all."""
        self.release.set()
        wait_until(lambda: len(self.c.answered) == count, "every answer")

    def trackers_answered(self) -> list[Any]:
        return [r.tracker for r, _ in self.c.answered]


def test_update_metadata_said_again_behind_it_is_dropped(servers: Callable[..., Server]) -> None:
    h = Held(servers)
    c = h.c
    written: list[str] = []
    with h:
        c.channel.send([update_metadata([0, 1], "A", written)])
        c.channel.send([update_metadata([], "B", written)])  # the live brokers only
        # All B says, not all A says: B goes, and C's row goes to A in place of A's own
        # (_hand_rows_forward), so C goes too, answered after A.
        c.channel.send([update_metadata([0], "C", written)])
        assert c.channel.queue_sizes() == {7: 2}  # A and the one taken ahead
        c.channel.send([update_metadata(None, "D", written)])  # says all of A and C
        assert c.channel.queue_sizes() == {7: 2}
        assert c.channel.superseded() == 3
        h.answer_all(6)
    assert h.server.received == ["hold", "taken-ahead", "um:orders-0,orders-1,orders-2"]
    # The dropped ones are answered with the one that replaced them, oldest first.
    assert h.trackers_answered() == [None, None, "A", "B", "C", "D"]
    # Written once, in D: each event hears its UpdateMetadata went out then.
    assert written == ["A", "B", "C", "D"]
    assert all(response == {"error_code": 0} for _, response in c.answered[2:])
    # The dropped ones are handed back without their rows and body (not held twice).
    assert [r.update_metadata_rows is None for r, _ in c.answered[2:]] == [True] * 3 + [False]
    assert all(r.shared is None for r, _ in c.answered[2:5])
    assert c.abandoned == []


def test_update_metadata_marking_a_topic_deleted_is_dropped_only_for_another_marking_it(
    servers: Callable[..., Server],
) -> None:
    """A broker hosting none of a topic's replicas learns of its deletion from the
    UpdateMetadata marking it (leader -2) alone (its group offsets of the topic go then):
    the topic made again under the name, queued behind, must not hide it."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata(None, "deleted", deleting=True)])
        c.channel.send([update_metadata(None, "made again")])
        assert c.channel.queue_sizes() == {7: 3}  # both, and the one taken ahead
        # Deleted again: this one says all both said (the deletion included).
        c.channel.send([update_metadata(None, "deleted again", deleting=True)])
        assert c.channel.queue_sizes() == {7: 2}
        assert c.channel.superseded() == 2
        h.answer_all(5)
    assert h.trackers_answered() == [None, None, "deleted", "made again", "deleted again"]


def test_the_end_of_a_full_update_is_dropped_only_for_the_end_of_another(
    servers: Callable[..., Server],
) -> None:
    """A full update's last request (FULL) ends a new broker's Metadata hold (item 13):
    dropped for an incremental update that says all it says, the broker would never hear
    its metadata is whole, and would hold Metadata until the bound."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata(None, "full")])
        c.channel.send([update_metadata([0, 1, 2], "incremental")])
        # The full update's end stays: the incremental one handed it its rows and went,
        # to be answered after it.
        assert c.channel.queue_sizes() == {7: 2}
        assert c.channel.superseded() == 1
        c.channel.send([update_metadata(None, "full again")])  # it ends one: it goes
        assert c.channel.queue_sizes() == {7: 2}
        assert c.channel.superseded() == 2
        h.answer_all(5)
    assert h.trackers_answered() == [None, None, "full", "incremental", "full again"]


def test_what_is_queued_before_a_full_updates_end_that_stays_is_kept(
    servers: Callable[..., Server],
) -> None:
    """Dropped, an incremental update queued before a full update's end (FULL) that stays
    would reach the broker after it, in the newer request: the broker would take its
    metadata for whole without those partitions' news."""
    h = Held(servers)
    c = h.c
    with h:
        # The full update does not say all "before" says (a deletion's mark)...
        c.channel.send([update_metadata([0], "before", deleting=True)])
        c.channel.send([update_metadata(None, "full")])
        # ... this one does.
        c.channel.send([update_metadata([0], "after", deleting=True)])
        assert c.channel.queue_sizes() == {7: 4}
        assert c.channel.superseded() == 0
        h.answer_all(5)
    assert h.server.received == [
        "hold",
        "taken-ahead",
        "um:orders-0",
        "um:orders-0,orders-1,orders-2",
        "um:orders-0",
    ]


def test_update_metadata_with_another_request_behind_it_is_kept(
    servers: Callable[..., Server],
) -> None:
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0], "A")])
        c.channel.send([h.built.request("between")])
        c.channel.send([update_metadata(None, "B")])
        # Not all of B: B stays (and takes C's rows: C goes, answered after B).
        c.channel.send([update_metadata([1, 2], "C")])
        assert c.channel.superseded() == 1
        h.answer_all(6)
    assert h.server.received == [
        "hold",
        "taken-ahead",
        "um:orders-0",
        "between",
        "um:orders-0,orders-1,orders-2",
    ]
    assert h.trackers_answered() == [None, None, "A", None, "B", "C"]


def test_a_newer_row_goes_in_place_of_the_row_waiting_for_its_partition(
    servers: Callable[..., Server],
) -> None:
    """A broker busy for minutes (applying 100,000 new logs) would otherwise be sent, and
    the controller hold for it meanwhile, a row for each change of a partition's ISR:
    each partition's newest row goes where the last one waiting for it is, and the newer
    request without it. The broker learns no state later than it would have, and ends
    where sending all of them would leave it."""
    h = Held(servers)
    c = h.c
    written: list[str] = []
    with h:
        c.channel.send([update_metadata([0, 1], "A", written)])
        c.channel.send([update_metadata([1, 2], "B", written, leader_epoch=2)])
        assert c.channel.queue_sizes() == {7: 3}  # B keeps partition 2
        # Its only row goes to A, the last waiting with partition 1: C goes, answered
        # after B, the last waiting.
        c.channel.send([update_metadata([1], "C", written, leader_epoch=3)])
        assert c.channel.queue_sizes() == {7: 3}
        assert c.channel.superseded() == 1
        h.answer_all(5)
    assert h.server.update_metadata == [({0: (7, 1), 1: (7, 3)}, [7]), ({2: (7, 2)}, [7])]
    # Each answered and written after the request that carried its rows, in order.
    assert h.trackers_answered() == [None, None, "A", "B", "C"]
    assert written == ["A", "B", "C"]
    assert [r.update_metadata_rows is None for r, _ in c.answered[2:]] == [False, False, True]
    assert c.abandoned == []


def test_a_newer_row_goes_to_the_last_request_waiting_for_its_partition(
    servers: Callable[..., Server],
) -> None:
    """The last one waiting with the partition says what the broker is left with: an
    earlier one (here one that cannot carry it, a deletion's mark) keeps its own."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0, 1], "deleted", deleting=True)])
        c.channel.send([update_metadata(None, "full", leader_epoch=2)])
        c.channel.send([update_metadata([0], "newer", leader_epoch=3)])
        assert c.channel.queue_sizes() == {7: 3}  # the newer one went into the full one
        h.answer_all(5)
    assert h.server.update_metadata == [
        ({0: (-2, 1), 1: (-2, 1)}, [7]),
        ({0: (7, 3), 1: (7, 2), 2: (7, 2)}, [7]),
    ]
    assert h.trackers_answered() == [None, None, "deleted", "full", "newer"]


@pytest.mark.parametrize("stop_replica", [False, True], ids=["leader_and_isr", "stop_replica"])
def test_a_newer_row_goes_past_a_request_not_naming_its_partition(
    servers: Callable[..., Server], stop_replica: bool
) -> None:
    """Where leaderships move while a broker is slow, its queue interleaves LeaderAndIsr
    with UpdateMetadata: a row goes past one that does not name its partition, and stays
    behind one that does (the broker must apply it before the metadata that follows)."""
    h = Held(servers)
    c = h.c
    kind = "sr" if stop_replica else "lai"
    with h:
        c.channel.send([update_metadata([0, 1], "A")])
        c.channel.send([leader_and_isr([1], "move", stop_replica=stop_replica)])
        c.channel.send([update_metadata([0, 1], "B", leader_epoch=2)])
        assert c.channel.queue_sizes() == {7: 4}  # one taken ahead
        h.answer_all(5)
    assert h.server.received[2:] == ["um:orders-0,orders-1", f"{kind}:orders-1", "um:orders-1"]
    assert h.server.update_metadata == [({0: (7, 2), 1: (7, 1)}, [7]), ({1: (7, 2)}, [7])]
    assert h.trackers_answered() == [None, None, "A", "move", "B"]


def test_an_update_metadata_whose_rows_all_went_past_a_leader_and_isr_is_answered_with_them(
    servers: Callable[..., Server],
) -> None:
    h = Held(servers)
    c = h.c
    written: list[str] = []
    with h:
        c.channel.send([update_metadata([0, 1], "A", written)])
        c.channel.send([leader_and_isr([2], "move")])
        c.channel.send([update_metadata([0], "B", written, leader_epoch=2)])
        assert c.channel.queue_sizes() == {7: 3}
        assert c.channel.superseded() == 1
        h.answer_all(5)
    assert h.server.received[2:] == ["um:orders-0,orders-1", "lai:orders-2"]
    assert h.server.update_metadata == [({0: (7, 2), 1: (7, 1)}, [7])]
    # B said nothing A does not say now: answered, and written, with A.
    assert h.trackers_answered() == [None, None, "A", "B", "move"]
    assert written == ["A", "B"]


def test_a_newer_row_goes_past_no_request_of_another_kind(
    servers: Callable[..., Server],
) -> None:
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0, 1], "A")])
        c.channel.send([h.built.request("between")])
        c.channel.send([update_metadata([0], "B", leader_epoch=2)])
        assert c.channel.queue_sizes() == {7: 4}
        h.answer_all(5)
    assert h.server.received[2:] == ["um:orders-0,orders-1", "between", "um:orders-0"]
    assert h.server.update_metadata == [({0: (7, 1), 1: (7, 1)}, [7]), ({0: (7, 2)}, [7])]


@pytest.mark.parametrize(
    ("waiting", "newer", "why"),
    [
        ({}, {"leader": 8, "live": (7, 8)}, "the waiting one has no address for its leader"),
        (
            {"topic_id": uuid.UUID(int=1)},
            {"topic_id": uuid.UUID(int=2)},
            "another topic of the same name",
        ),
        ({"topic_id": None}, {"topic_id": None}, "a topic without an id"),
        ({"deleting": True}, {}, "the waiting one marks the topic deleted (said once)"),
        ({}, {"deleting": True}, "the newer one marks the topic deleted"),
    ],
)
def test_a_newer_row_stays_in_its_request_when_the_waiting_one_cannot_carry_it(
    servers: Callable[..., Server], waiting: dict[str, Any], newer: dict[str, Any], why: str
) -> None:
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0, 1], "waiting", **waiting)])
        c.channel.send([update_metadata([0], "newer", leader_epoch=2, **newer)])
        assert c.channel.queue_sizes() == {7: 3}, why
        assert c.channel.superseded() == 0
        h.answer_all(4)
    [(first, _), (second, _)] = h.server.update_metadata
    assert (sorted(first), first[0][1], sorted(second), second[0][1]) == ([0, 1], 1, [0], 2), why


@pytest.mark.parametrize(
    ("newer", "live"), [({"live": (7, 9)}, [7, 9]), ({"port": 10}, [7])], ids=["broker", "endpoint"]
)
def test_a_newer_update_metadata_left_without_rows_still_tells_other_live_brokers(
    servers: Callable[..., Server], newer: dict[str, Any], live: list[int]
) -> None:
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0, 1], "A")])
        c.channel.send([update_metadata([0], "B", leader_epoch=2, **newer)])
        assert c.channel.queue_sizes() == {7: 3}
        assert c.channel.superseded() == 0
        h.answer_all(4)
    assert h.server.update_metadata == [({0: (7, 2), 1: (7, 1)}, [7]), ({}, live)]


def test_update_metadata_dropped_for_one_never_answered_is_abandoned_with_it(
    servers: Callable[..., Server],
) -> None:
    h = Held(servers)
    c = h.c
    c.channel.send([update_metadata([0], "A")])
    c.channel.send([update_metadata([0, 1], "B")])
    c.channel.remove_broker(7)
    h.release.set()
    wait_until(lambda: len(c.answered) + len(c.abandoned) == 4, "every request's fate")
    c.channel.close()
    assert [r.tracker for r in c.abandoned][-2:] == ["A", "B"]


# --- a broker leaving, or moving, while a request is in flight -----------------------------


def test_a_broker_leaving_ends_its_request_in_flight_and_its_answer_is_never_delivered(
    servers: Callable[..., Server], caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's removeBroker shuts the broker's RequestSendThread down (its NetworkClient
    closed): the request in flight fails at once and its callback never runs. An answer
    delivered later would reach a controller that has moved on: the broker's new
    incarnation, or a later term of this controller (review scenario: a late
    StopReplica answer stalled a topic deletion). The answer is held and the socket
    timeout is 600 s: a request that waited for either would fail wait_until's
    hang-only deadline."""
    release = threading.Event()
    arrived = threading.Event()

    def hold(_topic: str) -> None:
        arrived.set()
        release.wait(600)

    server = servers(before_answer=hold)
    c = Connected(server, socket_timeout_s=600)
    request = Built().request("t0")
    try:
        c.channel.send([request])
        assert arrived.wait(DEADLINE_S)
        c.channel.remove_broker(7)  # the broker left (died, or bounced: a new epoch)
        # The connection was closed under it: no wait for the answer (or the timeout).
        wait_until(lambda: bool(c.answered or c.abandoned), "the request's fate")
        release.set()  # the server answers now, on a connection closed
        time.sleep(0.2)
    finally:
        release.set()
        c.channel.close()
    assert c.answered == [], "a removed broker's answer was delivered to the controller"
    assert c.abandoned == [request]
    # A broker leaving is no failure of the channel: nothing reported as an error.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_queued_requests_survive_an_endpoint_change_and_leave_in_order(
    servers: Callable[..., Server],
) -> None:
    """A live broker registered again under other endpoints (same broker epoch): its
    queue is meant for the same incarnation and is sent to the new address, the request
    in flight first (again). Kafka 2.8's processBrokerModification leaves the channel
    and its queue untouched."""
    release = threading.Event()

    def hold(topic: str) -> None:
        if topic == "t0":
            release.wait(DEADLINE_S)

    old = servers(before_answer=hold)
    new = servers()
    # t0 is held and the socket timeout is 600 s: t0 reaches the new address only if the
    # move ends the connection under it (a wait for either fails wait_until's deadline).
    c = Connected(old, socket_timeout_s=600)
    built = Built()
    requests = [built.request(f"t{i}") for i in range(4)]
    topics = [f"t{i}" for i in range(4)]
    try:
        c.channel.send(requests)
        wait_until(lambda: "t0" in old.received, "t0 in flight")
        c.channel.add_broker(7, "127.0.0.1", new.port)
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 4, "every request's fate")
        assert c.channel.queue_sizes() == {7: 0}
        # Moved back while idle: the next request goes to the old address.
        c.channel.add_broker(7, "127.0.0.1", old.port)
        release.set()
        requests.append(built.request("t4"))
        c.channel.send(requests[-1:])
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 5, "t4's fate")
    finally:
        release.set()
        c.channel.close()
    assert c.abandoned == [], f"{len(c.abandoned)} queued requests dropped"
    assert [r for r, _ in c.answered] == requests
    assert new.received == topics
    assert old.received == ["t0", "t4"]


def test_a_broker_registered_under_a_host_no_lookup_can_take_is_retried_not_abandoned(
    servers: Callable[..., Server], caplog: pytest.LogCaptureFixture
) -> None:
    """A registration's host the resolver cannot be asked about ("a..b": socket's IDNA
    encoding raised UnicodeError) is a broker not reachable yet, as an unknown host is:
    its requests wait, sent again, for it to register under another address. They were
    abandoned at the first attempt, with a traceback."""
    server = servers()
    built = Built()
    c = Connected(server)
    c.channel.add_broker(8, "a..b", server.port)
    sender = c.channel._senders[8]
    request = dataclasses.replace(built.request("t0"), broker_id=8)
    try:
        c.channel.send([request])
        wait_until(lambda: sender.stats.retries >= 2 or bool(c.abandoned), "a retry")
        assert c.abandoned == []
        c.channel.add_broker(8, "127.0.0.1", server.port)
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 1, "t0's fate")
    finally:
        c.channel.close()
    assert c.abandoned == []
    assert c.answered_topics() == ["t0"]
    # The failure is told (as Kafka's RequestSendThread warns of each), naming the broker.
    assert any(
        r.levelno == logging.WARNING and "request to broker 8 at a..b" in r.getMessage()
        for r in caplog.records
    )


def test_how_long_each_request_waited_in_its_brokers_queue_is_observable(
    servers: Callable[..., Server],
) -> None:
    """Kafka's RequestRateAndQueueTimeMs (per broker): from queued to taken to be sent.
    The broker answers each request in 0.1 s, so the third waited for two answers."""
    server = servers(delay_s=0.1)
    built = Built()
    c = Connected(server)
    try:
        started = time.monotonic()
        c.channel.send([built.request(f"t{i}") for i in range(3)])
        wait_until(lambda: len(c.answered) == 3, "every answer")
        waited = c.channel.queue_times()
        elapsed_ms = (time.monotonic() - started) * 1000
    finally:
        c.channel.close()
    assert set(waited) == {7}
    assert waited[7]["count"] == 3
    assert waited[7]["max_ms"] >= 190  # the third: two answers of 0.1 s
    assert waited[7]["max_ms"] <= elapsed_ms  # timed from when it was queued, not before
    assert waited[7]["p50_ms"] >= 90  # the second: one answer
    assert c.channel.queue_times() == {}  # the broker left, and its timer with it


# --- which newer UpdateMetadata replace one waiting -----------------------------------------


def test_a_deletion_mark_in_any_newer_update_metadata_of_one_send_covers_one_waiting(
    servers: Callable[..., Server],
) -> None:
    """Newer UpdateMetadata sent together say all of them say: a topic deleted, then
    made again, in one send still tells the broker of the deletion. The one they
    replaced is answered with the last of them (the first alone does not say it all)."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([0], "deleted", deleting=True)])
        c.channel.send(
            [
                update_metadata([0], "deleted again", deleting=True),
                update_metadata([0], "made again"),
            ]
        )
        assert c.channel.superseded() == 1
        h.answer_all(5)
    assert h.server.received == ["hold", "taken-ahead", "um:orders-0", "um:orders-0"]
    assert h.trackers_answered() == [None, None, "deleted again", "deleted", "made again"]


def test_the_end_of_a_full_update_is_dropped_for_a_send_with_the_end_of_another_in_it(
    servers: Callable[..., Server],
) -> None:
    """The newer send ends a full update (FULL) though its last request does not: the
    waiting end of a full update goes, answered with the send's last request."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata(None, "full")])
        c.channel.send([update_metadata(None, "full again"), update_metadata([], "brokers")])
        assert c.channel.superseded() == 1
        h.answer_all(5)
    assert h.server.received == ["hold", "taken-ahead", "um:orders-0,orders-1,orders-2", "um:"]
    assert h.trackers_answered() == [None, None, "full again", "full", "brokers"]


def test_update_metadata_not_built_from_rows_is_never_dropped(
    servers: Callable[..., Server],
) -> None:
    """Without its rows there is nothing to compare: it stays, though the newer one says
    all the one queued after it says."""
    h = Held(servers)
    c = h.c
    rowless = dataclasses.replace(update_metadata([0], "rowless"), update_metadata_rows=None)
    with h:
        c.channel.send([rowless])
        c.channel.send([update_metadata([0], "A")])
        c.channel.send([update_metadata(None, "B")])
        assert c.channel.superseded() == 1  # A
        h.answer_all(5)
    assert h.server.received == [
        "hold",
        "taken-ahead",
        "um:orders-0",
        "um:orders-0,orders-1,orders-2",
    ]
    assert h.trackers_answered() == [None, None, "rowless", "A", "B"]


def test_only_update_metadata_at_the_head_of_a_send_replace_one_waiting(
    servers: Callable[..., Server],
) -> None:
    """A send that starts with another request replaces nothing (the UpdateMetadata
    waiting, even one of the live brokers only, must reach the broker before it), and one
    that starts with UpdateMetadata replaces only for those before its first other
    request: what follows that request reaches the broker after it."""
    h = Held(servers)
    c = h.c
    with h:
        c.channel.send([update_metadata([], "brokers")])
        c.channel.send([h.built.request("other")])
        c.channel.send([update_metadata([0], "A")])
        c.channel.send(
            [update_metadata([], "B"), h.built.request("between"), update_metadata(None, "C")]
        )
        assert c.channel.superseded() == 0
        h.answer_all(8)
    assert h.server.received == [
        "hold",
        "taken-ahead",
        "um:",
        "other",
        "um:orders-0",
        "um:",
        "between",
        "um:orders-0,orders-1,orders-2",
    ]


# --- brokers joining and leaving the channel ------------------------------------------------


def test_each_broker_has_its_own_queue_and_a_held_one_holds_up_nobody_else(
    servers: Callable[..., Server],
) -> None:
    """Kafka's controller has one queue and RequestSendThread per broker: requests for
    several brokers in one send each go to their own broker, in order, and a broker that
    does not answer delays only its own."""
    release = threading.Event()

    def hold(topic: str) -> None:
        if topic == "s0":
            release.wait(DEADLINE_S)

    slow = servers(before_answer=hold)
    fast = servers()
    c = Connected(slow)
    c.channel.add_broker(8, "127.0.0.1", fast.port)
    built = Built()
    to_slow = [built.request(f"s{i}") for i in range(3)]
    to_fast = [dataclasses.replace(built.request(f"f{i}"), broker_id=8) for i in range(3)]
    try:
        c.channel.send([r for pair in zip(to_slow, to_fast, strict=True) for r in pair])
        wait_until(lambda: len(c.answered) == 3 and slow.received == ["s0"], "broker 8's answers")
        assert [r for r, _ in c.answered] == to_fast
        assert c.channel.queue_sizes() == {7: 2, 8: 0}  # s0 sent, s1 and s2 wait
        release.set()
        wait_until(lambda: len(c.answered) == 6, "every answer")
    finally:
        release.set()
        c.channel.close()
    assert [r for r, _ in c.answered] == to_fast + to_slow
    assert slow.received == ["s0", "s1", "s2"]
    assert fast.received == ["f0", "f1", "f2"]
    assert c.abandoned == []


def test_a_bounced_broker_gets_a_new_channel_and_what_is_sent_while_it_is_out_is_abandoned(
    servers: Callable[..., Server],
) -> None:
    """A bounced broker (a new epoch) is removed from the channel and added again: a
    request for it while it is out is reported abandoned at once (Kafka's sendRequest:
    "Not sending request ... since it is offline"), and the new incarnation gets a new
    sender, on a new connection."""
    server = servers()
    built = Built()
    c = Connected(server)
    before, meanwhile, after = (built.request(t) for t in ("t0", "t1", "t2"))
    try:
        c.channel.send([before])
        wait_until(lambda: len(c.answered) == 1, "t0's answer")
        c.channel.remove_broker(7)
        assert c.channel.broker_ids() == set()
        assert c.channel.queue_sizes() == {}
        c.channel.send([meanwhile])
        assert c.abandoned == [meanwhile]
        c.channel.add_broker(7, "127.0.0.1", server.port)
        assert c.channel.broker_ids() == {7}
        c.channel.send([after])
        wait_until(lambda: len(c.answered) == 2, "t2's answer")
    finally:
        c.channel.close()
    assert [r for r, _ in c.answered] == [before, after]
    assert server.received == ["t0", "t2"]
    assert server.connections == 2
    assert c.abandoned == [meanwhile]


def test_the_sender_of_a_broker_removed_or_of_a_closed_channel_ends(
    servers: Callable[..., Server],
) -> None:
    """Kafka's removeBroker and shutdown shut the broker's RequestSendThread down, an
    idle one too: no thread is left waiting for requests that will never come."""
    server = servers()
    c = Connected(server)
    c.channel.add_broker(8, "127.0.0.1", server.port)
    removed = c.channel._senders[7].thread
    closed = c.channel._senders[8].thread
    try:
        c.channel.send([dataclasses.replace(Built().request("t0"), broker_id=8)])
        wait_until(lambda: len(c.answered) == 1, "t0's answer")
        c.channel.remove_broker(7)
        removed.join(DEADLINE_S)
        assert not removed.is_alive(), "a removed broker's sender still runs"
    finally:
        c.channel.close(timeout_s=DEADLINE_S)
    # close() waits for its senders to end, as Kafka's shutdown awaits each thread.
    assert not closed.is_alive(), "a closed channel's sender still runs"


def test_an_answer_read_as_its_broker_leaves_is_abandoned_not_delivered(
    servers: Callable[..., Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is read, and the broker is removed before it is handed over: once
    remove_broker returns the controller hears of it only as abandoned."""
    server = servers()
    c = Connected(server)
    request = Built().request("t0")
    sender = c.channel._senders[7]
    real_request = KafkaConnection.request

    def answered_as_removed(self: KafkaConnection, *args: Any, **kwargs: Any) -> Any:
        response = real_request(self, *args, **kwargs)
        c.channel.remove_broker(7)
        return response

    monkeypatch.setattr(KafkaConnection, "request", answered_as_removed)
    try:
        c.channel.send([request])
        sender.thread.join(DEADLINE_S)
        assert not sender.thread.is_alive()
    finally:
        c.channel.close()
    assert server.received == ["t0"]
    assert c.answered == []
    assert c.abandoned == [request]


def test_a_broker_removed_while_its_connection_is_made_is_sent_nothing(
    servers: Callable[..., Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """remove_broker finds no connection to end while one is being made: the connection
    made is closed unused, and the request is abandoned (Kafka closes the removed
    broker's NetworkClient: nothing more goes out on it)."""
    server = servers()
    c = Connected(server)
    request = Built().request("t0")
    sender = c.channel._senders[7]
    real_init = KafkaConnection.__init__

    def connect_as_removed(self: KafkaConnection, *args: Any, **kwargs: Any) -> None:
        c.channel.remove_broker(7)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(KafkaConnection, "__init__", connect_as_removed)
    try:
        c.channel.send([request])
        sender.thread.join(DEADLINE_S)
        assert not sender.thread.is_alive()
    finally:
        c.channel.close()
    assert server.received == []
    assert c.answered == []
    assert c.abandoned == [request]


def test_a_request_whose_body_cannot_be_built_is_abandoned_and_the_next_one_goes(
    servers: Callable[..., Server],
) -> None:
    """Building it again would fail again (the broker is not at fault): it is reported
    abandoned, not retried, and the requests behind it still go to the broker."""
    server = servers()
    built = Built()
    c = Connected(server)

    def no_body() -> dict[str, Any]:
        raise ValueError("no body")

    bad = BrokerRequest(7, ApiKey.METADATA, 9, no_body)
    first, last = built.request("t0"), built.request("t1")
    try:
        c.channel.send([first, bad, last])
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 3, "every request's fate")
    finally:
        c.channel.close()
    assert c.abandoned == [bad]
    assert [r for r, _ in c.answered] == [first, last]
    assert server.received == ["t0", "t1"]


def test_a_broker_registered_again_at_the_same_address_keeps_its_request_in_flight(
    servers: Callable[..., Server],
) -> None:
    """Nothing moved: the connection stays, and the request in flight is not sent again."""
    release = threading.Event()

    def hold(topic: str) -> None:
        if topic == "t0":
            release.wait(DEADLINE_S)

    server = servers(before_answer=hold)
    c = Connected(server)
    built = Built()
    requests = [built.request("t0"), built.request("t1")]
    try:
        c.channel.send(requests)
        wait_until(lambda: server.received == ["t0"], "t0 in flight")
        c.channel.add_broker(7, "127.0.0.1", server.port)
        release.set()
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 2, "every request's fate")
    finally:
        release.set()
        c.channel.close()
    assert [r for r, _ in c.answered] == requests
    assert server.received == ["t0", "t1"]
    assert server.connections == 1


def test_a_moved_brokers_requests_are_abandoned_when_it_is_removed(
    servers: Callable[..., Server],
) -> None:
    """The broker moved while its requests waited: its sender (there is one per broker)
    still holds them, and removing the broker abandons them all, the one in flight at the
    new address too. The socket timeout is 600 s: a wait for it fails wait_until."""
    release = threading.Event()
    arrived = threading.Event()

    def hold(topic: str) -> None:
        if topic == "t0":
            arrived.set()
            release.wait(DEADLINE_S)

    old = servers(before_answer=hold)
    new = servers(before_answer=hold)
    c = Connected(old, socket_timeout_s=600)
    built = Built()
    requests = [built.request(f"t{i}") for i in range(3)]
    try:
        c.channel.send(requests)
        wait_until(lambda: old.received == ["t0"], "t0 in flight")
        arrived.clear()
        c.channel.add_broker(7, "127.0.0.1", new.port)
        assert arrived.wait(DEADLINE_S)  # t0 in flight at the new address
        c.channel.remove_broker(7)
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 3, "every request's fate")
    finally:
        release.set()
        c.channel.close()
    assert c.answered == []
    assert c.abandoned == requests
    assert new.received == ["t0"]


def test_a_broker_moved_while_its_connection_is_made_is_sent_its_request_at_the_new_address(
    servers: Callable[..., Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """move_to finds no connection to end while one is being made to the old address:
    that one is closed unused, and the request goes to the new address."""
    old = servers()
    new = servers()
    c = Connected(old)
    request = Built().request("t0")
    real_init = KafkaConnection.__init__
    moved = threading.Event()

    def connect_as_moved(self: KafkaConnection, *args: Any, **kwargs: Any) -> None:
        if not moved.is_set():
            moved.set()
            c.channel.add_broker(7, "127.0.0.1", new.port)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(KafkaConnection, "__init__", connect_as_moved)
    try:
        c.channel.send([request])
        wait_until(lambda: len(c.answered) + len(c.abandoned) >= 1, "t0's fate")
    finally:
        c.channel.close()
    assert [r for r, _ in c.answered] == [request]
    assert old.received == []
    assert new.received == ["t0"]


def test_a_callback_that_fails_stops_nothing_else(servers: Callable[..., Server]) -> None:
    """The controller's callback failing on an answer, or the event told its request was
    written failing, is logged: the request still counts as answered, and those behind it
    still go (Kafka's RequestSendThread catches what its work throws and goes on)."""
    server = servers()
    built = Built()
    answered: list[BrokerRequest] = []

    def on_response(request: BrokerRequest, _response: dict[str, Any]) -> None:
        answered.append(request)
        if len(answered) == 1:
            raise RuntimeError("the controller's callback failed")

    class FailingTracker:
        def written(self, _request: BrokerRequest) -> None:
            raise RuntimeError("the written callback failed")

    abandoned: list[BrokerRequest] = []
    channel = ControllerChannelManager(1, on_response, on_abandon=abandoned.append)
    channel.add_broker(7, "127.0.0.1", server.port)
    first = built.request("t0")
    tracked = dataclasses.replace(built.request("t1"), tracker=FailingTracker())
    last = built.request("t2")
    try:
        channel.send([first, tracked, last])
        wait_until(lambda: len(answered) + len(abandoned) >= 3, "every request's fate")
    finally:
        channel.close()
    assert answered == [first, tracked, last]
    assert abandoned == []
    assert server.received == ["t0", "t1", "t2"]


def test_a_channel_told_of_no_abandoned_requests_drops_them_quietly(
    servers: Callable[..., Server], caplog: pytest.LogCaptureFixture
) -> None:
    """Without on_abandon, a broker removed with requests waiting logs no error."""
    release = threading.Event()

    def hold(topic: str) -> None:
        if topic == "t0":
            release.wait(DEADLINE_S)

    server = servers(before_answer=hold)
    answered: list[BrokerRequest] = []
    channel = ControllerChannelManager(1, lambda r, _: answered.append(r))
    channel.add_broker(7, "127.0.0.1", server.port)
    sender = channel._senders[7]
    built = Built()
    try:
        channel.send([built.request(f"t{i}") for i in range(3)])
        wait_until(lambda: server.received == ["t0"], "t0 in flight")
        channel.remove_broker(7)
        sender.thread.join(DEADLINE_S)
        assert not sender.thread.is_alive()
    finally:
        release.set()
        channel.close()
    assert answered == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
