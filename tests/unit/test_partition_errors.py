"""PartitionErrors: a StopReplica answer's partition_errors held as partitions and codes
reads, compares and encodes as the list of dicts it stands for."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.partition_errors import PartitionErrors
from wire.codec import get_codec
from zkdata.znodes import TopicPartition

STORAGE_ERROR = 56
FENCED = 74

partitions = st.builds(
    TopicPartition, st.sampled_from(["a", "b", "t-1", "ü"]), st.integers(0, 2**31 - 1)
)
answers = st.lists(st.tuples(partitions, st.sampled_from([0, 0, 0, FENCED, STORAGE_ERROR])))


def as_dicts(pairs: list[tuple[TopicPartition, int]]) -> list[dict[str, Any]]:
    return [
        {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
        for tp, code in pairs
    ]


def made(pairs: list[tuple[TopicPartition, int]]) -> PartitionErrors:
    errors = PartitionErrors()
    for tp, code in pairs:
        errors.add(tp, code)
    return errors


@given(answers, st.data())
def test_it_reads_as_the_list_of_dicts_and_a_failure_takes_only_the_zero_answers(
    pairs: list[tuple[TopicPartition, int]], data: st.DataObject
) -> None:
    errors = made(pairs)
    model = as_dicts(pairs)
    assert errors == model
    assert list(errors) == model
    assert len(errors) == len(model)
    assert [errors[i] for i in range(-len(model), len(model))] == model + model
    assert errors[1:3] == model[1:3]
    assert errors[::-1] == model[::-1]
    failed = (
        {tp: None for tp in data.draw(st.lists(st.sampled_from([tp for tp, _ in pairs])))}
        if pairs
        else {}
    )
    changed = errors.set_error(failed, STORAGE_ERROR)
    for position, answer in enumerate(model):
        if (
            answer["error_code"] == 0
            and TopicPartition(answer["topic_name"], answer["partition_index"]) in failed
        ):
            answer["error_code"] = STORAGE_ERROR
            assert position in changed
    assert errors == model
    assert [errors.partition(p) for p in changed] == [pairs[p][0] for p in changed]
    assert sorted(changed) == changed


@given(answers, st.integers(0, 3))
def test_it_encodes_byte_for_byte_as_the_list_of_dicts(
    pairs: list[tuple[TopicPartition, int]], version: int
) -> None:
    codec = get_codec("StopReplicaResponse", version)
    ours = codec.encode({"error_code": 0, "partition_errors": made(pairs)})
    assert ours == codec.encode({"error_code": 0, "partition_errors": as_dicts(pairs)})
    assert codec.decode(ours)["partition_errors"] == as_dicts(pairs)


def test_a_partition_named_twice_keeps_an_answer_each() -> None:
    tp = TopicPartition("t", 0)
    errors = made([(tp, FENCED), (tp, 0)])
    assert errors.set_error({tp: None}, STORAGE_ERROR) == [1]
    assert [a["error_code"] for a in errors] == [FENCED, STORAGE_ERROR]


def test_a_read_dict_is_a_copy_and_out_of_range_is_an_index_error() -> None:
    errors = made([(TopicPartition("t", 0), 0)])
    errors[0]["error_code"] = FENCED
    assert errors[0]["error_code"] == 0
    with pytest.raises(IndexError):
        errors[1]
    with pytest.raises(IndexError):
        errors[-2]
    assert errors != [{"topic_name": "t", "partition_index": 0, "error_code": FENCED}]
    assert errors != "not a list"
    assert "PartitionErrors([{" in repr(errors)
    with pytest.raises(TypeError):
        hash(errors)
