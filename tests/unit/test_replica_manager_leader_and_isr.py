"""LeaderAndIsr fencing in the replica manager, per partition: what is applied, what is a
repeat (a new controller resends every partition), what is refused. No ZooKeeper: a
LeaderAndIsr touches none."""

from __future__ import annotations

import json
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.replica_manager import (
    Followers,
    FollowerState,
    ReplicaManager,
    stale_takes_its_epoch_again,
)
from broker.state_change_log import StateChangeLog
from storage.checkpoints import read_topic_ids
from storage.log_manager import TOPIC_IDS_FILE, LogManager
from storage.testing import RecordSpec, build_batch
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

BROKER = 1
TOPIC_ID = uuid.UUID(int=7)


def request(
    states: dict[int, tuple[int, int, list[int]]],
    *,
    controller_epoch: int = 3,
    replicas: list[int] | None = None,
    is_new: bool = False,
) -> dict[str, Any]:
    """Partition -> (leader, leader epoch, ISR) of topic "t"."""
    return {
        "controller_id": 9,
        "controller_epoch": controller_epoch,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": "t",
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": p,
                        "controller_epoch": controller_epoch,
                        "leader": leader,
                        "leader_epoch": epoch,
                        "isr": isr,
                        "partition_epoch": epoch,
                        "replicas": replicas if replicas is not None else [1, 2, 3],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": is_new,
                    }
                    for p, (leader, epoch, isr) in states.items()
                ],
            }
        ],
    }


def errors(response: dict[str, Any]) -> dict[int, int]:
    return {
        e["partition_index"]: e["error_code"]
        for topic in response["topics"]
        for e in topic["partition_errors"]
    }


def logged(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "state-change.log"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [row for row in lines if row["event"] == "leader_and_isr"]


def manager(tmp_path: Path) -> ReplicaManager:
    return ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER))


def notified(rm: ReplicaManager) -> list[tuple[bool, list[TopicPartition] | None]]:
    """What the manager tells the fetch handler changed, from now on."""
    calls: list[tuple[bool, list[TopicPartition] | None]] = []
    rm.on_data = lambda data, partitions: calls.append(
        (data, None if partitions is None else list(partitions))
    )
    return calls


