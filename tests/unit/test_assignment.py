"""Replica assignment: golden cases worked out from Kafka's AdminUtils, and properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.assignment import (
    AssignmentError,
    BrokerMetadata,
    IncompleteRackInfoError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    format_replica_assignment,
    parse_replica_assignment,
    rack_alternated_broker_list,
    replica_index,
    validate_replica_assignment,
)

# The example of AdminUtils' scaladoc (and AdminRackAwareTest).
SCALADOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in racks.items()]


class ScriptedRandom(random.Random):
    """randrange answers from a script, to pin the start index and the shift separately."""

    def __init__(self, answers: list[int]) -> None:
        super().__init__(0)
        self.answers = list(answers)

    def randrange(self, *args: object, **kwargs: object) -> int:
        return self.answers.pop(0)


# --------------------------------------------------------------------------- golden cases


def test_rack_unaware_five_brokers_ten_partitions_rf3_start0() -> None:
    # The table in AdminUtils' scaladoc: start index 0, shift 0; p5 starts a new round of
    # 5 partitions, so the shift becomes 1 and p5's followers move one broker further.
    assert assign_replicas_to_brokers(range(5), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_unaware_sorts_brokers_and_uses_their_ids() -> None:
    # n=4, start 1, shift 1: p -> first index (p+1)%4, follower at +1+(shift%3); shift is 2
    # from p4. Indexes into [10, 20, 30, 40].
    got = assign_replicas_to_brokers([30, 10, 40, 20], 6, 2, fixed_start_index=1)
    assert got == {
        0: [20, 40],
        1: [30, 10],
        2: [40, 20],
        3: [10, 30],
        4: [20, 10],
        5: [30, 20],
    }


def test_start_index_is_drawn_before_the_shift() -> None:
    # start 0, shift 1: the follower of p sits two brokers on.
    got = assign_replicas_to_brokers(range(5), 5, 2, rng=ScriptedRandom([0, 1]))
    assert got == {0: [0, 2], 1: [1, 3], 2: [2, 4], 3: [3, 0], 4: [4, 1]}
    # start 1, shift 0: the follower is the next broker.
    got = assign_replicas_to_brokers(range(5), 5, 2, rng=ScriptedRandom([1, 0]))
    assert got == {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 0], 4: [0, 1]}


def test_fixed_start_index_fixes_the_shift_too() -> None:
    scripted = assign_replicas_to_brokers(range(7), 20, 3, rng=ScriptedRandom([3, 3]))
    assert scripted == assign_replicas_to_brokers(range(7), 20, 3, fixed_start_index=3)


def test_same_seed_same_assignment() -> None:
    a = assign_replicas_to_brokers(range(6), 30, 3, rng=random.Random(7))
    b = assign_replicas_to_brokers(range(6), 30, 3, rng=random.Random(7))
    assert a == b


def test_replica_index_formula() -> None:
    # (first + 1 + (shift + j) % (n - 1)) % n
    assert replica_index(0, 0, 0, 5) == 1
    assert replica_index(0, 0, 1, 5) == 2
    assert replica_index(4, 1, 0, 5) == 1
    assert replica_index(3, 3, 1, 5) == 4  # shift wraps: 1 + 4 % 4 = 1
    assert replica_index(2, 7, 0, 2) == 3 % 2


def test_rack_alternated_list_matches_scaladoc() -> None:
    assert rack_alternated_broker_list(SCALADOC_RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in SCALADOC_RACKS.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]


def test_rack_alternated_list_three_racks_of_three() -> None:
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_scaladoc_example() -> None:
    # Round robin over 0,3,1,5,4,2; p6 starts the second round with shift 1 (x 3 racks), so
    # it is 0,4,2 rather than a repeat of p0's 0,3,1.
    got = assign_replicas_to_brokers(
        racked(SCALADOC_RACKS), 7, 3, fixed_start_index=0, start_partition_id=0
    )
    assert got == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_aware_more_replicas_than_racks() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: RF 4 on 3 racks.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    got = assign_replicas_to_brokers(racked(racks), 6, 4, fixed_start_index=2)
    for replicas in got.values():
        assert len(set(replicas)) == 4
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_rack_aware_single_rack_behaves_like_distinct_brokers() -> None:
    racks = dict.fromkeys(range(6), "rack1")
    got = assign_replicas_to_brokers(racked(racks), 6, 3, rng=random.Random(1))
    assert Counter(r[0] for r in got.values()) == Counter(range(6))
    assert all(len(set(r)) == 3 for r in got.values())


# --------------------------------------------------------------------------- rack modes


def test_partial_rack_info_is_an_error_when_enforced() -> None:
    brokers = [BrokerMetadata(0, "r1"), BrokerMetadata(1), BrokerMetadata(2, "r2")]
    with pytest.raises(IncompleteRackInfoError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers(brokers, 3, 2)


def test_partial_rack_info_without_a_mode_is_adminutils_own_refusal() -> None:
    """The brokers as they are (Kafka 2.8's ZkAdminManager.createTopics, no
    getBrokerMetadatas): AdminUtils checks the replication factor, then refuses partial
    rack info with its own message, not the command line's."""
    brokers = [BrokerMetadata(0, "r1"), BrokerMetadata(1), BrokerMetadata(2, "r2")]
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(brokers, 3, 4, rack_aware_mode=None)
    with pytest.raises(IncompleteRackInfoError) as e:
        assign_replicas_to_brokers(brokers, 3, 2, rack_aware_mode=None)
    assert str(e.value) == (
        "Not all brokers have rack information for replica rack aware assignment."
    )


