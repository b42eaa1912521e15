"""min.insync.replicas on the produce path (broker/replica_manager.py append_as_leader,
wait_for_replication): taken from the partition log's own config, in memory, as Kafka
2.8 reads leaderLog.config.minInSyncReplicas, and checked under the lock the append
holds; and a topic's config kept while the broker holds any log of it
(broker/server.py _on_stop)."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss

import storage.log
import storage.records
from broker.apis import KafkaApis
from broker.config import BrokerConfig, effective_topic_config
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, update_metadata_listing
from tests.unit.test_topic_configs import Zk, put_config, replica_manager, server
from wire.errors import ErrorCode
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


class DownableZk(Zk):
    down = False

    def _maybe_fail(self) -> None:
        if self.down:
            raise ConnectionLoss()
        super()._maybe_fail()

    def wait_connected(self, timeout_s: float) -> bool:
        if self.down:
            time.sleep(timeout_s)
            return False
        return True

    # the real retry-until-connected loop
    until_connected = ZkClient.until_connected


def produce_body(tp: TopicPartition, timeout_ms: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {
                "name": tp.topic,
                "partition_data": [
                    {"index": tp.partition, "records": bytearray(build_batch([b"v"]))}
                ],
            }
        ],
    }


def stop_replica_request(tp: TopicPartition) -> dict[str, Any]:
    """A StopReplica deleting ``tp``'s replica here (a reassignment moved it off)."""
    return {
        "controller_id": 9,
        "controller_epoch": 3,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": tp.topic,
                "partition_states": [
                    {"partition_index": tp.partition, "leader_epoch": -2, "delete_partition": True}
                ],
            }
        ],
    }


def wired_server(tmp_path: Path, zk: Zk) -> tuple[Any, LogManager, ReplicaManager]:
    s = server(zk)
    s.fetchers = types.SimpleNamespace(unfollow=lambda tps: None)
    s.groups = types.SimpleNamespace(on_stop=lambda tps: None)
    s._on_stop = types.MethodType(KafkaServer._on_stop, s)
    logs, replicas = replica_manager(tmp_path, s)
    replicas.on_stop = s._on_stop
    return s, logs, replicas


@pytest.mark.parametrize("before", ["nothing", "moved_away", "forgotten"])
def test_acks_all_produce_answered_within_timeout_while_zookeeper_is_down(
    tmp_path: Path, before: str
) -> None:
    """A reassignment moved orders-0 off this broker (StopReplica, delete_partition):
    the whole topic's config was forgotten though orders-1 is still led here, and every
    acks=all produce to it read min.insync.replicas from ZooKeeper again; in an outage
    the request thread waited (no bound) until ZooKeeper came back, past the producer's
    timeout_ms. Kafka reads it from the leader log's config, in memory: ``forgotten``,
    the produce path must not read the broker's kept config at all."""
    zk = DownableZk()
    put_config(zk, "orders", {"min.insync.replicas": "1"})
    s, logs, replicas = wired_server(tmp_path, zk)
    result: list[Any] = []
    t = None
    try:
        for tp in (P0, P1):
            replicas.become_leader_or_follower(
                leader_and_isr_request(tp, 1, 0, [1], [1], is_new=True)
            )
        if before == "moved_away":
            replicas.stop_replicas(stop_replica_request(P0))
            assert "orders" in s._topic_configs, "forgotten while orders-1's log is held"
        elif before == "forgotten":
            s._forget_topic_config("orders")
        zk.down = True  # a ZooKeeper outage
        metadata = MetadataCache(1, "PLAINTEXT")
        metadata.update(update_metadata_listing([P0, P1], 1, [1]))
        apis = KafkaApis(
            1,
            metadata,
            replicas,
            cast(Any, None),
            StateChangeLog(None, 1),
            lambda: 1,
        )

        def run() -> None:
            try:
                result.append(apis._handle_produce(8, produce_body(P1, 500), {"client_id": "c"}))
            except BaseException as e:
                result.append(e)

        t = threading.Thread(target=run, daemon=True)
        started = time.monotonic()
        t.start()
        t.join(3.0)
        elapsed = time.monotonic() - started
        assert not t.is_alive(), (
            f"acks=all produce with timeout_ms=500 still unanswered after {elapsed:.1f}s "
            "(blocked reading /config/topics/orders from an unreachable ZooKeeper)"
        )
        answer = result[0]
        assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
    finally:
        s.stop_requested.set()  # cancels the until_connected loop
        zk.down = False
        if t is not None:
            t.join(5.0)
        replicas.close()
        logs.close()


def test_a_topics_config_is_forgotten_with_its_last_log_here(tmp_path: Path) -> None:
    """A StopReplica deleting one of the topic's logs keeps its config while others are
    held (kept only while the broker holds logs of it), and forgets it with the last."""
    zk = Zk()
    put_config(zk, "orders", {"min.insync.replicas": "1"})
    s, logs, replicas = wired_server(tmp_path, zk)
    try:
        for tp in (P0, P1):
            replicas.become_leader_or_follower(
                leader_and_isr_request(tp, 1, 0, [1], [1], is_new=True)
            )
        replicas.stop_replicas(stop_replica_request(P0))
        assert "orders" in s._topic_configs
        replicas.stop_replicas(stop_replica_request(P1))
        assert "orders" not in s._topic_configs
    finally:
        replicas.close()
        logs.close()


