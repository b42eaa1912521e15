"""The controller's rewrite of a topic's znode: partitions an admin added meanwhile stay."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from controller.store import keeping_added_partitions
from zkdata.znodes import TopicAssignment

REPLICAS = st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True).map(tuple)
PARTITIONS = st.dictionaries(st.integers(0, 7), REPLICAS, min_size=1)
TOPIC_ID = uuid.UUID(int=1)


@given(ours=PARTITIONS, theirs=PARTITIONS, adding=st.booleans())
def test_the_controllers_partitions_win_and_only_unknown_ones_are_added(
    ours: dict[int, tuple[int, ...]], theirs: dict[int, tuple[int, ...]], adding: bool
) -> None:
    first = min(ours)
    mine = TopicAssignment(
        "t", ours, TOPIC_ID, {first: ours[first]} if adding else {}, {first: (9,)} if adding else {}
    )
    current = TopicAssignment("t", theirs, uuid.UUID(int=2), {min(theirs): (8,)})
    merged = keeping_added_partitions(mine, current)
    assert merged.partitions == {**theirs, **ours}
    # the rest is the controller's: its topic id, its reassignments in progress
    assert (merged.topic, merged.topic_id) == ("t", TOPIC_ID)
    assert (merged.adding_replicas, merged.removing_replicas) == (
        mine.adding_replicas,
        mine.removing_replicas,
    )
    if set(theirs) <= set(ours):
        assert merged is mine


def test_a_znode_that_could_not_be_read_is_rewritten_from_the_controllers() -> None:
    mine = TopicAssignment("t", {0: (1, 2)}, TOPIC_ID)
    assert keeping_added_partitions(mine, None) is mine
