"""The persistent-mode protocol (election/broker_identity.py) over the real ZooKeeper shell
(election/identity_store.py ZkIdentityStore) and an in-memory ZooKeeper: GetNextBrokerId
must not hand out an id the cluster already knows (a registered broker, or a replica of a
topic's assignment), as Kafka keeps configured and generated ids apart."""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError
from kazoo.protocol.states import ZnodeStat

from broker.config import BrokerConfig, load_broker_config
from election import identity_store
from election.broker_identity import (
    IdentityError,
    IdentityFiles,
    IdentityOutcome,
    checkpoint_meta_properties,
    obtain_persistent_id,
)
from election.identity_store import ZkIdentityStore, _establish
from tests.unit.fake_cluster import add_topic, empty_cluster, register
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import decode_cluster_id, decode_identity_claim, encode_cluster_id

T = TypeVar("T")


def _obtain(
    zk: FakeZk,
    directory: Path,
    name: str = "red",
    reserved_max: int = 1000,
    address: str = "127.0.0.1:9999",
    crash_at: str | None = None,
) -> IdentityOutcome:
    def crash(point: str) -> None:
        if point == crash_at:
            raise _Crash(point)

    return obtain_persistent_id(
        ZkIdentityStore(zk),  # type: ignore[arg-type]
        IdentityFiles(directory),
        cluster_name="DefaultCluster",
        broker_name=name,
        address=address,
        reserved_max=reserved_max,
        crash=crash,
    )


class _Crash(Exception):
    pass


def _kafka_generated_id(zk: FakeZk, reserved_max: int = 1000) -> int:
    """The id a Kafka-mode broker with broker.id=-1 would generate now."""
    return ZkIdentityStore(zk).generate_seq_id() + reserved_max  # type: ignore[arg-type]


def test_a_persistent_broker_is_not_given_the_id_of_a_registered_static_broker(
    tmp_path: Path,
) -> None:
    zk = empty_cluster()
    for b in (1, 2, 3):  # `zkctl up`'s static brokers
        register(zk, b)
    outcome = _obtain(zk, tmp_path)
    assert (outcome.broker_id, outcome.source, outcome.rejected) == (4, "allocated", [])
    assert zk.children(paths.BROKER_IDENTITIES) == ["4"]


def test_ids_named_by_topic_assignments_are_not_handed_out(tmp_path: Path) -> None:
    """Broker 5 is down (not registered), but its replicas are still assigned to it: a
    persistent broker given id 5 would take them over with an empty disk."""
    zk = empty_cluster()
    register(zk, 1)
    add_topic(zk, "t", {0: (1, 5), 1: (5, 1)})
    add_topic(zk, "u", {0: (2, 1)})
    assert _obtain(zk, tmp_path).broker_id == 6


def test_the_highest_of_claims_registrations_and_replicas_wins(tmp_path: Path) -> None:
    zk = empty_cluster()
    register(zk, 2)
    add_topic(zk, "t", {0: (3,)})
    assert _obtain(zk, tmp_path / "a", "a").broker_id == 4
    assert _obtain(zk, tmp_path / "b", "b").broker_id == 5  # above its claim of 4
    assert sorted(map(int, zk.children(paths.BROKER_IDENTITIES))) == [4, 5]


def test_malformed_children_and_topic_znodes_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    zk = empty_cluster()
    register(zk, 2)
    zk.put(paths.BROKER_IDS + "/not-an-id", b"")
    zk.put(paths.BROKER_IDS + "/007", b"")
    zk.put(paths.BROKER_IDENTITIES, b"")
    zk.put(paths.BROKER_IDENTITIES + "/x", b"")
    zk.put(paths.topic("bad"), b"{not json")
    zk.put(paths.topic("worse"), b'{"version": 1, "partitions": {"0": ["a"]}}')
    add_topic(zk, "good", {0: (3,)})
    with caplog.at_level(logging.WARNING, logger="election.identity_store"):
        assert _obtain(zk, tmp_path).broker_id == 4
    text = caplog.text
    for what in ("/brokers/ids/not-an-id", "/brokers/ids/007", "/brokers/identities/x"):
        assert what in text
    assert "topic bad's replicas are not counted" in text
    assert "/brokers/topics/worse" in text


