"""`zkctl reassign`'s checks that Kafka 2.8's ZooKeeper-based ReassignPartitionsCommand
makes too: ids that are JSON integers (not booleans), a log_dirs list as long as the
replicas, and a reassignment in progress refused before the new one is looked at."""

from __future__ import annotations

import pytest

from admin import reassign
from admin.errors import AdminError, InvalidArgumentError, Problems
from tests.unit.test_cli_args import tree_with_topic
from zkdata import paths, znodes
from zkdata.znodes import TopicAssignment, TopicPartition


@pytest.mark.parametrize(
    "entry",
    [
        '{"topic":"t","partition":true,"replicas":[1]}',
        '{"topic":"t","partition":false,"replicas":[1]}',
        '{"topic":"t","partition":0,"replicas":[true]}',
        '{"topic":"t","partition":0,"replicas":[1,false]}',
    ],
)
def test_a_boolean_is_no_partition_or_broker_id(entry: str) -> None:
    """Kafka reads the ids as JSON numbers (to[Int]): true and false are refused, not
    taken as Python takes them, for 1 and 0."""
    with pytest.raises(InvalidArgumentError, match="must be"):
        reassign.parse_reassignment_json(f'{{"version":1,"partitions":[{entry}]}}')


@pytest.mark.parametrize("log_dirs", ['["any"]', '["any","any","any"]', "[]"])
def test_log_dirs_name_one_directory_per_replica(log_dirs: str) -> None:
    """ReassignPartitionsCommand: "Size of replicas list ... is different from size of log
    dirs list ..." when the lists differ in length."""
    text = (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        f'"log_dirs":{log_dirs}}}]}}'
    )
    with pytest.raises(InvalidArgumentError, match=r'only "any" \(one per replica\)'):
        reassign.parse_reassignment_json(text)
    same = text.replace(f'"log_dirs":{log_dirs}', '"log_dirs":["any","any"]')
    assert reassign.parse_reassignment_json(same) == {TopicPartition("t", 0): (1, 2)}


def test_a_reassignment_in_progress_is_reported_before_the_new_one_is_checked() -> None:
    """Kafka 2.8's ZooKeeper executeAssignment: "There is an existing assignment running."
    comes first, whatever the new targets name."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    running = znodes.encode_reassignment({TopicPartition("t", 0): (2, 3)})
    zk.put(paths.REASSIGN_PARTITIONS, running)
    for targets in (
        {TopicPartition("gone", 0): (1,)},
        {TopicPartition("t", 0): (7,)},
        {TopicPartition("t", 0): (3, 1)},
    ):
        with pytest.raises(AdminError, match="a reassignment is in progress") as info:
            reassign.start_reassignment(zk, targets)  # type: ignore[arg-type]
        assert "cannot reassign" not in str(info.value)
        assert zk.nodes[paths.REASSIGN_PARTITIONS][0] == running


def test_a_reassignment_is_complete_only_with_the_replicas_in_the_targets_order() -> None:
    """Kafka 2.8's ZooKeeper verify compares the assigned replicas with the target as
    sequences: the same brokers in another order (another preferred leader) did not
    reach the target."""
    t0 = TopicPartition("t", 0)
    assert reassign.partition_status(t0, (1, 2), (1, 2)).status == "complete"
    reordered = reassign.partition_status(t0, (1, 2), (2, 1))
    assert reordered.status == "failed"
    assert reordered.detail == "the replicas are [2, 1], not the target"


def test_a_verification_is_complete_only_when_every_partition_is() -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    done = reassign.partition_status(t0, (1,), (1,))
    moving = reassign.partition_status(t1, (2,), (1, 2), adding=(2,), removing=(1,))
    assert moving.status == "in_progress"
    assert reassign.VerifyResult([done], False, Problems()).complete
    assert not reassign.VerifyResult([done, moving], True, Problems()).complete


def test_a_target_in_a_malformed_topic_znode_is_reported_as_such() -> None:
    t = TopicAssignment("t", {0: (1,)})
    with pytest.raises(AdminError) as info:
        reassign.check_targets(
            {TopicPartition("bad", 0): (1,), TopicPartition("t", 0): (1,)},
            {"t": t},
            {1},
            [],
            malformed_topics={"bad"},
        )
    assert str(info.value) == (
        "cannot reassign: topic 'bad' has a malformed znode /brokers/topics/bad"
    )


@pytest.mark.parametrize(
    ("partitions", "problem"),
    [
        ("[1]", "partition entry 1 is not an object"),
        ('[["t",0,[1]]]', 'partition entry ["t", 0, [1]] is not an object'),
        ('[{"topic":5,"partition":0,"replicas":[1]}]', "'topic' must be a string"),
        ('[{"topic":null,"partition":0,"replicas":[1]}]', "'topic' must be a string"),
        ('[{"partition":0,"replicas":[1]}]', "'topic' must be a string"),
    ],
)
def test_an_entry_of_another_shape_is_an_argument_error(partitions: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^f\.json: ") as info:
        reassign.parse_reassignment_json(f'{{"version":1,"partitions":{partitions}}}', "f.json")
    assert problem in str(info.value)


@pytest.mark.parametrize("partitions", ["5", '"t-0"', '{"topic":"t"}', "null"])
def test_partitions_that_are_no_list_are_an_argument_error(partitions: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^f\.json: 'partitions' must be a list$"):
        reassign.parse_reassignment_json(f'{{"version":1,"partitions":{partitions}}}', "f.json")
