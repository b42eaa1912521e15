"""`zkctl groups --bootstrap-server` against real brokers, run as a user runs it: two
confluent-kafka consumers share a 4-partition topic in a group and commit; while they are
still members, --list shows the group Stable (so does --list --state Stable, not --state
Empty,Dead), and --describe shows each partition's committed offset, log end offset and
lag beside the member (of the two) assigned it; --members shows the two members and their
partitions. Once they leave, the group is Empty (--list --state Empty shows it) with its
offsets kept; a group never seen does not exist (exit 1)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap, group_consumer, poll_until, produce
from tests.integration.harness import Cluster, wait_for
from tests.integration.harness import run_zkctl as zkctl
from tests.integration.test_consumer_groups import coordinates
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode

pytestmark = pytest.mark.integration

GROUP_SETTINGS = {
    "group_initial_rebalance_delay_ms": "0",
    "offsets_topic_num_partitions": "5",
}
TOPIC = "orders"
GROUP = "billing"
PARTITIONS = 4
# Messages per partition (all consumed and committed), and those produced after the commit.
CONSUMED = {p: 5 * (p + 1) for p in range(PARTITIONS)}
LATE = {0: 3, 2: 1}


def groups(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return zkctl("groups", "--bootstrap-server", bootstrap(c), "--timeout", "10", *args)


def table_rows(text: str, header: str) -> list[dict[str, str]]:
    """The rows of the table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = lines[start].split()
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        assert len(cells) == len(names), line
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def test_zkctl_groups_lists_and_describes_a_group_of_two_consumers(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    c.create_topic(TOPIC, {p: (1, 2, 3) for p in range(PARTITIONS)})
    c.wait_topic_online(TOPIC)
    for p, n in CONSUMED.items():
        acked = produce(c, TOPIC, [b"m-%d-%d" % (p, i) for i in range(n)], partition=p)
        assert acked.errors == []

    members: dict[str, str] = {}  # member id -> client id
    owner: dict[int, str] = {}  # partition -> member id
    first = group_consumer(c, GROUP, client_id="first")
    second = group_consumer(c, GROUP, client_id="second")
    try:
        first.subscribe([TOPIC])
        second.subscribe([TOPIC])
        seen: dict[tuple[int, int], bytes] = {}
        poll_until(
            [first, second],
            seen,
            lambda: (
                len(seen) == sum(CONSUMED.values())
                and all(len(m.assignment()) == 2 for m in (first, second))
            ),
            120,
            "two members, two partitions each",
        )
        for member, client_id in ((first, "first"), (second, "second")):
            member.commit(asynchronous=False)
            member_id = member.memberid()
            assert member_id
            members[member_id] = client_id
            owner.update({tp.partition: member_id for tp in member.assignment()})
        assert sorted(owner) == list(range(PARTITIONS))
        for p, n in LATE.items():
            assert produce(c, TOPIC, [b"late-%d" % i for i in range(n)], partition=p).errors == []

        # --- while both are members -------------------------------------------------------
        listed = groups(c, "--list")
        assert (listed.returncode, listed.stdout) == (0, f"{GROUP}\n"), listed.stderr
        with_states = groups(c, "--list", "--state")
        assert with_states.returncode == 0, with_states.stderr
        assert table_rows(with_states.stdout, "GROUP") == [{"GROUP": GROUP, "STATE": "Stable"}]
        # --state STATES: the brokers' ListGroups keeps the groups in those states.
        for states, expected in (("Stable", [GROUP]), ("Empty,Dead", [])):
            filtered = groups(c, "--list", "--state", states)
            assert filtered.returncode == 0, filtered.stderr
            assert [r["GROUP"] for r in table_rows(filtered.stdout, "GROUP")] == expected
        listed_json = groups(c, "--list", "--json")
        assert listed_json.returncode == 0, listed_json.stderr
        (entry,) = json.loads(listed_json.stdout)["groups"]
        assert (entry["group"], entry["state"], entry["protocol_type"]) == (
            GROUP,
            "Stable",
            "consumer",
        )

        described = groups(c, "--describe", "--group", GROUP)
        assert described.returncode == 0, described.stderr
        assert described.stderr == ""
        print(described.stdout)  # the table, in the test's output (-s)
        # The offsets alone, as Kafka 2.8's describeGroups; the state with --state.
        assert "COORDINATOR" not in described.stdout
        with_state = groups(c, "--describe", "--group", GROUP, "--state")
        assert (with_state.returncode, with_state.stderr) == (0, "")
        (state,) = table_rows(with_state.stdout, "GROUP           COORDINATOR")
        assert state["STATE"] == "Stable"
        assert state["#MEMBERS"] == "2"
        assert state["ASSIGNMENT-STRATEGY"] == "range"
        rows = table_rows(described.stdout, "GROUP           TOPIC")
        assert [(r["GROUP"], r["TOPIC"], r["PARTITION"]) for r in rows] == [
            (GROUP, TOPIC, str(p)) for p in range(PARTITIONS)
        ]
        for p, row in enumerate(rows):
            end = CONSUMED[p] + LATE.get(p, 0)
            assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == (
                str(CONSUMED[p]),
                str(end),
                str(LATE.get(p, 0)),
            ), row
            assert row["CONSUMER-ID"] == owner[p]
            assert row["CLIENT-ID"] == members[owner[p]]
            # Java's InetAddress.toString(), as kafka-consumer-groups.sh shows it.
            assert row["HOST"] == "/127.0.0.1"

        as_json = groups(c, "--describe", "--group", GROUP, "--json")
        assert as_json.returncode == 0, as_json.stderr
        (doc,) = json.loads(as_json.stdout)["groups"]
        coordinator = wait_for(lambda: _coordinator(c), 30, "the group's coordinator")
        assert doc["coordinator"]["id"] == coordinator
        assert (doc["group"], doc["state"], doc["warnings"]) == (GROUP, "Stable", [])
        assert {m["consumer_id"]: m["client_id"] for m in doc["members"]} == members
        assert [
            (o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["consumer_id"])
            for o in doc["offsets"]
        ] == [
            (p, CONSUMED[p], CONSUMED[p] + LATE.get(p, 0), LATE.get(p, 0), owner[p])
            for p in range(PARTITIONS)
        ]

        by_member = groups(c, "--describe", "--group", GROUP, "--members")
        assert by_member.returncode == 0, by_member.stderr
        member_rows = table_rows(by_member.stdout, "GROUP")
        assert {r["CONSUMER-ID"]: r["CLIENT-ID"] for r in member_rows} == members
        for r in member_rows:
            mine = sorted(p for p, m in owner.items() if m == r["CONSUMER-ID"])
            assert r["#PARTITIONS"] == "2"
            assert r["ASSIGNMENT"] == f"{TOPIC}({','.join(map(str, mine))})"
    finally:
        first.close()
        second.close()

    # --- once they have left: Empty, its offsets kept, no member assigned -----------------
    def empty() -> dict[str, Any] | None:
        got = groups(c, "--describe", "--group", GROUP, "--json")
        assert got.returncode == 0, got.stderr
        (doc,) = json.loads(got.stdout)["groups"]
        return doc if doc["state"] == "Empty" else None

    doc = wait_for(empty, 60, "the group Empty once its members left", interval=0.5)
    assert doc["members"] == []
    assert [(o["partition"], o["current_offset"], o["consumer_id"]) for o in doc["offsets"]] == [
        (p, CONSUMED[p], None) for p in range(PARTITIONS)
    ]
    text = groups(c, "--describe", "--group", GROUP)
    assert text.returncode == 0, text.stderr
    empties = groups(c, "--list", "--state", "Empty")
    assert table_rows(empties.stdout, "GROUP") == [{"GROUP": GROUP, "STATE": "Empty"}]
    assert text.stderr == f"zkctl: warning: consumer group '{GROUP}' has no active members\n"

    # --- a group never seen ----------------------------------------------------------------
    missing = groups(c, "--describe", "--group", "nobody", "--group", GROUP)
    assert missing.returncode == 1
    assert missing.stderr.splitlines()[-1] == "zkctl: error: consumer group 'nobody' does not exist"
    assert f"\n{GROUP} " in missing.stdout  # the group that exists is still shown


def test_a_malformed_assignment_is_shown_unreadable(cluster_factory: ClusterFactory) -> None:
    """A member (raw JoinGroup and SyncGroup) whose assignment is not ConsumerProtocol's:
    the group is described, the member shown with its assignment unreadable."""
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    coordinator = wait_for(lambda: _coordinator(c, "raw"), 60, "the coordinator of 'raw'")
    join: dict[str, Any] = {
        "group_id": "raw",
        "session_timeout_ms": 60_000,  # stays a member, unheartbeated, for the test
        "rebalance_timeout_ms": 60_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    with KafkaConnection("127.0.0.1", c[coordinator].port(), timeout_s=30) as conn:
        member = conn.request(ApiKey.JOIN_GROUP, 4, join)["member_id"]
        joined = conn.request(ApiKey.JOIN_GROUP, 4, {**join, "member_id": member})
        assert joined["error_code"] == ErrorCode.NONE
        sync = {
            "group_id": "raw",
            "generation_id": joined["generation_id"],
            "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"\x00\x00\xff\xff\xff\xff"}],
        }
        assert conn.request(ApiKey.SYNC_GROUP, 2, sync)["error_code"] == ErrorCode.NONE

    described = groups(c, "--describe", "--group", "raw")
    assert described.returncode == 0, described.stderr
    (row,) = table_rows(described.stdout, "GROUP           TOPIC")
    assert (row["TOPIC"], row["PARTITION"], row["CONSUMER-ID"]) == ("-", "-", member)
    assert described.stderr.startswith(
        f"zkctl: warning: consumer group 'raw': member {member}'s assignment is unreadable: "
    )
    members = groups(c, "--describe", "--group", "raw", "--members", "--json")
    assert members.returncode == 0, members.stderr
    (doc,) = json.loads(members.stdout)["groups"]
    (m,) = doc["members"]
    assert (m["consumer_id"], m["partitions"]) == (member, None)
    assert m["assignment_error"] == "assigned partitions: length -1 (the array is not nullable)"


def _coordinator(c: Cluster, group: str = GROUP) -> int | None:
    port = next(b.port() for b in c.brokers.values() if b.alive())
    with KafkaConnection("127.0.0.1", port, timeout_s=10) as conn:
        answer = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    if answer["error_code"] != ErrorCode.NONE:
        return None
    # Named before it may answer as the coordinator (see coordinates).
    return int(answer["node_id"]) if coordinates(c, group, int(answer["node_id"])) else None
