"""The persistent (RocketMQ 5) identity at the edges of its protocol
(election/broker_identity.py, election/identity_store.py): claims made or met by a copy of
this disk or by other brokers between our requests, identity files that cannot be read or
sit in another log directory, the allocation's retries, and ZooKeeper's answers read by
the store."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from kazoo.exceptions import ConnectionLoss, NoAuthError, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from broker.config import load_broker_config
from election import identity_store
from election.broker_identity import (
    MAX_ALLOCATION_ATTEMPTS,
    IdentityError,
    IdentityFiles,
    IdentityOutcome,
    IdentityRecord,
    new_check_code,
    obtain_persistent_id,
    parse_identity,
)
from election.identity_store import ZkIdentityStore, identity_files
from tests.unit.fake_cluster import add_topic, empty_cluster, register
from tests.unit.fake_zk import FakeZk
from tests.unit.test_broker_identity import MemoryStore, crash_at, run
from zkdata import paths
from zkdata.client import CancelledWhileDisconnected
from zkdata.znodes import IdentityClaim, encode_cluster_id

T = TypeVar("T")


def _obtain(store: MemoryStore, directory: Path, reserved_max: int = 1000) -> IdentityOutcome:
    return obtain_persistent_id(
        store,
        IdentityFiles(directory),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        reserved_max=reserved_max,
        crash=crash_at(None),
    )


# --------------------------------------------------------------------------- ApplyBrokerId


def test_a_claim_a_copy_of_this_disk_made_before_our_create_is_left_alone(
    tmp_path: Path,
) -> None:
    """A restart re-applying its temp file reads no claim, but its create is refused at
    once (NodeExists, not a resend): a copy of this disk applied the same temp file in
    between, and registered under the id. The claim holds our code, yet this start did
    not make it: the id is given up and the copy's claim left alone."""

    @dataclass
    class CopyClaimsFirst(MemoryStore):
        copy_claims: bool = False

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            if self.copy_claims:
                self.copy_claims = False
                self.claims[claim.broker_id] = IdentityClaim(
                    claim.broker_id,
                    claim.cluster_name,
                    claim.broker_name,
                    "copy:1",
                    claim.check_code,
                )
                self.registered.add(claim.broker_id)
            return super().create_claim(claim)

    store = CopyClaimsFirst()
    assert run(store, tmp_path, "a", "after_temp") is None
    assert store.claims == {}
    store.copy_claims = True
    outcome = _obtain(store, tmp_path)
    assert (outcome.broker_id, outcome.rejected, outcome.source) == (2, [1], "allocated")
    assert store.claims[1].address == "copy:1"  # the copy's claim, not deleted


def test_a_resent_create_after_a_claim_deleted_meanwhile_meets_anothers_claim(
    tmp_path: Path,
) -> None:
    """The claim's create meets another broker's claim; that claim is gone when read
    (FREE), so the claim is created again; that create's answer is lost and the resend
    meets a claim holding a third broker's code: the lost send did not make it, the id
    is another's (TAKEN), and the broker starts over with the next id."""

    @dataclass
    class Race(MemoryStore):
        creates: int = 0
        gets: int = 0

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            self.creates += 1
            if self.creates == 2:  # the third broker's claim wins; our resend meets it
                self.claims[1] = IdentityClaim(1, "c", "third", "h:3", "third's code")
                return None
            return super().create_claim(claim)

        def get_claim(self, broker_id: int) -> IdentityClaim | None:
            self.gets += 1
            if self.gets == 1:  # the other broker deletes its claim just before
                self.claims.pop(1, None)
            return super().get_claim(broker_id)

    store = Race()
    store.after_read.append(
        lambda: store.claims.__setitem__(1, IdentityClaim(1, "c", "b", "h:2", "b's code"))
    )
    outcome = _obtain(store, tmp_path)
    assert (outcome.broker_id, outcome.rejected) == (2, [1])
    assert {i: c.broker_name for i, c in store.claims.items()} == {1: "third", 2: "a"}


