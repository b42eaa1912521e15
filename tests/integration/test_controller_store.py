"""The controller's ZooKeeper store against a real server: reads of many partition states."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller import request_batch as request_batch_module
from controller import store as store_module
from controller.context import PartitionReplica, ReplicaAssignment
from controller.controller import ControllerConfig, KafkaController
from controller.request_batch import BrokerRequest
from controller.store import ZkControllerStore
from wire.api import ApiKey
from wire.codec import decode
from wire.errors import ErrorCode
from wire.protocol import EncodedBody
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    decode_reassignment,
    decode_topic,
    encode_broker,
    encode_controller_epoch,
    encode_log_dir_event,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
)

UMR = ApiKey.UPDATE_METADATA


def active_now(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


def close(controller: KafkaController, zk: ZkClient) -> None:
    """A test's controller stopped (its event thread, term, watches and channel), then its
    ZooKeeper client."""
    controller.events.close()
    if controller.is_active:
        controller._resign("test over")
    controller.handlers.unregister_all()
    if controller.channel is not None:
        controller.channel.close(timeout_s=1)
    zk.close()


def brokers_and_topic(zk: ZkClient, assignment: dict[int, tuple[int, ...]]) -> None:
    """Brokers 1-3 registered at port 1, where nothing answers (a controller's requests
    to them are never answered), and topic "t" with this assignment, each partition led by
    its first replica with all of them in the ISR."""
    for b in (1, 2, 3):
        registration = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 1),))
        zk.create(paths.broker(b), encode_broker(registration), make_parents=True)
    add_topic(zk, "t", assignment)


def add_topic(zk: ZkClient, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
    """The topic, each partition led by its first replica with all of them in the ISR."""
    zk.create(
        paths.topic(topic),
        encode_topic(TopicAssignment(topic, assignment, uuid.uuid4())),
        make_parents=True,
    )
    for p, replicas in assignment.items():
        state = encode_partition_state(LeaderAndIsr(replicas[0], 0, replicas), 0)
        zk.create(paths.partition_state(topic, p), state, make_parents=True)


def test_partition_states_read_in_slices_come_back_whole_and_in_order(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slices of 4 over 23 partitions: slice boundaries fall inside and at the ends.
    monkeypatch.setattr(store_module, "READ_SLICE", 4)
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        tps = [TopicPartition("t", p) for p in range(23)]
        for tp in tps:
            path = paths.partition_state(tp.topic, tp.partition)
            if tp.partition == 9:
                continue  # no state znode
            data = (
                b"{not json"
                if tp.partition == 14
                else encode_partition_state(LeaderAndIsr(tp.partition % 3, tp.partition, (0, 1)), 7)
            )
            zk.create(path, data, make_parents=True)
        got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    assert list(got) == tps
    assert got[TopicPartition("t", 9)] is None  # missing
    assert got[TopicPartition("t", 14)] is None  # malformed: reported and skipped
    for tp in tps:
        if tp.partition in (9, 14):
            continue
        state = got[tp]
        assert state is not None
        assert state.leader_and_isr.leader == tp.partition % 3
        assert state.leader_and_isr.leader_epoch == tp.partition
        assert state.leader_and_isr.isr == (0, 1)
        assert state.controller_epoch == 7


@pytest.mark.parametrize("missing", [False, True], ids=["every-state", "one-missing"])
def test_the_states_written_before_a_zxid_come_with_when_they_were(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch, missing: bool
) -> None:
    """A failover asks which states were last written before the newest registration:
    those come back with their mzxid; those written since, or missing, do not."""
    monkeypatch.setattr(store_module, "READ_SLICE", 3)
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        tps = [TopicPartition("t", p) for p in range(8)]
        data = encode_partition_state(LeaderAndIsr(1, 0, (1, 2)), 1)
        for tp in tps:
            if missing and tp.partition == 6:
                continue
            zk.create(paths.partition_state(tp.topic, tp.partition), data, make_parents=True)
        registered = zk.create(paths.broker(2), b"{}", make_parents=True, ephemeral=True)[1]
        for p in (1, 4, 7):  # written since the registration
            zk.set(paths.partition_state("t", p), data)
        store = ZkControllerStore(zk)
        states, written_at = store.read_partition_states_written_before(tps, registered.czxid)
        stats = {tp: zk.exists(paths.partition_state(tp.topic, tp.partition)) for tp in tps}
        nothing_before = store.read_partition_states_written_before(tps, 0)[1]
        plain = store.read_partition_states(tps)
    finally:
        zk.close()
    assert states == plain
    expected = {p for p in (0, 2, 3, 5, 6) if not (missing and p == 6)}
    assert {tp.partition for tp in written_at} == expected
    for tp, zxid in written_at.items():
        stat = stats[tp]
        assert stat is not None
        assert zxid == stat.mzxid < registered.czxid
    assert (states[TopicPartition("t", 6)] is None) == missing
    assert nothing_before == {}


def test_equal_partition_states_decode_to_one_shared_object(zk_connect: str) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        data = encode_partition_state(LeaderAndIsr(1, 4, (1, 2)), 3)
        tps = [TopicPartition("t", p) for p in range(4)]
        for tp in tps:
            zk.create(paths.partition_state(tp.topic, tp.partition), data, make_parents=True)
        zk.set(paths.partition_state("t", 3), data)  # the same data at zkVersion 1
        got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    first = got[tps[0]]
    assert first is not None
    assert first.leader_and_isr == LeaderAndIsr(1, 4, (1, 2), 0)
    assert got[tps[1]] is first
    assert got[tps[2]] is first
    other = got[tps[3]]
    assert other is not None
    assert other is not first
    assert other.leader_and_isr.zk_version == 1


def test_a_malformed_state_several_partitions_hold_is_reported_for_each(
    zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        good = encode_partition_state(LeaderAndIsr(1, 4, (1, 2)), 3)
        tps = [TopicPartition("t", p) for p in range(6)]
        for tp in tps:
            data = b'{"leader":"one"}' if tp.partition in (1, 4) else good
            zk.create(paths.partition_state(tp.topic, tp.partition), data, make_parents=True)
        with caplog.at_level(logging.ERROR, logger="controller.store"):
            got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    assert [p for p, state in enumerate(got.values()) if state is None] == [1, 4]
    assert len({id(state) for state in got.values() if state is not None}) == 1
    for p in (1, 4):  # once each, with its own path
        path = paths.partition_state("t", p)
        assert sum(path in r.getMessage() for r in caplog.records) == 1, caplog.records


def test_more_distinct_states_than_remembered_still_decode(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_DECODED_STATES_MAX", 3)
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        tps = [TopicPartition("t", p) for p in range(10)]
        for tp in tps:
            data = encode_partition_state(LeaderAndIsr(1, tp.partition % 5, (1, 2)), 3)
            zk.create(paths.partition_state(tp.topic, tp.partition), data, make_parents=True)
        got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    for tp, state in got.items():
        assert state is not None
        assert state.leader_and_isr == LeaderAndIsr(1, tp.partition % 5, (1, 2), 0)


def test_a_failover_loads_assignments_and_leaderships_from_zookeeper(
    zk_connect: str, tmp_path: Path
) -> None:
    """KafkaController._initialize_context against a real server: every topic's assignment
    (equal ones shared, a reassignment in progress noted) and every readable state."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    try:
        a = {p: ((1, 2, 3), (2, 3, 1))[p % 2] for p in range(6)}
        zk.create(
            paths.topic("a"), encode_topic(TopicAssignment("a", a, uuid.uuid4())), make_parents=True
        )
        moving = TopicAssignment(
            "b", {0: (1, 2, 3), 1: (1, 2)}, uuid.uuid4(), adding_replicas={0: (3,)}
        )
        zk.create(paths.topic("b"), encode_topic(moving), make_parents=True)
        state = encode_partition_state(LeaderAndIsr(1, 2, (1, 2)), 1)
        for topic, p in [("a", 0), ("a", 1), ("a", 2), ("a", 4), ("a", 5), ("b", 0), ("b", 1)]:
            data = b"[]" if (topic, p) == ("a", 4) else state
            zk.create(paths.partition_state(topic, p), data, make_parents=True)
        controller._initialize_context()
        ctx = controller.ctx
        assert {t: dict(parts) for t, parts in ctx.assignments.items()} == {
            "a": {p: ReplicaAssignment(r) for p, r in a.items()},
            "b": {0: ReplicaAssignment((1, 2, 3), (3,)), 1: ReplicaAssignment((1, 2))},
        }
        assert ctx.assignments["a"][0] is ctx.assignments["a"][2] is ctx.assignments["a"][4]
        assert ctx.partitions_being_reassigned == {TopicPartition("b", 0)}
        assert list(ctx.all_partitions()) == [
            *(TopicPartition("a", p) for p in range(6)),
            TopicPartition("b", 0),
            TopicPartition("b", 1),
        ]
        # "a"-3 has no state znode, "a"-4 a malformed one: neither has a leadership.
        assert set(ctx.leadership) == {
            TopicPartition(t, p)
            for t, p in [("a", 0), ("a", 1), ("a", 2), ("a", 5), ("b", 0), ("b", 1)]
        }
        first = ctx.leadership[TopicPartition("a", 0)]
        assert first.leader_and_isr == LeaderAndIsr(1, 2, (1, 2), 0)
        assert first.controller_epoch == 1
        assert all(lice is first for lice in ctx.leadership.values())
    finally:
        close(controller, zk)


