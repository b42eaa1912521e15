"""election/registration.py's register_broker over the in-memory ZooKeeper
(tests/unit/fake_zk.py): the ephemeral /brokers/ids/<id> and the broker epoch, its czxid
(Kafka 2.8's KafkaZkClient.registerBroker: checkedEphemeralCreate returns the czxid, and
a NODEEXISTS whose znode is of this very session is the create's own, landed before its
answer was lost). A znode of another session (this broker's previous incarnation not yet
expired) is waited for, up to a deadline, then BrokerIdInUse."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from election import registration
from election.registration import BrokerIdInUse, RegistrationCancelled, register_broker
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import BrokerRegistration, EndPoint, encode_broker

OURS, THEIRS = 0x111, 0x222
PATH = paths.broker(1)


def reg(port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(1, (EndPoint("PLAINTEXT", "127.0.0.1", port),))


class RegistrationZk(FakeZk):
    """A FakeZk counting its disconnections (ZkClient.disconnections), whose ``exists``
    runs ``on_exists[n]`` (if any) at its n-th call, and whose watches fire at once (a
    spurious wake: the loop looks again without a real wait)."""

    def __init__(self, session_id: int = OURS) -> None:
        super().__init__(session_id)
        self.disconnections = 0
        self.exists_calls = 0
        self.on_exists: dict[int, Callable[[], None]] = {}
        self.put(paths.BROKER_IDS, b"")

    def exists(self, path: str, *, watch: bool = False, watcher: Any = None) -> Any:
        step = self.on_exists.get(self.exists_calls)
        self.exists_calls += 1
        if step is not None:
            step()
        got = super().exists(path, watch=watch, watcher=watcher)
        if watcher is not None:
            watcher(None)
        return got


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(registration, "time", SimpleNamespace(monotonic=c.monotonic))
    return c


def stale(zk: RegistrationZk) -> None:
    """Broker 1's previous session still holds its registration."""
    zk.put(PATH, encode_broker(reg()), owner=THEIRS)


def gone(zk: RegistrationZk) -> Callable[[], None]:
    def step() -> None:
        del zk.nodes[PATH]

    return step


def test_the_broker_epoch_is_the_czxid_of_an_ephemeral_of_this_session() -> None:
    zk = RegistrationZk()
    # A timestamp of its own: with none, each encoding stamps the time of its making, and
    # the two encodings compared may fall in different milliseconds.
    registration = dataclasses.replace(reg(), timestamp_ms=1_796_000_000_000)
    epoch = register_broker(cast(ZkClient, zk), registration)
    data, stat = zk.nodes[PATH]
    assert epoch == stat.czxid
    assert stat.ephemeralOwner == OURS
    assert data == encode_broker(registration)


def test_registering_again_in_a_new_session_gives_a_larger_epoch() -> None:
    zk = RegistrationZk()
    first = register_broker(cast(ZkClient, zk), reg())
    zk.set_data(PATH, encode_broker(reg(9093)))  # the registration updated meanwhile
    zk.expire(0x333)
    assert PATH not in zk.nodes
    second = register_broker(cast(ZkClient, zk), reg())
    assert second > first
    assert zk.nodes[PATH][1].ephemeralOwner == 0x333


def test_a_znode_of_this_session_is_the_creates_own_and_keeps_its_czxid() -> None:
    """A create that landed before its answer was lost: NODEEXISTS, the znode of this
    session. Its czxid is the epoch, although its data changed since (mzxid moved)."""
    zk = RegistrationZk()
    zk.put(PATH, encode_broker(reg()), owner=OURS)
    zk.set_data(PATH, encode_broker(reg()))
    stat = zk.nodes[PATH][1]
    assert stat.mzxid != stat.czxid
    assert register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=0.0) == stat.czxid


def test_a_stale_registration_is_waited_for_then_replaced(clock: Clock) -> None:
    zk = RegistrationZk()
    stale(zk)
    said: list[str] = []

    def later() -> None:
        clock.now = 3.0

    zk.on_exists = {1: later, 3: later, 5: gone(zk)}
    epoch = register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=10.0, progress=said.append)
    stat = zk.nodes[PATH][1]
    assert stat.ephemeralOwner == OURS
    assert epoch == stat.czxid
    assert len(said) == 1  # announced once, however long the wait
    assert "earlier session (0x222)" in said[0]


@pytest.mark.timeout(30)  # a wait that never ended would hang
def test_a_registration_another_session_keeps_is_a_broker_id_in_use(clock: Clock) -> None:
    zk = RegistrationZk()
    stale(zk)

    def late() -> None:
        clock.now = 10.0

    zk.on_exists = {2: late}
    with pytest.raises(BrokerIdInUse, match=r"another ZooKeeper session \(0x222\)"):
        register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=10.0)
    assert zk.nodes[PATH][1].ephemeralOwner == THEIRS


def test_the_default_wait_outlasts_a_session_timeout(clock: Clock) -> None:
    """The earlier session may live a whole session timeout (6 s here): still waited for
    when that much has passed."""
    zk = RegistrationZk()
    stale(zk)

    def timeout_passed() -> None:
        clock.now = 6.0

    zk.on_exists = {2: timeout_passed, 4: gone(zk)}
    register_broker(cast(ZkClient, zk), reg())
    assert zk.nodes[PATH][1].ephemeralOwner == OURS


def test_a_lost_connection_starts_the_wait_over(clock: Clock) -> None:
    """ZooKeeper gives every session a fresh timeout after an outage: the connection lost
    at 9 s of a 10 s wait, the wait lasts till 19 s."""
    zk = RegistrationZk()
    stale(zk)

    def outage() -> None:
        clock.now = 9.0
        zk.disconnections += 1

    def later() -> None:
        clock.now = 15.0

    zk.on_exists = {2: outage, 4: later, 6: gone(zk)}
    register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=10.0)
    assert zk.nodes[PATH][1].ephemeralOwner == OURS


@pytest.mark.timeout(30)  # a stop never seen would hang
def test_a_stop_asked_for_during_the_wait_cancels_the_registration(clock: Clock) -> None:
    zk = RegistrationZk()
    stale(zk)
    cancelled = threading.Event()
    zk.on_exists = {2: cancelled.set}
    with pytest.raises(RegistrationCancelled):
        register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=10.0, cancelled=cancelled)
    assert zk.nodes[PATH][1].ephemeralOwner == THEIRS


def test_a_stale_registration_gone_between_the_create_and_the_look_is_created_again() -> None:
    zk = RegistrationZk()
    stale(zk)
    zk.on_exists = {0: gone(zk)}
    epoch = register_broker(cast(ZkClient, zk), reg(), wait_for_stale_s=0.0)
    assert zk.nodes[PATH][1].ephemeralOwner == OURS
    assert epoch == zk.nodes[PATH][1].czxid