def test_new_partitions_are_applied_and_logged(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    calls = notified(rm)
    response = rm.become_leader_or_follower(request({0: (1, 0, [1, 2, 3]), 1: (2, 0, [2, 3])}))
    assert errors(response) == {0: 0, 1: 0}
    # Waiting fetches are told which partitions changed (here the one led and the one
    # followed).
    assert calls == [(True, [TopicPartition("t", 0), TopicPartition("t", 1)])]
    assert [(r["partition"], r["result"]) for r in logged(tmp_path)] == [
        (0, "applied"),
        (1, "applied"),
    ]
    led = {tp.partition: p for tp, p in rm.partitions.items()}
    assert (led[0].leader, led[0].isr, len(led[0].followers)) == (1, (1, 2, 3), 2)
    assert (led[1].leader, led[1].isr, len(led[1].followers)) == (2, (2, 3), 0)


def test_a_repeat_changes_nothing_and_is_not_logged(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    before = dict(rm.partitions)
    # A new controller resends the state it read (even with another ISR: the epoch is
    # what fences; the broker's own view of the ISR stays).
    calls = notified(rm)
    response = rm.become_leader_or_follower(request({0: (1, 4, [1, 2])}, controller_epoch=4))
    assert errors(response) == {0: 0}
    assert calls == []  # nothing changed: no fetch is woken
    assert rm.partitions == before
    assert all(rm.partitions[tp] is p for tp, p in before.items())
    assert len(logged(tmp_path)) == 1


def test_an_older_leader_epoch_is_refused_and_logged(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    response = rm.become_leader_or_follower(request({0: (2, 3, [2, 3])}, controller_epoch=4))
    assert errors(response) == {0: int(ErrorCode.STALE_CONTROLLER_EPOCH)}
    (p,) = rm.partitions.values()
    assert (p.leader, p.leader_epoch) == (1, 4)
    assert [(r["result"], r["error"]) for r in logged(tmp_path)][-1] == (
        "rejected",
        "STALE_CONTROLLER_EPOCH",
    )


def test_a_newer_leader_epoch_replaces_the_partition(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    response = rm.become_leader_or_follower(request({0: (2, 5, [2, 3])}, controller_epoch=4))
    assert errors(response) == {0: 0}
    (p,) = rm.partitions.values()
    assert (p.leader, p.leader_epoch, p.isr, len(p.followers)) == (2, 5, (2, 3), 0)


def test_a_partition_not_hosted_here_is_refused_even_at_the_same_epoch(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    response = rm.become_leader_or_follower(
        request({0: (2, 4, [2, 3])}, controller_epoch=4, replicas=[2, 3])
    )
    assert errors(response) == {0: int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}


def test_a_stale_partition_takes_the_same_epoch_again(tmp_path: Path) -> None:
    # Stopped by a StopReplica of its epoch: a new controller's resend of that epoch, no
    # older than the state held (zkVersion 4), restarts it.
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    (old,) = rm.partitions.values()
    old.stale = True
    response = rm.become_leader_or_follower(request({0: (1, 4, [1, 2])}, controller_epoch=4))
    assert errors(response) == {0: 0}
    (new,) = rm.partitions.values()
    assert new is not old
    assert (new.stale, new.isr) == (False, (1, 2))


def test_a_stale_partition_refuses_an_older_leader_epoch(tmp_path: Path) -> None:
    # Stopped, it keeps its epoch so that older states stay refused: a delayed
    # LeaderAndIsr of an earlier epoch must not restart it under a deposed leader.
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    (old,) = rm.partitions.values()
    old.stale = True
    response = rm.become_leader_or_follower(request({0: (2, 3, [2, 3])}, controller_epoch=4))
    assert errors(response) == {0: int(ErrorCode.STALE_CONTROLLER_EPOCH)}
    assert rm.partitions[TopicPartition("t", 0)] is old
    assert (old.stale, old.leader, old.leader_epoch) == (True, 1, 4)


@pytest.mark.parametrize(
    ("held", "found", "offered"),
    [
        (4, -1, 3),  # older than the state held (one its own ISR write made, say)
        (4, 6, 4),  # its ISR write found a newer state (another epoch) stored
        (4, 6, 5),
    ],
)
def test_a_stale_partition_takes_no_same_epoch_state_older_than_one_it_knows(
    tmp_path: Path, held: int, found: int, offered: int
) -> None:
    """A repeat, answered NONE and not logged: applied, a delayed resend would take back
    an ISR ZooKeeper no longer holds."""
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}))
    (old,) = rm.partitions.values()
    old.zk_version, old.found_zk_version, old.stale = held, found, True
    rows = len(logged(tmp_path))
    same_epoch = request({0: (1, 4, [1, 2])}, controller_epoch=4)
    same_epoch["topic_states"][0]["partition_states"][0]["partition_epoch"] = offered
    assert errors(rm.become_leader_or_follower(same_epoch)) == {0: 0}
    assert rm.partitions[TopicPartition("t", 0)] is old
    assert (old.stale, old.isr) == (True, (1, 2, 3))
    assert len(logged(tmp_path)) == rows


@pytest.mark.parametrize(
    ("held", "found", "offered", "taken"),
    [(5, -1, 5, True), (5, -1, 6, True), (5, -1, 4, False), (5, 7, 7, False), (5, 7, 8, True)],
)
def test_stale_takes_its_epoch_again(held: int, found: int, offered: int, taken: bool) -> None:
    assert stale_takes_its_epoch_again(held, found, offered) is taken


def test_an_older_controller_epoch_is_refused_whole(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}, controller_epoch=5))
    response = rm.become_leader_or_follower(request({0: (2, 9, [2])}, controller_epoch=4))
    assert response == {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "topics": []}
    (p,) = rm.partitions.values()
    assert p.leader_epoch == 4


