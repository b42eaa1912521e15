"""A controller whose ZooKeeper session expires in the middle of an event, over the
in-memory ZooKeeper (tests/unit/fake_zk.py, whose `expire` starts the next session at
once, as kazoo does). The event goes on in the next session until it ends; it must
neither write (its term's writes are bound to the session it was won in) nor send
brokers anything of its term. Kafka 2.8 cannot: its new session waits for the Expire
(beforeInitializingSession), and the event's requests on the expired handle fail. The
Expire queued meanwhile then resigns nothing twice, and the next session's election
wins the next epoch."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

from controller import events as ev
from controller.controller import KafkaController
from tests.unit.fake_cluster import Controller, ZooKeeperData
from tests.unit.fake_cluster import queued as queued_events
from zkdata import paths
from zkdata.znodes import TopicPartition

NEW_SESSION = 0x999


def active_now(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


def test_a_term_whose_session_expired_mid_failover_writes_and_sends_nothing() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    # Partition 0 led by broker 1, which (as in a real expiry) is not registered in the
    # new session yet: the failover would elect it a new leader.
    data.topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    with Controller(data) as c:
        ctl = c.controller
        c.zk.add_state_listener(ctl._on_zk_state)
        loading = ctl._initialize_context
        expired: list[bool] = []

        def expiring() -> Any:  # the session ends while the first failover loads
            if not expired:
                expired.append(True)
                c.zk.expire(NEW_SESSION)
                data.unregister(1)
            return loading()

        ctl._initialize_context = expiring  # type: ignore[method-assign]
        states = {p: data.state(TopicPartition("t", p)) for p in (0, 1)}
        c.run(ev.Startup())
        assert c.sent == []
        assert {p: data.state(TopicPartition("t", p)) for p in (0, 1)} == states
        assert not ctl.is_active
        assert ctl.resignations == 1
        rest = queued_events(ctl)
        assert [e.name for e in rest] == ["Expire", "ReelectAfterZkError"]
        for event in rest:
            c.run(event)
        assert ctl.resignations == 1  # the Expire resigned nothing again
        assert paths.CONTROLLER not in data.zk.nodes  # the retry did not elect
        # The new session's registration elects: the next epoch, in that session.
        data.register(1)
        c.run(ev.RegisterBrokerAndReelect())
        assert active_now(ctl)
        assert ctl.ctx.epoch == 6
        assert data.zk.nodes[paths.CONTROLLER][1].ephemeralOwner == NEW_SESSION
        assert c.sent
        assert {r.body["controller_epoch"] for r in c.sent} == {6}


def test_a_term_whose_session_expired_between_events_writes_nothing() -> None:
    """The Expire is queued, but an event taken before it runs first (a broker loss): its
    elections are refused, its requests dropped."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (2, 3, 1)})
    with Controller(data) as c:
        c.elect()
        ctl = c.controller
        c.zk.add_state_listener(ctl._on_zk_state)
        c.sent.clear()
        ctl.state_log = MagicMock()
        state = data.state(TopicPartition("t", 0))
        c.zk.expire(NEW_SESSION)
        data.unregister(2)  # the leader goes: its partition would get a new one
        c.run(ev.BrokerChange())
        assert c.sent == []
        assert data.state(TopicPartition("t", 0)) == state
        assert not ctl.is_active
        c.drain()  # the Expire
        resigned = ctl.state_log.controller_resigned.call_args_list
        assert [call.args for call in resigned] == [(5, "session expired")]


def started(c: Controller, monkeypatch: Any) -> list[str]:
    """``c``'s controller started as the server starts it (its events processed here, not
    on its thread); the events it processed."""
    monkeypatch.setattr(c.controller.events, "start", lambda: None)
    c.controller.start()
    return c.drain()


def test_a_session_ended_before_the_controller_started_registers_the_broker_again(
    monkeypatch: Any,
) -> None:
    """The server registers, then writes meta.properties and a claim address, then starts
    the controller, whose state listener turns a new session into RegisterBrokerAndReelect.
    A session that ended in between took the registration with it and nobody heard of
    it: with another broker controller, nothing registered this broker again."""
    data = ZooKeeperData(brokers=(2, 3))
    with Controller(data, 2) as other, Controller(data, 1) as c:
        other.elect()
        registered: list[int] = []

        def register() -> int:
            data.zk.put(paths.broker(1), b"{}", owner=c.zk.session_id)
            registered.append(c.zk.session_id)
            return len(registered)

        c.controller.register_broker = register
        register()  # the server's registration
        c.zk.expire(NEW_SESSION)  # before controller.start(): nobody listens yet
        assert paths.broker(1) not in data.zk.nodes
        assert started(c, monkeypatch) == ["RegisterBrokerAndReelect"]
        assert data.zk.nodes[paths.broker(1)][1].ephemeralOwner == NEW_SESSION
        assert not c.controller.is_active
        assert c.controller.active_controller_id == 2


def test_a_controller_started_in_the_session_registered_in_starts_up(monkeypatch: Any) -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    with Controller(data) as c:
        assert started(c, monkeypatch)[0] == "Startup"
        assert c.controller.is_active