def test_an_empty_cluster_starts_at_id_1(tmp_path: Path) -> None:
    zk = FakeZk()  # not even /brokers: a cluster no broker has started in yet
    zk.put("/brokers", b"")
    outcome = _obtain(zk, tmp_path)
    assert outcome.broker_id == 1
    claim = decode_identity_claim(1, zk.nodes[paths.broker_identity(1)][0])
    assert claim.broker_name == "red"


class _RegistersAfterRead(FakeZk):
    """A static broker registers under ``broker_id`` right after GetNextBrokerId's reads,
    before the claim: a race the read cannot see."""

    def __init__(self, broker_id: int) -> None:
        super().__init__()
        self.broker_id = broker_id
        self.pending = True

    def get_children_many(self, path_list, *, watch=False, batch=0):  # type: ignore[no-untyped-def]
        got = super().get_children_many(path_list, watch=watch, batch=batch)
        if self.pending:
            self.pending = False
            register(self, self.broker_id)
        return got


def test_a_claim_won_for_an_id_registered_meanwhile_is_dropped_and_allocation_starts_over(
    tmp_path: Path,
) -> None:
    base = empty_cluster()
    zk = _RegistersAfterRead(1)
    zk.nodes, zk._zxid = base.nodes, base._zxid
    outcome = _obtain(zk, tmp_path)
    assert (outcome.broker_id, outcome.rejected) == (2, [1])
    # The claim of 1 is gone again: 1 belongs to the static broker, not to "red".
    assert zk.children(paths.BROKER_IDENTITIES) == ["2"]
    assert IdentityFiles(tmp_path).read_final().broker_id == 2  # type: ignore[union-attr]
    assert not IdentityFiles(tmp_path).temp_path.exists()


def test_a_generated_broker_does_not_lift_persistent_ids_into_the_generated_range(
    tmp_path: Path,
) -> None:
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    generated = _kafka_generated_id(zk)
    register(zk, generated)
    assert generated == 1001
    assert _obtain(zk, tmp_path).broker_id == 4  # not 1002 ...
    assert _kafka_generated_id(zk) == 1002  # ... which the next generated broker gets


def test_past_the_configured_range_persistent_ids_come_from_seqid(tmp_path: Path) -> None:
    """reserved.broker.max.id 3, brokers 1..3 static: the range is used up, so the id is
    generated as Kafka generates one, and Kafka-mode brokers generate past it."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    register(zk, 5)  # a configured id above the range (broker.id.generation.enable=false)
    first = _obtain(zk, tmp_path / "a", "a", reserved_max=3)
    assert (first.broker_id, first.rejected) == (4, [])  # seqid version 1 + 3
    second = _obtain(zk, tmp_path / "b", "b", reserved_max=3)
    assert (second.broker_id, second.rejected) == (6, [5])  # 5 is in use: generated again
    assert _kafka_generated_id(zk, 3) == 7
    assert sorted(map(int, zk.children(paths.BROKER_IDENTITIES))) == [4, 6]


def test_a_copy_of_a_live_brokers_disk_leaves_the_live_brokers_claim_alone(
    tmp_path: Path,
) -> None:
    """A broker started from a copy of a live persistent broker's first log directory holds
    its identity file, check code included: the claim counts as its own and it is given
    the id (its registration is what refuses it: BrokerIdInUse, the original holds
    /brokers/ids/<id>). Before, establishing the identity wrote the copy's address into
    the claim, and the live broker was listed at the address of a copy that never ran."""
    zk = empty_cluster()
    original = _obtain(zk, tmp_path / "a", address="10.0.0.1:9092")
    register(zk, original.broker_id)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    copy = _obtain(zk, tmp_path / "b", address="10.0.0.2:9092")
    assert copy.broker_id == original.broker_id
    got = zk.get(paths.broker_identity(original.broker_id))
    assert got is not None
    claim = decode_identity_claim(original.broker_id, got[0])
    assert claim.address == "10.0.0.1:9092"
    # What the copy would write once registered (it never is, while the original lives).
    assert copy.claim is not None
    assert copy.claim.address == "10.0.0.2:9092"


def test_a_copy_of_a_temp_only_disk_leaves_the_live_brokers_claim_alone(
    tmp_path: Path,
) -> None:
    """A copy of a persistent broker's disk taken while it held only its temp file (it
    crashed once its claim was accepted), started while the original, restarted from that
    temp file, is registered: the claim holds the copy's check code too, and the id is
    registered. The copy cannot tell the original from another broker registered under
    the id, and it did not make the claim: it gives the id up without deleting it, and
    starts over. Before, it deleted the live original's claim."""
    zk = empty_cluster()
    with pytest.raises(_Crash):
        _obtain(zk, tmp_path / "a", address="10.0.0.1:9092", crash_at="after_apply")
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the temp file only
    original = _obtain(zk, tmp_path / "a", address="10.0.0.1:9092")
    assert (original.broker_id, original.source) == (1, "temp-file")
    register(zk, original.broker_id)
    copy = _obtain(zk, tmp_path / "b", address="10.0.0.2:9092")
    assert (copy.broker_id, copy.source, copy.rejected) == (2, "allocated", [1])
    got = zk.get(paths.broker_identity(1))
    assert got is not None, "the live original's claim was deleted"
    assert original.claim is not None
    assert decode_identity_claim(1, got[0]).check_code == original.claim.check_code
    assert decode_identity_claim(1, got[0]).address == "10.0.0.1:9092"
    assert sorted(map(int, zk.children(paths.BROKER_IDENTITIES))) == [1, 2]
    assert not IdentityFiles(tmp_path / "b").temp_path.exists()


