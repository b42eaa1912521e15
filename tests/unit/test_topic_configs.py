"""A broker's topic configs (broker/server.py): read from /config/topics/<t> as Kafka
reads them, kept, and applied to the topic's logs when a change notification names it."""

from __future__ import annotations

import json
import threading
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from broker.config import BrokerConfig, TopicConfig, load_broker_config
from broker.config_changes import ConfigChangeListener
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from tests.unit.fake_zk import FakeZk
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from zkdata import paths
from zkdata.znodes import TopicPartition, encode_config_change

T = TypeVar("T")


class Zk(FakeZk):
    def until_connected(self, fn: Callable[[], T], *, cancelled: Any = None) -> T:
        return fn()


class Controller:
    def __init__(self) -> None:
        self.unclean: list[str] = []

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        self.unclean.append(topic)


def server(zk: Zk, logs: Any = None, config: BrokerConfig | None = None) -> Any:
    """What KafkaServer's topic-config methods use, with those methods (the real ones)."""
    s = types.SimpleNamespace(
        zk=zk,
        config=config or load_broker_config(text="zookeeper.connect=z:2181\n"),
        _topic_configs={},
        _topic_config_generation={},
        _topic_configs_lock=threading.Lock(),
        logs=logs,
        controller=Controller(),
        stop_requested=threading.Event(),
        replicas=types.SimpleNamespace(delete_orphaned_logs=lambda topics: []),
        groups=types.SimpleNamespace(handle_deleted_topics=lambda topics: None),
    )
    for name in (
        "_topic_config",
        "_new_logs_topic_configs",
        "_forget_topic_config",
        "_keep_topic_config",
        "_read_topic_configs",
        "_config_from_znode",
        "_on_topic_config_change",
        "_on_topics_deleted",
    ):
        setattr(s, name, types.MethodType(getattr(KafkaServer, name), s))
    return s


def put_config(zk: Zk, topic: str, config: dict[str, Any] | bytes) -> None:
    data = config if isinstance(config, bytes) else json.dumps({"version": 1, "config": config})
    zk.put(paths.topic_config(topic), data.encode() if isinstance(data, str) else data)


def test_an_unknown_key_does_not_drop_the_topics_other_overrides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One unknown key (a newer Kafka's, another tool's typo) made the whole znode bad and
    every key fall back to the broker's defaults: a compacted topic became cleanup.policy
    =delete, and retention deleted its records. Kafka's LogConfig.fromProps ignores it."""
    zk = Zk()
    put_config(zk, "orders", {"cleanup.policy": "compact", "retention.ms": "1000", "typo": "1"})
    config = server(zk)._topic_config("orders")
    assert config.cleanup_policy == ("compact",)
    assert config.retention_ms == 1000
    assert "ignoring config keys unknown to this broker" in caplog.text
    assert "typo" in caplog.text