def test_a_failover_encodes_its_update_metadata_before_the_state_machines_start(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failover's UpdateMetadata (every partition, to every broker) is encoded by the
    event thread, each chunk once, before the replica state machine starts: no
    LeaderAndIsr leaves before it, and the senders no longer encode it beside that step."""
    monkeypatch.setattr(request_batch_module, "MAX_PARTITIONS_PER_REQUEST", 2)
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    sent: list[BrokerRequest] = []
    at_replica_start: list[list[bool]] = []
    replica_startup = controller.replica_sm.startup

    def startup() -> list[PartitionReplica]:
        at_replica_start.append(
            [r.shared.is_encoded for r in sent if r.shared is not None and r.api_key is UMR]
        )
        return replica_startup()

    monkeypatch.setattr(controller.ops, "send", sent.extend)
    monkeypatch.setattr(controller.replica_sm, "startup", startup)
    try:
        # The requests are caught before the channel.
        brokers_and_topic(zk, {p: (1, 2, 3) for p in range(5)})
        add_topic(zk, "u", {0: (2, 3, 1), 1: (3, 1, 2)})
        controller._elect()
        assert controller.is_active
        update_metadata = [r for r in sent if r.api_key is UMR]
        # Two chunks (t's 5 partitions: a topic is never split; u's 2) to each of the
        # three brokers, shared.
        assert sorted(r.broker_id for r in update_metadata) == [1, 1, 2, 2, 3, 3]
        assert len({id(r.shared) for r in update_metadata}) == 2
        assert (
            sorted(len(r.update_metadata_rows or ()) for r in update_metadata) == [2] * 3 + [5] * 3
        )
        assert at_replica_start == [[True] * 6]
        # The LeaderAndIsr the replica step queued come after them.
        first_lai = next(i for i, r in enumerate(sent) if r.api_key is ApiKey.LEADER_AND_ISR)
        assert first_lai > max(i for i, r in enumerate(sent) if r.api_key is UMR)
        (row,) = [
            json.loads(line)
            for line in (tmp_path / "state-change.log").read_text().splitlines()
            if '"event":"controller_failover"' in line
        ]
        assert row["update_metadata_queued_ms"] <= row["update_metadata_encoded_ms"]
        assert row["update_metadata_encoded_ms"] <= row["replica_state_machine_ms"]
    finally:
        close(controller, zk)


def test_a_topic_created_and_marked_for_deletion_during_a_failover_is_deleted(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic created just after the failover read /brokers/topics and marked for deletion
    just before it read /admin/delete_topics: the failover sees a request for a topic it
    does not know, and no watch fires for that request again. When the topic's creation
    is heard of (its TopicChange), its deletion starts."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    monkeypatch.setattr(controller.ops, "send", lambda requests: None)
    try:
        brokers_and_topic(zk, {0: (1, 2, 3)})
        late = TopicAssignment("late", {0: (1, 2, 3)}, uuid.uuid4())
        zk.create(paths.topic("late"), encode_topic(late), make_parents=True)
        zk.create(paths.delete_topic("late"), make_parents=True)
        real_get_children = zk.get_children
        reads: list[str] = []

        def topics_read_before_late_was_created(path: str, **kwargs: object) -> object:
            children = real_get_children(path, **kwargs)  # type: ignore[arg-type]
            if path == paths.BROKER_TOPICS and not reads:
                reads.append(path)
                return [t for t in children or [] if t != "late"]
            return children

        monkeypatch.setattr(zk, "get_children", topics_read_before_late_was_created)
        controller._elect()
        assert controller.is_active
        assert reads
        assert "late" not in controller.ctx.all_topics
        assert zk.exists(paths.delete_topic("late")) is not None  # left, not dropped
        controller._on_TopicChange(ev.TopicChange())  # the creation's watch, heard now
        assert "late" in controller.ctx.topics_to_be_deleted
        assert "t" not in controller.ctx.topics_to_be_deleted
    finally:
        close(controller, zk)


def test_a_failover_of_a_cluster_without_partitions_tells_the_brokers_of_each_other(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no partition to tell of, the failover's UpdateMetadata still goes to every
    broker, with the live brokers only: a client asking any of them finds the others."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    sent: list[BrokerRequest] = []
    monkeypatch.setattr(controller.ops, "send", sent.extend)
    try:
        brokers_and_topic(zk, {})
        controller._elect()
        assert controller.is_active
        assert [(r.api_key, r.broker_id, r.update_metadata_rows) for r in sent] == [
            (UMR, b, []) for b in (1, 2, 3)
        ]
        (request,) = [r for r in sent if r.broker_id == 2]
        encoded = request.wire_body()
        assert isinstance(encoded, EncodedBody)
        body = decode("UpdateMetadataRequest", encoded.api_version, bytes(encoded.data))
        assert body["topic_states"] == []
        assert [(b["id"], b["endpoints"][0]["port"]) for b in body["live_brokers"]] == [
            (1, 1),
            (2, 1),
            (3, 1),
        ]
    finally:
        close(controller, zk)


def test_a_controlled_shutdown_the_controller_is_fenced_in_is_answered_not_controller(
    zk_connect: str, tmp_path: Path
) -> None:
    """A controller that finds itself fenced while moving a broker's leaderships resigns
    and tells the broker NOT_CONTROLLER, at once: the broker asks the active controller
    next, rather than waiting out its request timeout for an answer that never comes."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    replies: list[tuple[int, list[TopicPartition]]] = []
    try:
        brokers_and_topic(zk, {0: (2, 1, 3)})
        controller._elect()
        assert controller.is_active
        epoch = controller.ctx.epoch
        # Another controller's term began: the epoch znode's version moved on.
        zk.set(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1))
        controller.process(
            ev.ControlledShutdown(2, -1, lambda code, tps: replies.append((code, tps)))
        )
        assert replies == [(int(ErrorCode.NOT_CONTROLLER), [])]
        assert not active_now(controller)
        state, _ = zk.get(paths.partition_state("t", 0)) or (b"", None)
        assert json.loads(state)["leader"] == 2  # nothing written with the old epoch
    finally:
        close(controller, zk)


