"""Broker identity: the pure decisions and the two-phase protocol over an in-memory store."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import ConfigError, load_broker_config
from election.broker_identity import (
    CRASH_POINTS,
    Allocate,
    ClaimDecision,
    GenerateId,
    IdentityError,
    IdentityFiles,
    IdentityRecord,
    KnownIds,
    MetaProperties,
    Reapply,
    UseFinal,
    UseId,
    checkpoint_meta_properties,
    claim_update,
    decide_claim,
    decide_kafka_id,
    format_identity,
    format_meta_properties,
    meta_to_write,
    next_free_id,
    next_step,
    obtain_kafka_id,
    obtain_persistent_id,
    parse_identity,
    parse_meta_properties,
    read_meta_properties,
    record_claim_address,
)
from zkdata.paths import MAX_BROKER_ID
from zkdata.znodes import IdentityClaim, decode_identity_claim, encode_identity_claim

# --- configuration ------------------------------------------------------------------------


def test_identity_config_keys_and_their_checks() -> None:
    c = load_broker_config(text="zookeeper.connect=zk:2181\n")
    assert (c.broker_identity_mode, c.cluster_name, c.broker_name) == (
        "kafka",
        "DefaultCluster",
        None,
    )
    c = load_broker_config(
        text="zookeeper.connect=zk\nbroker.identity.mode=persistent\nbroker.name=b-1\n"
    )
    assert (c.broker_id, c.broker_name) == (-1, "b-1")
    with pytest.raises(ConfigError) as e:
        load_broker_config(text="zookeeper.connect=zk\nbroker.identity.mode=persistent\n")
    assert "broker.name" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_broker_config(
            text="zookeeper.connect=zk\nbroker.identity.mode=persistent\nbroker.name=b\n"
            "broker.id=3\n"
        )
    assert "broker.id must not be set" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_broker_config(text="zookeeper.connect=zk\nbroker.identity.mode=raft\n")
    assert "one of kafka, persistent" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_broker_config(text="zookeeper.connect=zk\ncluster.name=a:b\n")
    assert "cluster.name" in str(e.value)


# --- Kafka's mode: meta.properties ---------------------------------------------------------


def test_meta_properties_round_trip_and_kafka_layout() -> None:
    meta = MetaProperties(1001, "klkXjr4uQuqJfUICi84gMA")
    text = format_meta_properties(meta)
    assert text.startswith("#\n#")
    assert "version=0\n" in text
    assert "broker.id=1001\n" in text
    assert parse_meta_properties(text, "m") == meta
    with pytest.raises(IdentityError, match="version"):
        parse_meta_properties("version=1\nbroker.id=1\n", "m")
    # No broker.id line: no stored id (Kafka 2.8's RawMetaProperties.brokerId is None),
    # with the version implicit (0) or not.
    assert parse_meta_properties("version=0\n", "m") == MetaProperties(None)
    assert parse_meta_properties("cluster.id=c\n", "m") == MetaProperties(None, "c")


@pytest.mark.parametrize(
    "raw",
    [
        *("\u00b2", "1\u00b2", "--5", "-", "+", "+-1", "", "1 ", "2147483648", "-2147483649"),
        # MATHEMATICAL BOLD DIGIT SEVEN: Nd, but two UTF-16 chars, neither a digit, to Java
        "\U0001d7d5",
        # more digits than int() takes: its ValueError, not this module's error
        "1" * 5000,
        "-" + "9" * 5000,
    ],
    ids=lambda raw: raw if len(raw) < 20 else f"{len(raw)} chars",
)
def test_a_broker_id_in_meta_properties_that_is_not_a_java_int_is_a_clear_error(raw: str) -> None:
    """Decimal digits, perhaps a sign, within a Java int (Kafka's Integer.parseInt):
    '\u00b2' passes str.isdigit() and made int() raise ValueError, not IdentityError."""
    with pytest.raises(IdentityError, match=r"no valid broker\.id"):
        parse_meta_properties(f"version=0\nbroker.id={raw}\n", "m")
    assert parse_meta_properties("version=0\nbroker.id=-1\n", "m").broker_id == -1
    assert parse_meta_properties("version=0\nbroker.id=2147483647\n", "m").broker_id == 2**31 - 1


@pytest.mark.parametrize(
    ("raw", "value"),
    [("+1", 1), ("007", 7), ("-0", 0), ("+2147483647", 2**31 - 1), ("\u0661\u0662", 12)],
)
def test_a_broker_id_in_meta_properties_is_read_as_integer_parse_int_reads_it(
    raw: str, value: int
) -> None:
    """Java's Integer.parseInt takes a plus sign, leading zeros and any Unicode decimal
    digit (Character.digit), as Kafka 2.8 reads meta.properties: such a file was refused
    ("no valid broker.id") where Kafka starts."""
    assert parse_meta_properties(f"version=0\nbroker.id={raw}\n", "m").broker_id == value


def test_meta_properties_version_is_read_as_an_int() -> None:
    """RawMetaProperties.version is Integer.parseInt of the value (0 when missing): "00"
    and "+0" are version 0, as Kafka 2.8 reads them (refused before); a version that is
    no int is a clear error naming it, as Kafka's "Failed to parse version"."""
    for raw in ("00", "+0", "-0"):
        assert parse_meta_properties(f"version={raw}\nbroker.id=1\n", "m").broker_id == 1
    with pytest.raises(IdentityError, match=r"version '1'; only version 0"):
        parse_meta_properties("version=1\nbroker.id=1\n", "m")
    with pytest.raises(IdentityError, match=r"no valid version \(found 'zero'\)"):
        parse_meta_properties("version=zero\nbroker.id=1\n", "m")


def test_log_dirs_whose_meta_properties_differ_in_any_property_disagree() -> None:
    """Kafka 2.8's getBrokerMetadataAndOfflineDirs compares the files' whole Properties:
    an implicit version beside an explicit one, "00" beside "0", or a key one file has
    and another lacks makes them disagree (InconsistentBrokerMetadataException). Before,
    only broker.id and cluster.id were compared."""

    def meta(text: str) -> MetaProperties:
        return parse_meta_properties(text, "m")

    same = meta("version=0\nbroker.id=1\ncluster.id=c\n")
    for other in (
        "broker.id=1\ncluster.id=c\n",
        "version=00\nbroker.id=1\ncluster.id=c\n",
        "version=0\nbroker.id=1\ncluster.id=c\nnode.id=1\n",
    ):
        with pytest.raises(IdentityError, match="disagree") as e:
            decide_kafka_id(-1, {"a": same, "b": meta(other)}, generation_enabled=True)
        assert "a: broker.id 1, cluster.id 'c', version '0'; b: broker.id 1" in str(e.value)
    # Once registered every file is written alike (Kafka's checkpointBrokerMetadata), so
    # a directory added beside one with another property does not disagree next time.
    for other in ("version=00\nbroker.id=1\ncluster.id=c\n", "broker.id=1\ncluster.id=c\nx=y\n"):
        assert meta_to_write({"a": meta(other), "b": None}, 1, "c") == ["a", "b"]
    # The order of the lines and the comments are not properties.
    reordered = meta("#x\ncluster.id=c\nbroker.id=1\nversion=0\n")
    assert decide_kafka_id(-1, {"a": same, "b": reordered}, generation_enabled=True) == UseId(
        1, "meta.properties"
    )


def test_decide_kafka_id() -> None:
    m = MetaProperties
    assert decide_kafka_id(5, {"a": None}, generation_enabled=True) == UseId(5, "config")
    assert decide_kafka_id(-1, {"a": None}, generation_enabled=True) == GenerateId()
    stored = {"a": m(1001), "b": None}
    assert decide_kafka_id(-1, stored, generation_enabled=True) == UseId(1001, "meta.properties")
    assert decide_kafka_id(1001, stored, generation_enabled=False) == UseId(1001, "meta.properties")
    with pytest.raises(IdentityError, match=r"does not match broker\.id 1001"):
        decide_kafka_id(7, stored, generation_enabled=True)
    with pytest.raises(IdentityError, match="disagree"):
        decide_kafka_id(-1, {"a": m(1), "b": m(2)}, generation_enabled=True)
    with pytest.raises(IdentityError, match="generation"):
        decide_kafka_id(-1, {"a": None}, generation_enabled=False)


def test_decide_kafka_id_over_a_meta_properties_without_broker_id() -> None:
    """Kafka 2.8's getOrGenerateBrokerId: a meta.properties with no broker.id holds no id,
    so the configured one is used, or one generated. But the log directories' files must
    agree (getBrokerMetadataAndOfflineDirs' InconsistentBrokerMetadataException): one
    without broker.id beside one with it is a disagreement. Before, parsing such a file
    stopped the broker."""
    m = MetaProperties
    no_id = {"a": m(None, "c"), "b": None, "c": m(None, "c")}
    assert decide_kafka_id(5, no_id, generation_enabled=False) == UseId(5, "config")
    assert decide_kafka_id(-1, no_id, generation_enabled=True) == GenerateId()
    with pytest.raises(IdentityError, match="generation"):
        decide_kafka_id(-1, no_id, generation_enabled=False)
    with pytest.raises(
        IdentityError, match=r"\(a: broker\.id 1, cluster\.id none, version '0'; b: broker"
    ):
        decide_kafka_id(1, {"a": m(1), "b": m(None)}, generation_enabled=True)


def test_log_dirs_whose_meta_properties_differ_only_in_cluster_id_disagree() -> None:
    """Kafka 2.8's getBrokerMetadataAndOfflineDirs wants every directory's meta.properties
    alike (brokerMetadataMap.values.toSet.size > 1: InconsistentBrokerMetadataException),
    the cluster id included, whether or not they hold a broker.id. Before, only broker.id
    was compared: such directories were accepted and written over."""
    m = MetaProperties
    with pytest.raises(IdentityError, match="disagree") as e:
        decide_kafka_id(3, {"a": m(None, "cid"), "b": m(None), "c": None}, generation_enabled=True)
    assert (
        "(a: broker.id none, cluster.id 'cid', version '0'; b: broker.id none, cluster.id none,"
        " version '0')" in str(e.value)
    )
    with pytest.raises(
        IdentityError, match=r"a: broker\.id 1, cluster\.id 'cid', version '0'; b: broker\.id 1,"
    ):
        decide_kafka_id(-1, {"a": m(1, "cid"), "b": m(1)}, generation_enabled=True)
    with pytest.raises(
        IdentityError, match=r"cluster\.id '', version '0'; b: broker\.id 1, cluster\.id 'cid'"
    ):
        decide_kafka_id(1, {"a": m(1, ""), "b": m(1, "cid")}, generation_enabled=True)
    alike = {"a": m(1, "cid"), "b": m(1, "cid"), "c": None}
    assert decide_kafka_id(-1, alike, generation_enabled=True) == UseId(1, "meta.properties")


def test_an_id_generated_over_a_meta_properties_without_broker_id(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=0\n")
    store = MemoryStore()
    outcome = obtain_kafka_id(
        -1,
        [str(tmp_path)],
        generation_enabled=True,
        reserved_max_id=1000,
        store_factory=lambda: store,
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.source) == (1001, "generated")
    assert meta_to_write(read_meta_properties([str(tmp_path)]), 1001, "c") == [str(tmp_path)]


def test_no_id_is_generated_for_a_log_dir_of_another_cluster(tmp_path: Path) -> None:
    """Kafka 2.8's KafkaServer.startup checks the cluster id before getOrGenerateBrokerId
    (InconsistentClusterIdException). Before, the id was generated first: one leaked."""
    (tmp_path / "meta.properties").write_text("version=0\ncluster.id=another\n")
    store = MemoryStore()
    with pytest.raises(IdentityError, match="belongs to another cluster"):
        obtain_kafka_id(
            -1,
            [str(tmp_path)],
            generation_enabled=True,
            reserved_max_id=1000,
            store_factory=lambda: store,
            crash=crash_at(None),
        )
    assert (store.seq_version, store.requests) == (0, 1)  # only the cluster id was read
    (tmp_path / "meta.properties").write_text("version=0\ncluster.id=cid\n")
    store.requests = 0
    outcome = obtain_kafka_id(
        -1,
        [str(tmp_path)],
        generation_enabled=True,
        reserved_max_id=1000,
        store_factory=lambda: store,
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.zk_requests) == (1001, 2)  # and the setData


def test_a_configured_id_is_compared_after_the_cluster_id(tmp_path: Path) -> None:
    """Kafka 2.8's KafkaServer.startup: the log directories' files must agree
    (getBrokerMetadataAndOfflineDirs), then the cluster id (InconsistentClusterIdException),
    then the broker id (getOrGenerateBrokerId: InconsistentBrokerIdException). Before, a
    configured id unlike the stored one was refused first, "change broker.id to match", for
    a directory of another cluster, and a configured or stored id was not checked here."""
    checkpoint_meta_properties([str(tmp_path)], 1, "another")
    for configured in (2, 1, -1):
        store = MemoryStore()
        with pytest.raises(IdentityError, match="belongs to another cluster"):
            obtain_kafka_id(
                configured,
                [str(tmp_path)],
                generation_enabled=True,
                reserved_max_id=1000,
                store_factory=lambda store=store: store,  # type: ignore[misc]
                crash=crash_at(None),
            )
        assert store.requests == 1  # only the cluster id was read
    # files that disagree are refused before any session is opened
    other = tmp_path / "other"
    checkpoint_meta_properties([str(other)], 2, "cid")
    with pytest.raises(IdentityError, match="disagree"):
        obtain_kafka_id(
            2,
            [str(tmp_path), str(other)],
            generation_enabled=True,
            reserved_max_id=1000,
            store_factory=lambda: pytest.fail("no session for files that disagree"),
        )
    # this cluster's directory: a configured mismatch is still one, after the cluster id
    checkpoint_meta_properties([str(other)], 2, "cid")
    with pytest.raises(IdentityError, match=r"configured broker\.id 3 does not match"):
        obtain_kafka_id(
            3,
            [str(other)],
            generation_enabled=True,
            reserved_max_id=1000,
            store_factory=MemoryStore,
        )


def test_meta_to_write_refuses_another_clusters_directory() -> None:
    m = MetaProperties
    assert meta_to_write({"a": None, "b": m(1, "c1")}, 1, "c1") == ["a"]
    assert meta_to_write({"a": m(1)}, 1, "c1") == ["a"]  # adds the cluster id
    # Any other property differing is rewritten too (Kafka rewrites every file).
    assert meta_to_write({"a": m(1, "c1", (("version", "00"),)), "b": m(1, "c1")}, 1, "c1") == ["a"]
    with pytest.raises(IdentityError, match="belongs to another cluster"):
        meta_to_write({"a": m(1, "c0")}, 1, "c1")


@pytest.mark.parametrize("line", ["cluster.id=", "cluster.id", "cluster.id = "])
def test_an_empty_cluster_id_is_a_cluster_id(line: str) -> None:
    """Kafka 2.8's RawMetaProperties.clusterId is Option(getProperty("cluster.id")):
    Some("") for an empty value, which KafkaServer.startup finds unequal to ZooKeeper's
    (InconsistentClusterIdException). Before, "" was read as no cluster id, and the file
    was accepted and written over."""
    m = MetaProperties
    assert parse_meta_properties(f"version=0\n{line}\n", "m") == m(None, "")
    assert parse_meta_properties(f"broker.id=1\n{line}\n", "m") == m(1, "")
    with pytest.raises(IdentityError, match=r"cluster id '' in .* belongs to another cluster"):
        meta_to_write({"a": m(1, "")}, 1, "cid")
    # and one written so reads back the same (Kafka writes the cluster id it has)
    assert parse_meta_properties(format_meta_properties(m(1, "")), "m") == m(1, "")


def test_checkpoint_writes_every_log_dir(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    assert checkpoint_meta_properties(dirs, 1001, "cid") == 2
    assert checkpoint_meta_properties(dirs, 1001, "cid") == 0
    assert read_meta_properties(dirs) == {d: MetaProperties(1001, "cid") for d in dirs}
    with pytest.raises(IdentityError):
        checkpoint_meta_properties(dirs, 1001, "other")


def test_an_unreadable_meta_properties_makes_its_directory_offline_not_the_broker_fail(
    tmp_path: Path,
) -> None:
    """Kafka's start-up takes a log directory whose meta.properties cannot be read offline
    (KIP-112) and starts with the others: here, a disk gone, a file where it was."""
    good, gone = str(tmp_path / "d1"), str(tmp_path / "d2")
    checkpoint_meta_properties([good], 7, "cid")
    Path(gone).write_text("not a directory\n")
    with pytest.raises(IdentityError, match="cannot read"):
        read_meta_properties([good, gone])
    unreadable: dict[str, OSError] = {}
    assert read_meta_properties([good, gone], unreadable) == {good: MetaProperties(7, "cid")}
    assert isinstance(unreadable[gone], NotADirectoryError)
    # the broker's checkpoint per directory: an OSError for the gone one (offline)
    with pytest.raises(NotADirectoryError):
        checkpoint_meta_properties([gone], 7, "cid")
    # and the id is decided by the readable ones alone (their cluster id read, not generated)
    outcome = obtain_kafka_id(
        -1,
        [good, gone],
        generation_enabled=True,
        reserved_max_id=1000,
        store_factory=MemoryStore,
    )
    assert (outcome.broker_id, outcome.source, outcome.zk_requests) == (7, "meta.properties", 1)


def test_meta_properties_is_read_as_iso_8859_1_as_kafkas_properties_load(tmp_path: Path) -> None:
    """Kafka 2.8 reads meta.properties with Properties.load(InputStream): ISO-8859-1, every
    byte a character. A byte that is not UTF-8 in a comment reads as Kafka reads it; bytes
    that are no properties at all are the error naming the file that other bad content is.
    Before, reading as UTF-8 raised a bare UnicodeDecodeError naming no file: exit 1."""
    damaged, garbage = tmp_path / "d1", tmp_path / "d2"
    damaged.mkdir()
    garbage.mkdir()
    (damaged / "meta.properties").write_bytes(
        b"#\xff damaged\nversion=0\nbroker.id=7\ncluster.id=cid\n"
    )
    assert read_meta_properties([str(damaged)]) == {str(damaged): MetaProperties(7, "cid")}
    # Garbage reads as Kafka reads it too: a property "\xff\xfe", so no broker.id, which
    # disagrees with the other directory's 7 (Kafka's InconsistentBrokerMetadataException).
    (garbage / "meta.properties").write_bytes(b"\xff\xfe garbage \x80\x81\n")
    metas = read_meta_properties([str(damaged), str(garbage)], {})
    assert metas == {str(damaged): MetaProperties(7, "cid"), str(garbage): MetaProperties(None)}
    with pytest.raises(IdentityError, match="disagree") as e:
        decide_kafka_id(7, metas, generation_enabled=True)
    assert f"{garbage}: broker.id none, cluster.id none" in str(e.value)


# --- the persistent mode: files and decisions ----------------------------------------------

names = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
codes = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() == s and "\x00" not in s)


@pytest.mark.parametrize(
    "raw",
    ["\u00b2", "1\u00b2", "0", "-3", "+3", "2147483648", "\u0661", "1" * 5000],
    ids=lambda raw: raw if len(raw) < 20 else f"{len(raw)} chars",
)
def test_an_identity_files_broker_id_must_be_ascii_digits_from_1(raw: str) -> None:
    text = f"cluster.name=c\nbroker.name=b\nbroker.id={raw}\ncheck.code=x\n"
    with pytest.raises(IdentityError, match=r"invalid broker\.id"):
        parse_identity(text, "f")


@given(names, names, st.integers(1, 2**31 - 1), codes)
def test_identity_file_round_trips(cluster: str, broker: str, broker_id: int, code: str) -> None:
    record = IdentityRecord(cluster, broker, broker_id, code)
    assert parse_identity(format_identity(record), "f") == record


@given(names, names, st.integers(1, 2**31 - 1), codes)
def test_identity_claim_znode_round_trips(
    cluster: str, broker: str, broker_id: int, code: str
) -> None:
    claim = IdentityClaim(broker_id, cluster, broker, "h:1", code, 123)
    assert decode_identity_claim(broker_id, encode_identity_claim(claim)) == claim
    assert claim.identity == f"{cluster}:{broker}:{broker_id}"


def test_next_step_is_rocketmqs_recovery_table() -> None:
    rec = IdentityRecord("c", "b", 3, "code")
    kw = {"cluster_name": "c", "broker_name": "b"}
    assert next_step(None, None, **kw) == Allocate()
    assert next_step(None, rec, **kw) == Reapply(rec)
    assert next_step(rec, None, **kw) == UseFinal(rec, remove_temp=False)
    assert next_step(rec, rec, **kw) == UseFinal(rec, remove_temp=True)
    with pytest.raises(IdentityError, match="cluster name 'c' \\(configured: 'other'\\)"):
        next_step(rec, None, cluster_name="other", broker_name="b")
    with pytest.raises(IdentityError, match="broker name"):
        next_step(None, rec, cluster_name="c", broker_name="x")


def test_claim_decision() -> None:
    claim = IdentityClaim(1, "c", "b", "h:1", "code")
    assert decide_claim(None, "code") is ClaimDecision.FREE
    assert decide_claim(claim, "code") is ClaimDecision.OURS
    assert decide_claim(claim, "other") is ClaimDecision.TAKEN


def test_claim_update_once_registered() -> None:
    """Only our own claim (our check code) is rewritten, and only when its address moved."""
    ours = IdentityClaim(1, "c", "b", "h:1", "code")
    moved = IdentityClaim(1, "c", "b", "h:2", "code")
    assert claim_update(ours, moved) == moved
    assert claim_update(moved, moved) is None
    assert claim_update(None, moved) is None  # deleted by hand meanwhile
    assert claim_update(IdentityClaim(1, "c", "x", "h:1", "other"), moved) is None


def test_next_free_id_is_above_every_id_the_cluster_knows() -> None:
    assert next_free_id([], [], []) == 1
    assert next_free_id([1, 2, 7], [], []) == 8
    assert next_free_id([0], [0], [0]) == 1  # ids start at 1: 0 is never handed out
    # `zkctl up`'s static brokers 1..3 registered, no claim yet: not 1
    assert next_free_id([], [1, 2, 3], []) == 4
    # broker 9 is down but still named by an assignment: its replicas are not up for grabs
    assert next_free_id([2], [1], [1, 9]) == 10
    assert next_free_id([12], [1, 2], [3]) == 13


def test_next_free_id_stays_in_the_configured_range_then_generates() -> None:
    # generated ids (above reserved.broker.max.id) do not lift persistent ids into their
    # range, where the next generated id (seqid version + 1000) would meet them
    assert next_free_id([], [1, 2, 1001], [1002]) == 3
    assert next_free_id([999], [], [], reserved_max=1000) == 1000
    # the range used up to its top: take the id from /brokers/seqid, as Kafka does
    assert next_free_id([1000], [], [], reserved_max=1000) == GenerateId()
    assert next_free_id([], [3], [], reserved_max=3) == GenerateId()
    assert next_free_id([], [], [], reserved_max=0) == GenerateId()


_known = st.frozensets(st.integers(min_value=-5, max_value=MAX_BROKER_ID), max_size=20)


@given(_known, _known, _known, st.integers(min_value=0, max_value=MAX_BROKER_ID))
def test_the_next_id_is_in_none_of_the_known_sets_and_at_least_1(
    claimed: frozenset[int], registered: frozenset[int], assigned: frozenset[int], reserved: int
) -> None:
    chosen = next_free_id(claimed, registered, assigned, reserved_max=reserved)
    known = claimed | registered | assigned
    in_range = {i for i in known if i <= reserved}
    if isinstance(chosen, GenerateId):
        assert max(in_range | {0}) == reserved  # only when the range is used up to its top
        return
    assert 1 <= chosen <= reserved
    assert chosen not in known
    # RocketMQ's model kept: one above the highest known id, so ids grow and never repeat
    assert chosen == max(in_range | {0}) + 1


# --- the protocol over an in-memory store --------------------------------------------------


@dataclass
class MemoryStore:
    claims: dict[int, IdentityClaim] = field(default_factory=dict)
    seq_version: int = 0
    requests: int = 0
    #: called after each GetNextBrokerId read: lets another broker run in between (a race)
    after_read: list[object] = field(default_factory=list)
    #: ids registered under /brokers/ids, and named by topic assignments
    registered: set[int] = field(default_factory=set)
    assigned: set[int] = field(default_factory=set)

    def known_ids(self) -> KnownIds:
        self.requests += 1
        known = KnownIds(
            frozenset(self.claims), frozenset(self.registered), frozenset(self.assigned)
        )
        if self.after_read:
            hook = self.after_read.pop(0)
            assert callable(hook)
            hook()
        return known

    def is_registered(self, broker_id: int) -> bool:
        self.requests += 1
        return broker_id in self.registered

    def delete_claim(self, broker_id: int) -> None:
        self.requests += 1
        self.claims.pop(broker_id, None)

    def get_claim(self, broker_id: int) -> IdentityClaim | None:
        self.requests += 1
        return self.claims.get(broker_id)

    def create_claim(self, claim: IdentityClaim) -> bool | None:
        self.requests += 1
        if claim.broker_id in self.claims:
            return False
        self.claims[claim.broker_id] = claim
        return True

    def set_claim(self, claim: IdentityClaim) -> None:
        self.requests += 1
        self.claims[claim.broker_id] = claim

    def generate_seq_id(self) -> int:
        self.requests += 1
        self.seq_version += 1
        return self.seq_version

    def cluster_id(self) -> str:
        self.requests += 1
        return "cid"


class Crash(Exception):
    pass


def crash_at(point: str | None):  # type: ignore[no-untyped-def]
    def hook(p: str) -> None:
        if p == point:
            raise Crash(p)

    return hook


def run(
    store: MemoryStore, directory: Path, name: str, point: str | None = None, address: str = "h:1"
) -> int | None:
    try:
        outcome = obtain_persistent_id(
            store,
            IdentityFiles(directory),
            cluster_name="c",
            broker_name=name,
            address=address,
            crash=crash_at(point),
        )
    except Crash:
        return None
    return outcome.broker_id


def test_first_start_costs_three_requests_and_a_restart_one(tmp_path: Path) -> None:
    store = MemoryStore()
    files = IdentityFiles(tmp_path)
    first = obtain_persistent_id(
        store, files, cluster_name="c", broker_name="b", address="h:1", crash=crash_at(None)
    )
    # the known ids, the claim, and the check that nobody registered under the id meanwhile
    assert (first.broker_id, first.source, first.zk_requests) == (1, "allocated", 3)
    assert not files.temp_path.exists()
    assert files.read_final() == IdentityRecord("c", "b", 1, store.claims[1].check_code)
    store.requests = 0
    again = obtain_persistent_id(
        store, files, cluster_name="c", broker_name="b", address="h:1", crash=crash_at(None)
    )
    assert (again.broker_id, again.source, again.zk_requests) == (1, "identity-file", 1)
    store.requests = 0
    moved = obtain_persistent_id(
        store, files, cluster_name="c", broker_name="b", address="h:2", crash=crash_at(None)
    )
    # The address is written only once the broker is registered (not before: a copy of a
    # live broker's disk must not rewrite its claim), one more get and a set.
    assert (moved.broker_id, moved.zk_requests) == (1, 1)
    assert store.claims[1].address == "h:1"
    assert moved.claim is not None
    assert record_claim_address(store, moved.claim)
    assert (store.claims[1].address, store.requests) == ("h:2", 3)
    assert not record_claim_address(store, moved.claim)  # up to date: only the get
    assert store.requests == 4


@pytest.mark.parametrize("point", [p for p in CRASH_POINTS if p != "after_generate"])
def test_each_crash_point_then_restart_gives_the_same_id(tmp_path: Path, point: str) -> None:
    store = MemoryStore()
    run(store, tmp_path / "other", "other")  # id 1 is taken
    assert run(store, tmp_path / "b", "b", point) is None
    files = IdentityFiles(tmp_path / "b")
    assert files.temp_path.exists()
    assert files.final_path.exists() == (point == "after_final")
    assert run(store, tmp_path / "b", "b") == 2
    assert sorted(store.claims) == [1, 2]
    assert not files.temp_path.exists()


def test_a_rejected_temp_file_is_dropped_and_the_broker_starts_over(tmp_path: Path) -> None:
    store = MemoryStore()
    assert run(store, tmp_path / "a", "a", "after_temp") is None  # a's temp file says 1
    assert run(store, tmp_path / "b", "b") == 1  # b claims 1 first
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path / "a"),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.rejected, outcome.source) == (2, [1], "allocated")
    assert {i: c.broker_name for i, c in store.claims.items()} == {1: "b", 2: "a"}