def test_a_bad_value_keeps_the_config_known_before() -> None:
    """As Kafka keeps a topic's config when a change fails to apply; first read, the
    good overrides stand and the bad key takes the broker's default."""
    zk = Zk()
    put_config(zk, "orders", {"cleanup.policy": "compact", "retention.ms": "soon"})
    s = server(zk)
    first = s._topic_config("orders")
    assert first.cleanup_policy == ("compact",)
    assert first.retention_ms == s.config.log_retention_ms
    put_config(zk, "orders", {"cleanup.policy": "delete", "retention.ms": "1000"})
    s._on_topic_config_change("orders")
    known = s._topic_config("orders")
    assert (known.cleanup_policy, known.retention_ms) == (("delete",), 1000)
    for bad in (
        {"cleanup.policy": "compact", "retention.ms": "-5s"},
        {"cleanup.policy": "compact", "min.compaction.lag.ms": "9", "max.compaction.lag.ms": "1"},
        b"{not json",
    ):
        put_config(zk, "orders", bad)
        s._on_topic_config_change("orders")
        assert s._topic_config("orders") is known
    put_config(zk, "orders", {"cleanup.policy": "compact", "unknown.key": "x"})
    s._on_topic_config_change("orders")
    assert s._topic_config("orders").cleanup_policy == ("compact",)


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("second", [False, True])
def test_logs_made_while_a_config_change_is_applied_take_the_new_config(
    tmp_path: Path, second: bool, batched: bool
) -> None:
    """A LeaderAndIsr read the topic's config, then made its new logs with it; a change
    notification handled in between (on the config-changes thread) reached only the logs
    there then: the new ones kept the old config for good (a compacted topic's retention
    deleting its records). Kafka's LogManager re-reads it for logs being initialized
    (KAFKA-8813). ``second``: another change lands while the first is re-applied.
    ``batched``: the new logs' configs are read as the broker reads them, in one batch."""
    zk = Zk()
    put_config(zk, "t", {})
    s = server(zk)
    logs = LogManager([tmp_path / "logs"], s.config, topic_config=s._topic_config)
    s.logs = logs
    changes = [{"cleanup.policy": "compact"}, {"cleanup.policy": "compact", "retention.ms": "5"}]
    reads = 0

    def topic_config(topic: str) -> TopicConfig:
        nonlocal reads
        config: TopicConfig = s._topic_config(topic)  # the LeaderAndIsr thread's read
        reads += 1
        if reads == 1 or (second and reads == 2):
            # ... and the config-changes thread runs now, in full.
            put_config(zk, topic, changes[reads - 1])
            s._on_topic_config_change(topic)
        return config

    def new_logs_topic_configs(topics: Sequence[str]) -> dict[str, TopicConfig]:
        return {topic: topic_config(topic) for topic in topics}

    def read_for_new_logs(topics: Sequence[str]) -> dict[str, TopicConfig]:
        nonlocal reads
        configs: dict[str, TopicConfig] = s._new_logs_topic_configs(topics)
        reads += 1
        if reads == 1:
            put_config(zk, "t", changes[0])
            s._on_topic_config_change("t")
        return configs

    def settle_read(topic: str) -> TopicConfig:
        nonlocal reads
        config: TopicConfig = s._topic_config(topic)
        reads += 1
        if second and reads == 2:
            put_config(zk, topic, changes[1])
            s._on_topic_config_change(topic)
        return config

    replicas = ReplicaManager(
        1,
        cast(Any, None),
        StateChangeLog(tmp_path, 1),
        logs=logs,
        topic_config=settle_read if batched else topic_config,
        new_logs_topic_configs=read_for_new_logs if batched else new_logs_topic_configs,
    )
    tps = [TopicPartition("t", p) for p in range(3)]
    try:
        for tp in tps:
            request = leader_and_isr_request(tp, 1, 0, [1], [1], is_new=True)
            replicas.become_leader_or_follower(request)
        expected = s._topic_config("t")
        assert expected.cleanup_policy == ("compact",)
        assert expected.retention_ms == (5 if second else s.config.log_retention_ms)
        for tp in tps:
            made = logs.get_log(tp)
            assert made is not None
            assert made.config.compact, f"{tp} made with cleanup.policy=delete"
            assert made.config.retention_ms == expected.retention_ms
    finally:
        logs.close()


# --- whose config a log is made with -------------------------------------------------------


