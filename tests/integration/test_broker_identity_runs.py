"""The runs behind docs/broker-identity.md: the same scenarios in both identity modes
(Kafka's generated ids, Kafka's static ids, persistent ids), measured and checked.

    ZKCTL_IDENTITY_REPORT=report.json .venv/bin/pytest -s -m slow \\
        tests/integration/test_broker_identity_runs.py

prints one JSON object per mode (and writes them all to the report file when asked).
Sessions are 3 s (tests/integration/conftest.py FAST) so that failures show quickly.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from cluster.supervised import wait_for
from election.broker_identity import CRASH_ENV, CRASH_EXIT_CODE
from tests.integration.test_broker_identity import (
    Brokers,
    IdentityBroker,
    free_port,
    produce_some,
)
from zkdata import paths
from zkdata.znodes import (
    TopicAssignment,
    decode_controller,
    decode_partition_state,
    decode_topic,
    encode_topic,
    new_topic_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_REPORT: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _write_report() -> Iterator[None]:
    yield
    target = os.environ.get("ZKCTL_IDENTITY_REPORT")
    if target and _REPORT:
        Path(target).write_text(json.dumps(_REPORT, indent=2) + "\n")


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(zk_connect, tmp_path)
    yield b
    b.close()


def make(brokers: Brokers, mode: str, name: str, slot: int) -> IdentityBroker:
    port = free_port()
    if mode == "persistent":
        return brokers.persistent(name, port=port)
    if mode == "static":
        return brokers.make(name, port=port, broker_id=str(slot))
    return brokers.make(name, port=port)  # kafka: generated


def registered_at(brokers: Brokers, broker_id: int, port: int) -> bool:
    return brokers.registered().get(broker_id) == ("127.0.0.1", port)


def partition_states(brokers: Brokers, topic: str, n: int) -> dict[int, Any]:
    result = {}
    for p in range(n):
        got = brokers.zk.get(paths.partition_state(topic, p))
        if got is None:
            return {}
        result[p] = decode_partition_state("", got[0], got[1].version).leader_and_isr
    return result


def broker_changes(bs: list[IdentityBroker], since: float) -> list[dict[str, Any]]:
    rows = [r for b in bs for r in b.state_changes("broker_change") if r["ts"] >= since * 1000]
    return [
        {k: r[k] for k in ("new", "dead", "bounced")}
        for r in sorted(rows, key=lambda r: r["ts"])
        if r["new"] or r["dead"] or r["bounced"]
    ]


def dead_detected(bs: list[IdentityBroker], broker_id: int, since: float) -> float | None:
    """Seconds from `since` until a controller logged `broker_id` dead (or bounced)."""
    rows = [
        r
        for x in bs
        for r in x.state_changes("broker_change")
        if r["ts"] >= since * 1000 and (broker_id in r["dead"] or broker_id in r["bounced"])
    ]
    return round(min(r["ts"] for r in rows) / 1000 - since, 2) if rows else None


def identity_summary(b: IdentityBroker) -> dict[str, Any]:
    ident = b.identity()
    keys = ("broker_id", "source", "zk_requests", "zk_sessions", "ms", "total_ms", "rejected")
    return {k: ident[k] for k in keys}


@pytest.mark.parametrize("mode", ["kafka", "static", "persistent"])
def test_identity_runs(brokers: Brokers, mode: str) -> None:
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    run: dict[str, Any] = {"mode": mode, "session_timeout_ms": 3000}
    bs = [make(brokers, mode, f"{mode}-{i}", i) for i in (1, 2, 3)]

    # 1. First start, three brokers at once.
    t0 = time.monotonic()
    for b in bs:
        b.start()
    ids = [b.allocated_id() for b in bs]
    brokers.wait_registered(set(ids))
    run["first_start"] = {
        "ids": ids,
        "identity": [identity_summary(b) for b in bs],
        "all_registered_s": round(time.monotonic() - t0, 2),
    }
    expected = {"kafka": [1001, 1002, 1003], "static": [1, 2, 3], "persistent": [1, 2, 3]}
    assert sorted(ids) == expected[mode]
    assignment = {0: tuple(ids), 1: tuple(ids[1:] + ids[:1]), 2: tuple(ids[2:] + ids[:2])}
    brokers.zk.create(
        paths.topic("t"), encode_topic(TopicAssignment("t", assignment, new_topic_id()))
    )
    wait_for(
        lambda: (s := partition_states(brokers, "t", 3))
        and all(len(v.isr) == 3 for v in s.values()),
        60,
        "full ISRs",
    )  # fmt: skip
    # The controller stays up: the victims' failures are then seen as broker changes.
    got = brokers.zk.get(paths.CONTROLLER)
    assert got is not None
    controller = decode_controller(got[0])
    a = next(x for x in bs if x.allocated_id() == controller)
    b, c = (x for x in bs if x is not a)
    ids = [a.allocated_id(), b.allocated_id(), c.allocated_id()]
    bootstrap = f"127.0.0.1:{a.listen_port}"
    produce_some(bootstrap, "t", 300)

    # 2. A graceful restart at the same address.
    b.stop()
    b.start()
    assert b.allocated_id() == ids[1]
    run["restart_same_address"] = identity_summary(b)
    brokers.wait_registered({ids[1]})

    # 3. A container restart: SIGKILL, then a new port (same disk).
    before = brokers.zk.exists(paths.broker(ids[1]))
    assert before is not None
    since = time.time()
    t0 = time.monotonic()
    b.kill()
    produce_some(bootstrap, "t", 300)  # while it is away: it must catch up
    b.listen_port = new_port = free_port()
    b.start()
    kept = b.allocated_id()
    wait_for(lambda: registered_at(brokers, kept, new_port), 60, "registration at the new port")
    registered_s = time.monotonic() - t0
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})

    def seen_by_clients() -> bool:
        try:
            md = admin.list_topics(timeout=5)
        except admin_mod.KafkaException:  # a broker of its old metadata, gone: ask again
            return False
        return md.brokers.get(kept) is not None and md.brokers[kept].port == new_port

    wait_for(seen_by_clients, 60, "Metadata with the new port")
    clients_s = time.monotonic() - t0
    wait_for(
        lambda: (s := partition_states(brokers, "t", 3)) and all(kept in v.isr for v in s.values()),
        90,
        "back in every ISR",
    )  # fmt: skip
    isr_s = time.monotonic() - t0
    after = brokers.zk.exists(paths.broker(kept))
    assert after is not None
    run["restart_new_address_after_sigkill"] = {
        "kept_id": kept == ids[1],
        "identity": identity_summary(b),
        "dead_detected_s": dead_detected(bs, kept, since),
        "registered_at_new_address_s": round(registered_s, 2),
        "clients_see_new_address_s": round(clients_s, 2),
        "back_in_every_isr_s": round(isr_s, 2),
        "broker_epoch_before_after": [int(before.czxid), int(after.czxid)],
        "controller_saw": broker_changes(bs, since),
    }
    assert kept == ids[1]

    # 4. A container restart that also lost its disk: SIGKILL, new port, empty log dir.
    since = time.time()
    t0 = time.monotonic()
    old_id = ids[2]
    c.kill()
    shutil.rmtree(c.data_dir)
    c.listen_port = new_port = free_port()
    c.start()
    new_id = c.allocated_id()
    wait_for(lambda: registered_at(brokers, new_id, new_port), 60, "registration")
    registered_s = time.monotonic() - t0
    if new_id == old_id:
        settled = cast(dict[int, Any], wait_for(
            lambda: (s := partition_states(brokers, "t", 3))
            and all(len(v.isr) == 3 for v in s.values()) and s,
            90,
            "the empty replica back in every ISR",
        ))  # fmt: skip
    else:
        wait_for(lambda: old_id not in brokers.registered(), 60, "the old id gone")
        settled = cast(dict[int, Any], wait_for(
            lambda: (s := partition_states(brokers, "t", 3))
            and all(old_id not in v.isr for v in s.values()) and s,
            60,
            "the old id out of every ISR",
        ))  # fmt: skip
        time.sleep(3)  # nothing more happens: nobody reassigns the old id's replicas
        settled = partition_states(brokers, "t", 3)
    topic = brokers.zk.get(paths.topic("t"))
    assert topic is not None
    still_named = sum(1 for r in decode_topic("t", topic[0]).partitions.values() if old_id in r)
    run["restart_new_address_lost_disk"] = {
        "old_id": old_id,
        "new_id": new_id,
        "kept_id": new_id == old_id,
        "identity": identity_summary(c),
        "dead_detected_s": dead_detected(bs, old_id, since),
        "registered_s": round(registered_s, 2),
        "settled_s": round(time.monotonic() - t0, 2),
        "under_replicated_partitions": sum(1 for v in settled.values() if len(v.isr) < 3),
        "partitions_still_assigned_to_the_old_id": still_named,
        "new_id_holds_replicas": any(new_id in v.isr for v in settled.values()),
        "controller_saw": broker_changes(bs, since),
    }
    if mode == "static":
        assert new_id == old_id
    else:
        assert new_id != old_id
        assert run["restart_new_address_lost_disk"]["under_replicated_partitions"] == 3

    # 5. A crash in the middle of the first start, then a restart.
    d = make(brokers, mode, f"{mode}-crash", 4)
    point = {"kafka": "after_generate", "persistent": "after_apply"}.get(mode)
    if point is not None:
        os.environ[CRASH_ENV] = point
        try:
            d.start()
        finally:
            del os.environ[CRASH_ENV]
        assert d.wait_exit(60) == CRASH_EXIT_CODE
        d.start()
        crash_id = d.allocated_id()
        seq = brokers.zk.exists(paths.BROKER_SEQID)
        generated = int(seq.version) if seq is not None else 0
        claims = sorted(brokers.claims())
        run["crash_then_restart"] = {
            "crash_point": point,
            "id_after_restart": crash_id,
            "identity": identity_summary(d),
            "kafka_ids_generated": generated,
            "persistent_ids_claimed": claims,
        }
        if mode == "kafka":
            assert crash_id == 1006  # 1005 was generated, then lost with the crash
        else:
            assert crash_id == 5
            assert claims == [1, 2, 3, 4, 5]  # 3 is the lost disk's id: leaked
    _REPORT[mode] = run
    print(json.dumps(run))