@pytest.mark.parametrize("point", ["after_temp", "after_apply"])
def test_a_temp_file_id_registered_by_another_broker_meanwhile_is_given_up(
    tmp_path: Path, point: str
) -> None:
    """The broker crashed with a temp file naming id 1 (claimed or not); before it came back
    a static broker registered as 1. The id is given up: the broker starts over. A claim
    its restart made is deleted again; one its crashed start made is left (the restart
    cannot tell the static broker from a copy of its disk that finished with the claim and
    registered: that claim is live, test_identity_store.py)."""
    store = MemoryStore()
    assert run(store, tmp_path, "a", point) is None
    store.registered.add(1)
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.rejected, outcome.source) == (2, [1], "allocated")
    assert sorted(store.claims) == ([2] if point == "after_temp" else [1, 2])
    assert not IdentityFiles(tmp_path).temp_path.exists()


def test_a_new_claim_met_again_by_its_resent_create_is_deleted_when_the_id_is_registered(
    tmp_path: Path,
) -> None:
    """The claim's create carried out, its answer lost, sent again: NodeExists, and the
    claim holds our code. With a code new in this attempt, that claim is this process's
    own: a static broker registered under the id meanwhile, so it is deleted again."""

    @dataclass
    class LostAnswer(MemoryStore):
        lost: bool = True

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            created = super().create_claim(claim)
            if self.lost:
                self.lost = False
                return False  # as the resent create after a lost answer sees it
            return created

    store = LostAnswer()
    store.after_read.append(lambda: store.registered.add(1))
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.rejected) == (2, [1])
    assert sorted(store.claims) == [2]


