"""The auto rebalance timer of a whole controller over the in-memory ZooKeeper: Kafka's
onControllerFailover schedules the first check 5 s after the failover
(scheduleAutoLeaderRebalanceTask(delay = 5)), each check the next one
leader.imbalance.check.interval.seconds later."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest.mock import MagicMock, patch

from controller import events as ev
from controller.controller import FIRST_REBALANCE_CHECK_S, ControllerConfig, KafkaController
from tests.unit import fake_cluster as fc
from zkdata import paths
from zkdata.znodes import decode_partition_state


class RecordedTimer:
    """threading.Timer, recorded and never started: (delay, what it would call)."""

    armed: list[tuple[float, Callable[[], Any]]] = []

    def __init__(self, interval: float, function: Callable[[], Any]) -> None:
        RecordedTimer.armed.append((interval, function))
        self.daemon = False

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        pass


def test_the_first_check_comes_5_s_after_a_failover_the_next_after_the_interval() -> None:
    zk = fc.empty_cluster()
    for b in (1, 2, 3):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 3, 1)}, leaders={0: 3})
    cfg = ControllerConfig(
        broker_id=1, auto_leader_rebalance_enable=True, leader_imbalance_check_interval_s=300.0
    )
    c = KafkaController(cfg, zk, MagicMock(), lambda: 123)  # type: ignore[arg-type]
    RecordedTimer.armed.clear()
    with patch("controller.controller.threading.Timer", RecordedTimer):
        fc.process(c, ev.Startup())
        fc.drain(c)
        assert c.is_active
        # Before the fix: 300 s, the whole interval, after every failover.
        assert [delay for delay, _ in RecordedTimer.armed] == [FIRST_REBALANCE_CHECK_S] == [5.0]
        _delay, fire = RecordedTimer.armed[0]
        fire()  # the check is due: it only enqueues
        fc.drain(c)
    assert [delay for delay, _ in RecordedTimer.armed] == [5.0, 300.0]
    # The check moved partition 0 back to its preferred replica, broker 2.
    path = paths.partition_state("t", 0)
    got = zk.get(path)
    assert got is not None
    assert decode_partition_state(path, got[0], got[1].version).leader_and_isr.leader == 2