class _LosesAnAnswer(FakeZk):
    """A connection that loses the answer of one create (of the znode ``lose``): ZooKeeper
    carries it out (or refuses it: NodeExists), the client sees ConnectionLoss and, as
    ZkClient.until_connected does, sends it again once connected (here at once)."""

    def __init__(self) -> None:
        super().__init__()
        base = empty_cluster()
        self.nodes, self._zxid = base.nodes, base._zxid
        self.lose: str | None = None
        self.resent = 0

    def create(  # type: ignore[no-untyped-def]
        self, path: str, data: bytes = b"", **kwargs
    ) -> tuple[str, ZnodeStat]:
        if path != self.lose:
            return super().create(path, data, **kwargs)
        with contextlib.suppress(NodeExistsError):  # refused: that answer is lost too
            super().create(path, data, **kwargs)  # NoNode (no parent yet) is answered
        self.lose = None
        raise ConnectionLoss("the answer was lost")

    def until_connected(self, fn: Callable[[], T], *, cancelled: object = None) -> T:
        while True:
            try:
                return fn()
            except ConnectionLoss:
                self.resent += 1


def test_a_restart_whose_claim_lost_its_answer_deletes_it_when_the_id_is_registered(
    tmp_path: Path,
) -> None:
    """A crash at after_temp (no claim yet), then a static broker registers as 1; the
    restart re-applies the temp file: its create of the claim is carried out but the
    answer is lost, and the create sent again meets the claim (NodeExists), holding our
    check code. The restart found no claim when it read it just before: this start made
    it, so it is deleted as the id is given up. Before, it was taken for an earlier
    start's and left for good: id 1 kept from persistent allocation, and the listing
    showing broker red on the static broker's id."""
    zk = _LosesAnAnswer()
    with pytest.raises(_Crash):
        _obtain(zk, tmp_path, crash_at="after_temp")
    assert zk.children(paths.BROKER_IDENTITIES) == []
    register(zk, 1)
    zk.lose = paths.broker_identity(1)
    outcome = _obtain(zk, tmp_path)
    assert (outcome.broker_id, outcome.source, outcome.rejected) == (2, "allocated", [1])
    assert zk.resent == 1
    assert zk.children(paths.BROKER_IDENTITIES) == ["2"], "this start's claim of 1 was left"


def test_a_copy_whose_resent_create_meets_the_live_brokers_claim_leaves_it_alone(
    tmp_path: Path,
) -> None:
    """As test_a_copy_of_a_temp_only_disk_leaves_the_live_brokers_claim_alone, with the
    answer to the copy's create lost: the create sent again meets the claim, but the copy
    read it, holding its check code, before sending the first: an earlier start's claim
    (the live original's), which the copy leaves alone."""
    zk = _LosesAnAnswer()
    with pytest.raises(_Crash):
        _obtain(zk, tmp_path / "a", address="10.0.0.1:9092", crash_at="after_apply")
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the temp file only
    original = _obtain(zk, tmp_path / "a", address="10.0.0.1:9092")
    assert (original.broker_id, original.source) == (1, "temp-file")
    register(zk, original.broker_id)
    zk.lose = paths.broker_identity(1)
    copy = _obtain(zk, tmp_path / "b", address="10.0.0.2:9092")
    assert (copy.broker_id, copy.source, copy.rejected) == (2, "allocated", [1])
    assert zk.resent == 1
    got = zk.get(paths.broker_identity(1))
    assert got is not None, "the live original's claim was deleted"
    assert decode_identity_claim(1, got[0]).address == "10.0.0.1:9092"
    assert sorted(map(int, zk.children(paths.BROKER_IDENTITIES))) == [1, 2]


