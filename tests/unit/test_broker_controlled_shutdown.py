"""broker/server.py's controlled shutdown: its attempts and the backoff between them."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import types
from pathlib import Path
from typing import Any, cast

import pytest

from broker import server
from broker.apis import KafkaApis
from broker.config import load_broker_config
from broker.network import SocketServer
from controller import controller as controller_module
from tests.unit import fake_cluster
from wire.api import ApiKey
from zkdata.znodes import BrokerRegistration, EndPoint, TopicPartition, encode_broker

BASE = load_broker_config(text="zookeeper.connect=127.0.0.1:2181\n")


def attempts_still_leading(backoff_ms: int, retries: int = 3) -> Any:
    """A stand-in for the server: every attempt leaves 3 partitions led here, another
    broker registered besides it."""
    asked: list[int] = []

    def ask() -> int:
        asked.append(1)
        return 3

    fake: Any = types.SimpleNamespace(
        config=dataclasses.replace(
            BASE,
            controlled_shutdown_retry_backoff_ms=backoff_ms,
            controlled_shutdown_max_retries=retries,
        ),
        _ask_controller_to_shut_down=ask,
        state_log=types.SimpleNamespace(write=lambda *a, **k: None),
        asked=asked,
        _other_brokers_alive=lambda: True,
    )
    return fake


def test_a_negative_backoff_does_not_stop_the_shutdown() -> None:
    """The config refuses it now; taken as it was, time.sleep raised ValueError and the
    rest of the broker's shutdown was skipped."""
    fake = attempts_still_leading(-1)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert len(fake.asked) == 3


def test_a_backoff_beyond_what_sleep_takes_is_slept_as_long_as_it_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)  # the module broker.server uses
    fake = attempts_still_leading(2**63 - 1, retries=2)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert slept == [threading.TIMEOUT_MAX]


def unstarted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, more: str = ""
) -> server.KafkaServer:
    """A broker made but never started, which takes its ZooKeeper for connected."""
    config = load_broker_config(
        text="broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nzookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'data'}\n{more}"
    )
    broker = server.KafkaServer(config)
    monkeypatch.setattr(type(broker.zk), "connected", property(lambda _self: True))
    return broker