def test_done_reassignments_leave_the_znode_and_an_admins_rewrite_stays(
    zk_connect: str,
) -> None:
    """The controller takes what it finished out of /admin/reassign_partitions, never
    writing back what it read: an admin's rewrite made in between stays (a fresh-clone run
    saw a new target undone by the controller's rewrite of the old one)."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(1), make_parents=True)
        store = ZkControllerStore(zk)
        a, b, c = (TopicPartition("t", p) for p in range(3))
        zk.create(
            paths.REASSIGN_PARTITIONS,
            encode_reassignment({a: (1, 2), b: (2, 3), c: (3, 1)}),
            make_parents=True,
        )

        def requested() -> dict[TopicPartition, tuple[int, ...]]:
            got = zk.get(paths.REASSIGN_PARTITIONS)
            return {} if got is None else dict(decode_reassignment(got[0]))

        # a done; b done towards a target the znode no longer asks for: b stays.
        assert not store.remove_from_reassignment_znode({a: (1, 2), b: (9, 8)}, 0)
        assert requested() == {b: (2, 3), c: (3, 1)}
        # An admin rewrites the znode between the controller's read and its write.
        real_get = zk.get
        rewrites: list[str] = []

        def get_then_admin_writes(path: str, *args: object, **kwargs: object) -> object:
            got = real_get(path, *args, **kwargs)  # type: ignore[arg-type]
            if path == paths.REASSIGN_PARTITIONS and not rewrites:
                rewrites.append(path)
                zk.set(path, encode_reassignment({b: (2, 3), c: (1, 2)}))
            return got

        zk.get = get_then_admin_writes  # type: ignore[method-assign,assignment]
        try:
            assert not store.remove_from_reassignment_znode({b: (2, 3), c: (3, 1)}, 0)
        finally:
            zk.get = real_get  # type: ignore[method-assign]
        assert rewrites
        assert requested() == {c: (1, 2)}  # b done; c's new target kept
        # The last one done: the znode goes.
        assert store.remove_from_reassignment_znode({c: (1, 2)}, 0)
        assert zk.get(paths.REASSIGN_PARTITIONS) is None
        assert not store.remove_from_reassignment_znode({c: (1, 2)}, 0)
    finally:
        zk.close()


def test_a_topic_rewrite_keeps_partitions_an_admin_added_before_or_during_it(
    zk_connect: str,
) -> None:
    """The controller rewrites a topic's znode (a reassignment's step) from its own
    assignment: partitions an admin added that it has not heard of yet stay, whether they
    were written before its read or between its read and its write (then its conditional
    write fails and it reads again)."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(1), make_parents=True)
        store = ZkControllerStore(zk)
        topic_id = uuid.uuid4()
        zk.create(
            paths.topic("t"),
            encode_topic(TopicAssignment("t", {0: (1, 2), 1: (2, 3)}, topic_id)),
            make_parents=True,
        )

        def stored() -> TopicAssignment:
            got = zk.get(paths.topic("t"))
            assert got is not None
            return decode_topic("t", got[0])

        def admin_adds(partition: int, replicas: tuple[int, ...]) -> None:
            current = stored()
            grown = {**current.partitions, partition: replicas}
            zk.set(
                paths.topic("t"),
                encode_topic(
                    TopicAssignment(
                        "t",
                        grown,
                        current.topic_id,
                        current.adding_replicas,
                        current.removing_replicas,
                    )
                ),
            )

        # Added before the controller's write: kept beside its reassignment of 0.
        admin_adds(2, (3, 1))
        moving = TopicAssignment("t", {0: (1, 2, 3), 1: (2, 3)}, topic_id, {0: (3,)})
        store.write_topic_assignments([moving], 0)
        assert stored() == TopicAssignment(
            "t", {0: (1, 2, 3), 1: (2, 3), 2: (3, 1)}, topic_id, {0: (3,)}
        )
        # Added between the controller's read and its write.
        real_get_many = zk.get_many
        added: list[list[str]] = []

        def read_then_admin_adds(path_list: list[str], **kwargs: object) -> object:
            got = real_get_many(path_list, **kwargs)  # type: ignore[arg-type]
            if not added:
                added.append(path_list)
                admin_adds(3, (1, 2))
            return got

        zk.get_many = read_then_admin_adds  # type: ignore[method-assign,assignment]
        try:
            done = TopicAssignment("t", {0: (2, 3), 1: (2, 3), 2: (3, 1)}, topic_id)
            store.write_topic_assignments([done], 0)
        finally:
            zk.get_many = real_get_many  # type: ignore[method-assign]
        assert added == [[paths.topic("t")]]
        assert stored() == TopicAssignment(
            "t", {0: (2, 3), 1: (2, 3), 2: (3, 1), 3: (1, 2)}, topic_id
        )
    finally:
        zk.close()