def _config_with_an_unreadable_meta_properties(tmp_path: Path, mode_lines: str) -> BrokerConfig:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (bad / "meta.properties").mkdir()  # reading it fails with an OSError (IsADirectoryError)
    text = f"log.dirs={good},{bad}\nzookeeper.connect=127.0.0.1:1\n{mode_lines}"
    return load_broker_config(text=text)


def _establish_over(zk: FakeZk, config: BrokerConfig) -> IdentityOutcome:
    return _establish(
        config,
        "127.0.0.1:9092",
        lambda: contextlib.nullcontext(ZkIdentityStore(zk)),  # type: ignore[arg-type]
        lambda outcome: outcome,
    )


@pytest.mark.parametrize(
    "mode_lines",
    ["broker.id=1\n", "broker.identity.mode=persistent\nbroker.name=red\n"],
    ids=["kafka", "persistent"],
)
def test_an_unreadable_meta_properties_leaves_its_directory_to_go_offline(
    tmp_path: Path, mode_lines: str
) -> None:
    """A log directory whose meta.properties cannot be read has no say in the id, and
    start-up takes it offline (KIP-112; Kafka 2.8's getBrokerMetadataAndOfflineDirs), in
    either mode. Before, persistent mode read without room for it: IdentityError, exit 1."""
    config = _config_with_an_unreadable_meta_properties(tmp_path, mode_lines)
    assert _establish_over(empty_cluster(), config).broker_id == 1


@pytest.mark.parametrize(
    "mode_lines",
    ["broker.id=1\n", "broker.identity.mode=persistent\nbroker.name=red\n"],
    ids=["kafka", "persistent"],
)
def test_a_meta_properties_that_is_not_utf_8_is_read_as_kafka_reads_it(
    tmp_path: Path, mode_lines: str
) -> None:
    """Bytes that are not UTF-8 decode as Kafka's Properties.load decodes them (ISO-8859-1):
    garbage is then a meta.properties with no broker.id, which holds no id (Kafka 2.8's
    RawMetaProperties). Before, the broker stopped with a bare "'utf-8' codec can't
    decode byte 0xff"."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (bad / "meta.properties").write_bytes(b"\xff\xfe garbage \x80\x81\n")
    text = f"log.dirs={good},{bad}\nzookeeper.connect=127.0.0.1:1\n{mode_lines}"
    assert _establish_over(empty_cluster(), load_broker_config(text=text)).broker_id == 1


@pytest.mark.parametrize(
    ("mode_lines", "source"),
    [
        ("broker.id=4\n", "config"),
        ("broker.identity.mode=persistent\nbroker.name=red\n", "allocated"),
    ],
    ids=["kafka", "persistent"],
)
@pytest.mark.parametrize("meta", ["version=0\n", "version=0\ncluster.id=cid\n"])
def test_a_meta_properties_without_broker_id_names_no_broker(
    tmp_path: Path, mode_lines: str, source: str, meta: str
) -> None:
    """A meta.properties with no broker.id holds no id (Kafka 2.8's RawMetaProperties):
    Kafka's mode takes the configured broker.id (getOrGenerateBrokerId), the persistent
    mode allocates one, the file being no sign of a Kafka-mode broker's directory. Both
    rewrite it once registered. Before, either stopped: "has no valid broker.id"."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text(meta)
    text = f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n{mode_lines}"
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))  # the cluster the file may name
    outcome = _establish_over(zk, load_broker_config(text=text))
    assert (outcome.broker_id, outcome.source) == (4 if source == "config" else 1, source)