def test_a_stop_replica_of_an_older_controller_is_refused_whole(tmp_path: Path) -> None:
    # A deposed controller's StopReplica (Kafka's ReplicaManager.stopReplicas): refused
    # before any partition is looked at; applied, it would stop a replica the current
    # controller has it lead.
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({0: (1, 4, [1, 2, 3])}, controller_epoch=5))
    response = rm.stop_replicas(
        {
            "controller_id": 8,
            "controller_epoch": 4,
            "broker_epoch": 100,
            "topic_states": [
                {
                    "topic_name": "t",
                    "partition_states": [
                        {"partition_index": 0, "leader_epoch": 5, "delete_partition": False}
                    ],
                }
            ],
        }
    )
    assert response == {
        "error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH),
        "partition_errors": [],
    }
    (p,) = rm.partitions.values()
    assert (p.stale, p.leader_epoch, rm.controller_epoch) == (False, 4, 5)


def test_isr_expiry_names_each_lagging_follower_of_the_partitions_this_broker_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """replica.lag.time.max.ms: a follower in the ISR not caught up within it is asked
    out, per follower, of the partitions this broker leads; one caught up, one outside the
    ISR and the partitions another broker leads are left alone."""
    rm = manager(tmp_path)
    rm.replica_lag_time_max_ms = 1_000
    rm.become_leader_or_follower(
        request(
            {
                0: (1, 1, [1, 2, 3]),
                1: (1, 1, [1, 2, 3]),
                2: (1, 1, [1, 2]),
                3: (2, 1, [1, 2, 3]),
            }
        )
    )
    led = {p: rm.partitions[TopicPartition("t", p)] for p in range(4)}
    now = 50_000
    caught_up = {
        (0, 2): now - 10,
        (0, 3): now - 5_000,
        (1, 2): now - 5_000,
        (1, 3): now - 1_001,
        (2, 2): now - 999,
        (2, 3): now - 9_999,
    }
    for (p, r), at in caught_up.items():
        led[p].followers[r].last_caught_up_ms = at
    assert sorted(isr_expiry(rm, now, monkeypatch)) == [(2, [1]), (3, [0, 1])]


def isr_expiry(
    rm: ReplicaManager, now: int, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int | None, list[int]]]:
    """What an ISR expiry check at ``now`` asks: (follower removed, partitions) each."""
    asked: list[tuple[int | None, list[int]]] = []

    def request_isr_changes(partitions: Any, *, remove: int | None = None, **_: Any) -> None:
        asked.append((remove, [p.topic_partition.partition for p in partitions]))

    monkeypatch.setattr(rm, "_request_isr_changes", request_isr_changes)
    monkeypatch.setattr("broker.replica_manager._now_ms", lambda: now)
    rm.maybe_shrink_isr()
    return asked


def test_isr_expiry_asks_out_a_follower_at_the_log_end_that_stopped_fetching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deliberately unlike Kafka 2.8 (architecture item 44): its isFollowerOutOfSync keeps
    a follower whose log end equals the leader's whatever its last fetch; here one that
    has not fetched within replica.lag.time.max.ms leaves the ISR, idle partition or not."""
    rm = manager(tmp_path)
    rm.replica_lag_time_max_ms = 1_000
    rm.become_leader_or_follower(request({0: (1, 1, [1, 2, 3])}))
    p = rm.partitions[TopicPartition("t", 0)]
    now = 50_000
    for r, at in ((2, now - 5_000), (3, now - 10)):
        p.followers[r].fetch_offset = p.log_end_offset  # at the leader's log end
        p.followers[r].last_caught_up_ms = at
    assert isr_expiry(rm, now, monkeypatch) == [(2, [0])]


def test_a_requests_new_leaders_give_their_isr_followers_one_lag_allowance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The followers of every partition a LeaderAndIsr makes this broker lead start their
    lag allowance at the request's apply: one clock reading, one int object held by all
    of them (a broker taking 100,000 leaderships held one each until the follower
    fetched); a follower out of the ISR starts with none."""
    readings = iter(range(10**12, 10**12 + 1_000))
    monkeypatch.setattr("broker.replica_manager._now_ms", lambda: next(readings))
    rm = manager(tmp_path)
    rm.become_leader_or_follower(request({p: (1, 1, [1, 2] if p else [1, 2, 3]) for p in range(3)}))
    states = [rm.partitions[TopicPartition("t", p)].followers for p in range(3)]
    in_isr = [states[0][2], states[0][3], states[1][2], states[2][2]]
    assert {s.last_caught_up_ms for s in in_isr} == {10**12}
    assert all(s.last_caught_up_ms is in_isr[0].last_caught_up_ms for s in in_isr)
    assert states[1][3].last_caught_up_ms == 0 == states[2][3].last_caught_up_ms