def test_a_change_of_min_insync_replicas_reaches_the_produce_checks_of_existing_logs(
    tmp_path: Path,
) -> None:
    """The produce path reads min.insync.replicas from the log's config, which a change
    notification updates as it updates retention.ms (LogManager.update_topic_config)."""
    zk = Zk()
    put_config(zk, "orders", {"min.insync.replicas": "1"})
    s, logs, replicas = wired_server(tmp_path, zk)
    try:
        replicas.become_leader_or_follower(leader_and_isr_request(P0, 1, 0, [1], [1], is_new=True))
        assert replicas.append_as_leader(P0, build_batch([b"a"]), -1)[0] == ErrorCode.NONE
        put_config(zk, "orders", {"min.insync.replicas": "2", "retention.ms": "5000"})
        s._on_topic_config_change("orders")
        made = logs.get_log(P0)
        assert made is not None
        assert (made.config.retention_ms, made.config.min_insync_replicas) == (5000, 2)
        error = replicas.append_as_leader(P0, build_batch([b"b"]), -1)[0]
        assert error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert replicas.append_as_leader(P0, build_batch([b"c"]), 1)[0] == ErrorCode.NONE
    finally:
        replicas.close()
        logs.close()


TP = TopicPartition("t", 0)
OLD, NEW = 1, 2


def test_isr_shrunk_below_min_insync_during_the_append_is_not_enough_replicas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ISR was checked on the partition read before the (slow, pure-Python)
    recompression, and the append went to the one current under the lock: a LeaderAndIsr
    meanwhile (same leader, new epoch, ISR shrunk below min.insync.replicas) let the
    batch in, answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, which a producer retries (a
    duplicate). Kafka 2.8's appendRecordsToLeader checks and appends under one
    leaderIsrUpdateLock read lock: NOT_ENOUGH_REPLICAS, nothing written."""
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "x:2181", "broker.id": str(OLD), "compression.type": "gzip"}
    )
    topic_config = effective_topic_config(config, {"min.insync.replicas": "2"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(
        OLD,
        cast(Any, None),
        StateChangeLog(tmp_path, OLD),
        logs=logs,
        topic_config=lambda topic: topic_config,
    )
    try:
        rm.become_leader_or_follower(
            leader_and_isr_request(TP, OLD, 1, [OLD, NEW], [OLD, NEW], is_new=True)
        )
        real = storage.records.recompress  # the function storage.log calls

        def isr_shrinks_meanwhile(records: Any, codec: int, **limits: Any) -> Any:
            # the controller took NEW out of the ISR: same leader, new epoch, ISR [OLD]
            rm.become_leader_or_follower(leader_and_isr_request(TP, OLD, 2, [OLD], [OLD, NEW]))
            return real(records, codec, **limits)

        monkeypatch.setattr(storage.log, "recompress", isr_shrinks_meanwhile)
        error, _p, _info, _why = rm.append_as_leader(TP, build_batch([b"x"]), -1)
        leo = rm.partitions[TP].log_end_offset
        assert (error, leo) == (ErrorCode.NOT_ENOUGH_REPLICAS, 0), (
            f"appended with ISR {list(rm.partitions[TP].isr)} < min.insync.replicas=2: "
            f"answered {error.name}, log end {leo}"
        )
    finally:
        rm.close()
        logs.close()


def test_isr_shrunk_below_min_insync_while_acks_all_waits_is_not_enough_replicas_after_append(
    tmp_path: Path,
) -> None:
    """Appended with the ISR at min.insync.replicas, the batch becomes committed only after
    the ISR shrank below it: answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, not success (Kafka
    2.8's Partition.checkEnoughReplicasReachOffset), the producer told its record has
    fewer copies than it asked for."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": str(OLD)})
    topic_config = effective_topic_config(config, {"min.insync.replicas": "2"})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(
        OLD,
        cast(Any, None),
        StateChangeLog(tmp_path, OLD),
        logs=logs,
        topic_config=lambda topic: topic_config,
    )
    try:
        rm.become_leader_or_follower(
            leader_and_isr_request(TP, OLD, 1, [OLD, NEW], [OLD, NEW], is_new=True)
        )
        error, p, _info, why = rm.append_as_leader(TP, build_batch([b"x"]), -1)
        assert error == ErrorCode.NONE, why
        assert p is not None
        assert p.high_watermark == 0  # NEW, in the ISR, has not fetched it
        # The controller took NEW out of the ISR: same leader, new epoch, ISR [OLD].
        rm.become_leader_or_follower(leader_and_isr_request(TP, OLD, 2, [OLD], [OLD, NEW]))
        rm.record_follower_fetch(rm.partitions[TP], NEW, 1)  # NEW has it after all
        assert rm.partitions[TP].high_watermark == 1
        assert rm.wait_for_replication(p, 0, 5.0) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    finally:
        rm.close()
        logs.close()


def test_acks_all_waits_until_every_isr_member_has_the_last_record(tmp_path: Path) -> None:
    """acks=all is answered once the high watermark is past the batch's last offset (every
    ISR member has it, Kafka's DelayedProduce: highWatermark >= requiredOffset, the offset
    after the batch); a high watermark at that offset means the follower lacks it."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": str(OLD)})
    logs = LogManager([tmp_path / "data"], config)
    rm = ReplicaManager(OLD, cast(Any, None), StateChangeLog(tmp_path, OLD), logs=logs)
    try:
        rm.become_leader_or_follower(
            leader_and_isr_request(TP, OLD, 1, [OLD, NEW], [OLD, NEW], is_new=True)
        )
        error, p, _info, why = rm.append_as_leader(TP, build_batch([b"x", b"y"]), -1)
        assert error == ErrorCode.NONE, why
        assert p is not None
        rm.record_follower_fetch(p, NEW, 1)  # NEW has offset 0, not 1
        assert p.high_watermark == 1
        assert rm.wait_for_replication(p, 1, 0.2) == ErrorCode.REQUEST_TIMED_OUT
        rm.record_follower_fetch(p, NEW, 2)
        assert rm.wait_for_replication(p, 1, 5.0) == ErrorCode.NONE
    finally:
        rm.close()
        logs.close()
