"""Broker identity with real brokers and a real ZooKeeper: Kafka's generated ids kept in
meta.properties, and persistent ids allocated through ZooKeeper (docs/broker-identity.md),
with every crash point of the protocol, and a broker moving to another port."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.config import format_properties
from cluster import ports
from cluster.supervised import PROJECT_ROOT, SupervisedBroker, wait_for
from election.broker_identity import (
    CRASH_ENV,
    CRASH_EXIT_CODE,
    IDENTITY_FILE,
    IDENTITY_TEMP_FILE,
    META_PROPERTIES,
)
from tests.integration.conftest import FAST
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    TopicAssignment,
    decode_broker,
    decode_identity_claim,
    decode_partition_state,
    encode_topic,
    new_topic_id,
)

pytestmark = pytest.mark.integration


@dataclass
class IdentityBroker(SupervisedBroker):
    """A supervised broker without broker.id (unless given) and with a chosen port."""

    listen_port: int = 0

    def write_properties(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.listen_port}",
            "zookeeper.connect": self.zk_connect,
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        self.props.write_text(format_properties(props))

    def identity(self, timeout: float = 60) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            if self.proc is not None and not self.alive():
                raise AssertionError(f"broker {self.root.name} exited:\n{self.output()[-2000:]}")
            st = self.status()
            return st["identity"] if st and "identity" in st else None

        return wait_for(check, timeout, f"{self.root.name}'s identity")

    def allocated_id(self) -> int:
        return int(self.identity()["broker_id"])


class Brokers:
    def __init__(self, zk_connect: str, root: Path) -> None:
        self.zk_connect = zk_connect
        self.root = root
        self.made: list[IdentityBroker] = []
        self.zk = ZkClient(zk_connect, session_timeout_ms=10_000)
        self.zk.start()

    def make(self, name: str, *, port: int = 0, **overrides: str) -> IdentityBroker:
        settings = {**FAST, **{k.replace("_", "."): v for k, v in overrides.items()}}
        b = IdentityBroker(0, self.root / name, self.zk_connect, settings, listen_port=port)
        self.made.append(b)
        return b

    def persistent(self, name: str, *, port: int = 0, **overrides: str) -> IdentityBroker:
        return self.make(
            name, port=port, broker_identity_mode="persistent", broker_name=name, **overrides
        )

    def close(self) -> None:
        for b in self.made:
            b.kill()
        self.zk.close()

    # ZooKeeper views
    def registered(self) -> dict[int, tuple[str, int]]:
        result = {}
        for child in self.zk.get_children(paths.BROKER_IDS) or []:
            got = self.zk.get(paths.broker(int(child)))
            if got is not None:
                reg = decode_broker(int(child), got[0])
                result[int(child)] = (reg.host, reg.port)
        return result

    def claims(self) -> dict[int, Any]:
        children = self.zk.get_children(paths.BROKER_IDENTITIES) or []
        result = {}
        for child in children:
            got = self.zk.get(paths.broker_identity(int(child)))
            assert got is not None
            result[int(child)] = decode_identity_claim(int(child), got[0])
        return result

    def wait_registered(self, ids: set[int], timeout: float = 60) -> None:
        wait_for(lambda: ids <= set(self.registered()), timeout, f"brokers {sorted(ids)}")


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(zk_connect, tmp_path)
    yield b
    b.close()


def free_port() -> int:
    """A port for a broker to listen on a moment later (or at its restart), from below the
    kernel's ephemeral range: one the kernel picked (bind to port 0) may be handed out
    again in between, as the local end of any connection the cluster or its clients
    make, and the broker's bind then fails (cluster/ports.py)."""
    [port] = ports.free_ports(1, "127.0.0.1")
    return port


def produce_some(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import KafkaError, Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60_000})
    failed: list[str] = []

    def note_failure(e: KafkaError | None, _m: object) -> None:
        if e:
            failed.append(str(e))

    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=note_failure)
    assert p.flush(90) == 0
    assert not failed


