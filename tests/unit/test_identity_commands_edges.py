"""`zkctl broker identities` over a tree in memory: what --json and the table say of
persistent claims, Kafka-mode ids, liveness and /brokers/seqid (docs/broker-identity.md)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest

from tests.unit.test_cli_args import TreeZk, run, tree_with_topic
from zkctl import identity_commands
from zkdata import paths
from zkdata.znodes import IdentityClaim, encode_identity_claim

WRITTEN_MS = 1_700_000_000_000


def _tree(monkeypatch: pytest.MonkeyPatch) -> TreeZk:
    """Kafka-mode brokers 1 and 1001, persistent 2 (registered) and 3 (not), and two
    ids generated from /brokers/seqid so far."""
    zk = tree_with_topic("t", {0: [1]}, (1, 2, 1001))
    # A re-written registration: the broker epoch is its czxid, not its mzxid.
    zk.set_data(paths.broker(2), zk.nodes[paths.broker(2)][0])
    zk.put(
        paths.broker_identity(2),
        encode_identity_claim(IdentityClaim(2, "c", "blue", "10.0.0.2:7", "x", WRITTEN_MS)),
    )
    # A claim with no time written (a hand-made znode: the broker writes its clock's).
    claim_3 = json.loads(
        encode_identity_claim(IdentityClaim(3, "c", "red", "10.0.0.3:9092", "y", 1))
    )
    claim_3["timestamp"] = "0"
    zk.put(paths.broker_identity(3), json.dumps(claim_3).encode())
    zk.put(paths.BROKER_SEQID, b"")
    zk.set_data(paths.BROKER_SEQID, b"")
    zk.set_data(paths.BROKER_SEQID, b"")
    monkeypatch.setattr(identity_commands, "zk_session", lambda args: contextlib.nullcontext(zk))
    return zk


def _identities(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, out, err = run(["broker", "identities", "--zookeeper", "127.0.0.1:1", *extra], capsys)
    assert code == 0, err
    return out


def test_json_says_each_ids_mode_identity_addresses_liveness_and_epoch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = _tree(monkeypatch)
    doc = json.loads(_identities(capsys, "--json"))
    assert doc["seqid_version"] == 2
    assert doc["problems"] == []
    rows = {r["broker_id"]: r for r in doc["identities"]}
    assert [r["broker_id"] for r in doc["identities"]] == [1, 2, 3, 1001]
    assert rows[2] == {
        "broker_id": 2,
        "mode": "persistent",
        "identity": "c:blue:2",
        "cluster_name": "c",
        "broker_name": "blue",
        "address": "127.0.0.1:9002",  # the registration's
        "claimed_address": "10.0.0.2:7",  # the claim's, as it was written
        "alive": True,
        "broker_epoch": zk.nodes[paths.broker(2)][1].czxid,
        "claim_written_ms": WRITTEN_MS,
    }
    assert zk.nodes[paths.broker(2)][1].mzxid != rows[2]["broker_epoch"]
    assert rows[3]["address"] == rows[3]["claimed_address"] == "10.0.0.3:9092"
    assert (rows[3]["alive"], rows[3]["broker_epoch"]) == (False, None)
    assert rows[1001]["mode"] == "kafka"
    assert rows[1001]["identity"] == "1001"
    assert rows[1001]["broker_epoch"] == zk.nodes[paths.broker(1001)][1].czxid


def test_the_table(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    zk = _tree(monkeypatch)
    lines = _identities(capsys).splitlines()
    assert lines[0] == (
        "2 persistent identities, 2 Kafka-mode ids; 3 alive."
        " Ids generated from /brokers/seqid so far: 2"
    )
    header, *rows = lines[1:]
    assert header.startswith("  ID  ")  # ids right-aligned: 1001 is the widest
    by_id = {int(r[:4]): r for r in rows}
    assert list(by_id) == [1, 2, 3, 1001]
    written = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(WRITTEN_MS / 1000))
    epoch_2 = str(zk.nodes[paths.broker(2)][1].czxid)
    two = by_id[2]
    assert "c:blue:2" in two
    assert "127.0.0.1:9002" in two
    assert two.endswith(written)
    # The epoch right-aligned under its heading.
    end = header.index("BROKER EPOCH") + len("BROKER EPOCH")
    assert two[:end].endswith(f" {epoch_2}")
    three = by_id[3]
    assert "10.0.0.3:9092" in three
    assert "not registered (last address)" in three
    assert three[:end].endswith(" -")  # no broker epoch
    assert three.endswith(" -")  # no time written (0)
    assert three.index("not registered") == header.index("STATE")
    assert by_id[1][header.index("STATE") :].startswith("alive ")
    assert all(line == line.rstrip() for line in lines)


def test_a_kafka_id_with_no_address_shows_a_dash_and_counts_are_singular(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = TreeZk()
    zk.put(
        paths.broker_identity(7),
        encode_identity_claim(IdentityClaim(7, "c", "n", "", "x", 0)),
    )
    monkeypatch.setattr(identity_commands, "zk_session", lambda args: contextlib.nullcontext(zk))
    lines = _identities(capsys).splitlines()
    assert lines[0] == (
        "1 persistent identity, 0 Kafka-mode ids; 0 alive."
        " Ids generated from /brokers/seqid so far: 0"
    )
    header, row = lines[1:]
    assert row[header.index("ADDRESS") :].startswith("- ")
    zk = tree_with_topic("t", {0: [1]}, (5,))
    monkeypatch.setattr(identity_commands, "zk_session", lambda args: contextlib.nullcontext(zk))
    lines = _identities(capsys).splitlines()
    assert lines[0].startswith("0 persistent identities, 1 Kafka-mode id; 1 alive.")


def test_a_claim_gone_between_the_listing_and_the_read_is_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = _tree(monkeypatch)
    gone = {paths.broker_identity(2), paths.broker(1)}
    real = zk.get_many

    def get_many(ps: list[str]) -> list[tuple[bytes, Any] | None]:
        return [None if p in gone else got for p, got in zip(ps, real(ps), strict=True)]

    monkeypatch.setattr(zk, "get_many", get_many)
    doc = json.loads(_identities(capsys, "--json"))
    rows = {r["broker_id"]: r for r in doc["identities"]}
    # 2 is a Kafka-mode id for this look (its registration without a claim); 1 is gone.
    assert sorted(rows) == [2, 3, 1001]
    assert rows[2]["mode"] == "kafka"
    assert rows[3]["mode"] == "persistent"
    assert doc["problems"] == []


def test_rows_are_by_id_whatever_the_order_read() -> None:
    from zkctl.identity_commands import identity_rows
    from zkdata.znodes import BrokerRegistration, EndPoint

    claims = {i: IdentityClaim(i, "c", f"n{i}", "h:1", "x", 5) for i in (1024, 8, 1)}
    regs = {
        i: (BrokerRegistration(i, (EndPoint("PLAINTEXT", "h", 9),), None), 7) for i in (2000, 3)
    }
    assert [r.broker_id for r in identity_rows(claims, regs)] == [1, 3, 8, 1024, 2000]
