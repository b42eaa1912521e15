"""The controller's election is bound to the ZooKeeper session this broker last
registered in, over the in-memory ZooKeeper (tests/unit/fake_zk.py, whose `expire`
starts the next session at once, as kazoo does).

An event of an ended session must not win a term in the next one: its election would
run before this broker registered there, and the failover would count this (live,
re-registering) broker dead, moving its leaderships away and shrinking it out of ISRs;
then the queued Expire resigns the term. Kafka 2.8 cannot: its new session is opened
only after the Expire was processed (beforeInitializingSession), and
RegisterBrokerAndReelect registers before electing. Here the election multi is refused
(SessionExpiredError) once the session of the registration has ended, and the new
session's RegisterBrokerAndReelect elects after registering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller import controller as controller_module
from controller import events as ev
from controller.controller import KafkaController
from election import controller_election
from tests.unit.fake_cluster import Controller, ZooKeeperData, registration
from zkdata import paths
from zkdata.znodes import LeaderAndIsr, TopicPartition, encode_broker

T0 = TopicPartition("t", 0)
SESSIONS = iter(range(0x900, 0x1000))


def active_now(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


def cluster() -> ZooKeeperData:
    data = ZooKeeperData(brokers=(2, 3), controller_epoch=4)
    data.topic("t", {0: (1, 2, 3)})  # led by broker 1, the controller's broker
    return data


def register_in_current_session(c: Controller) -> int:
    """Broker 1's registration, ephemeral of the controller's current session."""
    c.zk.put(paths.broker(1), encode_broker(registration(1)), owner=c.zk.session_id)
    return 1


def expire(c: Controller) -> None:
    c.zk.expire(next(SESSIONS))


def elected_after_registering(c: Controller) -> None:
    """What follows: the queued events, then the new session's connection (its
    RegisterBrokerAndReelect) elects, broker 1 registered there and live in its failover:
    the next epoch, once, in that session. (Its re-registration is a bounce: it leaves
    the ISRs written before, as another controller would have had it leave them.)"""
    ctl = c.controller
    c.drain()
    assert not ctl.is_active
    assert paths.CONTROLLER not in c.data.zk.nodes
    ctl._on_zk_state("CONNECTED")
    assert "RegisterBrokerAndReelect" in c.drain()
    assert active_now(ctl)
    assert ctl.ctx.epoch == 5
    assert c.data.zk.nodes[paths.CONTROLLER][1].ephemeralOwner == c.zk.session_id
    assert c.data.zk.nodes[paths.broker(1)][1].ephemeralOwner == c.zk.session_id
    assert 1 in ctl.ctx.live_broker_ids


def not_elected(c: Controller, before: LeaderAndIsr) -> None:
    after = c.data.state(T0)
    won = (
        f"an election of an ended session won epoch {c.controller.ctx.epoch} in the next,"
        f" before broker 1 registered there; t-0 leader {before.leader} -> {after.leader},"
        f" ISR {before.isr} -> {after.isr}"
    )
    assert not c.controller.is_active, won
    assert paths.CONTROLLER not in c.data.zk.nodes, won
    assert (after.leader, after.isr) == (before.leader, before.isr)


@pytest.mark.parametrize("event", [ev.Startup, ev.Reelect, ev.ControllerChange])
def test_an_event_whose_session_ends_under_it_wins_no_term_in_the_next(
    event: Callable[[], ev.ControllerEvent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer's case: the event reads /controller in S1, S1 expires, its election
    multi would be sent in S2 (for Reelect and ControllerChange the session ends at the
    read of their resignation check, before _elect starts)."""
    data = cluster()
    with Controller(data) as c:
        ctl = c.controller
        ctl.register_broker = lambda: register_in_current_session(c)
        register_in_current_session(c)
        c.zk.add_state_listener(ctl._on_zk_state)
        real = controller_election.read_controller  # the function controller.controller imports
        reads: list[int] = []

        def read_then_expire(*args: Any, **kwargs: Any) -> Any:
            got = real(*args, **kwargs)
            if not reads:
                reads.append(1)
                expire(c)  # S1 ends here, broker 1's registration with it
            return got

        monkeypatch.setattr(controller_module, "read_controller", read_then_expire)
        before = data.state(T0)
        c.run(event())
        not_elected(c, before)
        elected_after_registering(c)


def test_an_event_taken_after_the_session_ended_before_its_expire_was_queued() -> None:
    """kazoo moves the session on, then its listeners queue the Expire: an event the
    event thread took in between elects nothing."""
    data = cluster()
    with Controller(data) as c:
        ctl = c.controller
        ctl.register_broker = lambda: register_in_current_session(c)
        register_in_current_session(c)
        before = data.state(T0)
        expire(c)  # no listener yet: the Expire is not queued
        c.run(ev.Reelect())
        not_elected(c, before)
        c.zk.add_state_listener(ctl._on_zk_state)
        ctl._on_zk_state("LOST")  # the listener, late
        elected_after_registering(c)


@pytest.mark.parametrize(
    "event",
    [ev.RegisterBrokerAndReelect, ev.Reconnected, lambda: ev.ReelectAfterZkError(0)],
    ids=["RegisterBrokerAndReelect", "Reconnected", "ReelectAfterZkError"],
)
def test_a_registration_whose_session_ends_before_the_election_wins_no_term(
    event: Callable[[], ev.ControllerEvent],
) -> None:
    """The events that register then elect: the session the registration was made in
    ends before the election, which must not be won in the next one."""
    data = cluster()
    with Controller(data) as c:
        ctl = c.controller
        calls: list[int] = []

        def register_then_expire() -> int:
            register_in_current_session(c)
            if not calls:
                calls.append(1)
                expire(c)
            return 1

        ctl.register_broker = register_then_expire
        register_in_current_session(c)
        c.zk.add_state_listener(ctl._on_zk_state)
        before = data.state(T0)
        c.run(event())
        not_elected(c, before)
        elected_after_registering(c)