def test_a_restart_whose_missing_claim_is_taken_meanwhile_stops_the_broker(
    tmp_path: Path,
) -> None:
    """A restart with a final file whose claim is missing claims the id again; another
    broker's claim made in between wins the create: the id is another's, and the broker
    stops rather than run under it."""

    @dataclass
    class Overtaken(MemoryStore):
        overtake: bool = False

        def create_claim(self, claim: IdentityClaim) -> bool | None:
            if self.overtake:
                self.overtake = False
                self.claims[claim.broker_id] = IdentityClaim(
                    claim.broker_id, "c", "b", "h:2", "b's code"
                )
            return super().create_claim(claim)

    store = Overtaken()
    assert run(store, tmp_path, "a") == 1
    del store.claims[1]
    store.overtake = True
    with pytest.raises(IdentityError, match="another check code"):
        _obtain(store, tmp_path)
    assert store.claims[1].broker_name == "b"


def test_a_create_refused_at_once_is_told_from_a_resent_ones() -> None:
    """ZkIdentityStore.create_claim: False when the claim is there at the first send (not
    ours to count as made by a lost send); True when it creates it."""
    zk = empty_cluster()
    store = ZkIdentityStore(zk)  # type: ignore[arg-type]
    claim = IdentityClaim(1, "c", "a", "h:1", "code")
    assert store.create_claim(claim) is True
    assert store.create_claim(claim) is False


# --------------------------------------------------------------------------- GetNextBrokerId


def test_a_generated_id_named_by_a_topics_replicas_is_generated_again(tmp_path: Path) -> None:
    """Past the configured range the id comes from /brokers/seqid; one that a topic's
    assignment names (its broker down) is in use, as a registered one is: generated again."""
    store = MemoryStore(registered={1, 2}, assigned={3})
    outcome = _obtain(store, tmp_path, reserved_max=2)
    assert (outcome.broker_id, outcome.rejected) == (4, [3])


def test_lost_races_are_retried_until_an_id_is_won(tmp_path: Path) -> None:
    """Each id read is claimed by another broker before this one applies it: it starts over
    each time, and wins the first id nobody takes first."""
    store = MemoryStore()
    for other in (1, 2, 3):
        store.after_read.append(
            lambda i=other: store.claims.__setitem__(i, IdentityClaim(i, "c", "x", "h", "x"))
        )
    outcome = _obtain(store, tmp_path)
    assert (outcome.broker_id, outcome.rejected, outcome.attempts) == (4, [1, 2, 3], 4)


def test_an_allocation_that_never_wins_gives_up(tmp_path: Path) -> None:
    """A broker that loses every race stops with an error instead of running forever."""

    @dataclass
    class AlwaysTaken(MemoryStore):
        def create_claim(self, claim: IdentityClaim) -> bool | None:
            self.claims[claim.broker_id] = IdentityClaim(claim.broker_id, "c", "x", "h", "x")
            return False

    with pytest.raises(IdentityError, match=f"in {MAX_ALLOCATION_ATTEMPTS} attempts"):
        _obtain(AlwaysTaken(), tmp_path)


def test_a_topic_deleted_while_the_ids_are_read_does_not_hide_the_others() -> None:
    """A topic znode gone between the children's read and the topics' read is skipped;
    the replicas of the topics after it still count."""

    class DeletesFirstTopic(FakeZk):
        def get_many(
            self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
        ) -> list[tuple[bytes, ZnodeStat] | None]:
            self.nodes.pop(paths.topic("a"), None)
            return super().get_many(path_list, watch=watch, batch=batch)

    base = empty_cluster()
    add_topic(base, "a", {0: (5,)})
    add_topic(base, "b", {0: (7,)})
    zk = DeletesFirstTopic()
    zk.nodes, zk._zxid = base.nodes, base._zxid
    known = ZkIdentityStore(zk).known_ids()  # type: ignore[arg-type]
    assert known.assigned == frozenset({7})