@pytest.mark.parametrize("point", ["after_temp", "after_apply"])
def test_a_reapplied_claim_met_by_a_resent_create_is_deleted_only_if_absent_before(
    tmp_path: Path, point: str
) -> None:
    """A restart re-applying its temp file; a static broker registered under the id since
    the crash. The claim's create loses its answer and, sent again, meets the claim holding
    our code (the store answers None). Absent when the restart read it before (a crash at
    after_temp): the lost send made it, so it is deleted as the id is given up. Present
    (after_apply): the crashed start's, perhaps a live copy's, so it is left alone."""

    @dataclass
    class ResentCreate(MemoryStore):
        resend: bool = False

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            created = super().create_claim(claim)
            if self.resend:
                self.resend = False
                return None  # the create sent again after its answer was lost met it
            return created

    store = ResentCreate()
    assert run(store, tmp_path, "a", point) is None
    store.registered.add(1)
    store.resend = True
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.rejected, outcome.source) == (2, [1], "allocated")
    assert sorted(store.claims) == ([2] if point == "after_temp" else [1, 2])


def test_a_claim_made_again_by_a_lost_create_is_deleted_when_the_id_is_registered(
    tmp_path: Path,
) -> None:
    """The claim's create meets another broker's claim (False); that broker deletes it
    (a static broker registered under the id meanwhile) before our read finds it gone;
    our create again is carried out, its answer lost, and the resend meets our own claim
    (None). It was absent at that read, so it is ours, and deleted as the id is given up;
    it was counted TAKEN and left on the static broker's id for good."""

    @dataclass
    class Race(MemoryStore):
        creates: int = 0
        gets: int = 0

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            self.creates += 1
            created = super().create_claim(claim)
            if self.creates == 2:  # the create again: carried out, its answer lost
                assert created is True
                return None
            return created

        def get_claim(self, broker_id: int) -> IdentityClaim | None:
            self.gets += 1
            if self.gets == 1:  # the other broker deletes its claim just before
                self.claims.pop(1, None)
            return super().get_claim(broker_id)

    store = Race()

    def other_broker_claims_then_a_static_one_registers() -> None:
        store.claims[1] = IdentityClaim(1, "c", "a", "h:2", "a's code")
        store.registered.add(1)

    store.after_read.append(other_broker_claims_then_a_static_one_registers)
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path),
        cluster_name="c",
        broker_name="b",
        address="h:1",
        crash=crash_at(None),
    )
    assert (outcome.broker_id, outcome.rejected) == (2, [1])
    assert {i: c.broker_name for i, c in store.claims.items()} == {2: "b"}


