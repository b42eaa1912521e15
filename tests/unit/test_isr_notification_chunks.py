"""ISR change notifications are cut by size as well as by count. Cut at 10,000 partitions
only, one of topics with names of ~75 characters or more was over ZooKeeper's
jute.maxbuffer (1 MiB): the server dropped the connection, the ISR writer retried it every
second forever, and no later ISR change of the broker reached the controller."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker import replica_manager as rm
from broker.replica_manager import ReplicaManager, isr_notification_chunks
from zkdata.znodes import MAX_ZNODE_BYTES, TopicPartition, encode_partition_list

# Kafka's longest legal topic name.
LONGEST = "x" * 249


def _check(chunks: list[list[TopicPartition]], changed: list[TopicPartition], mp: int, mb: int):  # type: ignore[no-untyped-def]
    assert list(itertools.chain.from_iterable(chunks)) == changed  # all, in order, once
    for chunk in chunks:
        assert chunk
        assert len(chunk) <= mp
        assert len(encode_partition_list(chunk)) <= mb
    for chunk, after in itertools.pairwise(chunks):  # none cut shorter than it had to be
        grown = [*chunk, after[0]]
        assert len(grown) > mp or len(encode_partition_list(grown)) > mb


def test_longest_names_stay_under_a_znode() -> None:
    changed = [TopicPartition(LONGEST, p) for p in range(10_000)]
    chunks = isr_notification_chunks(changed)
    _check(chunks, changed, rm.ISR_NOTIFICATION_PARTITIONS, rm.ISR_NOTIFICATION_BYTES)
    assert rm.ISR_NOTIFICATION_BYTES < MAX_ZNODE_BYTES
    assert len(chunks) == 4  # 278 bytes each: 3,237 partitions a notification at most


def test_short_names_are_cut_by_count() -> None:
    changed = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(10_000)]
    chunks = isr_notification_chunks(changed)
    assert [len(c) for c in chunks] == [10_000, 10_000, 10_000]


def test_no_changes_no_notification() -> None:
    assert isr_notification_chunks([]) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=30),  # any: escaped in JSON or not
            st.integers(min_value=0, max_value=2**31 - 1),
        ),
        max_size=60,
    ),
    st.integers(min_value=1, max_value=20),
    st.integers(min_value=0, max_value=400),
)
def test_chunks_are_exact_and_as_large_as_allowed(
    items: list[tuple[str, int]], max_partitions: int, extra_bytes: int
) -> None:
    changed = sorted(TopicPartition(t, p) for t, p in items)
    # Room for at least one partition of each, whatever else.
    one = max((len(encode_partition_list([tp])) for tp in changed), default=0)
    max_bytes = one + extra_bytes
    chunks = isr_notification_chunks(changed, max_partitions, max_bytes)
    _check(chunks, changed, max_partitions, max_bytes)


def test_notify_writes_each_chunk_in_a_znode() -> None:
    created: list[bytes] = []

    class Zk:
        def multi_batched(self, items: list[list[Any]]) -> list[list[str]]:
            for (op,) in items:
                created.append(op.data)
            return [["ok"] for _ in items]

    changed = [TopicPartition("y" * 100, p) for p in range(10_000)]
    ReplicaManager._notify_isr_changes(SimpleNamespace(zk=Zk()), changed)  # type: ignore[arg-type]
    sizes = [len(d) for d in created]
    assert max(sizes) <= rm.ISR_NOTIFICATION_BYTES < MAX_ZNODE_BYTES, sizes
    assert len(sizes) == 2, sizes
