"""Giving back the table of a dict that shrank.

A CPython dict never shrinks when entries are deleted: its table keeps the size of its
largest past, and a dict whose entries were popped and put back (a fetch session moves
each answered partition to its end) grows to twice its size before compacting itself.
A broker that led 100,000 partitions during a cold start, and then gave two thirds of
them away, kept both follower fetch sessions sized for all of them: a dict of 100,000
entries each moved once has a 10.5 MB table, and a fresh one of the 33,334 left 1.3 MB.
The owners of such dicts call `compacted` after removing a batch of entries.
"""

from __future__ import annotations

import sys
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

# A dict's bytes per entry (sys.getsizeof) stay under 120 in every state its own growth
# leaves it in: a dict that ran out of room grows to the power of two at or above three
# times its entries, ~20 bytes a slot (a fresh one of 33,333 entries: 39). Above this,
# most of its table is left over from entries since deleted.
_SPARSE_BYTES_PER_ENTRY = 128
_SMALL_BYTES = 4096


def compacted(d: dict[K, V]) -> dict[K, V]:
    """``d`` itself, or an equal copy of it (same order) if most of ``d``'s table is
    left over from deleted entries. The caller replaces its reference with the result
    (under the lock that guards the dict), so that ``d``'s table can be freed."""
    size = sys.getsizeof(d)
    if size <= _SMALL_BYTES or size <= _SPARSE_BYTES_PER_ENTRY * len(d):
        return d
    return dict(d)
