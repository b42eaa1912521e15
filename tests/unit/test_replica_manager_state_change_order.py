"""Controller requests and log directory failures change the fetchers in the order they
change partition state (Kafka 2.8's replicaStateChangeLock, held by
becomeLeaderOrFollower, stopReplicas and handleLogDirFailure, fetcher changes included).

Two LeaderAndIsr requests can overlap: an old controller's last and the new one's first
at a failover, or a request the controller's channel sent again after a broken connection
while the broker still works on the first copy (one thread per connection). A log
directory's failure handler runs on a thread of its own. Had the fetcher changes
(``on_become``/``on_stop``, the server's follow/unfollow) of one of them run after it
let go of the lock, they could land after those of a change applied later: the partition
fetched from an earlier leader for good (every answer dropped), from nobody, or an
offline replica fetched (its leader may count it caught up and keep it in the ISR).

The first request is held in its state-change log write, after its states are applied
and before its fetcher changes; the second one runs meanwhile. No ZooKeeper, no network:
the fetchers' connections are refused.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.fetcher import ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer
from broker.state_change_log import LeaderAndIsrRow, StateChangeLog
from storage.log_manager import LogManager
from tests.unit.leader_and_isr_requests import stop_replica_request
from tests.unit.test_replica_manager_leader_and_isr import BROKER, errors, request
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
HELD_EPOCH = 5  # the leader epoch of the request held in its state-change log write


class _HeldLog(StateChangeLog):
    """The state-change log line of the request at HELD_EPOCH waits for ``release`` (a
    busy disk; sync_new_dirs and write_topic_ids sit in the same gap)."""

    def __init__(self, tmp_path: Path, release: threading.Event) -> None:
        super().__init__(tmp_path, BROKER)
        self.release = release
        self.held = threading.Event()

    def leader_and_isr(self, rows: Any) -> None:
        batch: list[LeaderAndIsrRow] = list(rows)
        if any(r.leader_epoch == HELD_EPOCH for r in batch):
            self.held.set()
            assert self.release.wait(10)
        super().leader_and_isr(batch)


def _refuse(*_a: Any) -> Any:
    raise OSError("no leader reachable in this test")


class _Setup:
    def __init__(self, tmp_path: Path, logs: LogManager | None) -> None:
        self.release = threading.Event()
        self.state_log = _HeldLog(tmp_path, self.release)
        self.rm = ReplicaManager(BROKER, cast(Any, None), self.state_log, logs=logs)
        self.fetchers = ReplicaFetcherManager(
            BROKER,
            lambda *a: None,
            lambda b: ("127.0.0.1", 9000 + b),
            follower_log=self.rm,
            connect=_refuse,
            backoff_ms=200,
        )
        # The server's own callbacks, on a stand-in for the server.
        server = cast(
            Any,
            types.SimpleNamespace(
                groups=types.SimpleNamespace(on_become=lambda *a: None, on_stop=lambda *a: None),
                fetchers=self.fetchers,
                logs=logs,
                _shutting_down=threading.Event(),
                _forget_topic_config=lambda topic: None,
            ),
        )
        self.rm.on_become = lambda leaders, followers: KafkaServer._on_become(
            server, leaders, followers
        )
        self.rm.on_stop = lambda tps, deleted: KafkaServer._on_stop(server, tps, deleted)
        self.threads: list[threading.Thread] = []

    def start(self, target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def hold_first(self, first: dict[str, Any]) -> None:
        """Apply ``first`` on a thread of its own, held after its states are applied."""
        self.start(self.rm.become_leader_or_follower, first)
        assert self.state_log.held.wait(10)
        p = self.rm.partitions[TP]
        assert p.leader_epoch == HELD_EPOCH

    def finish(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()

    def fetched(self) -> dict[int, set[TopicPartition]]:
        return {leader: tps for leader, tps in self.fetchers.followed().items() if tps}

    def close(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(10)
        self.fetchers.close()
        self.rm.close()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[_Setup]:
    s = _Setup(tmp_path, None)
    try:
        yield s
    finally:
        s.close()


def _second_request(s: _Setup, second: dict[str, Any]) -> dict[str, Any]:
    """``second`` on another connection's thread: it waits for the first request (bounded:
    0.3 s, after which it is let go and awaited)."""
    answers: list[dict[str, Any]] = []
    thread = s.start(lambda: answers.append(s.rm.become_leader_or_follower(second)))
    thread.join(0.3)
    s.finish()
    assert answers
    return answers[0]


def test_an_earlier_requests_follow_does_not_undo_a_later_ones(setup: _Setup) -> None:
    # Controller epoch 3: follow broker 2 at leader epoch 5 (held after applying).
    setup.hold_first(request({0: (2, HELD_EPOCH, [2, 1])}, controller_epoch=3))
    # Controller epoch 4: broker 3 leads at leader epoch 6.
    answer = _second_request(setup, request({0: (3, 6, [3, 1])}, controller_epoch=4))
    assert errors(answer) == {0: 0}
    p = setup.rm.partitions[TP]
    assert (p.leader, p.leader_epoch) == (3, 6)
    # Fetched from broker 3, not from broker 2 at epoch 5 (whose answers are all dropped).
    assert setup.fetched() == {3: {TP}}


def test_an_earlier_requests_unfollow_does_not_undo_a_later_follow(setup: _Setup) -> None:
    # Controller epoch 3: this broker leads at leader epoch 5 (its on_become unfollows).
    setup.hold_first(request({0: (BROKER, HELD_EPOCH, [1, 2])}, controller_epoch=3))
    answer = _second_request(setup, request({0: (3, 6, [3, 1])}, controller_epoch=4))
    assert errors(answer) == {0: 0}
    p = setup.rm.partitions[TP]
    assert (p.leader, p.leader_epoch) == (3, 6)
    assert setup.fetched() == {3: {TP}}  # not fetched from nobody


def test_a_failed_log_dirs_replica_is_not_fetched_again_by_a_request_applied_before(
    tmp_path: Path,
) -> None:
    # A LeaderAndIsr applied (follow broker 2) before the directory's failure handler took
    # the partition offline must not have its follow land after the handler's unfollow:
    # the offline replica would be fetched for good, and its leader might count it caught
    # up and keep it in (or add it back to) the ISR.
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "a", tmp_path / "b"], config)
    s = _Setup(tmp_path, logs)
    try:
        s.hold_first(request({0: (2, HELD_EPOCH, [2, 1])}, controller_epoch=3))
        plog = s.rm.partitions[TP].log
        assert plog is not None
        log_dir = plog.log_dir
        logs.dir_failures.maybe_add_offline_log_dir(log_dir, "test", OSError("EIO"))
        offline: list[list[TopicPartition]] = []
        handler = s.start(lambda: offline.append(s.rm.handle_log_dir_failure(log_dir)))
        handler.join(0.3)  # waits for the request (bounded)
        s.finish()
        assert offline == [[TP]]
        assert TP in s.rm.offline_partitions
        assert TP not in s.rm.partitions
        assert s.fetched() == {}
    finally:
        s.close()
        logs.close()


@pytest.mark.parametrize("delete", [True, False])
def test_a_stop_replicas_fetchers_let_go_before_its_logs_are_deleted(
    tmp_path: Path, delete: bool
) -> None:
    """Kafka's stopReplicas stops the fetchers first: a follower whose StopReplica is
    renaming 100,000 logs must not fetch them meanwhile from leaders that deleted them
    already (an error a partition, every round). The fetchers have let go when the
    server is told (``on_stopping``), the logs still there; they are gone after."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "a"], config)
    s = _Setup(tmp_path, logs)
    seen: list[tuple[list[TopicPartition], bool, dict[int, set[TopicPartition]]]] = []
    try:
        s.rm.become_leader_or_follower(request({0: (2, 1, [2, 1])}, controller_epoch=3))
        assert s.fetched() == {2: {TP}}

        def stopping(tps: list[TopicPartition]) -> None:
            s.fetchers.unfollow(tps)  # the server's on_stopping
            seen.append((list(tps), logs.get_log(TP) is not None, s.fetched()))

        s.rm.on_stopping = stopping
        answer = s.rm.stop_replicas(stop_replica_request(TP, -2, delete=delete))
        assert answer["error_code"] == 0
        assert seen == [([TP], True, {})]
        assert (logs.get_log(TP) is None) is delete
        assert s.fetched() == {}
    finally:
        s.close()
        logs.close()
