"""A controller whose ZooKeeper session expires in the middle of an event (here its
failover's load, as a 100,000-partition load takes seconds), against a real ZooKeeper.

kazoo opens a new session at once; the event must not carry its term on in it. Kafka 2.8
cannot: ZooKeeperClient.reinitialize first runs the controller's beforeInitializingSession
(clearAndPut(Expire), then awaitProcessing), so no event of the old session runs in the
new one, and the in-flight event's requests on the expired handle fail with
SESSIONEXPIRED. Here a term is bound to the session it was won in (the client's session
generation): its writes are refused and its requests to brokers dropped once that session
is gone."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from broker.config import load_broker_config
from broker.server import KafkaServer
from broker.state_change_log import StateChangeLog
from controller.controller import ControllerConfig, KafkaController
from election.registration import register_broker
from tests.integration.test_controller_lost_answer import wait_until
from tests.integration.test_controller_store import add_topic, close
from wire.protocol import decode_request_body, decode_request_header
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    decode_controller,
    decode_partition_state,
    encode_broker,
)

pytestmark = pytest.mark.integration

SESSION_MS = 3000


class Node:
    """A broker's controller, in process, with its own ZooKeeper session."""

    def __init__(self, broker_id: int, zk_connect: str, tmp: Path) -> None:
        self.id = broker_id
        self.zk = ZkClient(zk_connect, session_timeout_ms=SESSION_MS)
        self.zk.start()
        for p in ("/brokers/ids", *paths.PERSISTENT_PATHS):
            self.zk.kazoo.ensure_path(p)
        self.reg = BrokerRegistration(
            broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 1000 + broker_id),)
        )
        (tmp / str(broker_id)).mkdir()
        self.log = StateChangeLog(tmp / str(broker_id), broker_id)
        self.c = KafkaController(
            ControllerConfig(
                broker_id=broker_id,
                session_timeout_ms=SESSION_MS,
                auto_leader_rebalance_enable=False,
            ),
            self.zk,
            self.log,
            self.register,
        )
        self.register()

    def register(self) -> int:
        return register_broker(self.zk, self.reg)

    def close(self) -> None:
        close(self.c, self.zk)
        self.log.close()


def expire(zk_connect: str, node: Node) -> None:
    """End the node's session as ZooKeeper does: another client attaches to it and
    closes it; the node hears SESSION_EXPIRED when it reconnects."""
    expire_session(zk_connect, node.zk)


def expire_session(zk_connect: str, zk: ZkClient) -> None:
    """End ``zk``'s session as `expire` does."""
    sid, pw = zk.kazoo.client_id
    k = KazooClient(hosts=zk_connect, client_id=(sid, pw), timeout=SESSION_MS / 1000)
    k.start(timeout=10)
    k.stop()
    k.close()