def count_controlled_shutdowns(broker: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The broker's controlled_shutdown replaced by one that succeeds; a 1 per call."""
    asked: list[int] = []

    def controlled_shutdown() -> bool:
        asked.append(1)
        return True

    monkeypatch.setattr(broker, "controlled_shutdown", controlled_shutdown)
    return asked


def test_a_broker_whose_start_did_not_complete_asks_for_no_controlled_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka asks only once started (startupComplete). A duplicate of a running broker's
    id, refused at start-up (BrokerIdInUse), asked in its name: the controller moved
    every leadership off the running broker and kept it among those shutting down."""
    broker = unstarted_server(tmp_path, monkeypatch)
    asked = count_controlled_shutdowns(broker, monkeypatch)
    assert broker.shutdown()
    assert asked == []


def test_a_started_broker_asks_for_a_controlled_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = unstarted_server(tmp_path, monkeypatch)
    broker.startup_complete.set()  # as startup() ends
    asked = count_controlled_shutdowns(broker, monkeypatch)
    assert broker.shutdown()
    assert asked == [1]


def test_a_started_broker_asks_for_a_controlled_shutdown_while_zookeeper_is_disconnected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM during a ZooKeeper blip skipped the controlled shutdown (the stop was an
    unclean one for the cluster); Kafka's waits for the connection within each attempt."""
    broker = unstarted_server(tmp_path, monkeypatch)
    monkeypatch.setattr(type(broker.zk), "connected", property(lambda _self: False))
    broker.startup_complete.set()
    asked = count_controlled_shutdowns(broker, monkeypatch)
    assert broker.shutdown()
    assert asked == [1]


def test_a_controlled_shutdown_gives_up_when_zookeeper_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZooKeeper gone as the broker stops: its read of /controller waited for an answer
    for good (kazoo queues a request until its connection is back), and the broker never
    exited nor closed its logs. Kafka's getControllerId gives up after
    zookeeper.connection.timeout.ms, which ends the controlled shutdown; the rest of the
    shutdown runs."""
    broker = unstarted_server(tmp_path, monkeypatch, "zookeeper.connection.timeout.ms=300\n")
    broker.startup_complete.set()
    zk = broker.zk
    monkeypatch.setattr(zk, "wait_connected", lambda timeout_s: True)
    reads: list[str] = []

    def never_answered(path: str, watch: object = None) -> object:
        reads.append(path)
        return zk.kazoo.handler.async_result()

    monkeypatch.setattr(zk.kazoo, "get_async", never_answered)
    done: list[bool] = []
    stopping = threading.Thread(target=lambda: done.append(broker.controlled_shutdown()))
    stopping.daemon = True  # without the bound it never ends
    stopping.start()
    stopping.join(60)  # a hang-only bound: the read gives up after 0.3 s
    assert done == [False], "the controlled shutdown still waits for ZooKeeper"
    # One attempt (Kafka's exception ends the retries), bounded by the timeout.
    assert reads == ["/controller"]
    broker.shutdown()


class _ControllerApis:
    """A controller that answers every ControlledShutdown: done, nothing remaining."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def supported(self, api_key: int, version: int) -> bool:
        return api_key == ApiKey.CONTROLLED_SHUTDOWN

    def handle(self, api_key: int, version: int, header: Any, body: Any, **_: Any) -> Any:
        self.asked.append(body)
        return {"error_code": 0, "remaining_partitions": []}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_controller_known_only_from_zookeeper_is_asked_on_its_inter_broker_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apis = _ControllerApis()
    replication = SocketServer(
        "127.0.0.1", 0, lambda: cast(KafkaApis, apis), listener_name="REPLICATION"
    )
    replication.start()
    try:
        # Controller 7 advertises its client listener first (an address brokers do not
        # reach: nothing listens there), its inter-broker listener second.
        controller = BrokerRegistration(
            7,
            (
                EndPoint("CLIENT", "127.0.0.1", _closed_port()),
                EndPoint("REPLICATION", "127.0.0.1", replication.port),
            ),
        )
        config = load_broker_config(
            text="broker.id=1\n"
            "listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0\n"
            "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
            "inter.broker.listener.name=REPLICATION\n"
            "zookeeper.connect=127.0.0.1:1\n"
            "controlled.shutdown.retry.backoff.ms=0\n"
            "request.timeout.ms=2000\n"
            f"log.dirs={tmp_path / 'data'}\n"
        )
        broker = server.KafkaServer(config)
        try:
            # This broker's metadata does not know the controller yet (it has had no
            # UpdateMetadata: stopped right after it started): ZooKeeper names it.
            monkeypatch.setattr(server, "read_controller", lambda zk, **_: (7, 0x1234))
            stat = types.SimpleNamespace(version=0, czxid=5, ephemeralOwner=0x1234)
            monkeypatch.setattr(
                broker.zk, "get_within", lambda path, t: (encode_broker(controller), stat)
            )
            assert broker.controlled_shutdown() is True
            assert len(apis.asked) == 1
        finally:
            broker.startup_complete.clear()
            broker.shutdown()
    finally:
        replication.stop()


def test_an_answer_waiting_for_a_silent_broker_to_apply_the_moves_is_no_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller answers once its writes are made and the brokers applied the moves,
    waiting for that up to CONTROLLED_SHUTDOWN_APPLIED_WAIT_S (a broker that does not
    answer: here none does, the channel is mocked). The request handler waited only its
    own request.timeout.ms: below that wait it answered REQUEST_TIMED_OUT, the moves made,
    and the stopping broker took its attempt for failed. Kafka's handler answers whenever
    the controller's work is done (KafkaApis.handleControlledShutdownRequest)."""
    monkeypatch.setattr(controller_module, "CONTROLLED_SHUTDOWN_APPLIED_WAIT_S", 1.5)
    _zk, c = fake_cluster.cluster()  # t-0 on 2, 3, 1, led by 2
    handler = types.SimpleNamespace(controller=c, request_timeout_s=1.0)
    answered: list[dict[str, Any]] = []
    body = {"broker_id": 2, "broker_epoch": c.ctx.broker_epochs[2]}
    asking = threading.Thread(
        target=lambda: answered.append(
            KafkaApis._handle_controlled_shutdown(cast(KafkaApis, handler), 3, body, {})
        )
    )
    asking.start()
    deadline = time.monotonic() + 10
    while not fake_cluster.drain(c):  # the event, once the handler has queued it
        assert time.monotonic() < deadline, "no ControlledShutdown queued"
        time.sleep(0.01)
    asking.join(10)
    assert c.ctx.leadership[TopicPartition("t", 0)].leader_and_isr.leader == 3
    assert answered == [{"error_code": 0, "remaining_partitions": []}]


class _SlowControllerApis(_ControllerApis):
    """A controller whose answer comes `delay_s` after the request: its writes made at
    once, the brokers' application of the moves waited for."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    def handle(self, api_key: int, version: int, header: Any, body: Any, **kw: Any) -> Any:
        time.sleep(self.delay_s)
        return super().handle(api_key, version, header, body, **kw)


def test_an_attempt_waits_for_the_controllers_wait_for_the_moves_to_be_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller's answer may come CONTROLLED_SHUTDOWN_APPLIED_WAIT_S after its work
    is done, where Kafka's comes at once: a broker whose request.timeout.ms is below that
    timed the attempt out (and every retry), then shut down as if it had failed (the
    analytics took its stop for unclean). The wait is added to request.timeout.ms."""
    apis = _SlowControllerApis(delay_s=2.0)
    listener = SocketServer("127.0.0.1", 0, lambda: cast(KafkaApis, apis))
    listener.start()
    try:
        controller = BrokerRegistration(7, (EndPoint("PLAINTEXT", "127.0.0.1", listener.port),))
        config = load_broker_config(
            text="broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\n"
            "zookeeper.connect=127.0.0.1:1\n"
            "controlled.shutdown.max.retries=1\n"
            "request.timeout.ms=1000\n"
            f"log.dirs={tmp_path / 'data'}\n"
        )
        broker = server.KafkaServer(config)
        try:
            monkeypatch.setattr(server, "read_controller", lambda zk, **_: (7, 0x1234))
            stat = types.SimpleNamespace(version=0, czxid=5, ephemeralOwner=0x1234)
            monkeypatch.setattr(
                broker.zk, "get_within", lambda path, t: (encode_broker(controller), stat)
            )
            assert broker.controlled_shutdown() is True
        finally:
            broker.shutdown()
    finally:
        listener.stop()


def test_a_connection_to_the_controller_is_waited_for_controller_socket_timeout_ms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's attempt waits controller.socket.timeout.ms for its connection
    (NetworkClientUtils.awaitReady), then fails and retries, re-reading /controller. The
    connection to a controller that never accepts (its host gone, its session not yet
    expired) was waited for as long as the answer (request.timeout.ms, 30 s)."""
    unaccepting = socket.socket()
    unaccepting.bind(("127.0.0.1", 0))
    unaccepting.listen(0)
    port = unaccepting.getsockname()[1]
    # The backlog full: the next connection's SYNs are dropped, as to a host gone.
    held = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        controller = BrokerRegistration(7, (EndPoint("PLAINTEXT", "127.0.0.1", port),))
        config = load_broker_config(
            text="broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\n"
            "zookeeper.connect=127.0.0.1:1\n"
            "controlled.shutdown.max.retries=1\n"
            "controller.socket.timeout.ms=1000\n"
            f"log.dirs={tmp_path / 'data'}\n"
        )
        broker = server.KafkaServer(config)
        try:
            monkeypatch.setattr(server, "read_controller", lambda zk, **_: (7, 0x1234))
            stat = types.SimpleNamespace(version=0, czxid=5, ephemeralOwner=0x1234)
            monkeypatch.setattr(
                broker.zk, "get_within", lambda path, t: (encode_broker(controller), stat)
            )
            done: list[bool] = []
            stopping = threading.Thread(target=lambda: done.append(broker.controlled_shutdown()))
            stopping.daemon = True
            stopping.start()
            stopping.join(10)
            assert done == [False], "the connection is still waited for"
        finally:
            broker.shutdown()
    finally:
        held.close()
        unaccepting.close()