def test_a_lost_race_starts_over_with_the_next_id(tmp_path: Path) -> None:
    store = MemoryStore()
    # a reads next id 1; before it applies, b allocates 1.
    store.after_read.append(lambda: run(store, tmp_path / "b", "b"))
    assert run(store, tmp_path / "a", "a") == 2
    assert {i: c.broker_name for i, c in store.claims.items()} == {1: "b", 2: "a"}


def test_a_claim_taken_by_another_code_stops_the_broker(tmp_path: Path) -> None:
    store = MemoryStore()
    assert run(store, tmp_path, "b") == 1
    store.claims[1] = IdentityClaim(1, "c", "b", "h:9", "someone else's")
    with pytest.raises(IdentityError, match="another check code"):
        run(store, tmp_path, "b")


def test_identity_files_are_read_as_iso_8859_1_as_any_properties_file(tmp_path: Path) -> None:
    """The identity files are written with \\uXXXX escapes (ASCII) and read as
    Properties.load reads a file (ISO-8859-1), so no bytes fail to decode: a damaged temp
    file is dropped (it only promised a retry) and the broker allocates; a damaged final
    file stops it with an error naming the file. Before, a UnicodeDecodeError escaped both,
    naming no file."""
    files = IdentityFiles(tmp_path)
    record = IdentityRecord("c", "r\u00f8d", 3, "x\u00e9")
    files.write_final(record)
    assert files.final_path.read_bytes().isascii()
    assert files.read_final() == record
    files.final_path.unlink()
    files.temp_path.write_bytes(b"cluster.name=\xff\x00\x80\n")
    assert run(MemoryStore(), tmp_path, "b") == 1
    assert not files.temp_path.exists()
    files.final_path.write_bytes(b"\xff\xfe\x80\n")
    with pytest.raises(IdentityError, match="is incomplete") as e:
        run(MemoryStore(), tmp_path, "b")
    assert str(files.final_path) in str(e.value)