@pytest.mark.parametrize(("isr", "readable"), [([1], 4), ([1, 2], 0)])
def test_a_new_leader_alone_in_the_isr_moves_the_high_watermark_to_its_log_end(
    tmp_path: Path, isr: list[int], readable: int
) -> None:
    # After a restart the checkpointed high watermark can lag the log (here: none was
    # written, as after a crash); with no follower to hold it back it moves at once, as
    # Kafka's makeLeader does, so acknowledged records are readable before a new produce.
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    tp = TopicPartition("t", 0)
    log = logs.get_or_create(tp)
    log.append_as_leader(build_batch([b"v"] * 4), 1)
    assert log.high_watermark == 0
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        response = rm.become_leader_or_follower(request({0: (BROKER, 2, isr)}, replicas=[1, 2]))
        assert errors(response) == {0: 0}
        assert log.high_watermark == readable  # with a follower in the ISR, it waits for it
    finally:
        rm.close()
        logs.close()


def test_a_log_whose_name_is_too_long_for_a_file_is_that_partitions_error(
    tmp_path: Path,
) -> None:
    """Topic names are at most 249 characters, partitions up to 2^31 - 1: the log of a
    legal topic's partition 1,000,000 is named 257 characters, one file name too long
    (errno 36). Its creation failing took the log directory offline, and with its last
    one the broker halted, at every restart. It is now that partition's
    KAFKA_STORAGE_ERROR; the directory and the other partitions go on."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        lai = request({0: (1, 1, [1, 2, 3]), 1_000_000: (1, 1, [1, 2, 3])}, is_new=True)
        lai["topic_states"][0]["topic_name"] = "a" * 249
        response = rm.become_leader_or_follower(lai)
        assert errors(response) == {0: 0, 1_000_000: int(ErrorCode.KAFKA_STORAGE_ERROR)}
        assert not logs.offline_dirs
        assert logs.live_log_dirs == logs.log_dirs
        assert logs.get_log(TopicPartition("a" * 249, 0)) is not None
        response = rm.become_leader_or_follower(request({0: (1, 1, [1, 2, 3])}, is_new=True))
        assert errors(response) == {0: 0}
    finally:
        rm.close()
        logs.close()


def test_the_isr_expiry_scan_leaves_the_lock_to_produces_and_fetches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 100,000 partitions the scan takes a fifth of a second: a produce moving its high
    # watermark, or a fetch recording a follower's position, must not wait for all of it.
    rm = manager(tmp_path)
    rm.replica_lag_time_max_ms = 1_000
    rm.become_leader_or_follower(request({0: (1, 1, [1, 2, 3]), 1: (1, 1, [1, 2, 3])}))
    taken_meanwhile: list[bool] = []

    class Probe(FollowerState):
        __slots__ = ()

        def caught_up_ms(self, leader_leo: int) -> int:
            # What another thread (a produce) finds while the scan looks at a follower.
            def take() -> None:
                got = rm._lock.acquire(timeout=5)
                taken_meanwhile.append(got)
                if got:
                    rm._lock.release()

            other = threading.Thread(target=take)
            other.start()
            other.join()
            return 0  # long behind

    for p in range(2):
        partition = rm.partitions[TopicPartition("t", p)]
        partition.followers = Followers((2, 3), (Probe(), FollowerState(last_caught_up_ms=10**15)))
    asked: list[tuple[int | None, list[int]]] = []

    def request_isr_changes(partitions: Any, *, remove: int | None = None, **_: Any) -> None:
        asked.append((remove, sorted(p.topic_partition.partition for p in partitions)))

    monkeypatch.setattr(rm, "_request_isr_changes", request_isr_changes)
    monkeypatch.setattr("broker.replica_manager._now_ms", lambda: 50_000)
    rm.maybe_shrink_isr()
    assert taken_meanwhile == [True, True]
    assert asked == [(2, [0, 1])]


def test_a_log_of_an_earlier_incarnation_of_the_topic_is_set_aside(tmp_path: Path) -> None:
    # Topic "t" (TOPIC_ID) led here with records; a LeaderAndIsr of "t" under another id
    # (deleted while this broker was away, created again) starts it from an empty log,
    # from epoch 0 too: the old epochs are the old topic's.
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    stopped: list[tuple[list[TopicPartition], bool]] = []
    rm.on_stop = lambda tps, deleted: stopped.append((tps, deleted))
    tp = TopicPartition("t", 0)
    try:
        assert errors(rm.become_leader_or_follower(request({0: (BROKER, 5, [1])}))) == {0: 0}
        logs.get_or_create(tp).append_as_leader(build_batch([b"old"] * 4), 5)
        again = request({0: (BROKER, 0, [1])})
        again["topic_states"][0]["topic_id"] = uuid.UUID(int=8)
        assert errors(rm.become_leader_or_follower(again)) == {0: 0}
        assert stopped == [([tp], True)]
        assert rm.partitions[tp].leader_epoch == 0
        assert logs.get_or_create(tp).log_end_offset == 0
        (stray,) = (tmp_path / "data").glob("t-0.*-stray")
        assert (stray / "00000000000000000000.log").stat().st_size > 0
        # The same id again is the same topic: nothing more is set aside.
        assert errors(rm.become_leader_or_follower(again)) == {0: 0}
        assert len(stopped) == 1
    finally:
        rm.close()
        logs.close()


def test_a_deleted_topics_logs_no_partition_state_holds_are_deleted(tmp_path: Path) -> None:
    # "t"-0 is hosted (its StopReplica deletes it); "t"-1 is a log found on disk that no
    # LeaderAndIsr named (a replica moved off this broker while it was away); "u"-0 is of
    # a topic not deleted.
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    hosted, orphan, other = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    try:
        assert errors(rm.become_leader_or_follower(request({0: (BROKER, 1, [1])}))) == {0: 0}
        logs.get_or_create(orphan)
        logs.get_or_create(other)
        assert rm.delete_orphaned_logs(["t"]) == [orphan]
        assert logs.get_log(orphan) is None
        assert logs.get_log(hosted) is not None
        assert logs.get_log(other) is not None
        assert rm.delete_orphaned_logs(["t"]) == []
        # "t"-0's log is still here (its StopReplica to come): its id stays.
        assert read_topic_ids(tmp_path / "data" / TOPIC_IDS_FILE) == {"t": TOPIC_ID}
        logs.delete(hosted)
        assert rm.delete_orphaned_logs(["t"]) == []
        assert read_topic_ids(tmp_path / "data" / TOPIC_IDS_FILE) == {}
    finally:
        rm.close()
        logs.close()


def test_a_stop_replica_deleting_a_topics_last_log_here_forgets_its_id(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    ids_file = tmp_path / "data" / TOPIC_IDS_FILE

    def stop(rm: ReplicaManager, *partitions: int) -> None:
        answer = rm.stop_replicas(
            {
                "controller_id": 9,
                "controller_epoch": 3,
                "topic_states": [
                    {
                        "topic_name": "t",
                        "partition_states": [
                            {"partition_index": p, "leader_epoch": -2, "delete_partition": True}
                            for p in partitions
                        ],
                    }
                ],
            }
        )
        assert [e["error_code"] for e in answer["partition_errors"]] == [0] * len(partitions)

    try:
        states = {0: (BROKER, 1, [1]), 1: (BROKER, 1, [1])}
        assert errors(rm.become_leader_or_follower(request(states))) == {0: 0, 1: 0}
        assert read_topic_ids(ids_file) == {"t": TOPIC_ID}
        stop(rm, 0)  # "t"-1 is still here
        assert read_topic_ids(ids_file) == {"t": TOPIC_ID}
        # A broker restarted while the topic is being deleted holds its logs but no
        # partition state of them (no LeaderAndIsr names a topic being deleted).
        restarted = ReplicaManager(
            BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs
        )
        stop(restarted, 1)
        assert read_topic_ids(ids_file) == {}
    finally:
        rm.close()
        logs.close()


def test_a_leader_without_its_log_is_refused_where_the_isr_lists_others(tmp_path: Path) -> None:
    """Told to lead a partition that is not new, whose log it does not have (back on new
    disks), while the ISR lists other replicas that may hold its records: refused
    REPLICA_NOT_AVAILABLE, and no empty log made, so the controller hands the leadership
    to one of them. Led from an empty log, its followers would truncate to it and what
    was acknowledged would be lost (Kafka 2.8 leads)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        response = rm.become_leader_or_follower(
            request({0: (1, 4, [1, 2, 3]), 1: (1, 4, [1]), 2: (2, 4, [2, 1])})
        )
        # Partition 1: the ISR's only member leads with what it has (nothing better);
        # partition 2: followed, fetched from its leader.
        assert errors(response) == {0: ErrorCode.REPLICA_NOT_AVAILABLE, 1: 0, 2: 0}
        assert TopicPartition("t", 0) not in logs
        assert [(r["partition"], r["result"], r["error"]) for r in logged(tmp_path)] == [
            (0, "rejected", "REPLICA_NOT_AVAILABLE"),
            (1, "applied", None),
            (2, "applied", None),
        ]
        # Partition 1 is led from the log made empty: the followers the ISR takes in
        # since have their records from it, so a later leader epoch (a follower lost, a
        # reassignment) is taken, not refused as for a log still lacking.
        assert TopicPartition("t", 1) not in rm._lost_logs
        assert errors(rm.become_leader_or_follower(request({1: (1, 5, [1, 3])}))) == {1: 0}
        assert rm.partitions[TopicPartition("t", 1)].leader == BROKER
        # Sent again as a follower (another replica leads now), it follows.
        assert errors(rm.become_leader_or_follower(request({0: (2, 5, [2, 3])}))) == {0: 0}
        assert TopicPartition("t", 0) in logs
        # A new partition's first leader has no log yet: it is made.
        response = rm.become_leader_or_follower(request({3: (1, 0, [1, 2, 3])}, is_new=True))
        assert errors(response) == {3: 0}
        # Its log made empty then, and nothing fetched since: still no leader while the
        # ISR lists others (the tests below have it catch up, or be taken into the ISR).
        response = rm.become_leader_or_follower(request({0: (1, 6, [2, 3])}))
        assert errors(response) == {0: ErrorCode.REPLICA_NOT_AVAILABLE}
    finally:
        rm.close()
        logs.close()