def test_a_topic_rewrite_skips_a_topic_whose_znode_is_gone(zk_connect: str) -> None:
    """A topic znode gone when the controller rewrites it (gone at its read, or deleted
    between its read and its write: ZooKeeper's NoNode) is a topic being removed: skipped
    and returned, the others written (it raised, and the event ended the term)."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(1), make_parents=True)
        store = ZkControllerStore(zk)
        for topic in ("kept", "raced"):
            zk.create(
                paths.topic(topic),
                encode_topic(TopicAssignment(topic, {0: (1, 2)}, None)),
                make_parents=True,
            )
        ids = {t: uuid.uuid4() for t in ("kept", "raced", "never")}
        real_get_many = zk.get_many

        def read_then_deleted(path_list: list[str], **kwargs: object) -> object:
            got = real_get_many(path_list, **kwargs)  # type: ignore[arg-type]
            if zk.exists(paths.topic("raced")) is not None:
                zk.delete(paths.topic("raced"))
            return got

        zk.get_many = read_then_deleted  # type: ignore[method-assign,assignment]
        try:
            gone = store.write_topic_assignments(
                [TopicAssignment(t, {0: (1, 2)}, ids[t]) for t in ("kept", "never", "raced")], 0
            )
        finally:
            zk.get_many = real_get_many  # type: ignore[method-assign]
        assert gone == {"never", "raced"}
        got = zk.get(paths.topic("kept"))
        assert got is not None
        assert decode_topic("kept", got[0]).topic_id == ids["kept"]
        assert zk.exists(paths.topic("raced")) is None
    finally:
        zk.close()


def test_reassignments_watch_the_partitions_left_waiting_and_none_that_complete(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch on a partition's state is a read of its own (ZooKeeper ignores watches in a
    multiRead), a round trip per partition, so the controller arms one only where a
    reassignment is left waiting for its new replicas: all four when they start; when
    three catch up and one's ISR shrinks, only that one's again. A change that lands
    between its watch firing and being re-armed is not missed: the read that re-arms it
    shows it caught up, and it completes with no watch event to come. And a client's
    request is answered before its watch is armed."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    tps = [TopicPartition("t", p) for p in range(4)]
    state_paths = [paths.partition_state(tp.topic, tp.partition) for tp in tps]
    watched: list[list[str]] = []
    real_get_many = zk.get_many

    def leader_sets_isr(path: str, isr: tuple[int, ...]) -> None:
        """As the partition's leader writes its ISR: leader and epochs kept, conditional."""
        got = zk.get(path)
        assert got is not None
        state = json.loads(got[0])
        lai = LeaderAndIsr(state["leader"], state["leader_epoch"], isr)
        zk.set(path, encode_partition_state(lai, state["controller_epoch"]), got[1].version)

    def get_many(path_list: list[str], *, watch: bool = False) -> object:
        if watch and path_list[0].endswith("/state"):  # not the brokers' registrations
            watched.append(list(path_list))
            if path_list == state_paths[3:] and len(watched) == 2:
                leader_sets_isr(state_paths[3], (1, 2, 3))  # lands before the re-arm
        return real_get_many(path_list, watch=watch)

    def being_reassigned() -> set[TopicPartition]:
        return set(
            controller.events.run_on_thread(lambda: set(controller.ctx.partitions_being_reassigned))
        )

    def wait_until(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, f"timed out after 30 s waiting for {what}"
            time.sleep(0.02)

    try:
        brokers_and_topic(zk, {tp.partition: (1, 2) for tp in tps})
        controller._elect()
        assert controller.is_active
        controller.events.start()
        monkeypatch.setattr(zk, "get_many", get_many)
        zk.create(
            paths.REASSIGN_PARTITIONS,
            encode_reassignment(dict.fromkeys(tps, (1, 2, 3))),
            make_parents=True,
        )
        # Its creation fires the watch the failover armed.
        wait_until(lambda: being_reassigned() == set(tps), "the reassignments started")
        assert watched == [state_paths]
        for path in state_paths[:3]:
            leader_sets_isr(path, (1, 2, 3))
        leader_sets_isr(state_paths[3], (1,))
        wait_until(lambda: not being_reassigned(), "every reassignment complete")
        assert watched == [state_paths, state_paths[3:]]
        got = zk.get(paths.topic("t"))
        assert got is not None
        assert json.loads(got[0])["partitions"] == {str(tp.partition): [1, 2, 3] for tp in tps}
        assert zk.get(paths.REASSIGN_PARTITIONS) is None
        # A client's request is answered once its topic's znode is written, before the
        # event arms its watch (1,000 of them take ~0.2 s).
        registration = BrokerRegistration(4, (EndPoint("PLAINTEXT", "127.0.0.1", 1),))
        zk.create(paths.broker(4), encode_broker(registration))
        wait_until(
            lambda: 4 in controller.events.run_on_thread(lambda: controller.ctx.live_broker_ids),
            "broker 4 live",
        )
        answered: list[tuple[int, int]] = []
        controller.events.put(
            ev.AlterPartitionReassignments(
                {tps[0]: (1, 2, 4)},
                lambda code, _results: answered.append((code, len(watched))),
            )
        )
        wait_until(lambda: len(watched) == 3, "the new reassignment's watch")
        assert answered == [(int(ErrorCode.NONE), 2)]
        assert watched[2] == state_paths[:1]
        assert being_reassigned() == {tps[0]}
    finally:
        close(controller, zk)


def test_a_log_dir_event_asks_its_broker_and_only_its_current_epochs_answer_counts(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/log_dir_event_notification naming broker 1: the controller sends broker 1 a
    LeaderAndIsr of each of its partitions and deletes the notification. An answer of
    KAFKA_STORAGE_ERROR from an earlier incarnation of broker 1 (sent to its old broker
    epoch, arriving after it registered anew) changes nothing; the same answer from its
    current epoch takes the replica offline: the partition it led gets a new leader."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    controller = KafkaController(
        ControllerConfig(broker_id=1), zk, StateChangeLog(tmp_path, 1), lambda: 0
    )
    sent: list[BrokerRequest] = []
    try:
        zk.ensure_paths(paths.PERSISTENT_PATHS)  # as every broker does at start
        brokers_and_topic(zk, {0: (1, 2, 3), 1: (2, 3, 1)})
        controller._elect()
        assert controller.is_active
        monkeypatch.setattr(controller.ops, "send", sent.extend)
        controller.events.start()
        zk.create(
            paths.LOG_DIR_EVENT_NOTIFICATION + "/" + paths.LOG_DIR_EVENT_PREFIX,
            encode_log_dir_event(1),
            sequential=True,
        )
        deadline = time.monotonic() + 30
        while zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION):
            assert time.monotonic() < deadline, "the notification was not handled"
            time.sleep(0.02)
        asked = [
            r
            for r in controller.events.run_on_thread(lambda: list(sent))
            if r.api_key == ApiKey.LEADER_AND_ISR
        ]
        assert {r.broker_id for r in asked} == {1}
        assert {tp for r in asked for tp in r.partitions} == {
            TopicPartition("t", 0),
            TopicPartition("t", 1),
        }

        def answer(broker_epoch: int) -> None:
            topic_id = controller.ctx.topic_ids["t"]
            storage_error = int(ErrorCode.KAFKA_STORAGE_ERROR)
            response = {
                "error_code": 0,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partition_errors": [
                            {"partition_index": 0, "error_code": storage_error},
                            {"partition_index": 1, "error_code": 0},
                        ],
                    }
                ],
            }
            controller.events.put(ev.LeaderAndIsrResponseReceived(1, response, broker_epoch))
            controller.events.run_on_thread(lambda: None)  # processed

        epoch = controller.events.run_on_thread(lambda: controller.ctx.broker_epochs[1])
        answer(epoch - 1)
        assert (
            controller.events.run_on_thread(lambda: dict(controller.ctx.replicas_on_offline_dirs))
            == {}
        )
        state = zk.get(paths.partition_state("t", 0))
        assert state is not None
        assert json.loads(state[0])["leader"] == 1
        answer(epoch)
        assert controller.events.run_on_thread(
            lambda: dict(controller.ctx.replicas_on_offline_dirs)
        ) == {1: {TopicPartition("t", 0)}}
        state = zk.get(paths.partition_state("t", 0))
        assert state is not None
        assert (json.loads(state[0])["leader"], json.loads(state[0])["isr"]) == (2, [2, 3])
    finally:
        close(controller, zk)


