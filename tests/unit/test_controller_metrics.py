"""The controller's part of the broker's status file (`KafkaController.metrics`), over an
in-memory ZooKeeper (tests/unit/fake_zk.py): "active" says the controller's failover is
done, not only that it won the election. `zkctl controller` reads the file again while
it says not active (zkctl/admin_commands.py), and shows the counts of an active one as
the cluster's; the harness's wait_controller, the demo and the tests take an active
controller for one whose failover's line is in its state-change log."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from controller import controller as controller_module
from controller import reactions
from tests.unit.fake_cluster import Controller, ZooKeeperData


def cluster() -> ZooKeeperData:
    data = ZooKeeperData(brokers=(1, 2, 3), controller_epoch=4)
    data.topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    return data


def test_a_controller_is_active_in_its_metrics_only_once_its_failover_is_done() -> None:
    seen: dict[str, dict[str, Any]] = {}
    with Controller(cluster()) as c:
        ctl = c.controller
        start_state_machines = (
            reactions.start_state_machines
        )  # the function controller.controller imports
        failover_loaded = ctl.state_log.failover_loaded

        def mid_failover(*args: Any) -> None:
            seen["mid"] = ctl.metrics()  # the token is ours, the context loaded
            start_state_machines(*args)

        def about_to_log(*args: Any) -> None:
            seen["unlogged"] = ctl.metrics()  # its failover's line not yet written
            failover_loaded(*args)

        with (
            patch.object(controller_module, "start_state_machines", mid_failover),
            patch.object(ctl.state_log, "failover_loaded", about_to_log),
        ):
            c.elect()
        assert ctl.is_active
        for when in ("mid", "unlogged"):
            assert seen[when]["active"] is False, (when, seen[when])
            assert seen[when]["controller_epoch"] is None, (when, seen[when])
            assert seen[when]["partitions"] is None, (when, seen[when])
        after = ctl.metrics()
        assert after["active"] is True
        assert (after["controller_epoch"], after["partitions"]) == (5, 2)
        assert after["last_failover"]["total_ms"] is not None
        # The channel's queue time per broker beside its queue size (Kafka's
        # RequestRateAndQueueTimeMs and QueueSize, per broker; the channel is mocked here).
        assert "channel_queue_time_ms" in after

        ctl._resign("test")
        assert ctl.metrics()["active"] is False
        assert ctl.metrics()["channel_queue_time_ms"] == {}