def test_kafka_generated_id_and_its_crash_leak(tmp_path: Path) -> None:
    store = MemoryStore()
    kw = {"generation_enabled": True, "reserved_max_id": 1000, "store_factory": lambda: store}
    first = obtain_kafka_id(-1, [str(tmp_path)], crash=crash_at(None), **kw)  # type: ignore[arg-type]
    assert (first.broker_id, first.source, first.zk_requests) == (1001, "generated", 1)
    # No meta.properties was written (the broker does that once it knows the cluster id),
    # so a crash before it means the next start generates again: 1001 leaked.
    with pytest.raises(Crash):
        obtain_kafka_id(-1, [str(tmp_path)], crash=crash_at("after_generate"), **kw)  # type: ignore[arg-type]
    checkpoint_meta_properties([str(tmp_path)], 1003, "cid")
    store.requests = 0
    again = obtain_kafka_id(-1, [str(tmp_path)], crash=crash_at(None), **kw)  # type: ignore[arg-type]
    # (the cluster id the file names is read first, as Kafka's start-up checks it)
    assert (again.broker_id, again.source, again.zk_requests) == (1003, "meta.properties", 1)


# A schedule: brokers take turns starting; each start may crash at one of the points.
schedules = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from([None, *CRASH_POINTS[1:]])),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(schedules, st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=5))
def test_any_schedule_of_crashes_and_races_allocates_each_id_once_and_leaks_none(
    schedule: list[tuple[int, str | None]], races: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = MemoryStore()
        for racer, _victim in races:
            store.after_read.append(lambda r=racer: run(store, root / f"b{r}", f"b{r}"))
        for b, point in schedule:
            run(store, root / f"b{b}", f"b{b}", point)
        store.after_read.clear()
        started = {b for b, _ in schedule} | {r for r, _ in races}
        final = {b: run(store, root / f"b{b}", f"b{b}") for b in sorted(started)}
        ids = sorted(i for i in final.values() if i is not None)
        assert len(ids) == len(started)
        assert ids == list(range(1, len(started) + 1))  # distinct, from 1, no gaps
        assert {i: c.broker_name for i, c in store.claims.items()} == {
            i: f"b{b}" for b, i in final.items()
        }
        for b in started:
            assert not IdentityFiles(root / f"b{b}").temp_path.exists()


def test_zkctl_identity_rows_join_claims_and_registrations() -> None:
    from zkctl.identity_commands import identity_rows
    from zkdata.znodes import BrokerRegistration, EndPoint

    claims = {
        1: IdentityClaim(1, "c", "red", "h:1", "x", 5),
        2: IdentityClaim(2, "c", "blue", "h:2", "y", 6),
    }
    regs = {
        1: (BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 9),), None), 77),
        1001: (BrokerRegistration(1001, (EndPoint("PLAINTEXT", "k", 3),), None), 78),
    }
    rows = identity_rows(claims, regs)
    seen = [(r.broker_id, r.mode, r.identity, r.address, r.alive, r.broker_epoch) for r in rows]
    assert seen == [
        (1, "persistent", "c:red:1", "h:9", True, 77),  # the live address wins
        (2, "persistent", "c:blue:2", "h:2", False, None),  # else the last claimed one
        (1001, "kafka", "1001", "k:3", True, 78),
    ]


