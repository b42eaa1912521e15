"""broker/server.py writes meta.properties only once the broker is registered, as Kafka
2.8's KafkaServer.startup does ("Now that the broker is successfully registered,
checkpoint its metadata"): before, it is only read and checked. A broker started by
mistake with a live broker's broker.id on empty disks, refused its registration, wrote
that id there, and once the operator fixed broker.id it refused to start ("configured
broker.id 2 does not match broker.id 1 stored in meta.properties")."""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from broker import server
from broker.config import load_broker_config
from election import broker_identity, identity_store
from election.broker_identity import (
    META_PROPERTIES,
    IdentityError,
    MetaProperties,
    checkpoint_meta_properties,
    read_meta_properties,
)
from election.identity_store import ZkIdentityStore
from election.registration import BrokerIdInUse
from storage.checkpoints import write_atomically
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import encode_cluster_id


def new_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dirs: list[Path], broker_id: int = 1
) -> tuple[server.KafkaServer, list[str]]:
    """A broker on ``dirs`` whose ZooKeeper is a FakeZk of cluster "cid" (its identity
    step's session too) and whose registration, controller and background threads are
    stand-ins; ``events`` records its registrations and meta.properties writes, in order."""
    config = load_broker_config(
        text=f"broker.id={broker_id}\nlisteners=PLAINTEXT://127.0.0.1:0\n"
        f"zookeeper.connect=127.0.0.1:1\nlog.dirs={','.join(str(d) for d in dirs)}\n"
    )
    zk: Any = FakeZk()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    monkeypatch.setattr(
        identity_store, "zk_identity_store", lambda *_, **__: nullcontext(ZkIdentityStore(zk))
    )
    broker = server.KafkaServer(config)
    zk.start = lambda **_: None
    zk.close = lambda: None
    zk.connected = True
    broker.zk = zk
    events: list[str] = []
    real_write = write_atomically  # the function election.broker_identity imports

    def write(path: Path, text: str) -> None:
        events.append(f"write {path.parent.name}")
        real_write(path, text)

    monkeypatch.setattr(broker_identity, "write_atomically", write)
    monkeypatch.setattr(broker.controller, "start", lambda: None)
    monkeypatch.setattr(broker.config_changes, "start", lambda: None)
    monkeypatch.setattr(broker._status_thread, "start", lambda: None)
    monkeypatch.setattr(broker, "controlled_shutdown", lambda: True)
    return broker, events


def test_a_broker_refused_its_registration_writes_no_meta_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    broker, events = new_server(tmp_path, monkeypatch, [data])

    def refused(**_: Any) -> int:
        events.append("refused")
        raise BrokerIdInUse("broker.id 1 is registered by another live broker")

    monkeypatch.setattr(broker, "register", refused)
    try:
        with pytest.raises(BrokerIdInUse):
            broker.startup()
    finally:
        broker.shutdown()
    assert events == ["refused"]
    assert not (data / META_PROPERTIES).exists()
    # The operator fixes broker.id: the same (empty) disk starts as broker 2.
    broker, events = new_server(tmp_path, monkeypatch, [data], broker_id=2)
    try:

        def register(**_: Any) -> int:
            events.append("registered")
            return 5

        monkeypatch.setattr(broker, "register", register)
        broker.startup()
    finally:
        broker.shutdown()
    assert events == ["registered", "write data"]
    assert read_meta_properties([str(data)]) == {str(data): MetaProperties(2, "cid")}


def test_a_log_dir_of_another_cluster_still_stops_the_start_before_registering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    checkpoint_meta_properties([str(data)], 1, "another")
    # refused while the broker is built (its identity step), so before any registration
    with pytest.raises(IdentityError, match="belongs to another cluster"):
        new_server(tmp_path, monkeypatch, [data])
    assert read_meta_properties([str(data)]) == {str(data): MetaProperties(1, "another")}


def test_a_meta_properties_write_failing_after_registration_takes_its_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's checkpointBrokerMetadata: an IOException writing a directory's
    meta.properties goes to the LogDirFailureChannel; the broker runs on the others."""
    bad, good = tmp_path / "bad", tmp_path / "good"
    broker, events = new_server(tmp_path, monkeypatch, [bad, good])
    recording_write = broker_identity.write_atomically  # type: ignore[attr-defined]  # new_server's

    def write(path: Path, text: str) -> None:
        if path.parent == bad:
            events.append("write bad failed")
            raise OSError(5, "Input/output error")
        recording_write(path, text)

    monkeypatch.setattr(broker_identity, "write_atomically", write)

    def register(**_: Any) -> int:
        events.append("registered")
        return 5

    monkeypatch.setattr(broker, "register", register)
    try:
        broker.startup()
        assert broker.startup_complete.is_set()
        assert events == ["registered", "write bad failed", "write good"]
        assert broker.logs is not None
        assert broker.logs.dir_failures.has_offline_log_dir(os.fspath(bad))
        assert not broker.logs.dir_failures.has_offline_log_dir(os.fspath(good))
    finally:
        broker.shutdown()
    assert read_meta_properties([str(good)]) == {str(good): MetaProperties(1, "cid")}


@pytest.mark.parametrize(
    "text",
    ["version=0\n", "version=0\ncluster.id=cid\n", "cluster.id=cid\n", "#\n"],
    ids=["version", "version+cluster.id", "cluster.id", "comment"],
)
def test_a_meta_properties_without_broker_id_leaves_the_id_to_broker_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Kafka 2.8's RawMetaProperties.brokerId is None for a meta.properties with no
    broker.id line, and getOrGenerateBrokerId then takes the configured broker.id (the
    version defaults to 0); checkpointBrokerMetadata rewrites the file with it once
    registered. Before, such a file stopped the broker: "has no valid broker.id"."""
    data = tmp_path / "data"
    data.mkdir()
    (data / META_PROPERTIES).write_text(text)
    broker, events = new_server(tmp_path, monkeypatch, [data], broker_id=3)
    try:
        assert (broker.broker_id, broker.identity.source) == (3, "config")

        def register(**_: Any) -> int:
            events.append("registered")
            return 5

        monkeypatch.setattr(broker, "register", register)
        broker.startup()
    finally:
        broker.shutdown()
    assert events == ["registered", "write data"]
    assert read_meta_properties([str(data)]) == {str(data): MetaProperties(3, "cid")}


