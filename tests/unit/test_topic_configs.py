"""A broker's topic configs (broker/server.py): read from /config/topics/<t> as Kafka
reads them, kept, and applied to the topic's logs when a change notification names it."""

from __future__ import annotations

import json
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from broker.config import BrokerConfig, TopicConfig, load_broker_config
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from tests.unit.fake_zk import FakeZk
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from zkdata import paths
from zkdata.znodes import TopicPartition

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
        logs=logs,
        controller=Controller(),
        stop_requested=threading.Event(),
    )
    for name in (
        "_topic_config",
        "_forget_topic_config",
        "_read_topic_config",
        "_on_topic_config_change",
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


@pytest.mark.parametrize("second", [False, True])
def test_logs_made_while_a_config_change_is_applied_take_the_new_config(
    tmp_path: Path, second: bool
) -> None:
    """A LeaderAndIsr read the topic's config, then made its new logs with it; a change
    notification handled in between (on the config-changes thread) reached only the logs
    there then: the new ones kept the old config for good (a compacted topic's retention
    deleting its records). Kafka's LogManager re-reads it for logs being initialized
    (KAFKA-8813). ``second``: another change lands while the first is re-applied."""
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

    replicas = ReplicaManager(
        1, cast(Any, None), StateChangeLog(tmp_path, 1), logs=logs, topic_config=topic_config
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