@pytest.mark.parametrize("mode", [RackAwareMode.SAFE, RackAwareMode.DISABLED])
def test_partial_rack_info_ignored_when_safe_or_disabled(mode: RackAwareMode) -> None:
    brokers = [BrokerMetadata(0, "r1"), BrokerMetadata(1), BrokerMetadata(2, "r2")]
    got = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=0, rack_aware_mode=mode)
    assert got == assign_replicas_to_brokers(range(3), 3, 2, fixed_start_index=0)


def test_disabled_mode_ignores_complete_rack_info() -> None:
    got = assign_replicas_to_brokers(
        racked(SCALADOC_RACKS), 6, 3, fixed_start_index=0, rack_aware_mode=RackAwareMode.DISABLED
    )
    assert got == assign_replicas_to_brokers(range(6), 6, 3, fixed_start_index=0)


def test_safe_mode_keeps_complete_rack_info() -> None:
    got = assign_replicas_to_brokers(
        racked(SCALADOC_RACKS), 6, 3, fixed_start_index=0, rack_aware_mode=RackAwareMode.SAFE
    )
    assert got[0] == [0, 3, 1]


def test_broker_metadatas_sorts_and_rejects_duplicates() -> None:
    assert [m.id for m in broker_metadatas([3, BrokerMetadata(1, None), 2])] == [1, 2, 3]
    with pytest.raises(AssignmentError, match="duplicate broker ids: 2"):
        broker_metadatas([2, 1, BrokerMetadata(2)])


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("rf", [0, -1])
def test_replication_factor_below_one(rf: int) -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0"):
        assign_replicas_to_brokers(range(3), 3, rf)


def test_replication_factor_above_broker_count() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="4 larger than available brokers: 3"):
        assign_replicas_to_brokers(range(3), 3, 4)


@pytest.mark.parametrize("partitions", [0, -2])
def test_partitions_below_one(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError, match="larger than 0"):
        assign_replicas_to_brokers(range(3), partitions, 1)


def test_no_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers([], 1, 1)


def test_errors_share_a_base_class() -> None:
    for cls in (
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        IncompleteRackInfoError,
        InvalidReplicaAssignmentError,
    ):
        assert issubclass(cls, AssignmentError)
    assert issubclass(AssignmentError, ValueError)


# --------------------------------------------------------------------------- add partitions


def test_add_partitions_starts_at_partition0_leader_and_existing_count() -> None:
    brokers = [1, 2, 3, 4, 5]
    existing = {0: [3, 4, 5], 1: [4, 5, 1]}
    # Partition 0's leader (3) is at index 2 of [1..5]: start 2 and shift 2; partitions are
    # numbered from 2. p2: first (2+2)%5=4 -> 5, followers +3 and +4 -> 3, 4.
    # p3: first 0 -> 1, followers -> 4, 5.
    assert assign_new_partitions(brokers, existing, 4) == {2: [5, 3, 4], 3: [1, 4, 5]}