def test_a_state_naming_other_replicas_makes_no_log_here(tmp_path: Path) -> None:
    """A partition state whose replicas do not include this broker is refused
    UNKNOWN_TOPIC_OR_PARTITION with no log made: an empty directory would stay on disk
    (and the partition be taken for one whose log was lost). Kafka 2.8's
    becomeLeaderOrFollower checks the replicas before it makes anything."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        for is_new in (False, True):
            response = rm.become_leader_or_follower(
                request({0: (2, 1, [2, 3])}, replicas=[2, 3], is_new=is_new)
            )
            assert errors(response) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            assert TopicPartition("t", 0) not in logs
            assert not any((tmp_path / "data").glob("t-0*"))
            assert not rm._lost_logs
    finally:
        rm.close()
        logs.close()


def test_a_follower_that_made_its_log_empty_does_not_lead_until_it_caught_up(
    tmp_path: Path,
) -> None:
    """Back on new disks and first told to follow, it makes the log empty and fetches;
    told to lead before it reached its leader's high watermark (the ISR still listing it
    and others), it refuses as one without the log does; caught up, it leads."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        assert errors(rm.become_leader_or_follower(request({0: (2, 4, [2, 1, 3])}))) == {0: 0}
        assert TopicPartition("t", 0) in logs
        batch = bytes(build_batch([b"r"] * 3, base_offset=0, partition_leader_epoch=4))
        # Three of the leader's ten records: not caught up yet.
        assert rm.append_as_follower(TopicPartition("t", 0), 2, 4, batch, 10) == 3
        response = rm.become_leader_or_follower(request({0: (1, 5, [1, 3])}))
        assert errors(response) == {0: ErrorCode.REPLICA_NOT_AVAILABLE}
        # Following again, it reaches the leader's high watermark.
        assert errors(rm.become_leader_or_follower(request({0: (3, 6, [3, 1])}))) == {0: 0}
        more = bytes(build_batch([b"r"] * 7, base_offset=3, partition_leader_epoch=4))
        assert rm.append_as_follower(TopicPartition("t", 0), 3, 6, more, 10) == 10
        assert errors(rm.become_leader_or_follower(request({0: (1, 7, [1, 3])}))) == {0: 0}
        assert rm.partitions[TopicPartition("t", 0)].leader == BROKER
    finally:
        rm.close()
        logs.close()


