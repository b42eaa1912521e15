"""A controller's partition-state write whose answer is lost, against a real ZooKeeper:
ZooKeeper carries the election out, the answer never comes (only ZooKeeper's side of the
link is cut), the controller resigns (item 35 of docs/architecture.md), and once the link
is back it reads the partitions back and logs the write it finds, once. And the election
multi's own lost answer: the term it won is kept."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from broker.state_change_log import StateChangeLog
from cluster.netsplit import ZooKeeperLink
from controller.controller import ControllerConfig, KafkaController
from controller.state_machines import FOUND_WRITTEN
from tests.integration.test_controller_store import brokers_and_topic, close
from zkdata import paths
from zkdata.client import WriteOp, ZkClient
from zkdata.znodes import decode_partition_state


def wait_until(check: Any, what: str, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def controller_behind_a_link(
    zk_connect: str, tmp_path: Path
) -> tuple[ZkClient, ZooKeeperLink, ZkClient, StateChangeLog, KafkaController]:
    """A direct client, and broker 1's controller whose ZooKeeper link can be cut."""
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    link = ZooKeeperLink(zk_connect)
    zk = ZkClient(link.connect_string, session_timeout_ms=6_000)
    zk.start()
    log = StateChangeLog(tmp_path, 1)
    controller = KafkaController(
        ControllerConfig(broker_id=1, session_timeout_ms=6_000, auto_leader_rebalance_enable=False),
        zk,
        log,
        lambda: 0,
    )
    return direct, link, zk, log, controller


def test_an_election_whose_answer_was_lost_is_logged_once_read_back(
    zk_connect: str, tmp_path: Path
) -> None:
    direct, link, zk, log, controller = controller_behind_a_link(zk_connect, tmp_path)
    real = zk.multi_fenced_batched
    cut: list[bool] = []

    def answers_cut(epoch_zk_version: int, items: Iterable[Sequence[WriteOp]], **kw: Any) -> Any:
        items = list(items)
        if not cut and any(getattr(op, "path", "").endswith("/state") for i in items for op in i):
            cut.append(True)
            link.cut_answers()
        return real(epoch_zk_version, items, **kw)

    state_paths = [paths.partition_state("t", p) for p in range(3)]

    def stored() -> list[tuple[int, int, int]]:
        out = []
        for path in state_paths:
            got = direct.get(path)
            assert got is not None
            state = decode_partition_state(path, got[0], got[1].version)
            out.append((state.leader_and_isr.leader, got[1].version, state.controller_epoch))
        return out

    def rows() -> list[dict[str, Any]]:
        text = (tmp_path / "state-change.log").read_text()
        return [
            r
            for r in map(json.loads, text.splitlines())
            if r["event"] == "partition_state" and r["topic"] == "t"
        ]

    try:
        brokers_and_topic(direct, {0: (2, 3, 1), 1: (2, 1, 3), 2: (2, 3, 1)})
        controller.start()
        wait_until(lambda: controller.is_active and controller.failovers == 1, "the election")
        term = controller.ctx.epoch
        zk.multi_fenced_batched = answers_cut  # type: ignore[method-assign]
        direct.delete(paths.broker(2))  # the leader of every partition is lost
        wait_until(lambda: all(s[1:] == (1, term) for s in stored()), "the writes")
        wait_until(lambda: not controller.is_active, "the resignation")
        assert rows() == []  # the answers never came: nothing logged yet
        link.heal()
        wait_until(lambda: controller.is_active and controller.ctx.epoch > term, "a new term")
        wait_until(lambda: len(rows()) == 3, "the writes read back and logged")
        time.sleep(0.5)  # nothing more comes
        found = rows()
        leaders = stored()
    finally:
        close(controller, zk)
        log.close()
        link.close()
        direct.close()
    assert len(found) == 3, found
    for p, (leader, version, controller_epoch) in enumerate(leaders):
        (row,) = [r for r in found if r["partition"] == p]
        assert row["why"] == FOUND_WRITTEN
        assert row["reason"] == "offline"
        assert (row["leader"], row["zk_version"], row["controller_epoch"]) == (
            leader,
            version,
            controller_epoch,
        )
        assert controller_epoch == term


def test_an_election_whose_answer_was_lost_keeps_its_term(zk_connect: str, tmp_path: Path) -> None:
    """The election multi lands and its answer is lost: sent again once the connection is
    back (same session), answered NODEEXISTS, /controller found ours with the epoch it
    wrote, and the term is kept (Kafka 2.8's registerControllerAndIncrementControllerEpoch
    and checkControllerAndEpoch). It was thrown away: /controller deleted, epoch 2 won."""
    direct, link, zk, log, controller = controller_behind_a_link(zk_connect, tmp_path)
    real = zk.multi
    cut: list[bool] = []

    def answers_cut(ops: Sequence[WriteOp], **kw: Any) -> Any:
        if not cut and any(getattr(op, "path", "") == paths.CONTROLLER for op in ops):
            cut.append(True)
            link.cut_answers()
        return real(ops, **kw)

    try:
        brokers_and_topic(direct, {0: (2, 3, 1)})
        session = zk.session_id
        zk.multi = answers_cut  # type: ignore[method-assign]
        controller.start()
        wait_until(lambda: direct.exists(paths.CONTROLLER), "the election multi carried out")
        time.sleep(0.5)
        link.heal()  # the cut connection is closed: ConnectionLoss, and a reconnection
        wait_until(lambda: controller.is_active, "the term")
        time.sleep(2)  # no further election comes
        got = direct.get(paths.CONTROLLER)
        epoch = direct.get(paths.CONTROLLER_EPOCH)
        assert got is not None
        assert epoch is not None
        assert controller.is_active
        assert controller.ctx.epoch == 1
        assert (zk.session_id, epoch[0]) == (session, b"1")
        assert got[1].ephemeralOwner == session
    finally:
        close(controller, zk)
        log.close()
        link.close()
        direct.close()