def test_a_kafka_mode_directory_still_stops_the_persistent_mode(tmp_path: Path) -> None:
    """A meta.properties with a broker.id and no identity file is a Kafka-mode broker's
    directory: the persistent mode refuses it, as before."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=0\nbroker.id=1\n")
    text = f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n"
    config = load_broker_config(text=text + "broker.identity.mode=persistent\nbroker.name=red\n")
    with pytest.raises(IdentityError, match="hold no persistent identity"):
        _establish_over(empty_cluster(), config)


@pytest.mark.parametrize("in_zookeeper", [True, False], ids=["read", "created"])
@pytest.mark.parametrize(
    "mode_lines",
    ["broker.id=-1\n", "broker.identity.mode=persistent\nbroker.name=red\n"],
    ids=["kafka-generated", "persistent"],
)
def test_a_log_dir_of_another_cluster_stops_the_broker_before_an_id_is_spent(
    tmp_path: Path, mode_lines: str, in_zookeeper: bool
) -> None:
    """Kafka 2.8's KafkaServer.startup checks the log directories' cluster id against
    /cluster/id (read, or created: getOrGenerateClusterId) before getOrGenerateBrokerId
    (InconsistentClusterIdException): nothing is generated. A meta.properties with no
    broker.id names no broker but may name a cluster. Before, the id was settled first:
    /brokers/seqid bumped (the id leaked), or a claim made and broker-identity written into
    the other cluster's directory; only the broker's start-up then refused it."""
    zk = empty_cluster()
    if in_zookeeper:
        zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    else:
        zk.put("/cluster", b"")
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=0\ncluster.id=another\n")
    config = load_broker_config(
        text=f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n{mode_lines}"
    )
    with pytest.raises(IdentityError, match=r"'another' in .* belongs to another cluster"):
        _establish_over(zk, config)
    seqid = zk.get(paths.BROKER_SEQID)
    assert seqid is not None
    assert seqid[1].version == 0, "an id was generated"
    assert zk.children(paths.BROKER_IDENTITIES) == [], "an id was claimed"
    assert sorted(p.name for p in data.iterdir()) == ["meta.properties"]
    got = zk.get(paths.CLUSTER_ID)
    assert got is not None
    assert decode_cluster_id(got[0]) != "another"


@pytest.mark.parametrize(
    ("mode_lines", "stored"),
    [
        ("broker.id=2\n", "broker.id=1\n"),
        ("broker.id=1\n", "broker.id=1\n"),
        ("broker.id=-1\n", "broker.id=1\n"),
        ("broker.id=-1\n", "broker.id=1001\n"),
        ("broker.identity.mode=persistent\nbroker.name=red\n", "broker.id=1\n"),
    ],
    ids=[
        "kafka-configured-another-id",
        "kafka-configured",
        "kafka-stored",
        "kafka-generated-before",
        "persistent",
    ],
)
def test_a_log_dir_of_another_cluster_is_refused_as_such_whatever_its_broker_id(
    tmp_path: Path, mode_lines: str, stored: str
) -> None:
    """Kafka 2.8's KafkaServer.startup checks the cluster id (InconsistentClusterIdException)
    before getOrGenerateBrokerId (InconsistentBrokerIdException), whatever the id's source.
    Before, only an id to be generated or claimed waited for that check: a configured
    broker.id unlike the stored one was refused "change broker.id to match" (and once it
    matched, the next start said "another cluster"), the persistent mode refused the
    directory as a Kafka-mode broker's, and a configured or stored id was accepted."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text(f"version=0\n{stored}cluster.id=another\n")
    config = load_broker_config(
        text=f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n{mode_lines}"
    )
    with pytest.raises(IdentityError, match=r"'another' in .* belongs to another cluster"):
        _establish_over(zk, config)
    assert zk.children(paths.BROKER_IDENTITIES) == []
    assert sorted(p.name for p in data.iterdir()) == ["meta.properties"]


def test_a_kafka_mode_restart_reads_the_cluster_id_in_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The round trips of docs/broker-identity.md: a configured broker.id on an empty
    directory opens no session; at a restart (meta.properties names the cluster) one
    session reads /cluster/id, one request, whether the id is configured or stored."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    monkeypatch.setattr(
        identity_store,
        "zk_identity_store",
        lambda *_, **__: contextlib.nullcontext(ZkIdentityStore(zk)),  # type: ignore[arg-type]
    )
    data = tmp_path / "data"
    text = f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n"
    first = identity_store.establish_identity(
        load_broker_config(text=text + "broker.id=1\n"), "h:1"
    )
    assert (first.broker_id, first.source, first.zk_sessions, first.zk_requests) == (
        1,
        "config",
        0,
        0,
    )
    checkpoint_meta_properties([str(data)], 1, "cid")  # as the registered broker does
    for line in ("broker.id=1\n", "broker.id=-1\n"):
        again = identity_store.establish_identity(load_broker_config(text=text + line), "h:1")
        assert (again.broker_id, again.source, again.zk_sessions, again.zk_requests) == (
            1,
            "meta.properties",
            1,
            1,
        )


