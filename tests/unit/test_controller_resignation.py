"""A controller's resignation, over an in-memory ZooKeeper (tests/unit/fake_zk.py): a
fenced controller resigns even when it cannot read /controller afterwards; a /controller
of its own session is removed whatever broker id its data names; and the "disconnected
for a whole session timeout" timer never clears away the reconnection's event."""

from __future__ import annotations

import threading
from typing import Any
from unittest.mock import MagicMock, patch

import pytest
from kazoo.exceptions import ConnectionLoss

from controller import events as ev
from controller.controller import ControllerConfig, KafkaController
from election.controller_election import (
    UNKNOWN_CONTROLLER,
    FencingToken,
    read_controller,
    try_elect,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ControllerMovedError, SetData
from zkdata.znodes import encode_controller

OURS, THEIRS = 0x111, 0x222


def active_controller(zk: FakeZk) -> KafkaController:
    """Broker 1, controller of epoch 5 (its /controller of session OURS)."""
    zk.put(paths.CONTROLLER_EPOCH, b"4")
    zk.multi([SetData(paths.CONTROLLER_EPOCH, b"5", 0)])  # version 1
    zk.put(paths.CONTROLLER, encode_controller(1), owner=OURS)
    c = KafkaController(ControllerConfig(broker_id=1), zk, MagicMock(), lambda: 123)  # type: ignore[arg-type]
    c.token = FencingToken(5, 1)
    c.ctx.epoch, c.ctx.epoch_zk_version = 5, 1
    return c


def test_a_fenced_controller_resigns_even_when_reading_controller_fails() -> None:
    """Its write met another controller's epoch, then the connection dropped: it resigns
    all the same (token, channel, handlers dropped), not only once it can read."""
    zk = FakeZk(OURS)
    c = active_controller(zk)
    channel = c.channel = MagicMock()

    def fenced(_event: object) -> None:
        raise ControllerMovedError("the epoch check failed")

    def lost(*_args: object, **_kwargs: object) -> Any:
        raise ConnectionLoss()

    c._on_BrokerChange = fenced  # type: ignore[method-assign]
    zk.get = lost  # type: ignore[method-assign]
    c.process(ev.BrokerChange())
    assert not c.is_active
    assert c.channel is None
    channel.close.assert_called_once()


@pytest.mark.parametrize("named", [b'{"version":1,"brokerid":-1,"timestamp":"0"}', b"7"])
def test_a_controller_of_its_own_session_naming_another_broker_is_removed(named: bytes) -> None:
    """Its data rewritten by someone (the owner stays this broker's session): the broker
    resigns, and removes it, or every other broker's election would fail on it for as long
    as the session lives. A negative id is malformed: -1 read as "no controller" before."""
    zk = FakeZk(OURS)
    c = active_controller(zk)
    zk.multi([SetData(paths.CONTROLLER, named, -1)])
    other = zk.share(THEIRS)
    if named.startswith(b"{"):
        assert read_controller(other) == (UNKNOWN_CONTROLLER, OURS)
    c.process(ev.ControllerChange())
    assert not c.is_active
    assert paths.CONTROLLER not in zk.nodes
    assert try_elect(other, 2).token is not None


def test_another_sessions_controller_is_left_alone() -> None:
    zk = FakeZk(OURS)
    c = active_controller(zk)
    zk.put(paths.CONTROLLER, encode_controller(2), owner=THEIRS)  # broker 2 won since
    c.process(ev.ControllerChange())
    assert not c.is_active
    assert read_controller(zk) == (2, THEIRS)


class SteppedTimer(threading.Timer):
    """threading.Timer, paused between its cancellation check and its call: the
    reconnection lands in between."""

    checked = threading.Event()
    go_on = threading.Event()

    def run(self) -> None:
        self.finished.wait(self.interval)
        if not self.finished.is_set():
            SteppedTimer.checked.set()
            SteppedTimer.go_on.wait(5)
            self.function(*self.args, **self.kwargs)
        self.finished.set()


def queued(c: KafkaController) -> list[str]:
    names = []
    while not c.events._queue.empty():
        names.append(c.events._queue.get_nowait().event.name)
    return names


@pytest.mark.parametrize(
    ("previous", "expected"), [("SUSPENDED", "Reconnected"), ("LOST", "RegisterBrokerAndReelect")]
)
def test_the_session_timeout_timer_never_clears_away_the_reconnection(
    previous: str, expected: str
) -> None:
    SteppedTimer.checked.clear()
    SteppedTimer.go_on.clear()
    config = ControllerConfig(broker_id=1, session_timeout_ms=50)
    c = KafkaController(config, FakeZk(), MagicMock(), lambda: 1)  # type: ignore[arg-type]
    with patch("controller.controller.threading.Timer", SteppedTimer):
        c._on_zk_state("SUSPENDED")
        timer = c._suspended_timer
        assert timer is not None
        assert SteppedTimer.checked.wait(5)  # its wait is over, its cancel check passed
        if previous == "LOST":
            c._on_zk_state("LOST")
        c._on_zk_state("CONNECTED")  # cancels it, too late, and queues the event
        SteppedTimer.go_on.set()
        timer.join(5)  # its call has run
    assert expected in queued(c)