class CountingZk(Zk):
    """Counts the reads of topic configs: single gets, and batches (with their sizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.batches: list[int] = []

    def get(self, path: str, *, watch: bool = False) -> Any:
        if path.startswith(paths.topic_config("")):
            self.gets += 1
        return super().get(path, watch=watch)

    def get_many(self, path_list: Any, *, watch: bool = False, batch: int = 0) -> Any:
        path_list = list(path_list)
        if any(p.startswith(paths.topic_config("")) for p in path_list):
            self.batches.append(len(path_list))
        return super().get_many(path_list, watch=watch, batch=batch)


def notify(zk: Zk, n: int, topic: str) -> None:
    """A config change notification naming ``topic`` (as `zkctl topic alter-config` writes)."""
    zk.put(
        f"{paths.CONFIG_CHANGES}/config_change_{n:010d}", encode_config_change(f"topics/{topic}")
    )


def replica_manager(tmp_path: Path, s: Any) -> tuple[LogManager, ReplicaManager]:
    """A log manager and replica manager wired to ``s``'s topic configs as the broker's."""
    logs = LogManager([tmp_path / "logs"], s.config, topic_config=s._topic_config)
    s.logs = logs
    replicas = ReplicaManager(
        1,
        cast(Any, None),
        StateChangeLog(tmp_path, 1),
        logs=logs,
        topic_config=s._topic_config,
        new_logs_topic_configs=s._new_logs_topic_configs,
    )
    return logs, replicas


def make_log(replicas: ReplicaManager, tp: TopicPartition) -> Any:
    replicas.become_leader_or_follower(leader_and_isr_request(tp, 1, 0, [1], [1], is_new=True))
    assert replicas.logs is not None
    made = replicas.logs.get_log(tp)
    assert made is not None
    return made


def test_a_topic_made_again_takes_its_own_config_after_a_change_of_the_old_one(
    tmp_path: Path,
) -> None:
    """A broker holding no replica of a topic read (and kept, for good) the config a
    change notification named; the topic deleted (no StopReplica reaches a broker that
    held none of it) and made again, compacted, with a replica there: its log was made
    with the old topic's config (cleanup.policy=delete, 1 s retention), and retention
    deleted the records of a compacted topic. Kafka keeps no config of a topic it holds
    no log of, and reads /config/topics/<t> for each log it makes."""
    zk = Zk()
    zk.put(paths.CONFIG_CHANGES, b"")
    s = server(zk)
    listener = ConfigChangeListener(cast(Any, zk), s._on_topic_config_change)
    put_config(zk, "orders", {"retention.ms": "1000"})
    notify(zk, 0, "orders")
    listener.process()
    zk.delete(paths.topic_config("orders"))
    put_config(zk, "orders", {"cleanup.policy": "compact"})
    logs, replicas = replica_manager(tmp_path, s)
    try:
        made = make_log(replicas, TopicPartition("orders", 0))
        assert made.config.compact, "the new topic's log was made with the old topic's config"
        assert made.config.retention_ms == s.config.log_retention_ms
    finally:
        logs.close()


def test_a_change_notification_of_a_deleted_topic_does_not_pin_the_defaults(
    tmp_path: Path,
) -> None:
    """A notification read after its topic was gone (a broker starting within the 15
    minutes a notification lives reads them all) kept the broker's defaults for that
    name; a topic made later under it had its logs made with them, not its overrides."""
    zk = Zk()
    zk.put(paths.CONFIG_CHANGES, b"")
    s = server(zk)
    listener = ConfigChangeListener(cast(Any, zk), s._on_topic_config_change)
    notify(zk, 0, "orders")
    listener.process()
    put_config(zk, "orders", {"cleanup.policy": "compact", "retention.ms": "-1"})
    logs, replicas = replica_manager(tmp_path, s)
    try:
        made = make_log(replicas, TopicPartition("orders", 0))
        assert made.config.compact, "log made with the broker's defaults (cleanup.policy=delete)"
        assert made.config.retention_ms == -1
    finally:
        logs.close()


def test_a_topic_the_metadata_shows_deleted_is_forgotten(tmp_path: Path) -> None:
    """The config of a topic this broker held logs of was dropped only when a StopReplica
    deleted them; an UpdateMetadata saying the topic is gone (its orphaned logs deleted
    then, none of them StopReplica's) left it kept, for a topic made again to use."""
    zk = Zk()
    s = server(zk)
    put_config(zk, "orders", {"retention.ms": "1000"})
    logs, replicas = replica_manager(tmp_path, s)
    tp = TopicPartition("orders", 0)
    try:
        # A log no partition state holds (found at start-up: its replica moved off this
        # broker while it was away), made with the topic's config, which is kept.
        assert logs.get_or_create(tp, sync_dir=False).config.retention_ms == 1000
        assert s._topic_configs["orders"].retention_ms == 1000
        # The topic deleted: the UpdateMetadata has its orphaned log deleted.
        logs.delete(tp)
        s._on_topics_deleted(["orders"])
        assert "orders" not in s._topic_configs
        put_config(zk, "orders", {"cleanup.policy": "compact"})
        made = make_log(replicas, tp)
        assert made.config.compact, "the new topic's log was made with the old topic's config"
        assert made.config.retention_ms == s.config.log_retention_ms
    finally:
        logs.close()


def test_a_change_applies_to_the_logs_here_and_is_kept_only_for_them(tmp_path: Path) -> None:
    """As Kafka's TopicConfigHandler: a notification's config goes to the topic's logs
    here (and stays for the logs made next); a topic with no log here keeps nothing, but
    its unclean election still goes to the controller."""
    zk = Zk()
    s = server(zk)
    put_config(zk, "held", {})
    logs, replicas = replica_manager(tmp_path, s)
    try:
        held = make_log(replicas, TopicPartition("held", 0))
        put_config(zk, "held", {"retention.ms": "5000"})
        s._on_topic_config_change("held")
        assert held.config.retention_ms == 5000
        assert s._topic_configs["held"].retention_ms == 5000
        put_config(zk, "elsewhere", {"unclean.leader.election.enable": "true"})
        s._on_topic_config_change("elsewhere")
        assert "elsewhere" not in s._topic_configs
        assert s.controller.unclean == ["elsewhere"]
    finally:
        logs.close()


def test_a_leader_and_isr_reads_the_configs_of_its_new_logs_in_one_batch(
    tmp_path: Path,
) -> None:
    """Reading each topic's config when its logs are made must not cost a ZooKeeper round
    trip a topic: a LeaderAndIsr making the logs of 1,000s of topics would wait seconds.
    The topics of one request are read in one batch (multiReads), each once, kept ones
    too (the topic may have been made again since)."""
    zk = CountingZk()
    s = server(zk)
    topics = [f"t{i}" for i in range(50)]
    for i, topic in enumerate(topics):
        put_config(zk, topic, {"retention.ms": str(1000 + i)})
    logs, replicas = replica_manager(tmp_path, s)
    try:
        request = leader_and_isr_request(TopicPartition(topics[0], 0), 1, 0, [1], [1], is_new=True)
        template = request["topic_states"][0]
        request["topic_states"] = [
            {
                **template,
                "topic_name": topic,
                "partition_states": [
                    {**template["partition_states"][0], "topic_name": topic, "partition_index": p}
                    for p in range(3)
                ],
            }
            for topic in topics
        ]
        replicas.become_leader_or_follower(request)
        assert zk.batches == [len(topics)]
        assert zk.gets == 0
        for i, topic in enumerate(topics):
            for p in range(3):
                made = logs.get_log(TopicPartition(topic, p))
                assert made is not None
                assert made.config.retention_ms == 1000 + i
    finally:
        logs.close()


def test_only_the_topics_own_unclean_override_asks_the_controller_for_a_pass() -> None:
    """Kafka 2.8's TopicConfigHandler: `Try(topicConfig.getProperty(UncleanLeaderElection
    EnableProp).toBoolean).getOrElse(false)` over the topic's overrides, not its effective
    config: a broker default of true does not make every change of another key a pass;
    Scala's toBoolean takes "TRUE" but not " true" (untrimmed; the config reads that one)."""
    config = load_broker_config(
        text="zookeeper.connect=z:2181\nunclean.leader.election.enable=true\n"
    )
    zk = Zk()
    s = server(zk, config=config)
    put_config(zk, "defaulted", {"retention.ms": "5000"})
    s._on_topic_config_change("defaulted")
    put_config(zk, "off", {"unclean.leader.election.enable": "false"})
    s._on_topic_config_change("off")
    put_config(zk, "upper", {"unclean.leader.election.enable": "TRUE"})
    s._on_topic_config_change("upper")
    put_config(zk, "spaced", {"unclean.leader.election.enable": " true"})
    s._on_topic_config_change("spaced")
    assert s.controller.unclean == ["upper"]