def test_the_cluster_id_is_read_or_created_once(tmp_path: Path) -> None:
    """Kafka's getOrGenerateClusterId: /cluster/id as it is, or created with a new id; a
    create that meets one made meanwhile takes that one."""
    zk = FakeZk()
    zk.put("/cluster", b"")
    store = ZkIdentityStore(zk)  # type: ignore[arg-type]
    created = store.cluster_id()
    assert (len(created), store.requests) == (22, 2)  # a get, the create
    assert ZkIdentityStore(zk).cluster_id() == created  # type: ignore[arg-type]
    racing = FakeZk()
    racing.put("/cluster", b"")
    real_get = racing.get

    def get(path: str, *, watch: bool = False):  # type: ignore[no-untyped-def]
        got = real_get(path)
        if got is None:  # another broker creates it just after this read
            racing.put(paths.CLUSTER_ID, encode_cluster_id("theirs"))
        return got

    racing.get = get  # type: ignore[method-assign]
    assert ZkIdentityStore(racing).cluster_id() == "theirs"  # type: ignore[arg-type]


def test_a_persistent_restart_checks_the_cluster_id_before_its_claim(tmp_path: Path) -> None:
    """The requests of docs/broker-identity.md's round trips: a first start on an empty
    directory reads no cluster id (no meta.properties names one); a restart, whose
    meta.properties names it, reads /cluster/id and then its claim."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    zk.put(paths.BROKER_IDENTITIES, b"")  # not the first claim of the cluster
    data = tmp_path / "data"
    text = f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n"
    config = load_broker_config(text=text + "broker.identity.mode=persistent\nbroker.name=red\n")
    first = _establish_over(zk, config)
    assert (first.broker_id, first.source, first.zk_requests) == (1, "allocated", 3)
    checkpoint_meta_properties([str(data)], 1, "cid")  # as the registered broker does
    again = _establish_over(zk, config)
    assert (again.broker_id, again.source, again.zk_requests) == (1, "identity-file", 2)


def test_an_empty_cluster_id_stops_the_persistent_mode_before_its_claim(tmp_path: Path) -> None:
    """An empty cluster.id is a cluster id, no cluster's (Kafka 2.8's RawMetaProperties:
    Some("")). Before, it read as none: the broker claimed an id and wrote over the file."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=0\ncluster.id=\n")
    text = f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n"
    config = load_broker_config(text=text + "broker.identity.mode=persistent\nbroker.name=red\n")
    with pytest.raises(IdentityError, match=r"cluster id '' in .* belongs to another cluster"):
        _establish_over(zk, config)
    assert zk.children(paths.BROKER_IDENTITIES) == []


def test_the_persistent_mode_does_not_compare_the_meta_properties_files(
    tmp_path: Path,
) -> None:
    """Kafka's mode wants the log directories' meta.properties alike (Kafka 2.8's
    InconsistentBrokerMetadataException); the persistent mode's identity is its identity
    file, and docs/broker-identity.md gives meta.properties no say beyond the broker.id it
    holds (which must be the identity's) and its cluster id (checked): files that differ
    otherwise are written over once registered."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    for d, text in zip(dirs, ["version=0\ncluster.id=cid\n", "version=0\n"], strict=True):
        d.mkdir()
        (d / "meta.properties").write_text(text)
    text = f"log.dirs={','.join(map(str, dirs))}\nzookeeper.connect=127.0.0.1:1\n"
    config = load_broker_config(text=text + "broker.identity.mode=persistent\nbroker.name=red\n")
    assert _establish_over(zk, config).broker_id == 1


class _ClaimedUnreadablyAfterRead(FakeZk):
    """Right after GetNextBrokerId's reads, id 1 is claimed with data that is no claim (a
    claim written by hand, or by another tool): the race the claim's create loses."""

    def __init__(self) -> None:
        super().__init__()
        base = empty_cluster()
        self.nodes, self._zxid = base.nodes, base._zxid
        self.pending = True

    def get_children_many(self, path_list, *, watch=False, batch=0):  # type: ignore[no-untyped-def]
        got = super().get_children_many(path_list, watch=watch, batch=batch)
        if self.pending:
            self.pending = False
            self.put(paths.BROKER_IDENTITIES, b"")
            self.put(paths.broker_identity(1), b"{not json")
        return got