def test_add_partitions_matches_a_fresh_round_from_partition_n() -> None:
    created = assign_replicas_to_brokers(range(5), 10, 3, fixed_start_index=0)
    added = assign_new_partitions(range(5), created, 12)
    # The shift restarts from the start index (0) and grows at p10: Kafka does not continue
    # the creation-time shift, so p10 is 0,2,3 (creation would have given 0,3,4).
    assert added == {10: [0, 2, 3], 11: [1, 3, 4]}


def test_add_partitions_when_partition0_leader_is_gone() -> None:
    # No broker id >= 9: Kafka's indexWhere gives -1, clamped to start index 0.
    added = assign_new_partitions([1, 2, 3], {0: [9, 1]}, 2)
    assert added == assign_replicas_to_brokers(
        [1, 2, 3], 1, 2, fixed_start_index=0, start_partition_id=1
    )


def test_add_partitions_leader_between_ids() -> None:
    # Leader 4 is gone; the first broker with id >= 4 is 5, at index 2.
    added = assign_new_partitions([1, 3, 5, 7], {0: [4, 1]}, 3)
    assert added == assign_replicas_to_brokers(
        [1, 3, 5, 7], 2, 2, fixed_start_index=2, start_partition_id=1
    )


def test_add_partitions_must_increase() -> None:
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        assign_new_partitions(range(3), {0: [0], 1: [1]}, 2)


def test_add_partitions_needs_partition_zero() -> None:
    with pytest.raises(AssignmentError, match="partition id 0 is missing"):
        assign_new_partitions(range(3), {1: [0]}, 3)


def test_add_partitions_with_manual_assignment() -> None:
    got = assign_new_partitions(range(4), {0: [0, 1]}, 3, replica_assignment={2: [3, 2], 1: [1, 2]})
    assert got == {1: [1, 2], 2: [3, 2]}
    assert list(got) == [1, 2]


def test_add_partitions_manual_assignment_errors_all_reported() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        assign_new_partitions(range(4), {0: [0, 1]}, 3, replica_assignment={1: [1, 9], 2: [3]})
    text = str(info.value)
    assert "broker(s) 9 not available" in text
    assert "partition 2 has replication factor 1, expected 2" in text
    assert len(info.value.problems) == 2


def test_add_partitions_manual_assignment_wrong_count() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="1 partitions assigned but 2"):
        assign_new_partitions(range(4), {0: [0, 1]}, 3, replica_assignment={1: [1, 2]})


def test_add_partitions_manual_assignment_wrong_ids() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="consecutive from 1"):
        assign_new_partitions(range(4), {0: [0, 1]}, 2, replica_assignment={0: [1, 2]})


# --------------------------------------------------------------------------- manual assignment


def test_parse_replica_assignment() -> None:
    assert parse_replica_assignment("1:2,2:3") == {0: [1, 2], 1: [2, 3]}
    assert parse_replica_assignment(" 1 : 2 , 2:3 ") == {0: [1, 2], 1: [2, 3]}
    assert parse_replica_assignment("5") == {0: [5]}
    assert parse_replica_assignment("2147483647:0") == {0: [2147483647, 0]}
    assert parse_replica_assignment("0" * 5000 + "7") == {0: [7]}  # Java's parseInt's reading


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # TopicCommand.parseReplicaAssignment: split(",") and split(":"), which drop
        # trailing empty strings, then s.trim().toInt (String.trim, Integer.parseInt).
        ("+1:+2", {0: [1, 2]}),
        ("\u0661:\uff12", {0: [1, 2]}),  # ARABIC-INDIC ONE, FULLWIDTH TWO
        ("\x001\x1f:2", {0: [1, 2]}),  # String.trim takes every char to U+0020
        ("1:2,3:4,", {0: [1, 2], 1: [3, 4]}),
        ("1:2,3:4,,", {0: [1, 2], 1: [3, 4]}),
        ("1:2:,3:4", {0: [1, 2], 1: [3, 4]}),
    ],
    ids=repr,
)
def test_parse_replica_assignment_reads_as_kafkas_topic_command(
    text: str, expected: dict[int, list[int]]
) -> None:
    assert parse_replica_assignment(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1:1", "partition 0: duplicate broker(s) 1"),
        ("1:2,3", "partition 1 has replication factor 1 but partition 0 has 2"),
        ("a:2", "partition 0: 'a' is not a broker id"),
        ("1:2,,3:4", "partition 1: '' is not a broker id"),
        ("1_0", "'1_0' is not a broker id"),
        ("\u00a01:2", "is not a broker id"),  # NO-BREAK SPACE: String.trim leaves it
        ("1:\u20032", "is not a broker id"),  # EM SPACE
        ("+-1:2", "is not a broker id"),
        ("\U0001d7cf:2", "is not a broker id"),  # a digit beyond the BMP
        (",1:2", "partition 0: '' is not a broker id"),  # a leading empty string is kept
        ("", "the replica assignment is empty"),
        # Broker ids are Java ints from 0; int() refuses 4,300 digits with a plain ValueError.
        ("-1:2", "partition 0: '-1' is not a broker id"),
        ("1:2147483648", "partition 0: '2147483648' is not a broker id"),
        ("1:" + "1" * 5000, "is not a broker id"),
    ],
    ids=lambda v: v if len(v) < 40 else f"{v[:20]}...",
)
def test_parse_replica_assignment_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment(text)
    assert message in str(info.value)


