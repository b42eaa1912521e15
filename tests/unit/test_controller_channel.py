"""The controller's channel to one broker, against an in-process server speaking the Kafka
protocol: requests leave one at a time in the controller's order, each built once (the next
one while the broker works on the current), are sent again on a new connection when one
breaks, and are all reported abandoned when the broker leaves the channel."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.channel import ControllerChannelManager
from controller.request_batch import BrokerRequest
from tests.unit.test_wire_client import read_exactly
from wire.api import ApiKey
from wire.protocol import decode_request_body, decode_request_header, encode_response, frame_size

DEADLINE_S = 30  # only catches a hang


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
                topic = body["topics"][0]["name"]
                self.received.append(topic)
                if topic in self.hang_up_on:
                    self.hang_up_on.discard(topic)
                    return
                if self.before_answer is not None:
                    self.before_answer(topic)
                time.sleep(self.delay_s)
                reply = {"brokers": [], "controller_id": 1, "topics": [{"name": topic}]}
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

    def __init__(self, server: Server) -> None:
        self.answered: list[tuple[BrokerRequest, dict[str, Any]]] = []
        self.abandoned: list[BrokerRequest] = []
        self.channel = ControllerChannelManager(
            1,
            lambda request, response: self.answered.append((request, response)),
            socket_timeout_s=10,
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