def test_a_topic_with_children_someone_put_under_its_znodes_is_deleted(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka deletes a topic's znode recursively and ignores the config's and request's
    delete results: children there do not keep the deletion from completing. One put
    under the request while the deletion runs (its multi fails NotEmpty) goes too."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, b"1", make_parents=True)
        add_topic(zk, "t", {0: (1, 2, 3), 1: (2, 3, 1)})
        zk.create(paths.topic_config("t"), b'{"version":1,"config":{}}', make_parents=True)
        zk.create(paths.delete_topic("t"), make_parents=True)
        for stray in (
            paths.topic("t") + "/stray",
            paths.partition_state("t", 0) + "/stray/deeper",
            paths.topic_partitions("t") + "/x",
            paths.topic_config("t") + "/stray",
            paths.delete_topic("t") + "/stray",
        ):
            zk.create(stray, make_parents=True)
        real_multi_fenced_batched = zk.multi_fenced_batched
        raced: list[str] = []

        def child_created_meanwhile(
            epoch_zk_version: int, items: list[list[object]], **kwargs: object
        ) -> object:
            if not raced and any(
                getattr(op, "path", None) == paths.topic("t") for ops in items for op in ops
            ):
                raced.append(zk.create(paths.delete_topic("t") + "/late")[0])
            return real_multi_fenced_batched(epoch_zk_version, items, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(zk, "multi_fenced_batched", child_created_meanwhile)
        stat = zk.exists(paths.CONTROLLER_EPOCH)
        assert stat is not None
        ZkControllerStore(zk).delete_topic("t", [0, 1], stat.version)
        assert raced
        for root in (paths.topic("t"), paths.topic_config("t"), paths.delete_topic("t")):
            assert zk.exists(root) is None, root
    finally:
        zk.close()


@pytest.mark.parametrize("in_batches", [False, True])
def test_topics_deleted_together_share_their_round_trips_and_retry_alone(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch, in_batches: bool
) -> None:
    """A deletion's answers finish many topics at once: their znodes go in the same
    pipelined rounds, each topic's roots still in a multi of its own. A child put under
    one topic's request meanwhile holds that topic alone for the next round."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, b"1", make_parents=True)
        topics = ["a", "b", "c"]
        for t in topics:
            add_topic(zk, t, {0: (1, 2, 3), 1: (2, 3, 1)})
            zk.create(paths.topic_config(t), b'{"version":1,"config":{}}', make_parents=True)
            zk.create(paths.delete_topic(t), make_parents=True)
        real_multi_fenced_batched = zk.multi_fenced_batched
        roots_asked: list[list[str]] = []

        def child_created_meanwhile(
            epoch_zk_version: int, items: list[list[object]], **kwargs: object
        ) -> object:
            asked = [
                t
                for t in topics
                if any(getattr(op, "path", None) == paths.topic(t) for ops in items for op in ops)
            ]
            if asked:
                if not roots_asked:
                    zk.create(paths.delete_topic("b") + "/late")
                roots_asked.append(asked)
            return real_multi_fenced_batched(epoch_zk_version, items, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(zk, "multi_fenced_batched", child_created_meanwhile)
        stat = zk.exists(paths.CONTROLLER_EPOCH)
        assert stat is not None
        if in_batches:
            # At most that many partitions' deletes in flight: a batch at a time.
            monkeypatch.setattr(store_module, "DELETE_TOPICS_PARTITIONS", 4)
        ZkControllerStore(zk).delete_topics({t: [0, 1] for t in topics}, stat.version)
        if in_batches:
            assert roots_asked == [["a", "b"], ["b"], ["c"]]
        else:
            assert roots_asked == [["a", "b", "c"], ["b"]]
        for t in topics:
            for root in (paths.topic(t), paths.topic_config(t), paths.delete_topic(t)):
                assert zk.exists(root) is None, root
    finally:
        zk.close()


def test_a_child_put_under_the_topics_znode_before_the_roots_multi_is_deleted_next_round(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The topic's znode is the roots multi's first op: a child put under it meanwhile
    fails it NotEmpty, and the server answers the config's and the request's deletes
    RuntimeInconsistency (not tried), no failure of theirs. The child goes in the next
    round; the controller's event raised (and its term ended) on RuntimeInconsistency."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, b"1", make_parents=True)
        add_topic(zk, "t", {0: (1, 2, 3)})
        zk.create(paths.topic_config("t"), b'{"version":1,"config":{}}', make_parents=True)
        zk.create(paths.delete_topic("t"), make_parents=True)
        real_multi_fenced_batched = zk.multi_fenced_batched
        answers: list[list[object]] = []

        def child_created_meanwhile(
            epoch_zk_version: int, items: list[list[object]], **kwargs: object
        ) -> list[list[object]]:
            roots = [
                i
                for i, ops in enumerate(items)
                if any(getattr(op, "path", None) == paths.topic("t") for op in ops)
            ]
            if roots and not answers:
                zk.create(paths.topic("t") + "/stray")
            results = real_multi_fenced_batched(epoch_zk_version, items, **kwargs)  # type: ignore[arg-type]
            answers.extend(list(results[i]) for i in roots)
            return results

        monkeypatch.setattr(zk, "multi_fenced_batched", child_created_meanwhile)
        stat = zk.exists(paths.CONTROLLER_EPOCH)
        assert stat is not None
        ZkControllerStore(zk).delete_topic("t", [0], stat.version)
        assert [type(r).__name__ for r in answers[0]] == [
            "NotEmptyError",
            "RuntimeInconsistency",
            "RuntimeInconsistency",
        ]
        for root in (paths.topic("t"), paths.topic_config("t"), paths.delete_topic("t")):
            assert zk.exists(root) is None, root
    finally:
        zk.close()


@pytest.mark.parametrize("raced", [False, True])
def test_a_topic_s_znodes_are_deleted_packed_and_a_pack_that_fails_is_retried_in_order(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch, raced: bool
) -> None:
    """The partitions' deletes go many to a multi: a topic of 60 partitions, half of
    them deleted before (a deletion a failover cut short), is one multi of deletes and
    the roots' multi. Raced: between the read and the deletes a state is deleted by
    someone else (NoNode in the pack) and a child put under another partition
    (NotEmpty): the pack is retried a delete at a time, leaves before their parents, and
    the topic is gone, the child with it, next round."""
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.create(paths.CONTROLLER_EPOCH, b"1", make_parents=True)
        partitions = list(range(60))
        add_topic(zk, "t", {p: (1, 2, 3) for p in partitions})
        for p in partitions[30:]:
            zk.delete(paths.partition_state("t", p))
            zk.delete(paths.partition("t", p))
        zk.create(paths.delete_topic("t"), make_parents=True)
        real_multi_fenced_batched = zk.multi_fenced_batched
        changed: list[str] = []

        def changed_meanwhile(
            epoch_zk_version: int, items: list[list[object]], **kwargs: object
        ) -> object:
            if raced and not changed and len(items) > 50:  # the partitions' deletes
                zk.delete(paths.partition_state("t", 7))
                changed.append(zk.create(paths.partition_state("t", 20) + "/late")[0])
            return real_multi_fenced_batched(epoch_zk_version, items, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(zk, "multi_fenced_batched", changed_meanwhile)
        stat = zk.exists(paths.CONTROLLER_EPOCH)
        assert stat is not None
        sent = zk.writes_sent
        ZkControllerStore(zk).delete_topic("t", partitions, stat.version)
        assert bool(changed) is raced
        for root in (paths.topic("t"), paths.delete_topic("t")):
            assert zk.exists(root) is None, root
        if not raced:
            assert zk.writes_sent - sent == 2
    finally:
        zk.close()