def start_crashing_at(b: IdentityBroker, point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setenv(CRASH_ENV, point)
        b.start()
    assert b.wait_exit(60) == CRASH_EXIT_CODE, b.output()[-2000:]
    assert f"crash point {point} reached" in b.output()


# --- Kafka's mode -------------------------------------------------------------------------


def test_kafka_generated_ids_are_kept_in_meta_properties(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs = [brokers.make(f"k{i}") for i in range(3)]
    for b in bs:
        b.start()
    ids = [b.allocated_id() for b in bs]
    assert sorted(ids) == [1001, 1002, 1003]
    assert {b.identity()["source"] for b in bs} == {"generated"}
    brokers.wait_registered(set(ids))
    for b, i in zip(bs, ids, strict=True):
        text = (b.data_dir / META_PROPERTIES).read_text()
        assert f"broker.id={i}\n" in text
        assert "cluster.id=" in text
    # Restart: the id comes from meta.properties, once the cluster id it names is read
    # (one session, one request: Kafka checks the cluster id before the id).
    bs[0].stop()
    bs[0].start()
    assert bs[0].allocated_id() == ids[0]
    assert bs[0].identity()["source"] == "meta.properties"
    assert (bs[0].identity()["zk_sessions"], bs[0].identity()["zk_requests"]) == (1, 1)
    # A configured broker.id that disagrees with meta.properties stops the broker.
    bs[1].stop()
    bs[1].overrides["broker.id"] = "7"
    bs[1].start()
    assert bs[1].wait_exit(60) == 1
    assert f"configured broker.id 7 does not match broker.id {ids[1]}" in bs[1].output()
    # Kafka's crash window: an id generated but not yet in meta.properties is lost for good.
    fresh = brokers.make("k-crash")
    start_crashing_at(fresh, "after_generate", monkeypatch)
    fresh.start()
    assert fresh.allocated_id() == 1005  # 1004 leaked
    stat = brokers.zk.exists(paths.BROKER_SEQID)
    assert stat is not None
    assert stat.version == 5


# --- the persistent mode ------------------------------------------------------------------


@pytest.mark.slow
def test_ten_brokers_at_once_get_ids_1_to_10_and_keep_them(brokers: Brokers) -> None:
    bs = [brokers.persistent(f"p{i}") for i in range(10)]
    for b in bs:
        b.start()
    ids = {b.root.name: b.allocated_id() for b in bs}
    assert sorted(ids.values()) == list(range(1, 11))
    brokers.wait_registered(set(ids.values()), timeout=120)
    claims = brokers.claims()
    assert {i: c.broker_name for i, c in claims.items()} == {i: n for n, i in ids.items()}
    for b in bs:
        assert not (b.data_dir / IDENTITY_TEMP_FILE).exists()
        assert f"broker.id={ids[b.root.name]}\n" in (b.data_dir / IDENTITY_FILE).read_text()
    lost_races = sum(len(b.identity()["rejected"]) for b in bs)
    for b in bs:
        b.kill()
    for b in bs:
        b.start()
    again = {b.root.name: b.allocated_id() for b in bs}
    assert again == ids
    assert {b.identity()["source"] for b in bs} == {"identity-file"}
    assert sorted(brokers.claims()) == list(range(1, 11))
    print(json.dumps({"ten_at_once_lost_races": lost_races}))


@pytest.mark.parametrize("point", ["after_temp", "after_apply", "after_final"])
def test_each_crash_point_then_a_restart_gives_the_same_id(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    first = brokers.persistent("first")
    first.start()
    assert first.allocated_id() == 1
    b = brokers.persistent("b")
    start_crashing_at(b, point, monkeypatch)
    assert (b.data_dir / IDENTITY_TEMP_FILE).exists()
    assert (b.data_dir / IDENTITY_FILE).exists() == (point == "after_final")
    assert sorted(brokers.claims()) == ([1] if point == "after_temp" else [1, 2])
    b.start()
    assert b.allocated_id() == 2
    expected = {"after_temp": "temp-file", "after_apply": "temp-file"}
    assert b.identity()["source"] == expected.get(point, "identity-file")
    assert not (b.data_dir / IDENTITY_TEMP_FILE).exists()
    claims = brokers.claims()
    assert {i: c.broker_name for i, c in claims.items()} == {1: "first", 2: "b"}
    brokers.wait_registered({1, 2})


def test_a_rejected_apply_drops_the_temp_file_and_starts_over(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = brokers.persistent("a")
    start_crashing_at(a, "after_temp", monkeypatch)  # a's temp file claims id 1
    b = brokers.persistent("b")
    b.start()
    assert b.allocated_id() == 1  # b applied id 1 first
    a.start()
    assert a.allocated_id() == 2
    assert a.identity()["rejected"] == [1]
    claims = brokers.claims()
    assert {i: c.broker_name for i, c in claims.items()} == {1: "b", 2: "a"}


def test_an_identity_file_of_another_cluster_stops_the_broker(brokers: Brokers) -> None:
    b = brokers.persistent("b")
    b.start()
    assert b.allocated_id() == 1
    b.stop()
    path = b.data_dir / IDENTITY_FILE
    path.write_text(path.read_text().replace("cluster.name=DefaultCluster", "cluster.name=other"))
    b.start()
    assert b.wait_exit(60) == 1
    out = b.output()
    assert "belongs to another broker" in out
    assert "cluster name 'other' (configured: 'DefaultCluster')" in out
    assert sorted(brokers.claims()) == [1]


def test_a_copy_of_a_live_brokers_disk_is_refused_and_leaves_its_claim_alone(
    brokers: Brokers,
) -> None:
    """The copy's identity file holds the original's check code, so the restart check
    passes; its registration refuses it (BrokerIdInUse, once the wait for an earlier
    session's registration is over), and the claim still records the original's address
    (before, the copy rewrote it before ever registering)."""
    original = brokers.persistent("red")
    original.start()
    assert original.allocated_id() == 1
    brokers.wait_registered({1})
    port = brokers.registered()[1][1]
    address = f"127.0.0.1:{port}"
    wait_for(lambda: brokers.claims()[1].address == address, 30, "the original's address")
    copy = brokers.make("copy", broker_identity_mode="persistent", broker_name="red")
    shutil.copytree(original.data_dir, copy.data_dir)
    (copy.data_dir / "broker-status.json").unlink(missing_ok=True)
    copy.start()
    assert copy.wait_exit(60) == 1, copy.output()[-2000:]
    assert "by another ZooKeeper session" in copy.output()
    assert original.alive()
    assert brokers.registered()[1][1] == port
    assert brokers.claims()[1].address == address


@pytest.mark.slow
def test_a_broker_restarted_on_a_new_port_keeps_its_id_partitions_and_isr(
    brokers: Brokers,
) -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    bs = [brokers.persistent(f"p{i}", port=free_port()) for i in range(3)]
    for b in bs:
        b.start()
    ids = [b.allocated_id() for b in bs]
    brokers.wait_registered(set(ids))
    assignment = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}
    brokers.zk.create(
        paths.topic("moves"), encode_topic(TopicAssignment("moves", assignment, new_topic_id()))
    )

    def states() -> dict[int, Any]:
        result = {}
        for p in assignment:
            got = brokers.zk.get(paths.partition_state("moves", p))
            if got is None:
                return {}
            result[p] = decode_partition_state("", got[0], got[1].version).leader_and_isr
        return result

    wait_for(
        lambda: (s := states()) and all(sorted(v.isr) == [1, 2, 3] for v in s.values()),
        60,
        "full ISRs",
    )
    mover = next(b for b in bs if b.allocated_id() == 2)
    others = [b for b in bs if b is not mover]
    bootstrap = ",".join(f"127.0.0.1:{b.listen_port}" for b in others)
    produce_some(bootstrap, "moves", 300)
    old_port = mover.listen_port
    mover.stop()
    # Written while it is away: it must fetch them before it is back in the ISRs.
    produce_some(bootstrap, "moves", 300)
    wait_for(
        lambda: (s := states()) and all(2 not in v.isr for v in s.values()), 60, "2 out of ISRs"
    )
    mover.listen_port = new_port = free_port()
    mover.start()
    assert mover.allocated_id() == 2
    assert mover.identity()["source"] == "identity-file"
    wait_for(lambda: brokers.registered().get(2) == ("127.0.0.1", new_port), 60, "new address")
    # Written once registered, after the registration (not before: see the copied disk).
    wait_for(lambda: brokers.claims()[2].address == f"127.0.0.1:{new_port}", 30, "claim's address")
    wait_for(
        lambda: (s := states()) and all(sorted(v.isr) == [1, 2, 3] for v in s.values()),
        90,
        "broker 2 back in every ISR",
    )
    admin = admin_mod.AdminClient({"bootstrap.servers": f"127.0.0.1:{others[0].listen_port}"})

    def broker_2_at_new_port() -> Any:
        md = admin.list_topics(timeout=10)
        b2 = md.brokers.get(2)
        return md if b2 is not None and b2.port == new_port and "moves" in md.topics else None

    md = wait_for(broker_2_at_new_port, 60, "Metadata with broker 2 at its new port")
    assert old_port != new_port
    assert {p: list(pm.replicas) for p, pm in md.topics["moves"].partitions.items()} == {
        p: list(r) for p, r in assignment.items()
    }
    # A client that only knows the new address finds the whole cluster through it.
    direct = admin_mod.AdminClient({"bootstrap.servers": f"127.0.0.1:{new_port}"})
    md2 = wait_for(
        lambda: (m := direct.list_topics(timeout=10)) and len(m.brokers) == 3 and m,
        60,
        "metadata from the moved broker",
    )
    assert md2.brokers[2].port == new_port


def test_zkctl_broker_identities_lists_ids_names_addresses_and_liveness(
    brokers: Brokers,
) -> None:
    bs = [brokers.persistent(f"p{i}") for i in range(2)]
    for b in bs:
        b.start()
    ids = {b.root.name: b.allocated_id() for b in bs}
    brokers.wait_registered(set(ids.values()))
    bs[1].stop()
    wait_for(lambda: ids["p1"] not in brokers.registered(), 30, "p1 gone")

    def zkctl(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "zkctl", "broker", "identities", "--zookeeper",
             brokers.zk_connect, *args],
            capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout

    listing = json.loads(zkctl("--json"))
    rows = {r["broker_id"]: r for r in listing["identities"]}
    assert rows[ids["p0"]]["identity"] == f"DefaultCluster:p0:{ids['p0']}"
    assert rows[ids["p0"]]["alive"] is True
    assert rows[ids["p1"]]["alive"] is False
    stopped = bs[1].status()
    assert stopped is not None
    assert rows[ids["p1"]]["address"] == f"127.0.0.1:{stopped['port']}"
    text = zkctl()
    assert f"DefaultCluster:p0:{ids['p0']}" in text
    assert "alive" in text
    assert "not registered" in text