class RecordingBroker:
    """A TCP endpoint standing for a broker: records each request's API and the controller
    (id, epoch) it came from; answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.got: list[tuple[float, int, int, int]] = []  # (time, api, controller, epoch)
        self.conns: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            t = threading.Thread(target=self._read, args=(c,), daemon=True)
            self.threads.append(t)
            t.start()

    def _read(self, c: socket.socket) -> None:
        buf = b""
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
                while len(buf) >= 4:
                    (n,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + n:
                        break
                    frame, buf = buf[4 : 4 + n], buf[4 + n :]
                    header, off = decode_request_header(frame)
                    api = header["request_api_key"]
                    body = decode_request_body(api, header["request_api_version"], frame, off)
                    self.got.append(
                        (
                            time.monotonic(),
                            api,
                            body.get("controller_id", -1),
                            body.get("controller_epoch", -1),
                        )
                    )
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        for t in self.threads:
            t.join(timeout=2)


def test_a_controller_whose_session_expired_mid_failover_sends_nothing_of_its_old_term(
    zk_connect: str, tmp_path: Path
) -> None:
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    recorder = RecordingBroker()
    nodes: list[Node] = []
    try:
        nodes = [Node(i, zk_connect, tmp_path) for i in (1, 2)]
        a, b = nodes
        # broker 3: registered (in the test's own session) at the recording endpoint
        endpoint = EndPoint("PLAINTEXT", "127.0.0.1", recorder.port)
        registration = encode_broker(BrokerRegistration(3, (endpoint,)))
        direct.create(paths.broker(3), registration, ephemeral=True)
        add_topic(direct, "t", {0: (1, 3, 2), 1: (1, 2, 3), 2: (3, 1, 2)})
        real_load = a.c._initialize_context
        expired_at: list[float] = []

        def slow_load() -> Any:  # the session expires while the failover loads
            if not expired_at:
                expire(zk_connect, a)
                expired_at.append(time.monotonic())
                time.sleep(3)
            return real_load()

        a.c._initialize_context = slow_load  # type: ignore[method-assign]
        a.c.start()
        wait_until(lambda: expired_at, "a's failover started, its session expired")
        b.c.start()
        wait_until(lambda: b.c.is_active, "b elected")
        b_epoch = b.c.ctx.epoch
        wait_until(lambda: a.c.failovers == 1 and not a.c.is_active, "a's event over")
        time.sleep(1.5)
        from_a = [(api, epoch) for _t, api, cid, epoch in recorder.got if cid == 1]
        assert from_a == [], (
            f"controller 1 (epoch 1), whose session expired, sent broker 3 {from_a}"
            f" after broker 2 became controller of epoch {b_epoch}"
        )
        assert any(cid == 2 for _t, _api, cid, _e in recorder.got)  # b's did arrive
    finally:
        for n in nodes:
            n.close()
        recorder.close()
        direct.close()


def test_a_controller_whose_session_expired_mid_failover_writes_nothing_of_its_old_term(
    zk_connect: str, tmp_path: Path
) -> None:
    """No other broker quick to take over: the old term's failover, run on in the new
    session, would write partition states under epoch 1 after the session of epoch 1
    expired (elections of the partitions broker 1 led: it is not registered in the new
    session yet). Then the broker registers again and wins epoch 2 in its new session."""
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    nodes: list[Node] = []
    try:
        a = Node(1, zk_connect, tmp_path)
        nodes.append(a)
        for b in (2, 3):
            reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 1),))
            direct.create(paths.broker(b), encode_broker(reg), ephemeral=True)
        add_topic(direct, "t", {0: (1, 2, 3), 1: (1, 3, 2)})
        real_load = a.c._initialize_context
        lost_zxid: list[int] = []

        def slow_load() -> Any:
            if not lost_zxid:
                expire(zk_connect, a)
                # a zxid after the expiry: anything written later has a larger mzxid
                lost_zxid.append(direct.create("/marker", b"", ephemeral=True)[1].czxid)
                time.sleep(2)
            return real_load()

        a.c._initialize_context = slow_load  # type: ignore[method-assign]
        a.c.start()
        wait_until(lambda: lost_zxid and a.c.resignations >= 1, "a resigned")
        wait_until(lambda: a.c.is_active and a.c.ctx.epoch == 2, "a elected in its new session")
        assert a.c.resignations == 1  # the in-flight event's, not the Expire's again
        written_late = []
        for p in (0, 1):
            got = direct.get(paths.partition_state("t", p))
            assert got is not None
            data, stat = got
            st = decode_partition_state(paths.partition_state("t", p), data, stat.version)
            if st.controller_epoch == 1 and stat.mzxid > lost_zxid[0]:
                written_late.append((p, st.leader_and_isr.leader))
        assert written_late == [], f"epoch 1's controller wrote {written_late} after its expiry"
    finally:
        for n in nodes:
            n.close()
        direct.close()


def settled_controller(direct: ZkClient, nodes: list[Node]) -> Node | str:
    """The one active controller, if the nodes are settled: exactly one active, whose
    /controller stands in its session, and every broker registered in its own; else what
    keeps them from it."""
    active = [n for n in nodes if n.c.is_active]
    if len(active) != 1:
        return f"active controllers: {[n.id for n in active]}"
    (controller,) = active
    got = direct.get(paths.CONTROLLER)
    if got is None:
        return "no /controller"
    if (
        decode_controller(got[0]) != controller.id
        or got[1].ephemeralOwner != controller.zk.session_id
    ):
        return f"/controller {got[0]!r} is not broker {controller.id}'s"
    for n in nodes:
        registration = direct.get(paths.broker(n.id))
        if registration is None or registration[1].ephemeralOwner != n.zk.session_id:
            return f"broker {n.id} is not registered in its session"
    return controller


# A deletion again at once is the fault most likely to find a lost watch event: weighted.
FAULTS = (
    "delete",
    "delete_twice",
    "delete_twice",
    "delete_twice",
    "expire_controller",
    "expire_other",
)


@pytest.mark.parametrize("seed", [7, 11])
def test_deletions_and_expiries_in_turn_always_settle_on_one_controller(
    zk_connect: str, tmp_path: Path, seed: int
) -> None:
    """Three controllers; in turn /controller deleted (once, or again the moment a new
    one stands), the controller's session expired, another's: after each, exactly one
    controller, in its session. A deletion right after a creation left every broker
    without a controller (one run in five), fixed by a ControllerChange that finds none
    electing (architecture item 45)."""
    rnd = random.Random(seed)
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    nodes: list[Node] = []
    history: list[tuple[str, int]] = []
    try:
        nodes = [Node(i, zk_connect, tmp_path) for i in (1, 2, 3)]
        for n in nodes:
            n.c.start()
        for _ in range(20):
            deadline = time.monotonic() + 25  # a bound that only catches a hang
            while isinstance(settled := settled_controller(direct, nodes), str):
                assert time.monotonic() < deadline, f"after {history[-1:]}: {settled}"
                time.sleep(0.05)
            # The controller seen settled, not the active ones looked at again: a broker
            # whose election multi landed before the last deletion can take its (older,
            # fenced) term just after, its thread slow to run; the next wait sees it resign.
            controller = settled
            fault = rnd.choice(FAULTS)
            history.append((fault, controller.id))
            if fault == "expire_controller":
                expire(zk_connect, controller)
            elif fault == "expire_other":
                expire(zk_connect, rnd.choice([n for n in nodes if n is not controller]))
            else:
                direct.delete(paths.CONTROLLER)
                again = time.monotonic() + 2
                while fault == "delete_twice" and time.monotonic() < again:
                    if direct.delete(paths.CONTROLLER):
                        break
                    time.sleep(0.001)
    finally:
        for n in nodes:
            n.close()
        direct.close()


def test_a_broker_whose_session_expired_before_its_controller_started_registers_again(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KafkaServer.startup registers the broker, then writes meta.properties and records a
    persistent identity's claim address (waiting out a lost connection), and only then
    starts the controller, whose state listener turns a new session into
    RegisterBrokerAndReelect. A session that expired in between took the registration
    with it, and with another broker controller nothing registered it again: the broker
    ran unregistered for good."""
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    controller = Node(2, zk_connect, tmp_path)
    config = load_broker_config(
        text=f"broker.id=1\nzookeeper.connect={zk_connect}\n"
        f"zookeeper.session.timeout.ms={SESSION_MS}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'broker-1'}\ncontrolled.shutdown.enable=false\n"
    )
    broker = KafkaServer(config)
    record_claim_address = broker._record_claim_address

    def session_expires_first() -> None:  # e.g. an outage the claim's write waits out
        old = broker.zk.session_id
        assert direct.exists(paths.broker(1)) is not None
        expire_session(zk_connect, broker.zk)
        wait_until(
            lambda: broker.zk.connected and broker.zk.session_id not in (0, old), "a new session"
        )
        assert direct.exists(paths.broker(1)) is None  # gone with the session
        record_claim_address()

    monkeypatch.setattr(broker, "_record_claim_address", session_expires_first)
    try:
        controller.c.start()
        wait_until(lambda: controller.c.is_active, "broker 2 elected")
        broker.startup()
        got = wait_until(lambda: direct.get(paths.broker(1)), "broker 1 registered again", 10)
        assert got[1].ephemeralOwner == broker.zk.session_id
        assert not broker.controller.is_active
        wait_until(
            lambda: (
                1 in controller.c.events.run_on_thread(lambda: controller.c.ctx.live_broker_ids)
            ),
            "broker 1 live at the controller",
            10,
        )
    finally:
        broker.shutdown()
        controller.close()
        direct.close()