def test_a_cluster_id_deleted_while_it_is_created_is_an_error() -> None:
    """Kafka's createOrGetClusterId: the create meets /cluster/id, which is gone when
    read: "Failed to get cluster id from Zookeeper", not a crash."""

    class Vanishing(FakeZk):
        def create(
            self,
            path: str,
            data: bytes = b"",
            *,
            ephemeral: bool = False,
            sequential: bool = False,
            make_parents: bool = False,
        ) -> tuple[str, ZnodeStat]:
            if path == paths.CLUSTER_ID:
                raise NodeExistsError()
            return super().create(path, data, ephemeral=ephemeral, make_parents=make_parents)

    zk = Vanishing()
    with pytest.raises(IdentityError, match="deleted while it was being created"):
        ZkIdentityStore(zk).cluster_id()  # type: ignore[arg-type]


# --------------------------------------------------------------------------- identity files


def test_a_final_file_that_cannot_be_read_stops_the_broker(tmp_path: Path) -> None:
    """An identity file that cannot be read (an I/O error, not a missing file) stops the
    broker, naming it: it is not taken for a first start that allocates a new id."""
    files = IdentityFiles(tmp_path)
    files.final_path.mkdir(parents=True)
    store = MemoryStore()
    with pytest.raises(IdentityError, match=r"cannot read .*broker-identity"):
        _obtain(store, tmp_path)
    assert store.claims == {}


def test_a_bad_temp_file_beside_a_final_file_is_removed(tmp_path: Path) -> None:
    """A temp file that is not a valid identity is dropped, also when a final file is used."""
    store = MemoryStore()
    assert run(store, tmp_path, "a") == 1
    files = IdentityFiles(tmp_path)
    files.temp_path.write_text("garbage\n")
    outcome = _obtain(store, tmp_path)
    assert (outcome.broker_id, outcome.source) == (1, "identity-file")
    assert not files.temp_path.exists()


def _write(directory: Path, broker_id: int, *, temp: bool = False) -> None:
    files = IdentityFiles(directory)
    record = IdentityRecord("DefaultCluster", "red", broker_id, f"code{broker_id}")
    (files.write_temp if temp else files.write_final)(record)


def test_the_first_log_dir_holding_identity_files_wins(tmp_path: Path) -> None:
    """Identity files in the first log directory are this broker's, whatever another one
    holds (only several holders, none the first, cannot be told apart)."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    _write(dirs[0], 1)
    _write(dirs[1], 2)
    assert identity_files([str(d) for d in dirs]).directory == dirs[0]


def test_a_temp_file_alone_in_another_log_dir_is_found(tmp_path: Path) -> None:
    """A broker that crashed with only its temp file, restarted with log.dirs reordered,
    finds that temp file in the directory now second, and re-applies it."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    dirs[0].mkdir()
    _write(dirs[1], 3, temp=True)
    assert identity_files([str(d) for d in dirs]).directory == dirs[1]


# --------------------------------------------------------------------------- establish_identity


def _persistent_config(data: Path) -> str:
    return (
        f"log.dirs={data}\nzookeeper.connect=127.0.0.1:1\n"
        "broker.identity.mode=persistent\nbroker.name=red\n"
    )


@contextlib.contextmanager
def _sessions(zk: FakeZk, events: list[str]) -> Iterator[ZkIdentityStore]:
    events.append("session")
    yield ZkIdentityStore(zk)  # type: ignore[arg-type]


def _establish(
    monkeypatch: pytest.MonkeyPatch, zk: FakeZk, data: Path, events: list[str] | None = None
) -> IdentityOutcome:
    seen: list[str] = [] if events is None else events
    monkeypatch.setattr(identity_store, "zk_identity_store", lambda *_, **__: _sessions(zk, seen))
    return identity_store.establish_identity(
        load_broker_config(text=_persistent_config(data)),
        "h:1",
        prepare=lambda: seen.append("prepare"),
    )


