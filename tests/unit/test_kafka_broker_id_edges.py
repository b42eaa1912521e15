"""Kafka-mode broker ids at their edges (election/broker_identity.py): broker.id 0 is a
configured id like any other, a generated id is /brokers/seqid's version plus the
configured reserved.broker.max.id, and meta.properties' version must be exactly 0
(Kafka 2.8's KafkaServer.getOrGenerateBrokerId and its start-up's version check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from election.broker_identity import (
    GenerateId,
    IdentityError,
    MetaProperties,
    UseId,
    check_cluster_id,
    decide_kafka_id,
    obtain_kafka_id,
    parse_meta_properties,
)
from tests.unit.test_broker_identity import MemoryStore


@pytest.mark.parametrize("raw", ["-1", "2"])
def test_a_meta_properties_version_other_than_0_is_refused(raw: str) -> None:
    """Kafka 2.8's KafkaServer.startup: "Found unexpected version in loaded
    meta.properties ... Zk-based brokers only support version 0": a negative version is
    no more version 0 than 1 is."""
    with pytest.raises(IdentityError, match=rf"version '{raw}'; only version 0"):
        parse_meta_properties(f"version={raw}\nbroker.id=1\n", "m")


def test_broker_id_0_is_a_configured_id() -> None:
    """Kafka's getOrGenerateBrokerId tests config.brokerId >= 0: broker.id=0 is used as
    configured (not generated), and must match the id stored in meta.properties
    (InconsistentBrokerIdException)."""
    assert decide_kafka_id(0, {"a": None}, generation_enabled=True) == UseId(0, "config")
    assert decide_kafka_id(-1, {"a": None}, generation_enabled=True) == GenerateId()
    stored = {"a": MetaProperties(5)}
    with pytest.raises(IdentityError, match=r"configured broker\.id 0 does not match"):
        decide_kafka_id(0, stored, generation_enabled=True)
    zero = {"a": MetaProperties(0)}
    assert decide_kafka_id(0, zero, generation_enabled=True) == UseId(0, "meta.properties")
    with pytest.raises(IdentityError, match=r"configured broker\.id 3 does not match"):
        decide_kafka_id(3, zero, generation_enabled=True)


def test_a_generated_id_is_seqids_version_plus_the_configured_reserved_max(
    tmp_path: Path,
) -> None:
    """KafkaServer.getOrGenerateBrokerId: generateBrokerSequenceId() +
    config.maxReservedBrokerId, with the configured reserved.broker.max.id (not 1000)."""
    store = MemoryStore()
    for expected in (11, 12):
        outcome = obtain_kafka_id(
            -1,
            [str(tmp_path / "data")],
            generation_enabled=True,
            reserved_max_id=10,
            store_factory=lambda: store,
            crash=lambda _: None,
        )
        assert (outcome.broker_id, outcome.source) == (expected, "generated")
        assert outcome.identity == str(expected)  # as the status file shows it
        assert outcome.attempts == 1
    assert store.seq_version == 2


def test_the_cluster_id_of_every_log_dir_is_checked() -> None:
    """A log directory of another cluster is refused wherever it is in log.dirs, also after
    one with no meta.properties (Kafka 2.8 checks the cluster id of the directories'
    merged meta.properties, missing files ignored: InconsistentClusterIdException)."""
    metas = {"a": None, "b": MetaProperties(1, "cid"), "c": MetaProperties(1, "other")}
    with pytest.raises(IdentityError, match=r"'other' in c/meta\.properties"):
        check_cluster_id(metas, "cid")
    with pytest.raises(IdentityError, match=r"'other' in b/meta\.properties"):
        check_cluster_id({"a": None, "b": MetaProperties(1, "other")}, "cid")
    check_cluster_id({"a": None, "b": MetaProperties(1, "cid"), "c": MetaProperties(1)}, "cid")


def test_an_id_generated_after_the_cluster_id_check_uses_the_same_session(
    tmp_path: Path,
) -> None:
    """A meta.properties naming the cluster but no broker.id: /cluster/id is read and the
    id generated in one ZooKeeper session (docs/broker-identity.md's round trips)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=0\ncluster.id=cid\n")
    store = MemoryStore()
    sessions: list[MemoryStore] = []

    def factory() -> MemoryStore:
        sessions.append(store)
        return store

    outcome = obtain_kafka_id(
        -1,
        [str(data)],
        generation_enabled=True,
        reserved_max_id=1000,
        store_factory=factory,
        crash=lambda _: None,
    )
    assert (outcome.broker_id, outcome.zk_requests, len(sessions)) == (1001, 2, 1)