def test_zkctl_broker_identities_json_names_the_malformed_znodes_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed /brokers/ids/N or /brokers/identities/N is skipped with a warning; --json
    names it in "problems" ({"path", "reason"}, as controller --json and reassign --json):
    it was on stderr alone, so a script saw the id simply missing."""
    import contextlib
    import json

    from tests.unit.test_cli_args import run, tree_with_topic
    from zkctl import identity_commands
    from zkdata import paths

    zk = tree_with_topic("t", {0: [1]}, (1,))
    zk.put(paths.broker(2), b"not json")
    zk.put(paths.broker_identity(3), b"{}")
    zk.put(
        paths.broker_identity(4), encode_identity_claim(IdentityClaim(4, "c", "n", "h:1", "x", 5))
    )
    monkeypatch.setattr(identity_commands, "zk_session", lambda args: contextlib.nullcontext(zk))
    code, out, err = run(["broker", "identities", "--zookeeper", "127.0.0.1:1", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert [r["broker_id"] for r in doc["identities"]] == [1, 4]
    assert [p["path"] for p in doc["problems"]] == [paths.broker_identity(3), paths.broker(2)]
    assert all(p["reason"] for p in doc["problems"])
    assert f"malformed data in znode {paths.broker(2)}: " in err
    assert err.count("(skipped)") == 2