def test_a_temp_file_beside_meta_properties_is_reapplied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A persistent broker's directory with meta.properties and only its temp file (its
    final file lost) is no Kafka-mode broker's: the temp file's id is re-applied."""
    zk = empty_cluster()
    zk.put(paths.CLUSTER_ID, encode_cluster_id("cid"))
    data = tmp_path / "data"
    _write(data, 1, temp=True)
    (data / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=cid\n")
    outcome = _establish(monkeypatch, zk, data)
    assert (outcome.broker_id, outcome.source) == (1, "temp-file")


def test_an_identity_unlike_meta_properties_broker_id_stops_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """meta.properties' broker.id must be the persistent identity's."""
    zk = empty_cluster()
    data = tmp_path / "data"
    _write(data, 1)
    (data / "meta.properties").write_text("version=0\nbroker.id=2\n")
    with pytest.raises(IdentityError, match=r"disagrees with meta\.properties .*broker\.id 2"):
        _establish(monkeypatch, zk, data)


def test_prepare_runs_before_the_identity_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare`` (the broker creates its chroot there) runs before the session opens."""
    events: list[str] = []
    outcome = _establish(monkeypatch, empty_cluster(), tmp_path / "data", events)
    assert outcome.broker_id == 1
    assert events == ["prepare", "session"]


