"""A leader's pending ISR change for one partition: the requests merged into it say what a
set of additions, a set of removals and a list of distinct reasons would say."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from broker.replica_manager import _IsrIntent

REASONS = ["replica 1 caught up", "replica 2 caught up", "replica 2 fell behind"]

requests = st.lists(
    st.tuples(st.booleans(), st.integers(0, 4), st.sampled_from(REASONS)), max_size=30
)


@given(requests)
def test_merged_requests_match_sets_and_a_list_of_reasons(ops: list[tuple[bool, int, str]]) -> None:
    intent = _IsrIntent(cast(Any, None))
    add: set[int] = set()
    remove: set[int] = set()
    reasons: list[str] = []
    for is_add, replica, why in ops:
        if is_add:
            intent.merge(add=replica, why=why)
            add.add(replica)
            remove.discard(replica)
        else:
            intent.merge(remove=replica, why=why)
            remove.add(replica)
            add.discard(replica)
        if why not in reasons:
            reasons.append(why)
    assert sorted(intent.add) == sorted(add)
    assert sorted(intent.remove) == sorted(remove)
    assert list(intent.why) == reasons


@given(requests)
def test_equal_intents_share_their_tuples(ops: list[tuple[bool, int, str]]) -> None:
    # 100,000 partitions waiting for the same change hold the same few tuples.
    a = _IsrIntent(cast(Any, None))
    b = _IsrIntent(cast(Any, None))
    for is_add, replica, why in ops:
        for intent in (a, b):
            reason = why.encode().decode()  # an equal string, not the same object
            if is_add:
                intent.merge(add=replica, why=reason)
            else:
                intent.merge(remove=replica, why=reason)
    assert a.add is b.add
    assert a.remove is b.remove
    assert a.why is b.why