def test_parse_replica_assignment_reports_every_problem() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment("1:1:2,x:2,3:4:5:6")
    problems = info.value.problems
    assert any("duplicate broker(s) 1" in p for p in problems)
    assert any("'x' is not a broker id" in p for p in problems)
    assert any("partition 2 has replication factor 4" in p for p in problems)


def test_validate_replica_assignment_ok() -> None:
    got = validate_replica_assignment({1: [2, 3], 0: [1, 2]}, [1, 2, 3])
    assert got == {0: [1, 2], 1: [2, 3]}
    assert list(got) == [0, 1]


def test_validate_replica_assignment_reports_every_problem() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment(
            {0: [1, 1], 1: [7, 2], 3: [], 4: [1, 2, 3]},
            [1, 2, 3],
            expected_replication_factor=2,
        )
    problems = info.value.problems
    assert any("consecutive from 0: got 0, 1, 3, 4" in p for p in problems)
    assert any("partition 0: duplicate broker(s) 1" in p for p in problems)
    assert "broker(s) 7 not available (available brokers: 1, 2, 3), in partition 1" in problems
    assert any("partition 3 has no replicas" in p for p in problems)
    assert any("partition 4 has replication factor 3, expected 2" in p for p in problems)


def test_validate_replica_assignment_names_each_unknown_broker_once() -> None:
    """One problem a partition naming broker 9 made 1,000 partitions' message 70 KB, more
    than a Kafka string holds (the broker closed the connection instead of answering);
    Kafka's "Unknown broker(s) in replica assignment: 9." names it once."""
    assignment = {p: [1, 9 if p % 2 else 8] for p in range(1000)}
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment(assignment, [1, 2, 3])
    assert info.value.problems == (
        "broker(s) 8, 9 not available (available brokers: 1, 2, 3), in partitions"
        " 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 and 980 more",
    )
    many = {p: [1000 + p] for p in range(50)}
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment(many, range(100))
    (problem,) = info.value.problems
    assert problem.startswith("broker(s) 1000, 1001, ")
    assert "1019 and 30 more not available (available brokers: 0, 1, " in problem
    assert "19 and 80 more), in partitions 0, 1, " in problem


def test_many_problems_are_summed_up() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment({p: [1, 1] for p in range(1000)}, [1, 2])
    assert len(info.value.problems) == 1000
    assert info.value.summary()[-1] == "... and 990 more"
    assert str(info.value).count("\n") == 11


def test_validate_replica_assignment_uses_first_partition_rf_by_default() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="replication factor 1, expected 2"):
        validate_replica_assignment({0: [1, 2], 1: [3]}, [1, 2, 3])


def test_validate_replica_assignment_empty() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="no partitions"):
        validate_replica_assignment({}, [1])


# --------------------------------------------------------------------------- properties


@st.composite
def cluster(draw: st.DrawFn, *, racks: bool = False) -> tuple[list[BrokerMetadata], int]:
    ids = draw(st.lists(st.integers(0, 200), min_size=1, max_size=12, unique=True))
    if racks:
        n_racks = draw(st.integers(1, len(ids)))
        names = [f"rack{i}" for i in range(n_racks)]
        brokers = [BrokerMetadata(b, draw(st.sampled_from(names))) for b in ids]
    else:
        brokers = [BrokerMetadata(b) for b in ids]
    rf = draw(st.integers(1, len(ids)))
    return brokers, rf