def test_a_zookeeper_error_while_establishing_is_an_identity_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ZooKeeper failure (here NoAuth) stops the broker with a clear error, not a
    traceback."""
    zk = empty_cluster()
    zk.fail_next = [NoAuthError()]
    with pytest.raises(IdentityError, match="ZooKeeper failed while establishing"):
        _establish(monkeypatch, zk, tmp_path / "data")


class _MakesParents(FakeZk):
    """A ZooKeeper that honours make_parents, as ZkClient.create does (kazoo's makepath)."""

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> tuple[str, ZnodeStat]:
        if make_parents:
            self.ensure_paths([path.rsplit("/", 1)[0]])
        return super().create(path, data, ephemeral=ephemeral)


def test_a_fresh_zookeeper_gets_a_cluster_id_and_a_seqid() -> None:
    """On a ZooKeeper no broker has started in (no /cluster, no /brokers): /cluster/id is
    created with its parents (Kafka's createOrGetClusterId creates it recursively), and
    /brokers/seqid is created and then bumped (generateBrokerSequenceId: versions 1, 2)."""
    zk = _MakesParents()
    store = ZkIdentityStore(zk)  # type: ignore[arg-type]
    created = store.cluster_id()
    assert store.cluster_id() == created
    assert paths.CLUSTER_ID in zk.nodes
    assert [store.generate_seq_id(), store.generate_seq_id()] == [1, 2]
    assert paths.BROKER_SEQID in zk.nodes


def test_a_log_dir_that_cannot_be_looked_into_holds_no_identity_files(tmp_path: Path) -> None:
    """A log directory whose identity files cannot be looked for (here its name is too long
    for the file system) holds none: the one other directory holding them is this
    broker's, not two holders to refuse."""
    holder = tmp_path / "c"
    _write(holder, 3)
    dirs = [tmp_path / "a", tmp_path / ("b" * 300), holder]
    assert identity_files([str(d) for d in dirs]).directory == holder


def test_the_identity_sessions_requests_give_up_once_the_broker_is_asked_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The session's store waits for the connection with the broker's stop event: a SIGTERM
    while ZooKeeper is out of reach stops the start (CancelledWhileDisconnected) instead
    of waiting for ever."""

    class Disconnected:
        def __init__(self, *_: object, **__: object) -> None:
            pass

        def start(self, *, cancelled: threading.Event | None = None) -> None:
            pass

        def close(self) -> None:
            pass

        def until_connected(
            self, fn: Callable[[], object], *, cancelled: threading.Event | None = None
        ) -> object:
            # ConnectionLoss: wait for the connection, or give up once cancelled
            if cancelled is not None and cancelled.is_set():
                raise CancelledWhileDisconnected("ConnectionLoss")
            raise AssertionError("would wait for the connection for ever")

    monkeypatch.setattr(identity_store, "ZkClient", Disconnected)
    stop = threading.Event()
    stop.set()
    with (
        identity_store.zk_identity_store(
            "127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=6000, cancelled=stop
        ) as store,
        pytest.raises(CancelledWhileDisconnected),
    ):
        store.known_ids()


def test_every_replica_of_an_assignment_counts_not_only_the_preferred_one() -> None:
    """GetNextBrokerId counts each replica a topic names: broker 7, down and only ever a
    follower, still holds its replicas."""
    zk = empty_cluster()
    add_topic(zk, "t", {0: (1, 7), 1: (1, 2, 9)})
    known = ZkIdentityStore(zk).known_ids()  # type: ignore[arg-type]
    assert known.assigned == frozenset({1, 2, 7, 9})


def test_check_codes_differ_for_brokers_starting_in_the_same_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RocketMQ's check code is address;currentTimeMillis: two brokers on one address in
    one millisecond (a restart on a reused host:port) would hold the same code and take
    each other's claim for their own. Ours adds random bits."""
    monkeypatch.setattr(time, "time_ns", lambda: 1_700_000_000_000_000_000)
    first, second = new_check_code("h:1"), new_check_code("h:1")
    assert first.startswith("h:1;1700000000000;")
    assert first != second


def test_a_cluster_id_created_by_another_broker_behind_a_lost_answer_is_read() -> None:
    """/cluster/id absent when read; another broker creates it before our create, whose
    answer (NodeExists) is lost; the create sent again meets it too. Either send may have
    been refused: the id is read, not our proposal taken (Kafka's createOrGetClusterId)."""

    class AnotherCreatesFirst(FakeZk):
        def __init__(self) -> None:
            super().__init__()
            self.put("/cluster", b"")
            self.lost = False

        def create(
            self,
            path: str,
            data: bytes = b"",
            *,
            ephemeral: bool = False,
            sequential: bool = False,
            make_parents: bool = False,
        ) -> tuple[str, ZnodeStat]:
            if path == paths.CLUSTER_ID and not self.lost:
                self.lost = True
                self.put(paths.CLUSTER_ID, encode_cluster_id("another"))
                raise ConnectionLoss("the answer was lost")
            return super().create(path, data, ephemeral=ephemeral)

        def until_connected(self, fn: Callable[[], T], *, cancelled: object = None) -> T:
            while True:
                with contextlib.suppress(ConnectionLoss):
                    return fn()

    zk = AnotherCreatesFirst()
    assert ZkIdentityStore(zk).cluster_id() == "another"  # type: ignore[arg-type]
    assert zk.lost


def test_an_identity_file_without_a_check_code_is_incomplete() -> None:
    """Every field of the identity file is needed; one without check.code cannot prove
    its claim, and is named as incomplete."""
    text = "cluster.name=c\nbroker.name=a\nbroker.id=1\n"
    with pytest.raises(IdentityError, match=r"f is incomplete: no check\.code"):
        parse_identity(text, "f")


def test_a_static_broker_0_is_counted_as_a_known_id(tmp_path: Path) -> None:
    """broker.id=0 is a configured id like any other: a registered broker 0 takes no
    persistent id's place but its own; the first persistent id is 1."""
    zk = empty_cluster()
    register(zk, 0)
    store = ZkIdentityStore(zk)  # type: ignore[arg-type]
    assert store.known_ids().registered == frozenset({0})
    outcome = obtain_persistent_id(
        store,
        IdentityFiles(tmp_path),
        cluster_name="c",
        broker_name="a",
        address="h:1",
        crash=crash_at(None),
    )
    assert outcome.broker_id == 1


def test_a_claim_claimed_again_at_a_restart_records_the_address(tmp_path: Path) -> None:
    """A restart whose claim is missing from ZooKeeper creates it again, whole: with the
    broker's address, as the first claim was."""
    store = MemoryStore()
    assert run(store, tmp_path, "a", address="h:1") == 1
    del store.claims[1]
    outcome = _obtain(store, tmp_path)
    assert outcome.source == "identity-file"
    assert (store.claims[1].address, store.claims[1].broker_name) == ("h:1", "a")


def test_establishing_uses_the_first_log_dirs_identity_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With identity files in the first and another log directory, the first's are the
    broker's (establish_identity, as identity_files decides)."""
    zk = empty_cluster()
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first, 1)
    _write(second, 2)
    monkeypatch.setattr(
        identity_store,
        "zk_identity_store",
        lambda *_, **__: _sessions(zk, []),
    )
    text = (
        f"log.dirs={first},{second}\nzookeeper.connect=127.0.0.1:1\n"
        "broker.identity.mode=persistent\nbroker.name=red\n"
    )
    outcome = identity_store.establish_identity(load_broker_config(text=text), "h:1")
    assert (outcome.broker_id, outcome.source) == (1, "identity-file")


