"""A dict that shrank gives its table back; one in any state its own growth leaves it in
is left alone (a copy costs a pass over it)."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from broker.compact import compacted


def test_a_dict_that_lost_two_thirds_of_its_entries_is_copied_compact_in_order() -> None:
    d = {i: str(i) for i in range(100_000)}
    for i in range(100_000):
        if i % 3:
            del d[i]
    before = sys.getsizeof(d)
    out = compacted(d)
    assert out is not d
    assert out == d
    assert list(out) == list(d)
    assert sys.getsizeof(out) * 3 < before


def test_a_dict_whose_entries_were_each_moved_to_its_end_then_mostly_removed() -> None:
    # A leader's fetch session moves each answered partition to its end: the table
    # doubles before compacting itself. Then a preferred election takes two thirds away.
    d = dict.fromkeys(range(100_000))
    for k in list(d):
        d[k] = d.pop(k)
    for k in range(0, 100_000):
        if k % 3:
            del d[k]
    out = compacted(d)
    assert list(out) == [k for k in range(100_000) if k % 3 == 0]
    assert sys.getsizeof(out) < sys.getsizeof(d) // 6


def test_a_dict_as_its_own_growth_left_it_is_not_copied() -> None:
    fresh = dict.fromkeys(range(33_333))
    assert compacted(fresh) is fresh
    moved = dict.fromkeys(range(100_000))
    for k in list(moved):
        moved[k] = moved.pop(k)  # twice the fresh size: its own growth, not a past
    assert compacted(moved) is moved
    small: dict[int, int] = {}
    assert compacted(small) is small
    emptied = dict.fromkeys(range(10))
    emptied.clear()
    assert compacted(emptied) is emptied


def test_no_size_a_dict_grows_to_is_taken_for_a_past() -> None:
    # Just past each growth step (where a table is emptiest), grown by insertion or by
    # entries moved to the end.
    for k in range(3, 19):
        for n in (2**k * 2 // 3 - 1, 2**k * 2 // 3 + 1):
            fresh = {i: None for i in range(n)}  # one insertion at a time
            assert compacted(fresh) is fresh, n
            for key in list(fresh):
                fresh[key] = fresh.pop(key)
            assert compacted(fresh) is fresh, n


@given(st.integers(0, 5_000), st.integers(0, 5_000), st.booleans())
def test_any_grown_then_shrunk_dict_keeps_its_items_and_their_order(
    grown: int, kept: int, moved: bool
) -> None:
    d = dict.fromkeys(range(grown), "v")
    if moved:
        for k in list(d):
            d[k] = d.pop(k)
    for k in range(min(kept, grown), grown):
        del d[k]
    out = compacted(d)
    assert list(out.items()) == list(d.items())
    # Compact: at most what its own growth could have left it at.
    assert sys.getsizeof(out) <= max(4096, 128 * len(out))
