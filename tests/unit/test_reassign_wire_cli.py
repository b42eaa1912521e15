"""`zkctl reassign --bootstrap-server`'s words and checks (zkctl/admin_commands.py)
against Kafka 2.8's ReassignPartitionsCommand, over a stand-in admin client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from admin import cluster_admin, reassign
from zkctl.cli import main
from zkdata.znodes import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
BOOT = ["reassign", "--bootstrap-server", "h:1"]


class StandInAdmin:
    """Brokers 1-3; topic t's partitions 0-2; t-0 moving onto 3, t-1 off 2."""

    altered: list[dict[TopicPartition, Any]] = []
    refuse: set[TopicPartition] = set()

    def __init__(self, *_a: object, **_k: object) -> None:
        pass

    def list_partition_reassignments(
        self, partitions: object = None
    ) -> dict[TopicPartition, tuple[tuple[int, ...], ...]]:
        moving = {T0: ((1, 3), (3,), ()), T1: ((1, 2), (), (2,))}
        return {tp: m for tp, m in moving.items() if partitions is None or tp in partitions}  # type: ignore[operator]

    def alter_partition_reassignments(
        self, targets: dict[TopicPartition, Any]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        StandInAdmin.altered.append(dict(targets))
        return {tp: ((39, "refused") if tp in self.refuse else (0, None)) for tp in targets}

    def replicas(self, topics: object) -> dict[TopicPartition, tuple[int, ...]]:
        return {T0: (1,), T1: (1, 2), T2: (2, 3)}

    def metadata(self, topics: object = None) -> dict[str, Any]:
        return {"brokers": [{"node_id": b, "host": "h", "port": 1} for b in (1, 2, 3)]}


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    StandInAdmin.altered = []
    StandInAdmin.refuse = set()
    monkeypatch.setattr(cluster_admin, "ClusterAdmin", StandInAdmin)


def file_of(tmp_path: Path, *entries: tuple[str, int, list[int]]) -> str:
    f = tmp_path / "r.json"
    partitions = [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]
    f.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return str(f)


def test_list_names_adding_and_removing_only_when_there_are_some(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 2.8's curReassignmentsToString: " adding: X." and " removing: Y." only
    when not empty ("adding: 3. removing: ." before)."""
    assert main([*BOOT, "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Current partition reassignments:",
        "t-0: replicas: 1,3. adding: 3.",
        "t-1: replicas: 1,2. removing: 2.",
    ]


def test_cancel_of_one_partition_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 2.8's cancelAssignment: "reassignment%s", no s for one partition."""
    assert main([*BOOT, "--cancel", "--topic", "t", "--partition", "0"]) == 0
    assert capsys.readouterr().out == "Successfully cancelled partition reassignment for: t-0\n"


def test_a_refused_cancel_prints_no_success(capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 2.8's cancelAssignment throws on any refusal before its success line."""
    StandInAdmin.refuse = {T0}
    assert main([*BOOT, "--cancel", "--topic", "t", "--partition", "0"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "Error cancelling partition reassignment for:\nt-0: INVALID_REPLICA_ASSIGNMENT" in err


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([("t", 0, [1, 2]), ("t", 2, [2, 9])], "Unknown broker id 9"),
        ([("t", 0, [2, 3]), ("nosuch", 0, [1, 2])], "topic 'nosuch' does not exist"),
    ],
)
def test_execute_with_an_unknown_broker_or_topic_starts_nothing(
    entries: list[tuple[str, int, list[int]]],
    error: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 2.8's executeAssignment checks the brokers (verifyBrokerIds: "Unknown broker
    id 9") and the topics (describeTopics) before alterPartitionReassignments: the good
    entries beside a bad one were started before."""
    path = file_of(tmp_path, *entries)
    assert main([*BOOT, "--reassignment-json-file", path, "--additional"]) == 1
    out, err = capsys.readouterr()
    assert StandInAdmin.altered == []
    assert error in err
    assert "Successfully started" not in out


def test_execute_with_a_refused_partition_prints_no_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's executeAssignment throws "Error reassigning partition(s)" before its
    success line when the controller refuses any partition."""
    StandInAdmin.refuse = {T2}
    path = file_of(tmp_path, ("t", 0, [1, 2]), ("t", 2, [3, 1]))
    assert main([*BOOT, "--reassignment-json-file", path, "--additional"]) == 1
    out, err = capsys.readouterr()
    assert "Successfully started" not in out
    assert "Error reassigning partition(s):\nt-2: INVALID_REPLICA_ASSIGNMENT" in err
    path = file_of(tmp_path, ("t", 0, [1, 2]), ("t", 2, [3, 1]))
    StandInAdmin.refuse = set()
    assert main([*BOOT, "--reassignment-json-file", path, "--additional"]) == 0
    assert "Successfully started partition reassignments for t-0,t-2\n" in capsys.readouterr().out


def test_execute_json_has_one_shape_with_or_without_bootstrap_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reassign --json` prints the same keys, of the same types, whether ZooKeeper's znode
    is written or the controller is asked: "started" was Kafka's reassignment JSON without
    --bootstrap-server and a list of "t-0" with it, and the refusals were "errors" in one
    mode where the malformed znodes skipped were "problems" in the other."""
    from tests.unit.test_cli_args import on_tree, tree_with_topic

    on_tree(monkeypatch, tree_with_topic("t", {0: [1], 1: [1, 2], 2: [2, 3]}, (1, 2, 3)))
    path = file_of(tmp_path, ("t", 0, [1, 2]), ("t", 2, [3, 1]))
    assert main(["--zookeeper", "127.0.0.1:1", "reassign", "--reassignment-json-file", path,
                 "--json"]) == 0  # fmt: skip
    over_zk = json.loads(capsys.readouterr().out)
    assert main([*BOOT, "--reassignment-json-file", path, "--additional", "--json"]) == 0
    over_wire = json.loads(capsys.readouterr().out)
    for doc in (over_zk, over_wire):
        assert doc == {
            "started": ["t-0", "t-2"],
            "targets": json.loads(reassign.format_reassignment_json({T0: (1, 2), T2: (3, 1)})),
            "current": json.loads(reassign.format_reassignment_json({T0: (1,), T2: (2, 3)})),
            "problems": [],
            "errors": [],
        }

    StandInAdmin.refuse = {T2}
    assert main([*BOOT, "--reassignment-json-file", path, "--additional", "--json"]) == 1
    refused = json.loads(capsys.readouterr().out)
    assert refused["started"] == ["t-0"]
    assert refused["errors"] == ["t-2: INVALID_REPLICA_ASSIGNMENT (refused)"]
    assert refused["targets"] == over_wire["targets"]


def test_verify_json_has_one_shape_with_or_without_bootstrap_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reassign --verify --json` prints the same keys either way: "pending_znode" and
    "problems" were only in ZooKeeper's mode; with --bootstrap-server no znode is read, so
    pending_znode is null and nothing malformed was skipped."""
    from tests.unit.test_cli_args import on_tree, tree_with_topic

    on_tree(monkeypatch, tree_with_topic("t", {0: [1], 1: [1, 2], 2: [2, 3]}, (1, 2, 3)))
    path = file_of(tmp_path, ("t", 0, [1, 3]), ("t", 2, [2, 3]))
    assert main(["--zookeeper", "127.0.0.1:1", "reassign", "--verify",
                 "--reassignment-json-file", path, "--json"]) == 0  # fmt: skip
    over_zk = json.loads(capsys.readouterr().out)
    assert main([*BOOT, "--verify", "--reassignment-json-file", path, "--json"]) == 0
    over_wire = json.loads(capsys.readouterr().out)
    assert (
        list(over_zk) == list(over_wire) == ["complete", "pending_znode", "problems", "partitions"]
    )
    assert (over_zk["pending_znode"], over_zk["problems"]) == (False, [])
    assert (over_wire["pending_znode"], over_wire["problems"]) == (None, [])
    assert [p["partition"] for p in over_wire["partitions"]] == [0, 2]
    assert [list(p) for p in over_wire["partitions"]] == [list(p) for p in over_zk["partitions"]]