def test_a_claim_lost_to_an_unreadable_claim_is_rejected_and_allocation_starts_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The create met a claim holding no check code of ours (none can be read): the id is
    another's, as with another code, and the broker takes the next. Before, the
    MalformedZnode stopped the broker."""
    zk = _ClaimedUnreadablyAfterRead()
    with caplog.at_level(logging.WARNING):
        outcome = _obtain(zk, tmp_path)
    assert (outcome.broker_id, outcome.rejected) == (2, [1])
    assert zk.get(paths.broker_identity(1))[0] == b"{not json"  # type: ignore[index]
    assert paths.broker_identity(1) in caplog.text


def test_a_temp_file_whose_claim_cannot_be_read_gives_its_id_up(tmp_path: Path) -> None:
    """A crash at after_temp, then the temp file's id claimed with data that is no claim:
    the restart cannot find its check code there, so the id is not its own; it gives it
    up (the znode left alone) and takes another. Before, every restart stopped on the
    MalformedZnode, and the broker could not start until someone removed the temp file."""
    zk = empty_cluster()
    with pytest.raises(_Crash):
        _obtain(zk, tmp_path, crash_at="after_temp")
    zk.put(paths.BROKER_IDENTITIES, b"")
    zk.put(paths.broker_identity(1), b"{not json")
    outcome = _obtain(zk, tmp_path)
    assert (outcome.broker_id, outcome.source, outcome.rejected) == (2, "allocated", [1])
    assert zk.get(paths.broker_identity(1))[0] == b"{not json"  # type: ignore[index]
    assert not IdentityFiles(tmp_path).temp_path.exists()


@pytest.mark.parametrize("reordered", [["b", "a"], ["new", "a", "b"]], ids=["swapped", "added"])
def test_a_persistent_identity_is_found_after_log_dirs_are_reordered(
    tmp_path: Path, reordered: list[str]
) -> None:
    """The identity files are written in the first log directory; with log.dirs reordered
    (or a directory added before it) they are found where they are, as Kafka's
    meta.properties is in every directory. Before, the broker stopped, telling the
    directories a Kafka-mode broker's ("use that mode, or empty them")."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))

    def config(dirs: list[str]) -> BrokerConfig:
        log_dirs = ",".join(str(tmp_path / d) for d in dirs)
        return load_broker_config(
            text=f"log.dirs={log_dirs}\nzookeeper.connect=127.0.0.1:1\n"
            "broker.identity.mode=persistent\nbroker.name=red\n"
        )

    first = _establish_over(zk, config(["a", "b"]))
    assert (first.broker_id, first.source) == (1, "allocated")
    # What start-up writes once registered.
    checkpoint_meta_properties([str(tmp_path / d) for d in ("a", "b")], 1, "cid")
    again = _establish_over(zk, config(reordered))
    assert (again.broker_id, again.source, again.attempts) == (1, "identity-file", 0)
    assert sorted(map(int, zk.children(paths.BROKER_IDENTITIES))) == [1]


def test_identity_files_in_two_log_dirs_stop_the_broker(tmp_path: Path) -> None:
    """Two log directories holding identity files, none in the first: which is this
    broker's cannot be told, and the broker stops naming both."""
    zk = empty_cluster()
    for d in ("a", "b"):
        log_dirs = f"{tmp_path / d}"
        _establish_over(
            zk,
            load_broker_config(
                text=f"log.dirs={log_dirs}\nzookeeper.connect=127.0.0.1:1\n"
                "broker.identity.mode=persistent\nbroker.name=red\n"
            ),
        )
    log_dirs = ",".join(str(tmp_path / d) for d in ("new", "a", "b"))
    config = load_broker_config(
        text=f"log.dirs={log_dirs}\nzookeeper.connect=127.0.0.1:1\n"
        "broker.identity.mode=persistent\nbroker.name=red\n"
    )
    with pytest.raises(IdentityError, match="identity files in more than one log directory"):
        _establish_over(zk, config)