def leader_counts(assignment: dict[int, list[int]], brokers: list[BrokerMetadata]) -> list[int]:
    counts = Counter(r[0] for r in assignment.values())
    return [counts[b.id] for b in brokers]


def replica_counts(assignment: dict[int, list[int]], brokers: list[BrokerMetadata]) -> list[int]:
    counts = Counter(b for r in assignment.values() for b in r)
    return [counts[b.id] for b in brokers]


@settings(max_examples=300, deadline=None)
@given(
    cluster(racks=False) | cluster(racks=True),
    st.integers(1, 60),
    st.integers(0, 30),
    st.integers(0, 2**32),
)
def test_every_partition_gets_rf_distinct_brokers(
    c: tuple[list[BrokerMetadata], int], partitions: int, first_id: int, seed: int
) -> None:
    brokers, rf = c
    got = assign_replicas_to_brokers(
        brokers, partitions, rf, start_partition_id=first_id, rng=random.Random(seed)
    )
    ids = {b.id for b in brokers}
    assert list(got) == list(range(first_id, first_id + partitions))
    for replicas in got.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= ids


@settings(max_examples=300, deadline=None)
@given(cluster(racks=False) | cluster(racks=True), st.integers(1, 60), st.integers(0, 2**32))
def test_leaders_are_spread_evenly(
    c: tuple[list[BrokerMetadata], int], partitions: int, seed: int
) -> None:
    brokers, rf = c
    got = assign_replicas_to_brokers(brokers, partitions, rf, rng=random.Random(seed))
    counts = leader_counts(got, brokers)
    assert max(counts) - min(counts) <= 1
    if partitions % len(brokers) == 0:
        assert set(counts) == {partitions // len(brokers)}


@settings(max_examples=300, deadline=None)
@given(cluster(racks=False), st.integers(1, 5), st.integers(0, 3), st.integers(0, 2**32))
def test_rack_unaware_replicas_spread_evenly(
    c: tuple[list[BrokerMetadata], int], rounds: int, first_round: int, seed: int
) -> None:
    # Whole rounds of n partitions, aligned on partition ids (the shift grows at multiples
    # of n): every broker holds exactly partitions * rf / n replicas.
    brokers, rf = c
    n = len(brokers)
    got = assign_replicas_to_brokers(
        brokers, rounds * n, rf, start_partition_id=first_round * n, rng=random.Random(seed)
    )
    assert set(replica_counts(got, brokers)) == {rounds * rf}


@settings(max_examples=300, deadline=None)
@given(cluster(racks=True), st.integers(1, 60), st.integers(0, 2**32))
def test_rack_aware_partitions_span_min_rf_racks(
    c: tuple[list[BrokerMetadata], int], partitions: int, seed: int
) -> None:
    brokers, rf = c
    rack_of = {b.id: b.rack for b in brokers}
    n_racks = len(set(rack_of.values()))
    got = assign_replicas_to_brokers(brokers, partitions, rf, rng=random.Random(seed))
    for replicas in got.values():
        assert len({rack_of[b] for b in replicas}) == min(rf, n_racks)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(0, 2**32),
    st.randoms(use_true_random=False),
)
def test_rack_aware_equal_racks_spread_replicas_evenly(
    n_racks: int, per_rack: int, rounds: int, seed: int, shuffler: random.Random
) -> None:
    # "In a perfect situation" (equal racks) replicas are even across brokers.
    ids = list(range(n_racks * per_rack))
    shuffler.shuffle(ids)
    brokers = [BrokerMetadata(b, f"rack{i % n_racks}") for i, b in enumerate(ids)]
    rf = shuffler.randint(1, len(ids))
    got = assign_replicas_to_brokers(brokers, rounds * len(ids), rf, rng=random.Random(seed))
    assert set(replica_counts(got, brokers)) == {rounds * rf}


@settings(max_examples=200, deadline=None)
@given(cluster(racks=False), st.integers(1, 20), st.integers(1, 20), st.integers(0, 2**32))
def test_add_partitions_numbers_and_sizes(
    c: tuple[list[BrokerMetadata], int], existing: int, extra: int, seed: int
) -> None:
    brokers, rf = c
    created = assign_replicas_to_brokers(brokers, existing, rf, rng=random.Random(seed))
    added = assign_new_partitions(brokers, created, existing + extra)
    assert list(added) == list(range(existing, existing + extra))
    assert all(len(set(r)) == rf for r in added.values())