def test_a_meta_properties_without_broker_id_of_another_cluster_still_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cluster id is checked as ever (Kafka's InconsistentClusterIdException), and a
    broker.id that is no int stays an error (RawMetaProperties.intValue: "Failed to parse
    broker.id property as an int")."""
    data = tmp_path / "data"
    data.mkdir()
    (data / META_PROPERTIES).write_text("version=0\ncluster.id=another\n")
    with pytest.raises(IdentityError, match="belongs to another cluster"):
        new_server(tmp_path, monkeypatch, [data])
    (data / META_PROPERTIES).write_text("version=0\nbroker.id=abc\ncluster.id=cid\n")
    with pytest.raises(IdentityError, match=r"no valid broker\.id \(found 'abc'\)"):
        new_server(tmp_path, monkeypatch, [data])


def test_a_meta_properties_with_an_empty_cluster_id_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty cluster.id is a cluster id, not none (Kafka 2.8's RawMetaProperties:
    Some("")), and not ZooKeeper's: InconsistentClusterIdException. Before, the broker
    registered and wrote its id and cluster id over the file."""
    data = tmp_path / "data"
    data.mkdir()
    (data / META_PROPERTIES).write_text("version=0\ncluster.id=\n")
    with pytest.raises(IdentityError, match=r"cluster id '' in .* belongs to another cluster"):
        new_server(tmp_path, monkeypatch, [data], broker_id=3)
    assert (data / META_PROPERTIES).read_text() == "version=0\ncluster.id=\n"


def test_log_dirs_whose_meta_properties_differ_only_in_cluster_id_stop_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka 2.8's getBrokerMetadataAndOfflineDirs wants the directories' meta.properties
    alike (InconsistentBrokerMetadataException), cluster.id included. Before, only
    broker.id was compared: the broker registered and wrote over both."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    for d, text in zip(dirs, ["version=0\ncluster.id=cid\n", "version=0\n"], strict=True):
        d.mkdir()
        (d / META_PROPERTIES).write_text(text)
    with pytest.raises(IdentityError, match="disagree") as e:
        new_server(tmp_path, monkeypatch, dirs, broker_id=3)
    expected = f"{dirs[0]}: broker.id none, cluster.id 'cid', version '0'; {dirs[1]}: broker.id"
    assert expected in str(e.value)
    assert (dirs[1] / META_PROPERTIES).read_text() == "version=0\n"


@pytest.mark.parametrize("configured", [1, 2], ids=["same-id", "another-id"])
def test_a_log_dir_of_another_cluster_stops_the_broker_before_it_writes_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured: int
) -> None:
    """Kafka 2.8's KafkaServer.startup checks the cluster id (InconsistentClusterIdException)
    before getOrGenerateBrokerId (InconsistentBrokerIdException) and before anything is
    opened in a log directory. Before, a configured broker.id was compared first ("change
    broker.id to match", and once it was, the next start said "another cluster"), and a
    matching one let the broker be built: it opened its state-change log in the other
    cluster's directory, and its refused start overwrote that cluster's stopped broker's
    broker-status.json (read by zkctl)."""
    data = tmp_path / "data"
    checkpoint_meta_properties([str(data)], 1, "another")
    theirs = '{"broker_id": 1, "theirs": true}'
    (data / server.STATUS_FILE).write_text(theirs)
    (data / "state-change.log").write_text("theirs\n")
    before = {p.name: p.read_bytes() for p in data.iterdir()}

    def start() -> None:
        broker, _events = new_server(tmp_path, monkeypatch, [data], broker_id=configured)
        try:
            broker.startup()
        finally:
            broker.shutdown()

    with pytest.raises(IdentityError, match=r"'another' in .* belongs to another cluster"):
        start()
    after = {p.name: p.read_bytes() for p in data.iterdir() if p.name != ".lock"}
    assert after == before


def test_a_directory_added_beside_one_with_another_property_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A meta.properties Kafka reads as ours but that is not as we write it (version=00, a
    key of its own), and a new log directory beside it: once registered both are written
    alike (Kafka's checkpointBrokerMetadata rewrites every file), so the next start finds
    them agreeing. Before, only the new one was written and the restart was refused."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    (old / META_PROPERTIES).write_text("version=00\nbroker.id=1\ncluster.id=cid\nx=y\n")
    for _ in range(2):
        broker, _events = new_server(tmp_path, monkeypatch, [old, new])
        try:
            monkeypatch.setattr(broker, "register", lambda **_: 5)
            broker.startup()  # the restart was refused here
        finally:
            broker.shutdown()
    metas = read_meta_properties([str(old), str(new)])
    assert metas == {str(old): MetaProperties(1, "cid"), str(new): MetaProperties(1, "cid")}
    assert {m.others for m in metas.values() if m is not None} == {(("version", "0"),)}