class _Client:
    """A ZkClient for zk_identity_store: its start fails with ``fails`` (if set); it
    records that it was closed."""

    fails: Exception | None = None
    closed: list[bool] = []

    def __init__(self, *_: object, **__: object) -> None:
        pass

    def start(self, *, cancelled: threading.Event | None = None) -> None:
        if self.fails is not None:
            raise self.fails

    def close(self) -> None:
        _Client.closed.append(True)


@pytest.mark.parametrize("fails", [None, CancelledWhileDisconnected("ConnectionLoss")])
def test_a_stop_while_the_identity_session_connects_is_no_identity_error(
    monkeypatch: pytest.MonkeyPatch, fails: Exception | None
) -> None:
    """A SIGTERM while the identity session waits for ZooKeeper stops the start as such
    (CancelledWhileDisconnected), not as a failure to connect; a session opened is closed
    once the identity is established."""
    monkeypatch.setattr(_Client, "fails", fails)
    monkeypatch.setattr(_Client, "closed", [])
    monkeypatch.setattr(identity_store, "ZkClient", _Client)
    session = identity_store.zk_identity_store(
        "127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=6000
    )
    if fails is None:
        with session:
            assert _Client.closed == []
        assert _Client.closed == [True]
    else:
        with pytest.raises(CancelledWhileDisconnected), session:
            pass


def test_a_session_that_cannot_connect_is_an_identity_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_Client, "fails", KazooTimeoutError("Connection time-out"))
    monkeypatch.setattr(identity_store, "ZkClient", _Client)
    with (
        pytest.raises(IdentityError, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:1"),
        identity_store.zk_identity_store(
            "127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=6000
        ),
    ):
        pass


def test_a_zookeeper_timeout_while_establishing_is_an_identity_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request timing out (KazooTimeoutError, no KazooException) is reported as the
    identity's failure, not a traceback."""
    zk = empty_cluster()
    zk.fail_next = [KazooTimeoutError("timed out")]
    with pytest.raises(IdentityError, match="ZooKeeper failed while establishing"):
        _establish(monkeypatch, zk, tmp_path / "data")


def test_a_temp_file_that_cannot_be_removed_stops_the_broker(tmp_path: Path) -> None:
    """A temp file that can be neither read nor removed (here a directory in its place)
    stops the broker with the file named, not a traceback."""
    store = MemoryStore()
    assert run(store, tmp_path, "a") == 1
    temp = IdentityFiles(tmp_path).temp_path
    temp.mkdir()
    (temp / "x").write_text("x")
    with pytest.raises(IdentityError, match=r"cannot remove .*broker-identity-temp"):
        _obtain(store, tmp_path)


def test_meta_properties_of_every_log_dir_must_name_the_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the first log directory's meta.properties must hold the identity's
    broker.id: one in another directory naming another broker stops the broker too."""
    zk = empty_cluster()
    first, second = tmp_path / "a", tmp_path / "b"
    _write(first, 1)
    (first / "meta.properties").write_text("version=0\nbroker.id=1\n")
    second.mkdir()
    (second / "meta.properties").write_text("version=0\nbroker.id=2\n")
    monkeypatch.setattr(identity_store, "zk_identity_store", lambda *_, **__: _sessions(zk, []))
    text = (
        f"log.dirs={first},{second}\nzookeeper.connect=127.0.0.1:1\n"
        "broker.identity.mode=persistent\nbroker.name=red\n"
    )
    with pytest.raises(IdentityError, match=r"disagrees with meta\.properties in .*b \(broker"):
        identity_store.establish_identity(load_broker_config(text=text), "h:1")