def test_the_lost_logs_give_back_their_table_once_every_one_caught_up(tmp_path: Path) -> None:
    """Back on new disks, a broker told to follow many partitions that are not new makes
    each log empty and remembers it lost; once the last caught up, the set that held them
    holds no table sized for them (a set never shrinks by itself)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    partitions = range(300)
    try:
        response = rm.become_leader_or_follower(request({p: (2, 1, [2, 3]) for p in partitions}))
        assert set(errors(response).values()) == {0}
        assert len(rm._lost_logs) == len(partitions)
        assert sys.getsizeof(rm._lost_logs) > 10 * sys.getsizeof(set())
        for p in partitions:
            # Nothing to fetch: at the leader's high watermark (0), caught up.
            rm.append_as_follower(TopicPartition("t", p), 2, 1, b"", 0)
            assert len(rm._lost_logs) == len(partitions) - p - 1
        assert sys.getsizeof(rm._lost_logs) == sys.getsizeof(set())
    finally:
        rm.close()
        logs.close()


def test_a_follower_taken_into_the_isr_since_it_made_its_log_empty_leads(
    tmp_path: Path,
) -> None:
    """Back on new disks and told to follow with an ISR that does not list it, it makes
    the log empty; a later state listing it in the ISR means its leader saw it reach the
    high watermark (Kafka's maybeExpandIsr), though no fetch answer has told it yet (an
    idle partition's is held up to replica.fetch.wait.max.ms): told to lead, it leads.
    It was refused, and a preferred election right after the ISR change bounced back."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        assert errors(rm.become_leader_or_follower(request({0: (2, 1, [2])}))) == {0: 0}
        assert TopicPartition("t", 0) in rm._lost_logs
        assert errors(rm.become_leader_or_follower(request({0: (1, 2, [2, 1])}))) == {0: 0}
        assert rm.partitions[TopicPartition("t", 0)].leader == BROKER
        assert not rm._lost_logs
    finally:
        rm.close()
        logs.close()


def _leading(topic: str, epoch: int) -> dict[str, Any]:
    """A LeaderAndIsr making this broker the only replica and leader of ``topic``-0."""
    req = request({0: (BROKER, epoch, [BROKER])}, replicas=[BROKER], is_new=True)
    req["topic_states"][0]["topic_name"] = topic
    req["topic_states"][0]["topic_id"] = uuid.uuid5(uuid.NAMESPACE_DNS, topic)
    return req


def _deleting(topic: str) -> dict[str, Any]:
    return {
        "controller_id": 9,
        "controller_epoch": 3,
        "topic_states": [
            {
                "topic_name": topic,
                "partition_states": [
                    {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}
                ],
            }
        ],
    }


def test_a_stop_replica_waiting_for_a_cleaning_blocks_no_produce_and_no_leader_and_isr_races_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A StopReplica deleting a compacted log whose cleaning was building its offset map
    # waited for that cleaning (the deletion aborts it: LogCleaner.forget) while holding
    # the replica manager's lock, which every produce and fetch takes: the broker stood
    # still for the whole map build. Kafka's stopPartitions holds replicaStateChangeLock
    # alone, which no produce or fetch takes, and serializes it with LeaderAndIsr: a
    # LeaderAndIsr making the partition again waits for the deletion, and never sees the
    # old log's directory (which it would load as its own, then lose to the rename).
    import storage.cleaner
    import storage.compaction
    from tests.unit.test_log_cleaner import _history, compacted

    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    comp = compacted(segment_bytes=1 << 20)
    plain = compacted(segment_bytes=1 << 20, compact=False, delete_enabled=True)
    logs = LogManager(
        [tmp_path / "data"], config, topic_config=lambda t: comp if t == "c" else plain
    )
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    mapping = threading.Event()
    go_on = threading.Event()
    real_keys = storage.compaction.batch_keys  # the function storage.cleaner imports
    threads: list[threading.Thread] = []

    def held_keys(*args: Any, **kwargs: Any) -> Any:
        if not mapping.is_set():  # the map build's first batch: held
            mapping.set()
            assert go_on.wait(60)
        return real_keys(*args, **kwargs)

    def start(target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args)
        threads.append(thread)
        thread.start()
        return thread

    try:
        for topic in ("c", "p"):
            assert errors(rm.become_leader_or_follower(_leading(topic, 0))) == {0: 0}
        c0 = TopicPartition("c", 0)
        clog = logs.get_log(c0)
        assert clog is not None
        assert clog.config.compact
        _history(clog, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        clog.update_high_watermark(clog.log_end_offset)
        old_end = clog.log_end_offset
        monkeypatch.setattr(storage.cleaner, "batch_keys", held_keys)
        start(logs.cleaner.clean_one, clog)
        assert mapping.wait(30)

        stopped: list[dict[str, Any]] = []
        deleting = start(lambda: stopped.append(rm.stop_replicas(_deleting("c"))))
        for _ in range(3000):  # until the deletion waits for the cleaning
            if ("c", 0) in logs.cleaner._aborting:
                break
            deleting.join(0.01)
        assert ("c", 0) in logs.cleaner._aborting

        # A produce to another partition answers while the map build is still held (the
        # bound only catches a hang).
        answers: list[ErrorCode] = []
        producing = start(
            lambda: answers.append(
                rm.append_as_leader(TopicPartition("p", 0), build_batch([b"v"]), 1)[0]
            )
        )
        producing.join(10)
        assert not go_on.is_set()
        assert answers == [ErrorCode.NONE]
        # The partition is gone from the replica manager before its log is deleted.
        assert rm.leader_partition(c0, -1)[0] != ErrorCode.NONE

        # The controller makes the topic again: its LeaderAndIsr waits for the deletion.
        made: list[dict[str, Any]] = []
        making = start(lambda: made.append(rm.become_leader_or_follower(_leading("c", 1))))
        making.join(0.3)
        assert making.is_alive()
        assert deleting.is_alive()

        go_on.set()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive()
        assert [e["error_code"] for e in stopped[0]["partition_errors"]] == [0]
        assert errors(made[0]) == {0: 0}
        new = logs.get_log(c0)
        assert new is not None
        assert new is not clog
        assert old_end > 0
        assert new.log_end_offset == 0  # a new, empty log
        assert new.dir.exists()
        keyed = build_batch([RecordSpec(b"v", key=b"k")])
        assert rm.append_as_leader(c0, keyed, 1)[0] == ErrorCode.NONE
    finally:
        go_on.set()
        for thread in threads:
            thread.join(30)
        monkeypatch.undo()
        rm.close()
        logs.close()


def test_a_follower_below_the_leaders_epoch_start_is_not_taken_into_the_isr(
    tmp_path: Path,
) -> None:
    """Kafka's isFollowerInSync: at the high watermark is not enough, the follower must
    have reached where this leader epoch began. Below it, its log may still hold the
    deposed leader's records there, which it truncates only on its next fetch: in the ISR
    with them, it could be elected and serve them."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    tp = TopicPartition("t", 0)
    log = logs.get_or_create(tp)
    log.append_as_leader(build_batch([b"v"] * 4), 1)
    rm = ReplicaManager(BROKER, cast(Any, None), StateChangeLog(tmp_path, BROKER), logs=logs)
    try:
        # Follower 2 in the ISR has not fetched: the high watermark stays at 0.
        rm.become_leader_or_follower(request({0: (BROKER, 2, [1, 2])}))
        p = rm.partitions[tp]
        assert (p.high_watermark, p.epoch_start_offset) == (0, 4)
        rm.record_follower_fetch(p, 3, 2)  # at the high watermark, below the epoch start
        assert (p.isr, p.isr_adding) == ((1, 2), ())
        assert tp not in rm._isr_intents
        rm.record_follower_fetch(p, 3, 4)  # into this leader epoch: in sync
        assert 3 in p.isr_adding
    finally:
        rm.close()
        logs.close()