@settings(deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda rf: st.lists(
            st.lists(st.integers(0, 10**6), min_size=rf, max_size=rf, unique=True),
            min_size=1,
            max_size=10,
        )
    )
)
def test_format_and_parse_round_trip(partitions: list[list[int]]) -> None:
    assignment = dict(enumerate(partitions))
    text = format_replica_assignment(assignment)
    assert parse_replica_assignment(text) == assignment
    brokers = {b for r in partitions for b in r}
    assert validate_replica_assignment(assignment, brokers) == assignment


# ----------------------------------------------------------- what mutation testing found


def test_a_negative_start_partition_id_numbers_from_0() -> None:
    # AdminUtils: currentPartitionId = math.max(0, startPartitionId); -1 is its default.
    assert assign_replicas_to_brokers(
        [1, 2, 3], 3, 2, fixed_start_index=0, start_partition_id=-1
    ) == {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def test_a_blank_replica_assignment_is_reported_as_empty() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment(" \t ")
    assert info.value.problems == ("the replica assignment is empty",)


def test_a_partition_with_a_malformed_id_is_not_also_measured() -> None:
    # Its replicas are unknown: no replication factor problem is made up from the rest
    # (as partition 0, or against partition 0).
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment("1:x,2:3")
    assert info.value.problems == ("partition 0: 'x' is not a broker id (in '1:x')",)
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        parse_replica_assignment("1:2,3:y")
    assert info.value.problems == ("partition 1: 'y' is not a broker id (in '3:y')",)


def test_lists_at_their_limit_are_shown_whole() -> None:
    # Exactly MAX_IDS_SHOWN ids, and exactly MAX_PROBLEMS_SHOWN problems: no "and 0 more".
    twenty = {p: [100 + p] for p in range(20)}
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment(twenty, [1])
    (problem,) = info.value.problems
    assert "more" not in problem
    assert problem.startswith("broker(s) 100, 101, ")
    assert "118, 119 not available (available brokers: 1), in partitions 0, 1, " in problem
    assert problem.endswith(" 18, 19")
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment({p: [1, 1] for p in range(10)}, [1])
    assert info.value.summary() == list(info.value.problems)
    assert len(info.value.summary()) == 10
    assert "more" not in str(info.value)


def test_the_lowest_partitions_replication_factor_is_the_expected_one() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment({1: [1, 2, 3], 0: [1], 2: [2, 3]}, [1, 2, 3])
    assert info.value.problems == (
        "partition 1 has replication factor 3, expected 1",
        "partition 2 has replication factor 2, expected 1",
    )


def test_add_partitions_needs_a_replica_of_partition_zero() -> None:
    # Partition 0's replicas give the replication factor and the start index.
    with pytest.raises(AssignmentError, match="partition 0 has no replicas"):
        assign_new_partitions(range(3), {0: []}, 3)


def test_one_problem_is_the_message_itself() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment({0: [1, 1]}, [1])
    assert (
        str(info.value)
        == "invalid replica assignment: partition 0: duplicate broker(s) 1 in [1, 1]"
    )
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        validate_replica_assignment({0: [1, 1], 1: []}, [1])
    assert str(info.value) == (
        "invalid replica assignment:\n"
        "  - partition 0: duplicate broker(s) 1 in [1, 1]\n"
        "  - partition 1 has no replicas"
    )


def test_a_manual_assignment_of_new_partitions_is_refused_on_partial_racks() -> None:
    # ZkAdminManager.createPartitions takes getBrokerMetadatas() (RackAwareMode.Enforced)
    # before looking at the assignment asked for.
    brokers = [BrokerMetadata(0, "r1"), BrokerMetadata(1)]
    with pytest.raises(IncompleteRackInfoError):
        assign_new_partitions(brokers, {0: [0]}, 2, replica_assignment={1: [1]})
    assert assign_new_partitions(
        brokers, {0: [0]}, 2, replica_assignment={1: [1]}, rack_aware_mode=RackAwareMode.SAFE
    ) == {1: [1]}


def test_format_replica_assignment_orders_partitions() -> None:
    assert format_replica_assignment({2: [3, 1], 0: [1, 2], 1: [2, 3]}) == "1:2,2:3,3:1"
